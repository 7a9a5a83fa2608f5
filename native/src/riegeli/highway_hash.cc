#include "riegeli/highway_hash.h"

#include <highwayhash/arch_specific.h>
#include <highwayhash/highwayhash.h>         // HighwayHashCatT (compiled here: Portable)
#include <highwayhash/highwayhash_target.h>  // HighwayHash/HighwayHashCat (in the library)
#include <highwayhash/instruction_sets.h>

#include <atomic>
#include <stdexcept>

namespace arrayds {
namespace {

using highwayhash::HHResult64;
using highwayhash::InstructionSets;
using highwayhash::StringView;
using highwayhash::TargetBits;

// Which code computes the hash:
// * the library's dispatch (InstructionSets::Run over the HighwayHash / HighwayHashCat
//   functors compiled into libhighwayhash), when it picks a vector implementation that
//   reproduces the spec's vectors;
// * otherwise the library's portable implementation from its header, compiled into this
//   module. Debian's libhighwayhash0 (0~git20200803.9490b14) ships a Portable functor
//   that returns wrong hashes for inputs longer than 32 bytes that are not a multiple of
//   32 (the same header code compiled here gives the right ones), so this module never
//   calls the library's compiled Portable target.
constexpr TargetBits kHeaderPortable = 0;

// Testing aid: 0 for the choice above, else the one target bit forced (kForcedPortable
// for the header's portable code).
constexpr TargetBits kForcedPortable = HH_TARGET_Portable;
std::atomic<TargetBits> g_forced{0};

const highwayhash::HHKey& as_library_key(const HighwayKey& key) { return key.k; }

uint64_t header_portable(const HighwayKey& key, const StringView* fragments, size_t count) {
  highwayhash::HighwayHashCatT<HH_TARGET_Portable> cat(as_library_key(key));
  for (size_t i = 0; i < count; ++i) cat.Append(fragments[i].data, fragments[i].num_bytes);
  HHResult64 result = 0;
  cat.Finalize(&result);
  return result;
}

// Two of the spec's vectors (section 6.3) whose length is not a multiple of 32.
bool library_dispatch_is_right(TargetBits* used) {
  char data[100];
  for (int i = 0; i < 100; ++i) data[i] = static_cast<char>(i);
  HHResult64 h33 = 0, h100 = 0;
  const highwayhash::HHKey& key = as_library_key(kRiegeliKey);
  *used = InstructionSets::Run<highwayhash::HighwayHash>(key, data, size_t{33}, &h33);
  const StringView pieces[2] = {{data, 41}, {data + 41, 59}};
  InstructionSets::Run<highwayhash::HighwayHashCat>(key, pieces, size_t{2}, &h100);
  return *used != HH_TARGET_Portable && h33 == 0xEC2F920014EAA741ULL &&
         h100 == 0xE809487465A44F74ULL;
}

// The implementation used when none is forced: the library's dispatched target, or
// kHeaderPortable. Decided once.
TargetBits choice() {
  static const TargetBits chosen = [] {
    TargetBits used = 0;
    return library_dispatch_is_right(&used) ? used : kHeaderPortable;
  }();
  return chosen;
}

TargetBits supported() {
  static const TargetBits bits = InstructionSets::Supported();
  return bits;
}

// The targets a test may force, best first: the library's x86 vector ones, and Portable.
#if HH_ARCH_X64
constexpr TargetBits kForcible[] = {HH_TARGET_AVX2, HH_TARGET_SSE41, kForcedPortable};
#else
constexpr TargetBits kForcible[] = {kForcedPortable};
#endif

bool forcible(TargetBits t) { return t == kForcedPortable || (supported() & t) != 0; }

uint64_t hash_fragments(const HighwayKey& key, const StringView* fragments, size_t count) {
  const highwayhash::HHKey& k = as_library_key(key);
  HHResult64 result = 0;
  switch (const TargetBits forced = g_forced.load(std::memory_order_relaxed); forced) {
#if HH_ARCH_X64
    case HH_TARGET_AVX2:
      highwayhash::HighwayHashCat<HH_TARGET_AVX2>()(k, fragments, count, &result);
      return result;
    case HH_TARGET_SSE41:
      highwayhash::HighwayHashCat<HH_TARGET_SSE41>()(k, fragments, count, &result);
      return result;
#endif
    case kForcedPortable:
      return header_portable(key, fragments, count);
    default:
      break;
  }
  if (choice() == kHeaderPortable) return header_portable(key, fragments, count);
  InstructionSets::Run<highwayhash::HighwayHashCat>(k, fragments, count, &result);
  return result;
}

}  // namespace

uint64_t highway_hash64(const HighwayKey& key, const void* data, size_t size) {
  if (g_forced.load(std::memory_order_relaxed) == 0 && choice() != kHeaderPortable) {
    HHResult64 result = 0;
    InstructionSets::Run<highwayhash::HighwayHash>(as_library_key(key),
                                                   static_cast<const char*>(data), size, &result);
    return result;
  }
  const StringView one{static_cast<const char*>(data), size};
  return hash_fragments(key, &one, 1);
}

void HighwayHasher::update(const void* data, size_t size) {
  if (size != 0) pieces_.emplace_back(static_cast<const char*>(data), size);
}

uint64_t HighwayHasher::finish() {
  std::vector<StringView> fragments;
  fragments.reserve(pieces_.size());
  for (const auto& [data, size] : pieces_) fragments.push_back(StringView{data, size});
  pieces_.clear();
  return hash_fragments(key_, fragments.data(), fragments.size());
}

std::string highway_hash_implementation() {
  TargetBits t = g_forced.load(std::memory_order_relaxed);
  if (t == 0) t = choice();
  return t == kHeaderPortable ? "Portable" : highwayhash::TargetName(t);
}

std::vector<std::string> highway_hash_targets() {
  std::vector<std::string> names;
  for (TargetBits t : kForcible) {
    if (forcible(t)) names.emplace_back(highwayhash::TargetName(t));
  }
  return names;
}

std::string highway_hash_force_target(const std::string& name) {
  TargetBits bits = 0;
  if (!name.empty()) {
    for (TargetBits t : kForcible) {
      if (forcible(t) && name == highwayhash::TargetName(t)) bits = t;
    }
    if (bits == 0) {
      throw std::invalid_argument("no HighwayHash implementation '" + name + "' on this CPU");
    }
  }
  const TargetBits old = g_forced.exchange(bits);
  return old == 0 ? std::string() : std::string(highwayhash::TargetName(old));
}

}  // namespace arrayds
