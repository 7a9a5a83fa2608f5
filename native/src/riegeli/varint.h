// Unsigned LEB128 varints (spec section 1): shortest form when writing; when reading,
// forms up to 10 bytes are accepted as long as no bit beyond bit 63 is set.
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/byte_buffer.h"

namespace arrayds {

constexpr size_t kMaxVarintLength = 10;

inline size_t varint_length(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Writes v at out (which has room for 10 bytes); returns the number of bytes.
inline size_t put_varint(uint64_t v, uint8_t* out) {
  size_t n = 0;
  while (v >= 0x80) {
    out[n++] = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  out[n++] = static_cast<uint8_t>(v);
  return n;
}

inline void append_varint(ByteBuffer& out, uint64_t v) {
  uint8_t tmp[kMaxVarintLength];
  out.append(tmp, put_varint(v, tmp));
}

// Reads a varint from [p, end). On success advances p and returns true. Fails on
// truncation, on more than 10 bytes, and when bits beyond bit 63 are set.
inline bool read_varint(const uint8_t*& p, const uint8_t* end, uint64_t& value) {
  uint64_t result = 0;
  const uint8_t* q = p;
  for (unsigned shift = 0; shift < 70; shift += 7) {
    if (q == end) return false;
    const uint8_t b = *q++;
    if (shift == 63 && b > 1) return false;
    result |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      value = result;
      p = q;
      return true;
    }
  }
  return false;
}

}  // namespace arrayds
