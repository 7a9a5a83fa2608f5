// Reading one chunk out of the file around block headers, with every check of
// spec 11.3, and laying chunks out across 64 KiB blocks when writing (spec 4, 5.2).
#pragma once

#include <cstdint>
#include <string>

#include "arrayrecord/byte_source.h"
#include "byte_buffer.h"
#include "riegeli/chunk.h"
#include "riegeli/pieces.h"

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

// Output of a writer.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void append(const uint8_t* data, size_t size) = 0;
  virtual void append_zeros(size_t size) = 0;
  // Flushes and closes; further use is an error.
  virtual void finish() = 0;
};

// A local file. Zeros (the format's padding, spec 4.4 and 5.2) that cover whole
// filesystem blocks of a regular file are not written but left as a hole (the file is
// new, so it reads back as zeros): a small file padded to 128 KiB occupies a few KiB.
// The bytes read back are the same as if every zero had been written.
class FileSink final : public ByteSink {
 public:
  explicit FileSink(const std::string& path);  // creates/truncates; IoError on failure
  ~FileSink() override;
  void append(const uint8_t* data, size_t size) override;
  void append_zeros(size_t size) override;
  void finish() override;

 private:
  void flush();
  void buffer_zeros(uint64_t size);
  void settle_zeros();  // writes the pending zeros, or leaves their whole blocks as a hole
  void write_all(const uint8_t* data, size_t size);
  std::string path_;
  int fd_ = -1;
  uint64_t hole_unit_ = 0;     // filesystem block size; 0: never leave holes (not a file)
  uint64_t buffer_at_ = 0;     // file offset of buffer_[0]
  uint64_t written_end_ = 0;   // end of the bytes written to the file so far
  uint64_t zeros_ = 0;         // zeros appended after buffer_, not yet settled
  ByteBuffer buffer_;
};

class MemorySink final : public ByteSink {
 public:
  void append(const uint8_t* data, size_t size) override { buffer_.append(data, size); }
  void append_zeros(size_t size) override { buffer_.append_zeros(size); }
  void finish() override {}
  ByteBuffer& buffer() { return buffer_; }

 private:
  ByteBuffer buffer_;
};

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
