// The GIL and the bindings' locks: a mutex taken without holding the GIL while
// waiting, and whether the interpreter is shutting down.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>

namespace arrayds::python {

// True once the interpreter is finalizing (other threads may no longer take the GIL).
bool interpreter_finalizing();

// Locks a mutex; if another thread holds it, waits with the GIL released. A thread
// that already holds it (e.g. write() called from the iterator given to write_many())
// gets a RuntimeError instead of a deadlock.
class GilAwareLock {
 public:
  // what: "this Writer", ... for the RuntimeError message.
  GilAwareLock(std::mutex& mu, std::atomic<std::thread::id>& owner, const char* what);
  ~GilAwareLock() { owner_.store(std::thread::id()); }
  GilAwareLock(const GilAwareLock&) = delete;
  GilAwareLock& operator=(const GilAwareLock&) = delete;

 private:
  std::unique_lock<std::mutex> lock_;
  std::atomic<std::thread::id>& owner_;
};

}  // namespace arrayds::python
