// The pybind11 module arrayds._native. It converts arguments, allocates the Python
// objects, and releases the GIL around all I/O, decoding and encoding. The engine
// itself (riegeli/, compress/, arrayrecord/) knows nothing about Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <thread>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "arrayrecord/options.h"
#include "arrayrecord/reader.h"
#include "util/thread_pool.h"
#include "arrayrecord/writer.h"
#include "util/buffer_pool.h"
#include "compress/compressor.h"
#include "errors.h"
#include "python/buffers.h"
#include "python/gil.h"
#include "python/indices.h"
#include "python/paths.h"
#include "python/py_reader.h"
#include "python/py_writer.h"
#include "riegeli/highway_hash.h"

namespace py = pybind11;
using namespace arrayds;
using namespace arrayds::python;

namespace {

PyObject* g_corruption_error = nullptr;  // the module keeps it alive

// A writable bytes-like object over a block of the process-wide BufferPool (the
// Python type _native.PooledBuffer): the block goes back to the pool when the object,
// and so every numpy array made from it, is gone.
class PooledBuffer {
 public:
  explicit PooledBuffer(size_t n) : size_(n) {
    if (n != 0) block_ = BufferPool::shared().take(n, capacity_);
  }
  ~PooledBuffer() { BufferPool::shared().give(std::move(block_), capacity_); }
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;
  uint8_t* data() { return block_ ? block_.get() : &empty_; }
  size_t size() const { return size_; }

 private:
  AlignedBlock block_;
  size_t capacity_ = 0;
  size_t size_ = 0;
  uint8_t empty_ = 0;
};

// ---- module-level functions

uint64_t py_highway_hash(const py::handle& data, const py::object& key) {
  BufferView v;
  v.acquire(data.ptr(), "data");
  HighwayKey k = kRiegeliKey;
  if (!key.is_none()) {
    py::sequence seq = key.cast<py::sequence>();
    if (seq.size() != 4) throw py::value_error("key must be 4 unsigned 64-bit integers");
    for (size_t i = 0; i < 4; ++i) k.k[i] = seq[i].cast<uint64_t>();
  }
  if (v.size() < (1u << 16)) return highway_hash64(k, v.data(), v.size());
  py::gil_scoped_release release;
  return highway_hash64(k, v.data(), v.size());
}

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const CorruptionError& e) {
    PyErr_SetString(g_corruption_error, e.what());
  } catch (const FormatError& e) {
    PyErr_SetString(g_corruption_error, e.what());
  } catch (const UnsupportedError& e) {
    PyErr_SetString(PyExc_NotImplementedError, e.what());
  } catch (const OptionsError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const ClosedError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const UsageError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const IndexOutOfRange& e) {
    PyErr_SetString(PyExc_IndexError, e.what());
  } catch (const IoError& e) {
    PyObject* args = Py_BuildValue("(isO&)", e.error_number(), e.what(),
                                   PyUnicode_DecodeFSDefault, e.filename().c_str());
    if (args != nullptr) {
      PyErr_SetObject(PyExc_OSError, args);
      Py_DECREF(args);
    }
  }
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "arrayds native ArrayRecord engine (internal; use arrayds.ArrayRecordReader/Writer)";

  g_corruption_error = PyErr_NewExceptionWithDoc(
      "arrayds._native.CorruptionError",
      "A damaged or invalid ArrayRecord file (the message names the file and the byte "
      "position).",
      PyExc_OSError, nullptr);
  if (g_corruption_error == nullptr) throw py::error_already_set();
  m.attr("CorruptionError") = py::handle(g_corruption_error);  // the module holds a reference
  py::register_exception_translator(&translate);

  m.def("codecs", [] {
    py::dict d;
    d["uncompressed"] = true;
    d["zstd"] = codec_available(Compression::kZstd);
    d["brotli"] = codec_available(Compression::kBrotli);
    d["snappy"] = codec_available(Compression::kSnappy);
    return d;
  }, "Which codecs this build can read and write.");
  m.def("highway_hash", &py_highway_hash, py::arg("data"), py::arg("key") = py::none(),
        "HighwayHash-64 of data; key: four 64-bit words (default: the Riegeli key).");
  m.def("highway_hash_implementation", &highway_hash_implementation,
        "The HighwayHash library's implementation in use (\"AVX2\", \"SSE41\", \"Portable\").");
  m.def("_highway_hash_targets", &highway_hash_targets,
        "Testing aid: the HighwayHash implementations this CPU can run, best first.");
  m.def(
      "_highway_hash_force_target",
      [](const std::string& name) {
        try {
          return highway_hash_force_target(name);
        } catch (const std::invalid_argument& e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("name"),
      "Testing aid: use the named implementation (\"\" restores the library's choice); "
      "returns the previous setting.");
  m.def("canonical_writer_options",
        [](const std::string& options) { return WriterOptions::parse(options).canonical(); },
        py::arg("options"),
        "The canonical options string the writer stores for `options` (ValueError if invalid).");
  m.def("check_reader_options", [](const std::string& options) { ReaderOptions::parse(options); },
        py::arg("options"), "Raises ValueError if `options` is not a valid reader options string.");

  bind_writer(m);

  py::class_<PooledBuffer>(m, "PooledBuffer", py::buffer_protocol(),
                           "A writable uint8 buffer from the engine's pool of reused memory "
                           "blocks (see pooled_buffer).")
      .def_buffer([](PooledBuffer& b) {
        return py::buffer_info(b.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.size())}, {1}, false);
      })
      .def("__len__", &PooledBuffer::size);
  m.def("pooled_buffer", [](size_t n) { return std::make_unique<PooledBuffer>(n); },
        py::arg("size"),
        "A writable buffer of `size` uninitialised bytes whose memory is reused from "
        "recently freed buffers of 1..2x that size when possible (no fresh page faults); "
        "it returns to the pool when the object and all views of it are gone.");
  m.def("_buffer_pool_idle_bytes", [] { return BufferPool::shared().idle_bytes(); },
        "Testing aid: bytes kept idle in the buffer pool.");

  bind_reader(m);
}
