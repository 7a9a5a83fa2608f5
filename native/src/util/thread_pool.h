// A small fixed pool of worker threads shared by all readers and writers of the
// process, and parallel_for on top of it. The pool is created on first use with
// one thread per core and re-created in a forked child (whose copy of the parent's
// threads does not exist).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace arrayds {

class ThreadPool {
 public:
  explicit ThreadPool(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size(); }
  // Runs task on a worker. Exceptions thrown by a task are swallowed: tasks report
  // errors through their own state (see parallel_for and the writer's batches).
  void submit(std::function<void()> task);

  static ThreadPool& shared();

 private:
  void work();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

// Number of cores (at least 1).
size_t hardware_threads();

// Runs fn(i) for every i in [0, n) on up to `parallelism` threads, the calling thread
// being one of them, and returns when all are done. If any call throws, the remaining
// items are skipped and the first exception is rethrown here. Safe to call from a
// pool worker (the caller makes progress on its own).
void parallel_for(size_t n, size_t parallelism, const std::function<void(size_t)>& fn);

}  // namespace arrayds
