// Where a reader gets bytes from: a local file read with pread (safe to share between
// threads: there is no file position), or memory (bytes handed over from Python,
// e.g. fetched with fsspec). A Region is a window of the file held in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "byte_buffer.h"

namespace arrayds {

// Bytes [begin, begin + size) of the file, at data.
struct Region {
  const uint8_t* data = nullptr;
  uint64_t begin = 0;
  uint64_t size = 0;
  uint64_t end() const { return begin + size; }
  const uint8_t* at(uint64_t pos) const { return data + (pos - begin); }
};

class ByteSource {
 public:
  explicit ByteSource(std::string name) : name_(std::move(name)) {}
  virtual ~ByteSource() = default;
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  const std::string& name() const { return name_; }
  virtual uint64_t size() const = 0;
  // Bytes [pos, pos + n) as a Region: memory sources point into their memory (and
  // may return more than n bytes); file sources pread into buf. Throws
  // CorruptionError when the range is beyond the end, IoError on read errors.
  virtual Region fetch(uint64_t pos, uint64_t n, ByteBuffer& buf) const = 0;

 private:
  std::string name_;
};

class FileSource final : public ByteSource {
 public:
  // Opens path read-only; throws IoError (errno, path) on failure.
  explicit FileSource(const std::string& path);
  ~FileSource() override;
  uint64_t size() const override { return size_; }
  Region fetch(uint64_t pos, uint64_t n, ByteBuffer& buf) const override;

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

class MemorySource final : public ByteSource {
 public:
  // `keepalive` owns the memory (e.g. a Python buffer view released under the GIL).
  MemorySource(std::string name, const uint8_t* data, uint64_t size,
               std::shared_ptr<const void> keepalive);
  uint64_t size() const override { return size_; }
  Region fetch(uint64_t pos, uint64_t n, ByteBuffer& buf) const override;

 private:
  const uint8_t* data_;
  uint64_t size_;
  std::shared_ptr<const void> keepalive_;
};

}  // namespace arrayds
