// BufferPool: a small process-wide pool of large, 64-byte aligned memory blocks,
// reused instead of freed. A block freshly taken from the system page-faults on first
// touch (about 1,150 faults per 4.5 MiB); decoding array chunks into reused blocks
// avoids that (see docs/design/engine.md, "Pooled buffers"). Bounded: at most
// kMaxBytes and kMaxBlocks are kept idle, and a block larger than kMaxBlock is
// never kept. Thread-safe; consistent across fork() (the mutex is held over it).
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace arrayds {

struct AlignedFree {
  void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
using AlignedBlock = std::unique_ptr<uint8_t[], AlignedFree>;

class BufferPool {
 public:
  static constexpr size_t kMaxBytes = 128u << 20;
  static constexpr size_t kMaxBlock = 64u << 20;
  static constexpr size_t kMaxBlocks = 32;

  // Never destroyed: Python objects may hand blocks back during interpreter shutdown,
  // after static destructors would have run.
  static BufferPool& shared() {
    static BufferPool* const pool = [] {
      alignas(BufferPool) static unsigned char storage[sizeof(BufferPool)];
      BufferPool* p = new (storage) BufferPool();
      pthread_atfork(&prepare_fork, &after_fork, &after_fork);
      return p;
    }();
    return *pool;
  }

  // A block of at least n bytes (n > 0): a kept one of n..2n bytes if there is one,
  // else a new one. `capacity` receives its real size.
  AlignedBlock take(size_t n, size_t& capacity) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.lower_bound(n);
      if (it != free_.end() && it->first <= 2 * n) {
        capacity = it->first;
        AlignedBlock b = std::move(it->second);
        free_.erase(it);
        bytes_ -= capacity;
        return b;
      }
    }
    capacity = n;
    return AlignedBlock(static_cast<uint8_t*>(::operator new[](n, std::align_val_t(64))));
  }

  // Keeps the block for reuse, or frees it when the pool is full.
  void give(AlignedBlock block, size_t capacity) {
    if (!block || capacity > kMaxBlock) return;
    std::vector<AlignedBlock> dropped;  // freed after the lock is released
    std::lock_guard<std::mutex> lock(mu_);
    while (!free_.empty() && (bytes_ + capacity > kMaxBytes || free_.size() >= kMaxBlocks)) {
      auto victim = free_.begin();  // the smallest: large blocks fault the most
      bytes_ -= victim->first;
      dropped.push_back(std::move(victim->second));
      free_.erase(victim);
    }
    bytes_ += capacity;
    free_.emplace(capacity, std::move(block));
  }

  size_t idle_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
  }

 private:
  BufferPool() = default;
  static void prepare_fork() { shared().mu_.lock(); }
  static void after_fork() { shared().mu_.unlock(); }
  std::mutex mu_;
  std::multimap<size_t, AlignedBlock> free_;
  size_t bytes_ = 0;
};

}  // namespace arrayds
