// Record indices given from Python: a sequence of ints or a 1-d integer array (read
// through the buffer protocol without a copy), checked against the record count.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

namespace arrayds::python {

namespace py = pybind11;

// Throws IndexOutOfRange: index i is not below the n records of the file `name`.
[[noreturn]] void index_error(int64_t i, uint64_t n, const std::string& name);

// obj as a list of record indices, each below n (IndexOutOfRange naming `name` if
// not); TypeError for anything but integers.
std::vector<uint64_t> parse_indices(const py::handle& obj, uint64_t n, const std::string& name);

}  // namespace arrayds::python
