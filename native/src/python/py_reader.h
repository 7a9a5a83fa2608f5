// _native.Reader: an ArrayRecord reader (arrayrecord/reader.h) over a local file
// (mapped or read with pread), bytes in memory, or only a fetched footer (records then
// decoded from spans the caller fetched); the GIL is released around all I/O and
// decoding.
#pragma once

#include <pybind11/pybind11.h>

namespace arrayds::python {

namespace py = pybind11;

// Reader, _mmap_repaired_faults.
void bind_reader(py::module_& m);

}  // namespace arrayds::python
