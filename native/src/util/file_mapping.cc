#include "util/file_mapping.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace arrayds {
namespace {

// Everything the SIGBUS handler reads or writes is a lock-free atomic in static storage:
// the handler takes no lock, allocates nothing and touches no thread_local (whose
// first use in a dlopen'ed module may allocate), so any number of threads may fault
// at once, also while other threads map, unmap or re-install the handler.
static_assert(std::atomic<uintptr_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<pid_t>::is_always_lock_free);

// The mappings the handler knows about. Fixed size; a file that finds no free slot is
// read with pread. A slot is written only by the thread that owns it (claimed with
// `used`), seqlock style: `seq` is odd while begin/end change. The handler skips a slot
// whose `seq` is odd or changes while it reads begin/end: that slot is being published
// (no reader has the mapping yet) or withdrawn (no reader uses it any more), so it is
// never the one that faulted, and a torn (old begin, new end) pair is never matched.
constexpr size_t kSlots = 4096;

struct Slot {
  std::atomic<bool> used{false};
  std::atomic<uint64_t> seq{0};
  std::atomic<uintptr_t> begin{0};  // begin == end: not a mapping
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> damaged{false};
};

Slot g_slots[kSlots];
std::atomic<uintptr_t> g_page_size{4096};
std::atomic<uint64_t> g_repaired{0};

void publish(Slot& s, uintptr_t begin, uintptr_t end) {
  const uint64_t q = s.seq.load(std::memory_order_relaxed);
  s.seq.store(q + 1, std::memory_order_relaxed);  // odd: changing
  std::atomic_thread_fence(std::memory_order_release);
  s.begin.store(begin, std::memory_order_relaxed);
  s.end.store(end, std::memory_order_relaxed);
  s.seq.store(q + 2, std::memory_order_release);  // even: stable
}

// The slot whose mapping holds addr, or nullptr.
Slot* slot_of(uintptr_t addr) {
  for (Slot& s : g_slots) {
    const uint64_t q0 = s.seq.load(std::memory_order_acquire);
    if ((q0 & 1) != 0) continue;
    const uintptr_t b = s.begin.load(std::memory_order_relaxed);
    const uintptr_t e = s.end.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) != q0) continue;
    if (addr >= b && addr < e) return &s;
  }
  return nullptr;
}

// The handlers that were installed before ours, one record per installation of ours.
// A record is written completely before its index is published and never changes
// afterwards, so the handler never reads one half written. After kMaxInstalls
// installations the handler is not re-installed any more (files are then read with
// pread when ours is not the current handler).
constexpr uint32_t kMaxInstalls = 256;
struct sigaction g_previous[kMaxInstalls];
std::atomic<uint32_t> g_installs{0};  // records written; the last one is in effect
std::mutex g_install_mu;              // serialises installations (never in the handler)

// Re-entry guard. Chaining is a loop when the previous handler hands the signal back to
// us: faulthandler, say, enabled after our first installation saved ours as its
// previous, and our re-installation saved faulthandler as ours. It restores its
// previous handler (ours) and raises the signal again, which comes back to us either
// nested (if it is not blocked) or as soon as our handler returns. So a thread that
// chained records itself here until that comes back: a SIGBUS we do not own that
// reaches us on a thread still recorded takes the default action instead of going
// round again. Keyed by kernel thread id (no thread_local, see above): a thread is
// recorded while its slot holds its id.
constexpr size_t kGuards = 64;
std::atomic<pid_t> g_guards[kGuards];

pid_t this_thread_id() { return static_cast<pid_t>(syscall(SYS_gettid)); }

std::atomic<pid_t>* find_guard(pid_t tid) {
  for (std::atomic<pid_t>& g : g_guards) {
    if (g.load(std::memory_order_acquire) == tid) return &g;
  }
  return nullptr;
}

std::atomic<pid_t>* claim_guard(pid_t tid) {
  for (std::atomic<pid_t>& g : g_guards) {
    pid_t expected = 0;
    if (g.compare_exchange_strong(expected, tid, std::memory_order_acq_rel)) return &g;
  }
  return nullptr;
}

void release_guard(std::atomic<pid_t>* g) { g->store(0, std::memory_order_release); }

// The default action for SIGBUS: ends the process (after the retried instruction
// faults again, or at once for a signal that was sent).
void default_action(int sig, const siginfo_t* info) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  if (info == nullptr || info->si_code <= 0) raise(sig);  // sent by kill()/raise()
}

bool sigbus_pending() {
  sigset_t pending;
  sigemptyset(&pending);
  return sigpending(&pending) == 0 && sigismember(&pending, SIGBUS) == 1;
}

void chain(int sig, siginfo_t* info, void* context) {
  const pid_t tid = this_thread_id();
  if (std::atomic<pid_t>* g = find_guard(tid)) {  // the signal came back to us: end the loop
    release_guard(g);
    default_action(sig, info);
    return;
  }
  const uint32_t n = g_installs.load(std::memory_order_acquire);
  const struct sigaction& prev = g_previous[n == 0 ? 0 : n - 1];
  const bool to_function =
      (prev.sa_flags & SA_SIGINFO)
          ? prev.sa_sigaction != nullptr
          : (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr);
  std::atomic<pid_t>* g = to_function ? claim_guard(tid) : nullptr;
  if (g == nullptr) {  // nothing to chain to, or no room to guard against a loop
    default_action(sig, info);
    return;
  }
  if (prev.sa_flags & SA_SIGINFO) {
    prev.sa_sigaction(sig, info, context);
  } else {
    prev.sa_handler(sig);
  }
  // Still recorded if it raised the signal again: that comes back once we return.
  // Otherwise it was handled (or the retried instruction faults again and we chain
  // again, as a handler that neither fixes nor ends a fault makes any process do).
  if (!sigbus_pending()) release_guard(g);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (info != nullptr && info->si_code > 0) {  // a fault, not kill()
    const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
    if (Slot* s = slot_of(addr)) {
      s->damaged.store(true, std::memory_order_seq_cst);
      const uintptr_t size = g_page_size.load(std::memory_order_relaxed);
      const uintptr_t page = addr & ~(size - 1);
      // A private page of zeros over the missing one: the access is retried and
      // succeeds. mmap is a plain system call on Linux (safe in a signal handler).
      void* r = mmap(reinterpret_cast<void*>(page), size, PROT_READ,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      if (r != MAP_FAILED) {
        g_repaired.fetch_add(1, std::memory_order_relaxed);
        return;
      }
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
  const uint32_t n = g_installs.load(std::memory_order_relaxed);
  if (n == kMaxInstalls) return false;
  const long ps = sysconf(_SC_PAGESIZE);
  if (ps > 0) g_page_size.store(static_cast<uintptr_t>(ps), std::memory_order_relaxed);
  g_previous[n] = current;
  g_installs.store(n + 1, std::memory_order_release);
  struct sigaction ours {};
  ours.sa_sigaction = &on_sigbus;
  sigemptyset(&ours.sa_mask);
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  return sigaction(SIGBUS, &ours, nullptr) == 0;
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
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
  publish(s, begin, begin + static_cast<uintptr_t>(size));
  return std::unique_ptr<FileMapping>(new FileMapping(static_cast<const uint8_t*>(p), size, slot));
}

FileMapping::~FileMapping() {
  Slot& s = g_slots[slot_];
  // Unregister first: nothing reads the mapping any more (we are its only owner).
  publish(s, 0, 0);
  munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  s.used.store(false, std::memory_order_release);
}

bool FileMapping::damaged() const {
  return g_slots[slot_].damaged.load(std::memory_order_seq_cst);
}

uint64_t FileMapping::repaired_faults() { return g_repaired.load(std::memory_order_relaxed); }

}  // namespace arrayds
