// Where a reader gets bytes from: a local file, memory-mapped (or read with pread,
// which is safe to share between threads: there is no file position), or memory
// (bytes handed over from Python, e.g. fetched with fsspec). A Region is a window of
// the file held in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "util/byte_buffer.h"
#include "util/file_mapping.h"

namespace arrayds {

// Bytes [begin, begin + size) of the file, at data.
struct Region {
  const uint8_t* data = nullptr;
  uint64_t begin = 0;
  uint64_t size = 0;
  bool mapped = false;  // points into a file mapping: check ByteSource::verify after use
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
  // Call after using a Region from fetch(): throws CorruptionError if the bytes read
  // may not have been the file's (a mapped file was truncated while it was read).
  virtual void verify(const Region&) const {}
  // True if fetch() returns pointers into a memory mapping (no copy).
  virtual bool mapped() const { return false; }

 private:
  std::string name_;
};

class FileSource final : public ByteSource {
 public:
  // Opens path read-only; throws IoError (errno, path) on failure. With use_mmap, a
  // regular file is mapped whole (its size at open); if that fails (special files, no
  // address space), or after the mapping saw the file shrink, bytes are read with pread.
  explicit FileSource(const std::string& path, bool use_mmap = false);
  ~FileSource() override;
  uint64_t size() const override { return size_; }
  Region fetch(uint64_t pos, uint64_t n, ByteBuffer& buf) const override;
  void verify(const Region& region) const override;
  bool mapped() const override { return mapping_ != nullptr && !mapping_->damaged(); }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  std::unique_ptr<FileMapping> mapping_;
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
