#include "util/thread_pool.h"

#include <pthread.h>

#include <atomic>
#include <exception>
#include <memory>

namespace arrayds {

ThreadPool::ThreadPool(size_t threads) {
  workers_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

void ThreadPool::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      task();
    } catch (...) {
      // Never let an exception escape a worker thread.
    }
  }
}

size_t hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

namespace {

std::mutex g_pool_mu;
std::unique_ptr<ThreadPool> g_pool;

void atfork_prepare() { g_pool_mu.lock(); }
void atfork_parent() { g_pool_mu.unlock(); }
void atfork_child() {
  // The parent's worker threads do not exist in the child: forget the pool without
  // joining them (its memory is leaked on purpose), and build a fresh one on demand.
  (void)g_pool.release();
  g_pool_mu.unlock();
}

struct AtforkRegistration {
  AtforkRegistration() { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }
};

}  // namespace

ThreadPool& ThreadPool::shared() {
  static AtforkRegistration registration;
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(hardware_threads());
  return *g_pool;
}

namespace {

struct ForState {
  explicit ForState(size_t count, const std::function<void(size_t)>* f) : n(count), fn(f) {}
  const size_t n;
  const std::function<void(size_t)>* fn;  // valid while items remain
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::condition_variable cv;
  std::exception_ptr error;
};

void run_items(ForState& st) {
  for (;;) {
    const size_t i = st.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= st.n) return;
    if (!st.failed.load(std::memory_order_relaxed)) {
      try {
        (*st.fn)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(st.mu);
        if (!st.error) st.error = std::current_exception();
        st.failed.store(true);
      }
    }
    if (st.done.fetch_add(1, std::memory_order_acq_rel) + 1 == st.n) {
      std::lock_guard<std::mutex> lock(st.mu);
      st.cv.notify_all();
    }
  }
}

}  // namespace

void parallel_for(size_t n, size_t parallelism, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  if (parallelism <= 1 || n == 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  ThreadPool& pool = ThreadPool::shared();
  auto st = std::make_shared<ForState>(n, &fn);
  size_t helpers = parallelism - 1;
  if (helpers > n - 1) helpers = n - 1;
  if (helpers > pool.size()) helpers = pool.size();
  for (size_t h = 0; h < helpers; ++h) {
    pool.submit([st] { run_items(*st); });
  }
  run_items(*st);
  {
    std::unique_lock<std::mutex> lock(st->mu);
    st->cv.wait(lock, [&] { return st->done.load(std::memory_order_acquire) == n; });
  }
  if (st->error) std::rethrow_exception(st->error);
}

}  // namespace arrayds
