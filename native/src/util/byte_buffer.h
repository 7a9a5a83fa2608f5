// ByteBuffer: a growable byte array that does not zero-fill what it allocates.
// Sizes taken from a file are only trusted after checks, but an allocation that is
// never written (e.g. a lying size whose decompression then fails) costs only
// address space, never touched pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

namespace arrayds {

class ByteBuffer {
 public:
  ByteBuffer() = default;
  explicit ByteBuffer(size_t n) { resize(n); }
  ByteBuffer(ByteBuffer&&) noexcept = default;
  ByteBuffer& operator=(ByteBuffer&&) noexcept = default;
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }

  void clear() { size_ = 0; }
  // Frees the memory when it is larger than `keep` bytes (scratch buffers).
  void shrink_if_larger(size_t keep) {
    if (capacity_ > keep) {
      data_.reset();
      size_ = capacity_ = 0;
    }
  }

  void reserve(size_t n) {
    if (n <= capacity_) return;
    size_t cap = capacity_ < 64 ? 64 : capacity_;
    while (cap < n) cap = cap > (SIZE_MAX / 2) ? n : cap * 2;
    std::unique_ptr<uint8_t[]> fresh(new uint8_t[cap]);
    if (size_ != 0) std::memcpy(fresh.get(), data_.get(), size_);
    data_ = std::move(fresh);
    capacity_ = cap;
  }
  // New bytes are uninitialised.
  void resize(size_t n) {
    reserve(n);
    size_ = n;
  }
  // Grows by n uninitialised bytes and returns a pointer to them.
  uint8_t* extend(size_t n) {
    reserve(size_ + n);
    uint8_t* p = data_.get() + size_;
    size_ += n;
    return p;
  }
  void append(const void* p, size_t n) {
    if (n == 0) return;
    std::memcpy(extend(n), p, n);
  }
  void append_byte(uint8_t b) { *extend(1) = b; }
  void append_zeros(size_t n) {
    if (n == 0) return;
    std::memset(extend(n), 0, n);
  }

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace arrayds
