#include "python/hash.h"

#include <pybind11/stl.h>

#include <stdexcept>
#include <string>

#include "python/buffers.h"
#include "riegeli/highway_hash.h"

namespace arrayds::python {
namespace {

uint64_t py_highway_hash(const py::handle& data, const py::object& key) {
  BufferView v;
  v.acquire(data.ptr(), "data");
  HighwayKey k = kRiegeliKey;
  if (!key.is_none()) {
    py::sequence seq = key.cast<py::sequence>();
    if (seq.size() != 4) throw py::value_error("key must be 4 unsigned 64-bit integers");
    for (size_t i = 0; i < 4; ++i) k.k[i] = seq[i].cast<uint64_t>();
  }
  if (v.size() < (1u << 16)) return highway_hash64(k, v.data(), v.size());
  py::gil_scoped_release release;
  return highway_hash64(k, v.data(), v.size());
}

}  // namespace

void bind_hash(py::module_& m) {
  m.def("highway_hash", &py_highway_hash, py::arg("data"), py::arg("key") = py::none(),
        "HighwayHash-64 of data; key: four 64-bit words (default: the Riegeli key).");
  m.def("highway_hash_implementation", &highway_hash_implementation,
        "The HighwayHash library's implementation in use (\"AVX2\", \"SSE41\", \"Portable\").");
  m.def("_highway_hash_targets", &highway_hash_targets,
        "Testing aid: the HighwayHash implementations this CPU can run, best first.");
  m.def(
      "_highway_hash_force_target",
      [](const std::string& name) {
        try {
          return highway_hash_force_target(name);
        } catch (const std::invalid_argument& e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("name"),
      "Testing aid: use the named implementation (\"\" restores the library's choice); "
      "returns the previous setting.");
}

}  // namespace arrayds::python
