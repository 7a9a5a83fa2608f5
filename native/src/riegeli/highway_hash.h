// HighwayHash-64 (spec section 6.2), computed by Google's HighwayHash library (Debian
// libhighwayhash-dev). The library picks the AVX2, SSE4.1 or portable implementation
// for the CPU at run time; all give the same results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace arrayds {

struct HighwayKey {
  uint64_t k[4];
};

// "Riegeli/" and "records\n" as little-endian words, each used twice (spec 6.1).
constexpr HighwayKey kRiegeliKey = {{0x2f696c6567656952ULL, 0x0a7364726f636572ULL,
                                     0x2f696c6567656952ULL, 0x0a7364726f636572ULL}};

// One-shot hash.
uint64_t highway_hash64(const HighwayKey& key, const void* data, size_t size);
inline uint64_t riegeli_hash(const void* data, size_t size) {
  return highway_hash64(kRiegeliKey, data, size);
}

// Hash of the concatenation of several pieces. update() records a piece, finish() hashes
// them all with the library's HighwayHashCat: every piece must stay valid and unchanged
// until finish() returns.
class HighwayHasher {
 public:
  explicit HighwayHasher(const HighwayKey& key = kRiegeliKey) : key_(key) {}
  void update(const void* data, size_t size);
  uint64_t finish();  // call once

 private:
  HighwayKey key_;
  std::vector<std::pair<const char*, size_t>> pieces_;
};

// The library's name of the implementation the engine uses ("AVX2", "SSE41", "Portable").
std::string highway_hash_implementation();
// The names of every implementation this CPU can run, best first.
std::vector<std::string> highway_hash_targets();
// Testing aid: use the named implementation (one of highway_hash_targets()) instead of the
// library's choice; "" restores the choice. Returns the previous setting ("" if none).
std::string highway_hash_force_target(const std::string& name);

}  // namespace arrayds
