#include "python/pooled_buffer.h"

#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "util/buffer_pool.h"

namespace arrayds::python {
namespace {

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

}  // namespace

void bind_pooled_buffer(py::module_& m) {
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
}

}  // namespace arrayds::python
