#include "python/buffers.h"

#include <cstring>
#include <new>

namespace arrayds::python {

std::string type_name_of(PyObject* obj) { return Py_TYPE(obj)->tp_name; }

// ---- BufferView

BufferView& BufferView::operator=(BufferView&& o) noexcept {
  if (this != &o) {
    release();
    view_ = o.view_;
    held_ = o.held_;
    copy_ = std::move(o.copy_);
    data_ = o.data_;
    size_ = o.size_;
    o.held_ = false;
  }
  return *this;
}

void BufferView::acquire(PyObject* obj, const char* what) {
  release();
  if (PyBytes_CheckExact(obj)) {  // fast path; the caller keeps obj alive
    data_ = reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(obj));
    size_ = static_cast<size_t>(PyBytes_GET_SIZE(obj));
    return;
  }
  if (PyUnicode_Check(obj)) {
    throw py::type_error(std::string(what) +
                         " must be a bytes-like object (bytes, bytearray, memoryview, numpy "
                         "array), not str; encode it first");
  }
  if (!PyObject_CheckBuffer(obj)) {
    throw py::type_error(std::string(what) +
                         " must be a bytes-like object (bytes, bytearray, memoryview, numpy "
                         "array), not '" + type_name_of(obj) + "'");
  }
  if (PyObject_GetBuffer(obj, &view_, PyBUF_SIMPLE) == 0) {
    held_ = true;
    data_ = static_cast<const uint8_t*>(view_.buf);
    size_ = static_cast<size_t>(view_.len);
    return;
  }
  PyErr_Clear();
  if (PyObject_GetBuffer(obj, &view_, PyBUF_FULL_RO) != 0) throw py::error_already_set();
  held_ = true;
  const size_t n = static_cast<size_t>(view_.len);
  copy_.resize(n);
  if (n != 0 && PyBuffer_ToContiguous(copy_.data(), &view_, view_.len, 'C') != 0) {
    throw py::error_already_set();
  }
  release_view();
  data_ = copy_.data();
  size_ = n;
}

void BufferView::release_view() {
  if (held_) {
    PyBuffer_Release(&view_);
    held_ = false;
  }
}

void BufferView::release() {
  release_view();
  data_ = nullptr;
  size_ = 0;
}

// ---- PyBufferHolder

PyBufferHolder::~PyBufferHolder() {
  py::gil_scoped_acquire gil;
  view = BufferView();
  owner = py::object();
}

// ---- WritableView

void WritableView::acquire(PyObject* obj, size_t k, uint64_t record) {
  const std::string what =
      "buffer " + std::to_string(k) + " (for record " + std::to_string(record) + ")";
  if (PyUnicode_Check(obj) || !PyObject_CheckBuffer(obj)) {
    throw py::type_error(what + " must be a writable buffer (numpy array, bytearray, "
                                "memoryview), not '" + type_name_of(obj) + "'");
  }
  if (PyObject_GetBuffer(obj, &view_, PyBUF_RECORDS_RO) != 0) throw py::error_already_set();
  held_ = true;
  if (view_.readonly) {
    throw py::type_error(what + " is read-only ('" + type_name_of(obj) +
                         "'); pass a writable numpy array, bytearray or memoryview");
  }
  if (view_.suboffsets != nullptr) {
    throw py::type_error(what + " uses indirect (suboffset) memory, which is not supported");
  }
  contiguous_ = view_.len == 0 || PyBuffer_IsContiguous(&view_, 'C') != 0;
}

void WritableView::place(const uint8_t* src) const {
  if (view_.len == 0) return;
  if (contiguous_) {
    std::memcpy(view_.buf, src, static_cast<size_t>(view_.len));
    return;
  }
  place_dim(0, static_cast<uint8_t*>(view_.buf), src);
}

const uint8_t* WritableView::place_dim(int d, uint8_t* dst, const uint8_t* src) const {
  const Py_ssize_t n = view_.shape[d];
  const Py_ssize_t stride = view_.strides[d];
  const size_t item = static_cast<size_t>(view_.itemsize);
  if (d == view_.ndim - 1) {
    if (stride == view_.itemsize) {
      std::memcpy(dst, src, static_cast<size_t>(n) * item);
      return src + static_cast<size_t>(n) * item;
    }
    for (Py_ssize_t i = 0; i < n; ++i, src += item) std::memcpy(dst + i * stride, src, item);
    return src;
  }
  for (Py_ssize_t i = 0; i < n; ++i) src = place_dim(d + 1, dst + i * stride, src);
  return src;
}

// ---- bytes objects

py::bytes new_bytes(const uint8_t* data, uint64_t size) {
  PyObject* b = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(data),
                                          static_cast<Py_ssize_t>(size));
  if (b == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::bytes>(b);
}

py::bytes uninitialized_bytes(uint64_t size) {
  if (size > static_cast<uint64_t>(PY_SSIZE_T_MAX)) throw std::bad_alloc();
  PyObject* b = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
  if (b == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::bytes>(b);
}

}  // namespace arrayds::python
