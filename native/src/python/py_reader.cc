#include "python/py_reader.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arrayrecord/options.h"
#include "arrayrecord/reader.h"
#include "errors.h"
#include "python/buffers.h"
#include "python/indices.h"
#include "python/paths.h"
#include "util/byte_source.h"
#include "util/file_mapping.h"
#include "util/thread_pool.h"

namespace arrayds::python {
namespace {

class PyReader {
 public:
  explicit PyReader(std::shared_ptr<ReaderCore> core) : core_(std::move(core)) {
    name_ = core_->name();
    num_records_ = core_->num_records();
    num_chunks_ = core_->num_chunks();
    group_size_ = core_->group_size();
    writer_options_ = core_->writer_options();
  }

  static std::unique_ptr<PyReader> open(const py::object& path, const std::string& options,
                                        bool use_mmap) {
    const ReaderOptions opts = ReaderOptions::parse(options);
    const std::string p = fspath(path);
    std::shared_ptr<ReaderCore> core;
    {
      py::gil_scoped_release release;
      auto source = std::make_shared<FileSource>(p, use_mmap);
      core = ReaderCore::open(std::move(source), opts);
    }
    return std::make_unique<PyReader>(std::move(core));
  }

  static std::unique_ptr<PyReader> from_bytes(const py::object& data, const std::string& name,
                                              const std::string& options) {
    const ReaderOptions opts = ReaderOptions::parse(options);
    auto holder = std::make_shared<PyBufferHolder>();
    holder->owner = data;
    holder->view.acquire(data.ptr(), "data");
    const uint8_t* p = holder->view.data();
    const uint64_t n = holder->view.size();
    std::shared_ptr<ReaderCore> core;
    {
      py::gil_scoped_release release;
      auto source = std::make_shared<MemorySource>(name, p, n, std::move(holder));
      core = ReaderCore::open(std::move(source), opts);
    }
    return std::make_unique<PyReader>(std::move(core));
  }

  static uint64_t footer_offset(const py::object& tail, uint64_t file_size,
                                const std::string& name) {
    BufferView v;
    v.acquire(tail.ptr(), "tail");
    py::gil_scoped_release release;
    return ReaderCore::footer_offset_from_tail(v.data(), v.size(), file_size, name);
  }

  static std::unique_ptr<PyReader> from_footer(uint64_t file_size, uint64_t footer_offset,
                                               const py::object& footer,
                                               const std::string& name,
                                               const std::string& options) {
    const ReaderOptions opts = ReaderOptions::parse(options);
    BufferView v;
    v.acquire(footer.ptr(), "footer");
    std::shared_ptr<ReaderCore> core;
    {
      py::gil_scoped_release release;
      core = ReaderCore::from_footer(file_size, footer_offset, v.data(), v.size(), name, opts);
    }
    return std::make_unique<PyReader>(std::move(core));
  }

  uint64_t num_records() const { return num_records_; }
  uint64_t num_chunks() const { return num_chunks_; }
  uint64_t group_size() const { return group_size_; }
  const std::optional<std::string>& writer_options_string() const { return writer_options_; }
  const std::string& name() const { return name_; }
  bool is_open() {
    std::lock_guard<std::mutex> lock(mu_);
    return core_ != nullptr;
  }
  uint64_t file_size() { return core()->file_size(); }
  bool is_mapped() { return core()->mapped(); }

  void close() {
    std::shared_ptr<ReaderCore> old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      old = std::move(core_);
    }
    if (old) {
      py::gil_scoped_release release;
      old.reset();  // closes the file unless a read in another thread still uses it
    }
  }

  py::bytes read(int64_t i) {
    std::shared_ptr<ReaderCore> c = core_with_source();
    if (i < 0 || static_cast<uint64_t>(i) >= c->num_records()) index_error(i, c->num_records(), name_);
    const uint64_t chunk = c->chunk_of(static_cast<uint64_t>(i));
    if (c->chunk_records(chunk) == 1) {
      py::bytes out = uninitialized_bytes(c->chunk_decoded_size(chunk));
      ChunkJob job;
      job.chunk = chunk;
      job.dst = bytes_data(out);
      {
        py::gil_scoped_release release;
        c->run_one(job);
      }
      return out;
    }
    std::shared_ptr<const DecodedChunk> d;
    {
      py::gil_scoped_release release;
      d = c->chunk(chunk);
    }
    const uint64_t k = static_cast<uint64_t>(i) - chunk * c->group_size();
    return new_bytes(d->record(k), d->record_size(k));
  }

  py::list read_batch(const py::handle& indices) {
    std::shared_ptr<ReaderCore> c = core_with_source();
    std::vector<uint64_t> idx = parse_indices(indices, c->num_records(), name_);
    return decode(*c, idx, nullptr, false);
  }

  py::list read_range(int64_t start, int64_t stop) {
    std::shared_ptr<ReaderCore> c = core_with_source();
    const uint64_t n = c->num_records();
    if (start < 0 || stop < start || static_cast<uint64_t>(stop) > n) {
      throw IndexOutOfRange("record range [" + std::to_string(start) + ", " +
                            std::to_string(stop) + ") is out of range for " + std::to_string(n) +
                            " records in " + name_);
    }
    std::vector<uint64_t> idx(static_cast<size_t>(stop - start));
    for (size_t k = 0; k < idx.size(); ++k) idx[k] = static_cast<uint64_t>(start) + k;
    return decode(*c, idx, nullptr, true);
  }

  py::list chunk_spans(const py::handle& indices) {
    std::shared_ptr<ReaderCore> c = core_or_index();
    std::vector<uint64_t> idx = parse_indices(indices, c->num_records(), name_);
    for (uint64_t& i : idx) i = c->chunk_of(i);
    const auto spans = c->spans_for_chunks(std::move(idx));
    py::list out(spans.size());
    for (size_t k = 0; k < spans.size(); ++k) {
      out[k] = py::make_tuple(spans[k].first, spans[k].second);
    }
    return out;
  }

  py::list decode_spans(const py::handle& indices, const py::handle& spans) {
    std::shared_ptr<ReaderCore> c = core_or_index();
    std::vector<uint64_t> idx = parse_indices(indices, c->num_records(), name_);
    std::vector<BufferView> views;
    std::vector<Span> parts = parse_spans(spans, views);
    return decode(*c, idx, &parts, false);
  }

  // Decodes records idx[k] into buffers[k]: record k must be exactly prefix (the
  // shared one, or prefixes[k]) followed by as many bytes as buffers[k] holds; the
  // prefix is compared and the rest written into the buffer's elements in C order.
  // A single-record chunk with no prefix going to one contiguous buffer is
  // decompressed straight into it; otherwise into a reused thread-local buffer, then
  // copied. spans: as for decode_spans (index-only readers).
  void read_into(const py::handle& indices, const py::handle& buffers,
                 const py::handle& prefix, const py::handle& spans) {
    std::shared_ptr<ReaderCore> c = spans.is_none() ? core_with_source() : core_or_index();
    const std::vector<uint64_t> idx = parse_indices(indices, c->num_records(), name_);
    py::list bufs = py::list(py::iter(buffers));
    if (bufs.size() != idx.size()) {
      throw py::value_error("read_into: " + std::to_string(idx.size()) + " indices but " +
                            std::to_string(bufs.size()) + " buffers (one buffer per index)");
    }
    std::deque<WritableView> dst(idx.size());  // a deque: Py_buffer structs never move
    for (size_t k = 0; k < idx.size(); ++k) dst[k].acquire(bufs[k].ptr(), k, idx[k]);
    std::vector<BufferView> pre;
    if (prefix.is_none()) {
      pre.resize(1);
    } else if (PyObject_CheckBuffer(prefix.ptr())) {
      pre.resize(1);
      pre[0].acquire(prefix.ptr(), "prefix");
    } else {
      py::list items = py::list(py::iter(prefix));
      if (items.size() != idx.size()) {
        throw py::value_error("read_into: " + std::to_string(idx.size()) + " indices but " +
                              std::to_string(items.size()) +
                              " prefixes (pass one bytes-like prefix, or one per index)");
      }
      pre.resize(items.size());
      for (size_t k = 0; k < items.size(); ++k) pre[k].acquire(items[k].ptr(), "prefix");
    }
    std::vector<BufferView> span_views;
    std::vector<Span> parts;
    if (!spans.is_none()) parts = parse_spans(spans, span_views);
    if (idx.empty()) return;

    auto prefix_of = [&](size_t k) -> const BufferView& { return pre.size() == 1 ? pre[0] : pre[k]; };
    auto size_error = [&](size_t k, uint64_t size) {
      const uint64_t p = prefix_of(k).size();
      return UsageError(name_ + ": record " + std::to_string(idx[k]) + " has " +
                        std::to_string(size) + " bytes, but buffer " + std::to_string(k) +
                        " holds " + std::to_string(dst[k].size()) + " bytes" +
                        (p ? " after a " + std::to_string(p) + "-byte prefix (expected " +
                                 std::to_string(p + dst[k].size()) + " bytes)"
                           : ""));
    };
    // Checks record k (size bytes at rec) against its prefix and buffer, then copies it.
    auto deliver_to = [&](size_t k, const uint8_t* rec, uint64_t size) {
      const BufferView& p = prefix_of(k);
      if (size != p.size() + dst[k].size()) throw size_error(k, size);
      if (p.size() != 0 && std::memcmp(rec, p.data(), p.size()) != 0) {
        throw UsageError(name_ + ": record " + std::to_string(idx[k]) +
                         " does not start with the expected " + std::to_string(p.size()) +
                         "-byte prefix");
      }
      dst[k].place(rec + p.size());
    };

    std::vector<size_t> order(idx.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return idx[a] < idx[b]; });
    const uint64_t g = c->group_size();
    if (g == 1) {
      // Every size is known from the footer: check them all before decoding anything.
      for (size_t k = 0; k < idx.size(); ++k) {
        const uint64_t size = c->chunk_decoded_size(idx[k]);
        if (size != prefix_of(k).size() + dst[k].size()) throw size_error(k, size);
      }
      std::vector<ChunkJob> jobs;
      for (size_t a = 0; a < order.size();) {
        size_t b = a + 1;
        while (b < order.size() && idx[order[b]] == idx[order[a]]) ++b;
        ChunkJob j;
        j.chunk = idx[order[a]];
        const size_t k = order[a];
        if (b == a + 1 && prefix_of(k).size() == 0 && dst[k].contiguous() && dst[k].size() != 0) {
          j.dst = dst[k].data();
        } else {
          j.deliver = [&, a, b](const uint8_t* rec, uint64_t size) {
            for (size_t t = a; t < b; ++t) deliver_to(order[t], rec, size);
          };
        }
        jobs.push_back(std::move(j));
        a = b;
      }
      py::gil_scoped_release release;
      if (spans.is_none()) {
        c->run_jobs(jobs);
      } else {
        c->run_jobs_from_spans(jobs, std::move(parts));
      }
      return;
    }
    std::vector<uint64_t> ids;
    for (uint64_t i : idx) ids.push_back(i / g);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    py::gil_scoped_release release;
    std::vector<std::shared_ptr<const DecodedChunk>> decoded;
    if (spans.is_none()) {
      decoded = c->chunks(ids);
    } else {
      std::vector<ChunkJob> jobs(ids.size());
      for (size_t k = 0; k < ids.size(); ++k) jobs[k].chunk = ids[k];
      c->run_jobs_from_spans(jobs, std::move(parts));
      decoded.resize(ids.size());
      for (size_t k = 0; k < ids.size(); ++k) decoded[k] = std::move(jobs[k].decoded);
    }
    auto record_of = [&](size_t k) {
      const uint64_t chunk = idx[k] / g;
      const size_t pos = static_cast<size_t>(
          std::lower_bound(ids.begin(), ids.end(), chunk) - ids.begin());
      const DecodedChunk& d = *decoded[pos];
      const uint64_t r = idx[k] - chunk * g;
      return std::make_pair(d.record(r), d.record_size(r));
    };
    // Sizes first, so that a wrong buffer writes nothing.
    for (size_t k = 0; k < idx.size(); ++k) {
      const uint64_t size = record_of(k).second;
      if (size != prefix_of(k).size() + dst[k].size()) throw size_error(k, size);
    }
    parallel_for(idx.size(), idx.size() < 64 ? 1 : c->parallelism(), [&](size_t k) {
      const auto rec = record_of(k);
      deliver_to(k, rec.first, rec.second);
    });
  }

 private:
  // (begin, bytes) pairs -> Spans over views (kept alive by the caller).
  static std::vector<Span> parse_spans(const py::handle& spans, std::vector<BufferView>& views) {
    std::vector<Span> parts;
    py::list items = py::list(py::iter(spans));
    views.resize(items.size());
    for (size_t k = 0; k < items.size(); ++k) {
      py::tuple t = items[k].cast<py::tuple>();
      if (t.size() != 2) throw py::value_error("spans must be (begin, bytes) pairs");
      const uint64_t begin = t[0].cast<uint64_t>();
      views[k].acquire(t[1].ptr(), "span data");
      parts.push_back(Span{begin, views[k].data(), views[k].size()});
    }
    return parts;
  }

  std::shared_ptr<ReaderCore> core() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!core_) throw ClosedError("ArrayRecordReader(" + name_ + ") is closed");
    return core_;
  }
  std::shared_ptr<ReaderCore> core_or_index() { return core(); }
  // For read*: the reader must hold the file (not just the index of from_footer()).
  std::shared_ptr<ReaderCore> core_with_source() {
    std::shared_ptr<ReaderCore> c = core();
    if (!c->has_source()) {
      throw UsageError(name_ + ": this reader was made by from_footer() and holds only the "
                               "index; fetch chunk_spans() and call decode_spans()");
    }
    return c;
  }

  // Records idx (each < num_records) as a list of bytes, decoded in parallel.
  // spans: decode from these instead of the file. consecutive: idx is a range.
  py::list decode(ReaderCore& c, const std::vector<uint64_t>& idx, std::vector<Span>* spans,
                  bool consecutive) {
    py::list out(idx.size());
    if (idx.empty()) return out;
    const uint64_t g = c.group_size();
    if (g == 1) {
      // One record per chunk: decode straight into bytes objects.
      std::vector<size_t> order(idx.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = k;
      if (!consecutive) {
        std::sort(order.begin(), order.end(),
                  [&](size_t a, size_t b) { return idx[a] < idx[b]; });
      }
      std::vector<ChunkJob> jobs;
      std::vector<py::bytes> objs;
      jobs.reserve(idx.size());
      objs.reserve(idx.size());
      std::vector<size_t> slot(idx.size());
      for (size_t k = 0; k < order.size(); ++k) {
        const uint64_t chunk = idx[order[k]];
        if (jobs.empty() || jobs.back().chunk != chunk) {
          objs.push_back(uninitialized_bytes(c.chunk_decoded_size(chunk)));
          ChunkJob j;
          j.chunk = chunk;
          j.dst = bytes_data(objs.back());
          jobs.push_back(std::move(j));
        }
        slot[order[k]] = objs.size() - 1;
      }
      {
        py::gil_scoped_release release;
        if (spans) {
          c.run_jobs_from_spans(jobs, std::move(*spans));
        } else {
          c.run_jobs(jobs);
        }
      }
      for (size_t k = 0; k < idx.size(); ++k) {
        PyObject* o = objs[slot[k]].ptr();
        Py_INCREF(o);
        PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(k), o);
      }
      return out;
    }
    std::vector<uint64_t> ids;
    ids.reserve(idx.size());
    for (uint64_t i : idx) ids.push_back(i / g);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    std::vector<std::shared_ptr<const DecodedChunk>> decoded;
    {
      py::gil_scoped_release release;
      if (spans) {
        std::vector<ChunkJob> jobs(ids.size());
        for (size_t k = 0; k < ids.size(); ++k) jobs[k].chunk = ids[k];
        c.run_jobs_from_spans(jobs, std::move(*spans));
        decoded.resize(ids.size());
        for (size_t k = 0; k < ids.size(); ++k) decoded[k] = std::move(jobs[k].decoded);
      } else {
        decoded = c.chunks(ids);
      }
    }
    size_t pos = 0;
    for (size_t k = 0; k < idx.size(); ++k) {
      const uint64_t chunk = idx[k] / g;
      if (ids[pos] != chunk) {
        pos = static_cast<size_t>(std::lower_bound(ids.begin(), ids.end(), chunk) - ids.begin());
      }
      const DecodedChunk& d = *decoded[pos];
      const uint64_t r = idx[k] - chunk * g;
      PyObject* b = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(d.record(r)),
                                              static_cast<Py_ssize_t>(d.record_size(r)));
      if (b == nullptr) throw py::error_already_set();
      PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(k), b);
    }
    return out;
  }

  std::mutex mu_;
  std::shared_ptr<ReaderCore> core_;
  std::string name_;
  uint64_t num_records_ = 0, num_chunks_ = 0, group_size_ = 0;
  std::optional<std::string> writer_options_;
};

}  // namespace

void bind_reader(py::module_& m) {
  m.def("_mmap_repaired_faults", [] { return FileMapping::repaired_faults(); },
        "Testing aid: SIGBUS faults in mapped files (truncated while open) repaired so far.");

  py::class_<PyReader>(m, "Reader")
      .def(py::init(&PyReader::open), py::arg("path"), py::arg("options") = "",
           py::arg("mmap") = true)
      .def("is_mapped", &PyReader::is_mapped)
      .def_static("from_bytes", &PyReader::from_bytes, py::arg("data"),
                  py::arg("name") = "<memory>", py::arg("options") = "")
      .def_static("footer_offset", &PyReader::footer_offset, py::arg("tail"),
                  py::arg("file_size"), py::arg("name") = "<remote>")
      .def_static("from_footer", &PyReader::from_footer, py::arg("file_size"),
                  py::arg("footer_offset"), py::arg("footer"), py::arg("name") = "<remote>",
                  py::arg("options") = "")
      .def("num_records", &PyReader::num_records)
      .def("num_chunks", &PyReader::num_chunks)
      .def("group_size", &PyReader::group_size)
      .def("writer_options_string", &PyReader::writer_options_string)
      .def("name", &PyReader::name)
      .def("is_open", &PyReader::is_open)
      .def("file_size", &PyReader::file_size)
      .def("read", &PyReader::read, py::arg("index"))
      .def("read_batch", &PyReader::read_batch, py::arg("indices"))
      .def("read_range", &PyReader::read_range, py::arg("start"), py::arg("stop"))
      .def("chunk_spans", &PyReader::chunk_spans, py::arg("indices"))
      .def("decode_spans", &PyReader::decode_spans, py::arg("indices"), py::arg("spans"))
      .def("read_into", &PyReader::read_into, py::arg("indices"), py::arg("buffers"),
           py::arg("prefix") = py::none(), py::arg("spans") = py::none(),
           "Decode records indices[k] into the writable buffers[k] (GIL released, in "
           "parallel); each record must be prefix (or prefix[k]) + exactly len(buffers[k]) "
           "bytes, else ValueError.")
      .def("close", &PyReader::close);
}

}  // namespace arrayds::python
