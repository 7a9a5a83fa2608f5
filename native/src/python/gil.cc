#include "python/gil.h"

#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

namespace arrayds::python {

namespace py = pybind11;

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

GilAwareLock::GilAwareLock(std::mutex& mu, std::atomic<std::thread::id>& owner,
                           const char* what)
    : lock_(mu, std::defer_lock), owner_(owner) {
  if (owner.load() == std::this_thread::get_id()) {
    throw std::runtime_error(std::string(what) +
                             " is already busy in this thread (called from inside "
                             "write_many()'s iterator?)");
  }
  if (!lock_.try_lock()) {
    py::gil_scoped_release release;
    lock_.lock();
  }
  owner_.store(std::this_thread::get_id());
}

}  // namespace arrayds::python
