#include "python/py_writer.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "arrayrecord/options.h"
#include "arrayrecord/writer.h"
#include "python/buffers.h"
#include "python/gil.h"
#include "python/paths.h"
#include "util/byte_buffer.h"
#include "util/byte_sink.h"

namespace arrayds::python {
namespace {

// The output of a streaming writer (path None, write=callable): the file's bytes in
// blocks of 1 MiB, handed in order to a Python callable (an fsspec file's write, which
// uploads parts as they fill). Called by the writer with the GIL released.
class PyStreamSink final : public ByteSink {
 public:
  explicit PyStreamSink(py::object write) : write_(std::move(write)) { buffer_.reserve(kBlock); }
  ~PyStreamSink() override {
    py::gil_scoped_acquire gil;
    write_ = py::object();
  }
  void append(const uint8_t* data, size_t size) override {
    while (size > 0) {
      const size_t k = std::min(size, kBlock - buffer_.size());
      buffer_.append(data, k);
      data += k;
      size -= k;
      if (buffer_.size() == kBlock) flush();
    }
  }
  void append_zeros(size_t size) override {
    while (size > 0) {
      const size_t k = std::min(size, kBlock - buffer_.size());
      buffer_.append_zeros(k);
      size -= k;
      if (buffer_.size() == kBlock) flush();
    }
  }
  void finish() override { flush(); }

 private:
  void flush() {
    if (buffer_.size() == 0) return;
    py::gil_scoped_acquire gil;
    write_(py::bytes(reinterpret_cast<const char*>(buffer_.data()), buffer_.size()));
    buffer_.clear();
  }
  static constexpr size_t kBlock = 1u << 20;
  py::object write_;
  ByteBuffer buffer_;
};

class PyWriter {
 public:
  PyWriter(const py::object& path, const std::string& options, const py::object& write) {
    const WriterOptions opts = WriterOptions::parse(options);
    if (!write.is_none()) {
      if (!path.is_none()) throw py::value_error("give a path or write=, not both");
      writer_ = std::make_unique<Writer>(std::make_unique<PyStreamSink>(write), "<stream>", opts);
    } else if (path.is_none()) {
      writer_ = std::make_unique<Writer>(std::string(), true, opts);
    } else {
      writer_ = std::make_unique<Writer>(fspath(path), false, opts);
    }
  }

  ~PyWriter() {
    // Finish the file if close() was never called (Writer's destructor does it: drain
    // the encoders, write the footer), like close() without the GIL. The destructor
    // runs with the GIL held; nothing else can reach this object any more. During
    // interpreter shutdown the GIL is kept (other threads may no longer take it).
    if (writer_ != nullptr && writer_->is_open() && !interpreter_finalizing()) {
      py::gil_scoped_release release;
      writer_.reset();
    }
  }

  void write(const py::handle& record) {
    BufferView view;
    view.acquire(record.ptr(), "record");
    GilAwareLock lock(mu_, owner_, "this Writer");
    writer_->add_record(view.data(), view.size());
    if (writer_->needs_pump()) {
      py::gil_scoped_release release;
      writer_->pump();
    }
  }

  uint64_t write_many(const py::handle& records) {
    // Views of up to kBatchRecords records are taken with the GIL, then copied and
    // encoded with one GIL release per batch. A list or tuple is type-checked first,
    // so a bad item means nothing is written; for other iterables a bad item (or an
    // exception from the iterator) discards the records of the current batch only.
    constexpr size_t kBatchRecords = 16384;
    constexpr size_t kBatchBytes = 64u << 20;
    if (PyList_Check(records.ptr()) || PyTuple_Check(records.ptr())) {
      py::sequence seq = py::reinterpret_borrow<py::sequence>(records);
      const size_t n = seq.size();
      for (size_t k = 0; k < n; ++k) {
        PyObject* item = PySequence_Fast_GET_ITEM(records.ptr(), static_cast<Py_ssize_t>(k));
        if (PyUnicode_Check(item) || !PyObject_CheckBuffer(item)) {
          BufferView probe;
          probe.acquire(item, ("record " + std::to_string(k)).c_str());  // raises TypeError
        }
      }
    }
    py::iterator it = py::iter(records);
    std::vector<py::object> keep;
    std::deque<BufferView> views;  // a deque: Py_buffer structs are never moved
    uint64_t total = 0;
    GilAwareLock lock(mu_, owner_, "this Writer");
    for (;;) {
      keep.clear();
      views.clear();
      size_t bytes = 0;
      while (views.size() < kBatchRecords && bytes < kBatchBytes &&
             it != py::iterator::sentinel()) {
        py::object item = py::reinterpret_borrow<py::object>(*it);
        views.emplace_back();
        views.back().acquire(item.ptr(), "record");
        bytes += views.back().size();
        keep.push_back(std::move(item));
        ++it;
      }
      if (views.empty()) break;
      {
        py::gil_scoped_release release;
        for (const BufferView& v : views) {
          writer_->add_record(v.data(), v.size());
          if (writer_->needs_pump()) writer_->pump();
        }
      }
      total += views.size();
    }
    return total;
  }

  void close() {
    GilAwareLock lock(mu_, owner_, "this Writer");
    py::gil_scoped_release release;
    writer_->close();
  }

  // One bytes object, built on the first call: allocated with the GIL, filled (and the
  // writer's buffer freed) without it. If the allocation fails the file stays here for
  // another try.
  py::bytes getvalue() {
    GilAwareLock lock(mu_, owner_, "this Writer");
    if (!value_) {
      if (!memory_) memory_ = std::make_unique<ByteBuffer>(writer_->take_memory());
      py::bytes out = uninitialized_bytes(memory_->size());
      {
        py::gil_scoped_release release;
        if (memory_->size() != 0) std::memcpy(bytes_data(out), memory_->data(), memory_->size());
        memory_.reset();
      }
      value_ = std::move(out);
    }
    return *value_;
  }

  bool is_open() const { return writer_->is_open(); }
  uint64_t num_records() const { return writer_->num_records(); }
  std::string options_string() const { return writer_->options_string(); }

 private:
  std::mutex mu_;
  std::atomic<std::thread::id> owner_{};
  std::unique_ptr<Writer> writer_;
  std::unique_ptr<ByteBuffer> memory_;  // the in-memory file, between take_memory and value_
  std::optional<py::bytes> value_;
};

}  // namespace

void bind_writer(py::module_& m) {
  py::class_<PyWriter>(m, "Writer")
      .def(py::init<const py::object&, const std::string&, const py::object&>(), py::arg("path"),
           py::arg("options") = "", py::arg("write") = py::none())
      .def("write", &PyWriter::write, py::arg("record"))
      .def("write_many", &PyWriter::write_many, py::arg("records"))
      .def("close", &PyWriter::close)
      .def("getvalue", &PyWriter::getvalue)
      .def("is_open", &PyWriter::is_open)
      .def("num_records", &PyWriter::num_records)
      .def("options_string", &PyWriter::options_string);
}

}  // namespace arrayds::python
