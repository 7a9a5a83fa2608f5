#include "riegeli/chunk.h"

#include <cstring>

#include "riegeli/highway_hash.h"

namespace arrayds {
namespace {

inline void put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
inline uint64_t get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

void encode_fields(const ChunkHeader& h, uint8_t out[32]) {
  put64(out, h.data_size);
  put64(out + 8, h.data_hash);
  put64(out + 16, static_cast<uint64_t>(h.chunk_type) | (h.num_records << 8));
  put64(out + 24, h.decoded_data_size);
}

}  // namespace

void ChunkHeader::seal() {
  uint8_t fields[32];
  encode_fields(*this, fields);
  header_hash = riegeli_hash(fields, 32);
}

void ChunkHeader::encode(uint8_t out[kChunkHeaderSize]) const {
  put64(out, header_hash);
  encode_fields(*this, out + 8);
}

bool ChunkHeader::parse(const uint8_t in[kChunkHeaderSize]) {
  header_hash = get64(in);
  data_size = get64(in + 8);
  data_hash = get64(in + 16);
  const uint64_t word = get64(in + 24);
  chunk_type = static_cast<uint8_t>(word & 0xff);
  num_records = word >> 8;
  decoded_data_size = get64(in + 32);
  return riegeli_hash(in + 8, 32) == header_hash;
}

void BlockHeader::encode(uint8_t out[kBlockHeaderSize]) const {
  put64(out + 8, previous_chunk);
  put64(out + 16, next_chunk);
  put64(out, riegeli_hash(out + 8, 16));
}

bool BlockHeader::parse(const uint8_t in[kBlockHeaderSize]) {
  previous_chunk = get64(in + 8);
  next_chunk = get64(in + 16);
  return riegeli_hash(in + 8, 16) == get64(in);
}

ChunkHeader make_chunk_header(uint8_t type, const uint8_t* data, uint64_t data_size,
                              uint64_t num_records, uint64_t decoded_data_size) {
  ChunkHeader h;
  h.data_size = data_size;
  h.data_hash = riegeli_hash(data, data_size);
  h.chunk_type = type;
  h.num_records = num_records;
  h.decoded_data_size = decoded_data_size;
  h.seal();
  return h;
}

uint64_t hash_of_zeros(uint64_t n) {
  static const uint8_t kZeros[4096] = {};
  HighwayHasher hasher;
  while (n > 0) {
    const uint64_t k = n < sizeof(kZeros) ? n : sizeof(kZeros);
    hasher.update(kZeros, k);
    n -= k;
  }
  return hasher.finish();
}

}  // namespace arrayds
