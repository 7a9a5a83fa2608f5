#include "python/exceptions.h"

#include <exception>

#include "errors.h"

namespace arrayds::python {
namespace {

PyObject* g_corruption_error = nullptr;  // the module keeps it alive

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

void bind_exceptions(py::module_& m) {
  g_corruption_error = PyErr_NewExceptionWithDoc(
      "arrayds._native.CorruptionError",
      "A damaged or invalid ArrayRecord file (the message names the file and the byte "
      "position).",
      PyExc_OSError, nullptr);
  if (g_corruption_error == nullptr) throw py::error_already_set();
  m.attr("CorruptionError") = py::handle(g_corruption_error);  // the module holds a reference
  py::register_exception_translator(&translate);
}

}  // namespace arrayds::python
