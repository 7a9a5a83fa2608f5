#include "riegeli/highway_hash.h"

#include <atomic>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ARRAYDS_HH_X86 1
#include <immintrin.h>
#endif

namespace arrayds {
namespace {

constexpr uint64_t kInitMul0[4] = {0xdbe6d5d5fe4cce2fULL, 0xa4093822299f31d0ULL,
                                   0x13198a2e03707344ULL, 0x243f6a8885a308d3ULL};
constexpr uint64_t kInitMul1[4] = {0x3bd39e10cb0ef593ULL, 0xc0acf169b5f18a8cULL,
                                   0xbe5466cf34e90c6cULL, 0x452821e638d01377ULL};

inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // little-endian hosts only (spec: no big-endian support)
  return v;
}
inline uint64_t swap32(uint64_t x) { return (x >> 32) | (x << 32); }

void reset_state(HighwayState& s, const HighwayKey& key) {
  for (int i = 0; i < 4; ++i) {
    s.mul0[i] = kInitMul0[i];
    s.mul1[i] = kInitMul1[i];
    s.v0[i] = s.mul0[i] ^ key.k[i];
    s.v1[i] = s.mul1[i] ^ swap32(key.k[i]);
  }
}

// zipper_add(dst, src) for one lane pair: v0 = src[j] (low), v1 = src[j+1].
// Byte k of the result takes byte Z[k] of (v0 ++ v1),
// Z = [3,12,2,5,14,1,15,0, 11,4,10,13,9,6,8,7].
inline void zipper_add(uint64_t v1, uint64_t v0, uint64_t& add1, uint64_t& add0) {
  add0 += (((v0 & 0xff000000ULL) | (v1 & 0xff00000000ULL)) >> 24) |
          (((v0 & 0xff0000000000ULL) | (v1 & 0xff000000000000ULL)) >> 16) |
          (v0 & 0xff0000ULL) | ((v0 & 0xff00ULL) << 32) |
          ((v1 & 0xff00000000000000ULL) >> 8) | (v0 << 56);
  add1 += (((v1 & 0xff000000ULL) | (v0 & 0xff00000000ULL)) >> 24) | (v1 & 0xff0000ULL) |
          ((v1 & 0xff0000000000ULL) >> 16) | ((v1 & 0xff00ULL) << 24) |
          ((v0 & 0xff000000000000ULL) >> 8) | ((v1 & 0xffULL) << 48) |
          (v0 & 0xff00000000000000ULL);
}

// The state lives in locals so the compiler keeps it in registers.
struct Lanes {
  uint64_t v0[4], v1[4], mul0[4], mul1[4];
};

inline void update_lanes(Lanes& s, uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  const uint64_t in[4] = {a, b, c, d};
  for (int i = 0; i < 4; ++i) {
    s.v1[i] += s.mul0[i] + in[i];
    s.mul0[i] ^= (s.v1[i] & 0xffffffffULL) * (s.v0[i] >> 32);
    s.v0[i] += s.mul1[i];
    s.mul1[i] ^= (s.v0[i] & 0xffffffffULL) * (s.v1[i] >> 32);
  }
  zipper_add(s.v1[1], s.v1[0], s.v0[1], s.v0[0]);
  zipper_add(s.v1[3], s.v1[2], s.v0[3], s.v0[2]);
  zipper_add(s.v0[1], s.v0[0], s.v1[1], s.v1[0]);
  zipper_add(s.v0[3], s.v0[2], s.v1[3], s.v1[2]);
}

inline Lanes load_lanes(const HighwayState& st) {
  Lanes s;
  std::memcpy(s.v0, st.v0, 32);
  std::memcpy(s.v1, st.v1, 32);
  std::memcpy(s.mul0, st.mul0, 32);
  std::memcpy(s.mul1, st.mul1, 32);
  return s;
}
inline void store_lanes(HighwayState& st, const Lanes& s) {
  std::memcpy(st.v0, s.v0, 32);
  std::memcpy(st.v1, s.v1, 32);
  std::memcpy(st.mul0, s.mul0, 32);
  std::memcpy(st.mul1, s.mul1, 32);
}

void packets_portable(HighwayState& st, const uint8_t* p, size_t packets) {
  Lanes s = load_lanes(st);
  for (size_t k = 0; k < packets; ++k, p += 32) {
    update_lanes(s, load64(p), load64(p + 8), load64(p + 16), load64(p + 24));
  }
  store_lanes(st, s);
}

// Builds the final zero-padded packet for a tail of r (1..31) bytes and applies the
// length mixing of step 2 to v0/v1.
void prepare_tail(HighwayState& st, const uint8_t* tail, size_t r, uint8_t packet[32]) {
  std::memset(packet, 0, 32);
  for (int i = 0; i < 4; ++i) {
    st.v0[i] += (static_cast<uint64_t>(r) << 32) + r;
    const uint32_t lo = static_cast<uint32_t>(st.v1[i]);
    const uint32_t hi = static_cast<uint32_t>(st.v1[i] >> 32);
    const unsigned c = static_cast<unsigned>(r);
    const uint32_t rlo = (lo << c) | (lo >> (32 - c));
    const uint32_t rhi = (hi << c) | (hi >> (32 - c));
    st.v1[i] = (static_cast<uint64_t>(rhi) << 32) | rlo;
  }
  const size_t whole = r & ~static_cast<size_t>(3);
  std::memcpy(packet, tail, whole);
  if (r & 16) {
    std::memcpy(packet + 28, tail + r - 4, 4);
  } else {
    const size_t m = r & 3;
    if (m != 0) {
      packet[16] = tail[whole];
      packet[17] = tail[whole + (m >> 1)];
      packet[18] = tail[whole + m - 1];
    }
  }
}

uint64_t finish_portable(HighwayState& st, const uint8_t* tail, size_t r) {
  if (r != 0) {
    uint8_t packet[32];
    prepare_tail(st, tail, r, packet);
    packets_portable(st, packet, 1);
  }
  Lanes s = load_lanes(st);
  for (int n = 0; n < 4; ++n) {
    update_lanes(s, swap32(s.v0[2]), swap32(s.v0[3]), swap32(s.v0[0]), swap32(s.v0[1]));
  }
  return s.v0[0] + s.v1[0] + s.mul0[0] + s.mul1[0];
}

#ifdef ARRAYDS_HH_X86
struct Avx2Lanes {
  __m256i v0, v1, mul0, mul1;
};

__attribute__((target("avx2"))) inline __m256i zipper_avx2(__m256i x) {
  const __m256i mask = _mm256_setr_epi8(3, 12, 2, 5, 14, 1, 15, 0, 11, 4, 10, 13, 9, 6, 8, 7,
                                        3, 12, 2, 5, 14, 1, 15, 0, 11, 4, 10, 13, 9, 6, 8, 7);
  return _mm256_shuffle_epi8(x, mask);
}

__attribute__((target("avx2"))) inline void update_avx2(Avx2Lanes& s, __m256i packet) {
  s.v1 = _mm256_add_epi64(s.v1, _mm256_add_epi64(s.mul0, packet));
  s.mul0 = _mm256_xor_si256(s.mul0, _mm256_mul_epu32(s.v1, _mm256_srli_epi64(s.v0, 32)));
  s.v0 = _mm256_add_epi64(s.v0, s.mul1);
  s.mul1 = _mm256_xor_si256(s.mul1, _mm256_mul_epu32(s.v0, _mm256_srli_epi64(s.v1, 32)));
  s.v0 = _mm256_add_epi64(s.v0, zipper_avx2(s.v1));
  s.v1 = _mm256_add_epi64(s.v1, zipper_avx2(s.v0));
}

__attribute__((target("avx2"))) void packets_avx2(HighwayState& st, const uint8_t* p,
                                                  size_t packets) {
  Avx2Lanes s;
  s.v0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(st.v0));
  s.v1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(st.v1));
  s.mul0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(st.mul0));
  s.mul1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(st.mul1));
  for (size_t k = 0; k < packets; ++k, p += 32) {
    update_avx2(s, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  _mm256_store_si256(reinterpret_cast<__m256i*>(st.v0), s.v0);
  _mm256_store_si256(reinterpret_cast<__m256i*>(st.v1), s.v1);
  _mm256_store_si256(reinterpret_cast<__m256i*>(st.mul0), s.mul0);
  _mm256_store_si256(reinterpret_cast<__m256i*>(st.mul1), s.mul1);
}

__attribute__((target("avx2"))) uint64_t finish_avx2(HighwayState& st, const uint8_t* tail,
                                                     size_t r) {
  uint8_t packet[32];
  if (r != 0) prepare_tail(st, tail, r, packet);
  Avx2Lanes s;
  s.v0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(st.v0));
  s.v1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(st.v1));
  s.mul0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(st.mul0));
  s.mul1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(st.mul1));
  if (r != 0) update_avx2(s, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(packet)));
  for (int n = 0; n < 4; ++n) {
    // [swap32(v0[2]), swap32(v0[3]), swap32(v0[0]), swap32(v0[1])]
    const __m256i perm = _mm256_permute4x64_epi64(s.v0, _MM_SHUFFLE(1, 0, 3, 2));
    update_avx2(s, _mm256_shuffle_epi32(perm, _MM_SHUFFLE(2, 3, 0, 1)));
  }
  const __m256i sum = _mm256_add_epi64(_mm256_add_epi64(s.v0, s.v1),
                                       _mm256_add_epi64(s.mul0, s.mul1));
  return static_cast<uint64_t>(_mm_cvtsi128_si64(_mm256_castsi256_si128(sum)));
}
#endif

using PacketsFn = void (*)(HighwayState&, const uint8_t*, size_t);
using FinishFn = uint64_t (*)(HighwayState&, const uint8_t*, size_t);

struct Impl {
  PacketsFn packets;
  FinishFn finish;
  const char* name;
};

const Impl kPortable = {packets_portable, finish_portable, "portable"};
#ifdef ARRAYDS_HH_X86
const Impl kAvx2 = {packets_avx2, finish_avx2, "avx2"};
#endif

const Impl* detect() {
#ifdef ARRAYDS_HH_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) return &kAvx2;
#endif
  return &kPortable;
}

const Impl* const kBest = detect();
std::atomic<const Impl*> g_impl{kBest};

inline const Impl& impl() { return *g_impl.load(std::memory_order_relaxed); }

}  // namespace

uint64_t highway_hash64(const HighwayKey& key, const void* data, size_t size) {
  const Impl& f = impl();
  HighwayState st;
  reset_state(st, key);
  const uint8_t* p = static_cast<const uint8_t*>(data);
  const size_t packets = size / 32;
  if (packets != 0) f.packets(st, p, packets);
  return f.finish(st, p + packets * 32, size % 32);
}

HighwayHasher::HighwayHasher(const HighwayKey& key) { reset_state(state_, key); }

void HighwayHasher::update(const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  const Impl& f = impl();
  if (buffered_ != 0) {
    const size_t take = size < 32 - buffered_ ? size : 32 - buffered_;
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    size -= take;
    if (buffered_ < 32) return;
    f.packets(state_, buffer_, 1);
    buffered_ = 0;
  }
  const size_t packets = size / 32;
  if (packets != 0) f.packets(state_, p, packets);
  p += packets * 32;
  size -= packets * 32;
  if (size != 0) {
    std::memcpy(buffer_, p, size);
    buffered_ = size;
  }
}

uint64_t HighwayHasher::finish() { return impl().finish(state_, buffer_, buffered_); }

const char* highway_hash_implementation() { return impl().name; }

bool highway_hash_force_portable(bool force) {
  const Impl* old = g_impl.exchange(force ? &kPortable : kBest);
  return old == &kPortable && kBest != &kPortable;
}

}  // namespace arrayds
