#include "arrayrecord/file_mapping.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace arrayds {
namespace {

// The mappings the SIGBUS handler knows about. Fixed size and lock-free, since the
// handler may only read atomics; a file that finds no free slot is read with pread.
constexpr size_t kSlots = 4096;

struct Slot {
  std::atomic<bool> used{false};
  std::atomic<uintptr_t> begin{0};  // 0: not (yet) a mapping
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> damaged{false};
};

Slot g_slots[kSlots];
std::atomic<uintptr_t> g_page_size{4096};
std::atomic<uint64_t> g_repaired{0};
struct sigaction g_previous;  // written under g_install_mu before our handler is set
std::mutex g_install_mu;

void chain(int sig, siginfo_t* info, void* context) {
  const struct sigaction& prev = g_previous;
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction != nullptr) {
      prev.sa_sigaction(sig, info, context);
      return;
    }
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN &&
             prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
    return;
  }
  // Default action: uninstall ourselves; a real fault happens again when the
  // instruction is retried and kills the process as it would have without us.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  if (info == nullptr || info->si_code <= 0) raise(sig);  // sent by kill(): deliver it
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (info != nullptr && info->si_code > 0) {  // a fault, not kill()
    const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
    for (Slot& s : g_slots) {
      const uintptr_t b = s.begin.load(std::memory_order_acquire);
      if (b == 0 || addr < b || addr >= s.end.load(std::memory_order_acquire)) continue;
      s.damaged.store(true, std::memory_order_seq_cst);
      const uintptr_t page = addr & ~(g_page_size.load(std::memory_order_relaxed) - 1);
      // A private page of zeros over the missing one: the access is retried and
      // succeeds. mmap is a plain system call on Linux (safe in a signal handler).
      void* r = mmap(reinterpret_cast<void*>(page), g_page_size.load(std::memory_order_relaxed),
                     PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      if (r != MAP_FAILED) {
        g_repaired.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      break;
    }
  }
  chain(sig, info, context);
}

// Installs on_sigbus unless it is the current handler (someone may have replaced it
// since the last mapping). Returns false if that fails.
bool ensure_handler() {
  std::lock_guard<std::mutex> lock(g_install_mu);
  struct sigaction current {};
  if (sigaction(SIGBUS, nullptr, &current) != 0) return false;
  if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == &on_sigbus) return true;
  const long ps = sysconf(_SC_PAGESIZE);
  if (ps > 0) g_page_size.store(static_cast<uintptr_t>(ps), std::memory_order_relaxed);
  // Block SIGBUS while g_previous changes, so that our handler (if it was installed
  // before and then replaced by a handler that chains to it) never sees it half written.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGBUS);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  g_previous = current;
  struct sigaction ours {};
  ours.sa_sigaction = &on_sigbus;
  sigemptyset(&ours.sa_mask);
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  const bool ok = sigaction(SIGBUS, &ours, nullptr) == 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

}  // namespace

std::unique_ptr<FileMapping> FileMapping::map(int fd, uint64_t size) {
  if (size == 0 || size > static_cast<uint64_t>(SIZE_MAX)) return nullptr;
  if (!ensure_handler()) return nullptr;
  size_t slot = kSlots;
  for (size_t i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (g_slots[i].used.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      slot = i;
      break;
    }
  }
  if (slot == kSlots) return nullptr;
  void* p = mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    g_slots[slot].used.store(false, std::memory_order_release);
    return nullptr;
  }
  Slot& s = g_slots[slot];
  s.damaged.store(false, std::memory_order_relaxed);
  s.end.store(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(size),
              std::memory_order_release);
  s.begin.store(reinterpret_cast<uintptr_t>(p), std::memory_order_release);
  return std::unique_ptr<FileMapping>(new FileMapping(static_cast<const uint8_t*>(p), size, slot));
}

FileMapping::~FileMapping() {
  Slot& s = g_slots[slot_];
  // Unregister first: nothing reads the mapping any more (we are its only owner).
  s.begin.store(0, std::memory_order_release);
  s.end.store(0, std::memory_order_release);
  munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  s.used.store(false, std::memory_order_release);
}

bool FileMapping::damaged() const {
  return g_slots[slot_].damaged.load(std::memory_order_seq_cst);
}

uint64_t FileMapping::repaired_faults() { return g_repaired.load(std::memory_order_relaxed); }

}  // namespace arrayds
