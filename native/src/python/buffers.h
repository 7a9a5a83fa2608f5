// Python buffers and bytes objects as the bindings see them: read-only views of
// bytes-like objects (BufferView), writable destinations of any shape and strides
// (WritableView), a view kept alive for the engine (PyBufferHolder), and bytes
// objects made for the engine to fill. Everything here needs the GIL except
// WritableView::place.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "util/byte_buffer.h"

namespace arrayds::python {

namespace py = pybind11;

// The name of obj's type, for TypeError messages.
std::string type_name_of(PyObject* obj);

// A read-only contiguous view of a bytes-like object (copied when not contiguous).
// Must be created and destroyed with the GIL held.
class BufferView {
 public:
  BufferView() = default;
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;
  BufferView(BufferView&& o) noexcept { *this = std::move(o); }
  BufferView& operator=(BufferView&& o) noexcept;
  ~BufferView() { release(); }

  // what: "record", "data", ... for the TypeError message.
  void acquire(PyObject* obj, const char* what);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release_view();
  void release();
  Py_buffer view_{};
  bool held_ = false;
  ByteBuffer copy_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Keeps a Python buffer alive for a MemorySource; released under the GIL.
struct PyBufferHolder {
  py::object owner;
  BufferView view;
  ~PyBufferHolder();
};

// A caller-provided destination for Reader.read_into(): a writable Python buffer of
// any shape and strides (numpy arrays and views, bytearray, memoryview), held while
// the call runs. Created and destroyed with the GIL held; place() runs without it.
class WritableView {
 public:
  WritableView() = default;
  WritableView(const WritableView&) = delete;
  WritableView& operator=(const WritableView&) = delete;
  ~WritableView() {
    if (held_) PyBuffer_Release(&view_);
  }

  // k and record name the buffer in error messages.
  void acquire(PyObject* obj, size_t k, uint64_t record);

  uint8_t* data() const { return static_cast<uint8_t*>(view_.buf); }
  uint64_t size() const { return static_cast<uint64_t>(view_.len); }
  bool contiguous() const { return contiguous_; }

  // Writes size() bytes from src into the buffer's elements in C order.
  void place(const uint8_t* src) const;

 private:
  const uint8_t* place_dim(int d, uint8_t* dst, const uint8_t* src) const;

  Py_buffer view_{};
  bool held_ = false;
  bool contiguous_ = true;
};

// A bytes object holding a copy of [data, data + size).
py::bytes new_bytes(const uint8_t* data, uint64_t size);

// A bytes object of the given size whose contents are filled later (without the GIL,
// before anyone else can see it).
py::bytes uninitialized_bytes(uint64_t size);

// The writable contents of a bytes object made by uninitialized_bytes().
inline uint8_t* bytes_data(const py::bytes& b) {
  return reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(b.ptr()));
}

}  // namespace arrayds::python
