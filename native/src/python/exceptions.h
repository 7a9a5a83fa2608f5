// The engine's exceptions (errors.h) as Python exceptions. (Not named errors.h:
// "errors.h" included from this folder would find it instead of the engine's.)
#pragma once

#include <pybind11/pybind11.h>

namespace arrayds::python {

namespace py = pybind11;

// Adds _native.CorruptionError (a subclass of OSError) to m and registers the
// translation of every engine exception:
//   CorruptionError, FormatError -> _native.CorruptionError
//   UnsupportedError             -> NotImplementedError
//   OptionsError, ClosedError, UsageError -> ValueError
//   IndexOutOfRange              -> IndexError
//   IoError                      -> OSError(errno, message, filename)
void bind_exceptions(py::module_& m);

}  // namespace arrayds::python
