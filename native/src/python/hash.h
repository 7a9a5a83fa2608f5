// HighwayHash for Python: _native.highway_hash and its implementation controls.
#pragma once

#include <pybind11/pybind11.h>

namespace arrayds::python {

namespace py = pybind11;

// highway_hash, highway_hash_implementation, _highway_hash_targets,
// _highway_hash_force_target.
void bind_hash(py::module_& m);

}  // namespace arrayds::python
