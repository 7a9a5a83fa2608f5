// The engine's codecs and option strings for Python.
#pragma once

#include <pybind11/pybind11.h>

namespace arrayds::python {

namespace py = pybind11;

// codecs: which codecs this build can read and write.
void bind_codecs(py::module_& m);

// canonical_writer_options, check_reader_options.
void bind_options(py::module_& m);

}  // namespace arrayds::python
