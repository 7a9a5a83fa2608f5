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

class FileSink final : public ByteSink {
 public:
  explicit FileSink(const std::string& path);  // creates/truncates; IoError on failure
  ~FileSink() override;
  void append(const uint8_t* data, size_t size) override;
  void append_zeros(size_t size) override;
  void finish() override;

 private:
  void flush();
  void write_all(const uint8_t* data, size_t size);
  std::string path_;
  int fd_ = -1;
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
