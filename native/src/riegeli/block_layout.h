// Block and chunk geometry (spec sections 3, 4.2, 4.3, 4.5, 5.2).
#pragma once

#include <cstdint>

namespace arrayds {

constexpr uint64_t kBlockSize = 65536;                        // B
constexpr uint64_t kBlockHeaderSize = 24;                     // BH
constexpr uint64_t kChunkHeaderSize = 40;                     // CH
constexpr uint64_t kUsableBlockSize = kBlockSize - kBlockHeaderSize;  // U = 65512

// A chunk may begin at p only if p % B == 0 or p % B >= 25 (spec 4.2).
inline bool is_valid_chunk_begin(uint64_t p) {
  const uint64_t r = p % kBlockSize;
  return r == 0 || r > kBlockHeaderSize;
}

// The position reached after n logical bytes written from a valid begin (spec 4.3).
// Callers keep begin and n well below 2^62 (they are bounded by the file size).
inline uint64_t add_with_overhead(uint64_t begin, uint64_t n) {
  return begin + n +
         kBlockHeaderSize * ((n + (begin + kUsableBlockSize - 1) % kBlockSize) / kUsableBlockSize);
}

inline uint64_t round_up_to_boundary(uint64_t p) {
  const uint64_t r = p % kBlockSize;
  if (r == 0 || r > kBlockHeaderSize) return p;
  return p + (kBlockHeaderSize + 1 - r);
}

// Where the next chunk begins (spec 4.3).
inline uint64_t chunk_end(uint64_t begin, uint64_t data_size, uint64_t num_records) {
  const uint64_t raw_end = add_with_overhead(begin, kChunkHeaderSize + data_size);
  const uint64_t min_end = round_up_to_boundary(begin + num_records);
  return raw_end > min_end ? raw_end : min_end;
}

// Number of logical (non block header) bytes in [a, b) for valid positions a <= b.
inline uint64_t distance_without_overhead(uint64_t a, uint64_t b) {
  auto strip = [](uint64_t p) {
    const uint64_t r = p % kBlockSize;
    return p - (r < kBlockHeaderSize ? r : kBlockHeaderSize);
  };
  return strip(b) - strip(a) - kBlockHeaderSize * (b / kBlockSize - a / kBlockSize);
}

}  // namespace arrayds
