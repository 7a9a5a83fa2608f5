#include "python/indices.h"

#include <cstring>

#include "errors.h"
#include "python/buffers.h"

namespace arrayds::python {
namespace {

template <typename T>
void append_ints(const Py_buffer& v, std::vector<uint64_t>& out, uint64_t n,
                 const std::string& name) {
  const Py_ssize_t count = v.shape ? v.shape[0] : v.len / v.itemsize;
  const Py_ssize_t stride = v.strides ? v.strides[0] : v.itemsize;
  const char* p = static_cast<const char*>(v.buf);
  out.reserve(out.size() + static_cast<size_t>(count));
  for (Py_ssize_t k = 0; k < count; ++k, p += stride) {
    T x;
    std::memcpy(&x, p, sizeof(T));
    if (x < 0 || static_cast<uint64_t>(x) >= n) index_error(static_cast<int64_t>(x), n, name);
    out.push_back(static_cast<uint64_t>(x));
  }
}

template <>
void append_ints<uint64_t>(const Py_buffer& v, std::vector<uint64_t>& out, uint64_t n,
                           const std::string& name) {
  const Py_ssize_t count = v.shape ? v.shape[0] : v.len / v.itemsize;
  const Py_ssize_t stride = v.strides ? v.strides[0] : v.itemsize;
  const char* p = static_cast<const char*>(v.buf);
  out.reserve(out.size() + static_cast<size_t>(count));
  for (Py_ssize_t k = 0; k < count; ++k, p += stride) {
    uint64_t x;
    std::memcpy(&x, p, 8);
    if (x >= n) index_error(x > INT64_MAX ? -1 : static_cast<int64_t>(x), n, name);
    out.push_back(x);
  }
}

// Tries to read a 1-d array of native integers through the buffer protocol.
bool indices_from_buffer(PyObject* obj, std::vector<uint64_t>& out, uint64_t n,
                         const std::string& name) {
  if (!PyObject_CheckBuffer(obj) || PyBytes_Check(obj) || PyByteArray_Check(obj)) return false;
  Py_buffer v;
  if (PyObject_GetBuffer(obj, &v, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    return false;
  }
  struct Release {
    Py_buffer* v;
    ~Release() { PyBuffer_Release(v); }
  } release{&v};
  if (v.ndim != 1 || v.format == nullptr) return false;
  const char* f = v.format;
  if (*f == '@' || *f == '=' || *f == '<') ++f;
  if (f[0] == 0 || f[1] != 0) return false;
  const bool is_signed = std::strchr("bhilqn", f[0]) != nullptr;
  const bool is_unsigned = std::strchr("BHILQN", f[0]) != nullptr;
  if (!is_signed && !is_unsigned) return false;
  switch (v.itemsize) {
    case 1:
      is_signed ? append_ints<int8_t>(v, out, n, name) : append_ints<uint8_t>(v, out, n, name);
      return true;
    case 2:
      is_signed ? append_ints<int16_t>(v, out, n, name) : append_ints<uint16_t>(v, out, n, name);
      return true;
    case 4:
      is_signed ? append_ints<int32_t>(v, out, n, name) : append_ints<uint32_t>(v, out, n, name);
      return true;
    case 8:
      is_signed ? append_ints<int64_t>(v, out, n, name) : append_ints<uint64_t>(v, out, n, name);
      return true;
    default:
      return false;
  }
}

}  // namespace

void index_error(int64_t i, uint64_t n, const std::string& name) {
  throw IndexOutOfRange("record index " + std::to_string(i) + " is out of range for " +
                        std::to_string(n) + " records in " + name);
}

std::vector<uint64_t> parse_indices(const py::handle& obj, uint64_t n, const std::string& name) {
  std::vector<uint64_t> out;
  if (indices_from_buffer(obj.ptr(), out, n, name)) return out;
  PyObject* seq = PySequence_Fast(obj.ptr(), "indices must be a sequence of integers or a "
                                             "1-d integer numpy array");
  if (seq == nullptr) throw py::error_already_set();
  py::object hold = py::reinterpret_steal<py::object>(seq);
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  out.reserve(static_cast<size_t>(count));
  for (Py_ssize_t k = 0; k < count; ++k) {
    PyObject* item = items[k];
    if (PyFloat_Check(item) || PyBool_Check(item) || !PyIndex_Check(item)) {
      throw py::type_error("indices must be integers, not '" + type_name_of(item) + "'");
    }
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (overflow != 0) index_error(overflow < 0 ? INT64_MIN : INT64_MAX, n, name);
    if (x < 0 || static_cast<uint64_t>(x) >= n) index_error(x, n, name);
    out.push_back(static_cast<uint64_t>(x));
  }
  return out;
}

}  // namespace arrayds::python
