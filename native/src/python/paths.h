// File paths given from Python.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace arrayds::python {

namespace py = pybind11;

// os.fspath(path) as a byte string (str or bytes paths, os.PathLike).
std::string fspath(const py::handle& path);

}  // namespace arrayds::python
