// The data of a chunk as it lies in memory: one or more contiguous pieces (more than
// one when block headers interrupt it), and a cursor that reads across pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "riegeli/varint.h"
#include "util/byte_buffer.h"

namespace arrayds {

struct Piece {
  const uint8_t* data;
  size_t size;
};

class Pieces {
 public:
  void clear() {
    count_ = 0;
    total_ = 0;
    heap_.clear();
  }
  void add(const uint8_t* data, size_t size) {
    if (size == 0) return;
    if (count_ < kInline) {
      inline_[count_] = Piece{data, size};
    } else {
      if (count_ == kInline) heap_.assign(inline_, inline_ + kInline);
      heap_.push_back(Piece{data, size});
    }
    ++count_;
    total_ += size;
  }
  size_t count() const { return count_; }
  uint64_t total() const { return total_; }
  const Piece* begin() const { return count_ <= kInline ? inline_ : heap_.data(); }
  const Piece& operator[](size_t i) const { return begin()[i]; }

 private:
  static constexpr size_t kInline = 4;
  Piece inline_[kInline] = {};
  std::vector<Piece> heap_;
  size_t count_ = 0;
  uint64_t total_ = 0;
};

class PieceCursor {
 public:
  explicit PieceCursor(const Pieces& pieces)
      : pieces_(pieces.begin()), count_(pieces.count()), remaining_(pieces.total()) {}

  uint64_t remaining() const { return remaining_; }

  bool read_byte(uint8_t& b) {
    if (remaining_ == 0) return false;
    b = pieces_[index_].data[offset_];
    advance(1);
    return true;
  }

  bool read_varint(uint64_t& value) {
    if (remaining_ == 0) return false;
    const Piece& p = pieces_[index_];
    const size_t here = p.size - offset_;
    if (here >= kMaxVarintLength || here == remaining_) {
      const uint8_t* q = p.data + offset_;
      if (!arrayds::read_varint(q, p.data + p.size, value)) return false;
      advance(static_cast<size_t>(q - (p.data + offset_)));
      return true;
    }
    // The varint may cross into the next piece: gather up to 10 bytes.
    uint8_t tmp[kMaxVarintLength];
    const size_t n = remaining_ < kMaxVarintLength ? static_cast<size_t>(remaining_)
                                                   : kMaxVarintLength;
    peek(tmp, n);
    const uint8_t* q = tmp;
    if (!arrayds::read_varint(q, tmp + n, value)) return false;
    advance(static_cast<size_t>(q - tmp));
    return true;
  }

  // n contiguous bytes (n <= remaining()): a pointer into the current piece when they
  // lie inside it, else a copy in `scratch`.
  const uint8_t* contiguous(size_t n, ByteBuffer& scratch) {
    if (n == 0) return nullptr;
    const Piece& p = pieces_[index_];
    if (p.size - offset_ >= n) {
      const uint8_t* q = p.data + offset_;
      advance(n);
      return q;
    }
    scratch.resize(n);
    copy_to(scratch.data(), n);
    return scratch.data();
  }

  // Copies n bytes (n <= remaining()) and advances.
  void copy_to(uint8_t* dst, size_t n) {
    while (n > 0) {
      const Piece& p = pieces_[index_];
      const size_t k = p.size - offset_ < n ? p.size - offset_ : n;
      std::memcpy(dst, p.data + offset_, k);
      dst += k;
      n -= k;
      advance(k);
    }
  }

 private:
  void peek(uint8_t* dst, size_t n) const {
    size_t i = index_, off = offset_;
    while (n > 0) {
      const Piece& p = pieces_[i];
      const size_t k = p.size - off < n ? p.size - off : n;
      std::memcpy(dst, p.data + off, k);
      dst += k;
      n -= k;
      ++i;
      off = 0;
    }
  }
  // Moves forward n bytes (n <= remaining()), possibly across several pieces.
  void advance(size_t n) {
    remaining_ -= n;
    offset_ += n;
    while (index_ < count_ && offset_ >= pieces_[index_].size) {
      offset_ -= pieces_[index_].size;
      ++index_;
    }
  }

  const Piece* pieces_;
  size_t count_;
  size_t index_ = 0;
  size_t offset_ = 0;
  uint64_t remaining_;
};

}  // namespace arrayds
