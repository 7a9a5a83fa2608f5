// Reading one chunk out of the file around block headers, with every check of
// spec 11.3, and laying chunks out across 64 KiB blocks when writing (spec 4, 5.2).
#pragma once

#include <cstdint>
#include <string>

#include "riegeli/chunk.h"
#include "riegeli/pieces.h"
#include "util/byte_sink.h"
#include "util/byte_source.h"

namespace arrayds {

struct ParsedChunk {
  uint64_t begin = 0;
  uint64_t raw_end = 0;  // after header + data
  uint64_t end = 0;      // where the next chunk begins
  ChunkHeader header;
  Pieces data;  // points into the Region it was parsed from
};

// Parses the chunk beginning at `begin` from `region` (which must start at or before
// begin) and verifies the chunk header hash, the data hash, and every block header
// in the region inside [begin, end) (hash, previous_chunk, next_chunk). The chunk
// must end at or before `limit`. Returns 0 on success, or the position the region
// must reach for the chunk to be parsed (the caller fetches more and calls again).
// Throws CorruptionError naming `name` and the position.
uint64_t parse_chunk(const Region& region, uint64_t begin, uint64_t limit,
                     const std::string& name, ParsedChunk& out);

// Writes chunks one after another from position 0, inserting block headers.
class ChunkLayoutWriter {
 public:
  explicit ChunkLayoutWriter(ByteSink& sink) : sink_(sink) {}
  uint64_t pos() const { return pos_; }
  // Writes a sealed header and its data (header.data_size bytes) at pos(), then zero
  // padding up to the chunk end (spec 4.3, 4.4). Returns the chunk's begin.
  uint64_t write_chunk(const ChunkHeader& header, const uint8_t* data);
  // Writes the signature chunk (must be first).
  void write_signature();
  // A padding chunk up to the next multiple of 65536, if not already there (spec 5.2).
  void pad_to_block_boundary();

 private:
  void emit(const uint8_t* data, uint64_t n);  // n logical bytes; nullptr = zeros
  ByteSink& sink_;
  uint64_t pos_ = 0;
  uint64_t begin_ = 0;
  uint64_t end_ = 0;
};

// The 64 bytes every Riegeli file begins with (spec 5.1).
const uint8_t* file_signature();

}  // namespace arrayds
