// HighwayHash-64 (spec section 6.2), written from the algorithm description.
// A portable implementation plus an AVX2 one chosen at run time (same results).
#pragma once

#include <cstddef>
#include <cstdint>

namespace arrayds {

struct HighwayKey {
  uint64_t k[4];
};

// "Riegeli/" and "records\n" as little-endian words, each used twice (spec 6.1).
constexpr HighwayKey kRiegeliKey = {{0x2f696c6567656952ULL, 0x0a7364726f636572ULL,
                                     0x2f696c6567656952ULL, 0x0a7364726f636572ULL}};

struct alignas(32) HighwayState {
  uint64_t v0[4];
  uint64_t v1[4];
  uint64_t mul0[4];
  uint64_t mul1[4];
};

// One-shot hash.
uint64_t highway_hash64(const HighwayKey& key, const void* data, size_t size);
inline uint64_t riegeli_hash(const void* data, size_t size) {
  return highway_hash64(kRiegeliKey, data, size);
}

// Incremental hash: the same result as hashing the concatenation of all pieces.
class HighwayHasher {
 public:
  explicit HighwayHasher(const HighwayKey& key = kRiegeliKey);
  void update(const void* data, size_t size);
  uint64_t finish();  // call once

 private:
  HighwayState state_;
  uint8_t buffer_[32];
  size_t buffered_ = 0;
};

// Name of the implementation in use ("avx2" or "portable"), for tests/benchmarks.
const char* highway_hash_implementation();
// Forces the portable implementation (tests compare both); returns the old setting.
bool highway_hash_force_portable(bool force);

}  // namespace arrayds
