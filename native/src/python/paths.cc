#include "python/paths.h"

namespace arrayds::python {

std::string fspath(const py::handle& path) {
  py::object p = py::module_::import("os").attr("fspath")(path);
  if (PyBytes_Check(p.ptr())) return std::string(py::bytes(p));
  return p.cast<std::string>();
}

}  // namespace arrayds::python
