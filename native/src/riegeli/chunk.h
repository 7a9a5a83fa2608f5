// Chunk headers and block headers (spec sections 3 and 4.1).
#pragma once

#include <cstdint>

#include "riegeli/block_layout.h"

namespace arrayds {

enum ChunkType : uint8_t {
  kChunkSignature = 's',
  kChunkMetadata = 'm',
  kChunkPadding = 'p',
  kChunkSimple = 'r',
  kChunkTransposed = 't',
};

struct ChunkHeader {
  uint64_t header_hash = 0;
  uint64_t data_size = 0;
  uint64_t data_hash = 0;
  uint8_t chunk_type = 0;
  uint64_t num_records = 0;  // 56 bits
  uint64_t decoded_data_size = 0;

  // Fills header_hash from the other fields.
  void seal();
  // Serialises all 40 bytes (call seal() first).
  void encode(uint8_t out[kChunkHeaderSize]) const;
  // Parses 40 bytes; returns false if the stored header_hash does not match.
  bool parse(const uint8_t in[kChunkHeaderSize]);
};

struct BlockHeader {
  uint64_t previous_chunk = 0;
  uint64_t next_chunk = 0;

  void encode(uint8_t out[kBlockHeaderSize]) const;  // computes the hash
  // Returns false if the stored hash does not match.
  bool parse(const uint8_t in[kBlockHeaderSize]);
};

// Header of a chunk with the given type and data (computes both hashes).
ChunkHeader make_chunk_header(uint8_t type, const uint8_t* data, uint64_t data_size,
                              uint64_t num_records, uint64_t decoded_data_size);
// HH of n zero bytes (padding chunks), computed without allocating n bytes.
uint64_t hash_of_zeros(uint64_t n);

}  // namespace arrayds
