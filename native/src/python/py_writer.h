// _native.Writer: an ArrayRecord writer (arrayrecord/writer.h) to a file, to memory,
// or streamed to a Python callable; the GIL is released while records are encoded and
// written.
#pragma once

#include <pybind11/pybind11.h>

namespace arrayds::python {

namespace py = pybind11;

// Writer.
void bind_writer(py::module_& m);

}  // namespace arrayds::python
