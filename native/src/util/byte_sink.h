// Where a writer puts bytes: a local file (written through a 1 MiB buffer) or memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/byte_buffer.h"

namespace arrayds {

// The output of a writer; finish() flushes and closes it.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void append(const uint8_t* data, size_t size) = 0;
  virtual void append_zeros(size_t size) = 0;
  // Flushes and closes; further use is an error.
  virtual void finish() = 0;
};

// A local file. Zeros (a writer's padding; ArrayRecord: spec 4.4 and 5.2) that cover whole
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

}  // namespace arrayds
