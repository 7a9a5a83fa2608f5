#include "arrayrecord/chunk_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "errors.h"
#include "riegeli/highway_hash.h"

namespace arrayds {
namespace {

// Copies n logical bytes starting at chunk position pos (skipping block headers).
void copy_logical(const Region& r, uint64_t pos, uint64_t n, uint8_t* dst) {
  while (n > 0) {
    if (pos % kBlockSize == 0) pos += kBlockHeaderSize;
    const uint64_t room = kBlockSize - pos % kBlockSize;
    const uint64_t k = n < room ? n : room;
    std::memcpy(dst, r.at(pos), static_cast<size_t>(k));
    dst += k;
    pos += k;
    n -= k;
  }
}

}  // namespace

uint64_t parse_chunk(const Region& region, uint64_t begin, uint64_t limit,
                     const std::string& name, ParsedChunk& out) {
  if (!is_valid_chunk_begin(begin)) {
    throw_corruption(name, begin, "invalid chunk boundary: a chunk cannot begin at " +
                                      std::to_string(begin));
  }
  if (begin >= limit) {
    throw_corruption(name, begin, "chunk at " + std::to_string(begin) +
                                      " lies outside the expected range (limit " +
                                      std::to_string(limit) + ")");
  }
  const uint64_t header_end = add_with_overhead(begin, kChunkHeaderSize);
  if (header_end > limit) {
    throw_corruption(name, begin, "chunk header at " + std::to_string(begin) +
                                      " runs past " + std::to_string(limit) +
                                      " (truncated file or invalid chunk boundary)");
  }
  if (region.begin > begin || region.end() < header_end) return header_end;

  // A block header interrupting (or preceding) the chunk header: check it first, so a
  // damaged block header is reported as such.
  for (uint64_t p = (begin + kBlockSize - 1) / kBlockSize * kBlockSize; p < header_end;
       p += kBlockSize) {
    BlockHeader bh;
    if (!bh.parse(region.at(p))) {
      throw_corruption(name, p, "block header hash mismatch in the block at " +
                                    std::to_string(p));
    }
    if (bh.previous_chunk != p - begin) {
      throw_corruption(name, p, "block header at " + std::to_string(p) +
                                    " implies a different chunk boundary (previous_chunk " +
                                    std::to_string(bh.previous_chunk) + "; expected " +
                                    std::to_string(p - begin) + ")");
    }
  }
  uint8_t hb[kChunkHeaderSize];
  copy_logical(region, begin, kChunkHeaderSize, hb);
  ChunkHeader& h = out.header;
  if (!h.parse(hb)) {
    throw_corruption(name, begin, "chunk header hash mismatch in the chunk at " +
                                      std::to_string(begin));
  }
  const uint64_t room = limit - begin;
  if (h.data_size > room || h.num_records > room) {
    throw_corruption(name, begin, "chunk at " + std::to_string(begin) + " claims " +
                                      std::to_string(h.data_size) + " data bytes and " +
                                      std::to_string(h.num_records) +
                                      " records, which runs past " + std::to_string(limit));
  }
  out.begin = begin;
  out.raw_end = add_with_overhead(begin, kChunkHeaderSize + h.data_size);
  out.end = chunk_end(begin, h.data_size, h.num_records);
  if (out.end > limit) {
    throw_corruption(name, begin, "invalid chunk boundary: the chunk at " +
                                      std::to_string(begin) + " ends at " +
                                      std::to_string(out.end) + ", past " +
                                      std::to_string(limit));
  }
  if (region.end() < out.raw_end) return out.raw_end;

  // Block headers inside the chunk (only those wholly in the region).
  const uint64_t check_end = out.end < region.end() ? out.end : region.end();
  for (uint64_t p = (begin + kBlockSize - 1) / kBlockSize * kBlockSize;
       p < check_end && p + kBlockHeaderSize <= region.end(); p += kBlockSize) {
    BlockHeader bh;
    if (!bh.parse(region.at(p))) {
      throw_corruption(name, p, "block header hash mismatch in the block at " +
                                    std::to_string(p));
    }
    if (bh.previous_chunk != p - begin || bh.next_chunk != out.end - p) {
      throw_corruption(name, p, "block header at " + std::to_string(p) +
                                    " implies a different chunk boundary (previous_chunk " +
                                    std::to_string(bh.previous_chunk) + ", next_chunk " +
                                    std::to_string(bh.next_chunk) + "; expected " +
                                    std::to_string(p - begin) + ", " +
                                    std::to_string(out.end - p) + ")");
    }
  }

  // Data pieces and their hash.
  out.data.clear();
  uint64_t pos = header_end;
  uint64_t n = h.data_size;
  HighwayHasher hasher;
  while (n > 0) {
    if (pos % kBlockSize == 0) pos += kBlockHeaderSize;
    const uint64_t room_in_block = kBlockSize - pos % kBlockSize;
    const uint64_t k = n < room_in_block ? n : room_in_block;
    out.data.add(region.at(pos), static_cast<size_t>(k));
    pos += k;
    n -= k;
  }
  uint64_t data_hash;
  if (out.data.count() == 1) {
    data_hash = riegeli_hash(out.data[0].data, out.data[0].size);
  } else {
    for (size_t i = 0; i < out.data.count(); ++i) hasher.update(out.data[i].data, out.data[i].size);
    data_hash = hasher.finish();
  }
  if (data_hash != h.data_hash) {
    throw_corruption(name, begin, "chunk data hash mismatch in the chunk at " +
                                      std::to_string(begin));
  }
  return 0;
}

// ---- writing

namespace {
constexpr size_t kSinkBuffer = 1u << 20;

// The unit of holes for the open file `fd`: its filesystem block size when it is a
// regular file (a power of two up to the format's block size), else 0 (no holes: a
// pipe or a device cannot seek).
uint64_t hole_unit_of(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  const uint64_t b = st.st_blksize > 0 ? static_cast<uint64_t>(st.st_blksize) : 0;
  const bool usable = b >= 512 && b <= kBlockSize && (b & (b - 1)) == 0;
  return usable ? b : 4096;
}
}  // namespace

FileSink::FileSink(const std::string& path) : path_(path) {
  do {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  } while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0) {
    const int err = errno;
    throw IoError(err, path, std::strerror(err));
  }
  hole_unit_ = hole_unit_of(fd_);
  buffer_.reserve(kSinkBuffer);
}

FileSink::~FileSink() {
  if (fd_ >= 0) ::close(fd_);
}

void FileSink::write_all(const uint8_t* data, size_t size) {
  if (fd_ < 0) throw std::logic_error("FileSink used after finish()");
  while (size > 0) {
    const ssize_t r = ::write(fd_, data, size);
    if (r < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      throw IoError(err, path_, std::string("write failed: ") + std::strerror(err));
    }
    data += r;
    size -= static_cast<size_t>(r);
  }
}

void FileSink::flush() {
  if (buffer_.size() == 0) return;
  write_all(buffer_.data(), buffer_.size());
  buffer_at_ += buffer_.size();
  written_end_ = buffer_at_;
  buffer_.clear();
}

void FileSink::append(const uint8_t* data, size_t size) {
  settle_zeros();
  if (buffer_.size() + size > kSinkBuffer) {
    flush();
    if (size >= kSinkBuffer) {
      write_all(data, size);
      buffer_at_ += size;
      written_end_ = buffer_at_;
      return;
    }
  }
  buffer_.append(data, size);
}

// Zeros are collected (runs of them arrive in pieces between block headers) and
// settled when data follows or the file ends.
void FileSink::append_zeros(size_t size) {
  if (fd_ < 0) throw std::logic_error("FileSink used after finish()");
  zeros_ += size;
}

void FileSink::buffer_zeros(uint64_t size) {
  while (size > 0) {
    if (buffer_.size() >= kSinkBuffer) flush();
    const uint64_t room = kSinkBuffer - buffer_.size();
    const size_t k = static_cast<size_t>(size < room ? size : room);
    buffer_.append_zeros(k);
    size -= k;
  }
}

void FileSink::settle_zeros() {
  if (zeros_ == 0) return;
  const uint64_t begin = buffer_at_ + buffer_.size();
  const uint64_t end = begin + zeros_;
  zeros_ = 0;
  if (hole_unit_ != 0) {
    const uint64_t hole_begin = (begin + hole_unit_ - 1) / hole_unit_ * hole_unit_;
    const uint64_t hole_end = end / hole_unit_ * hole_unit_;
    if (hole_end > hole_begin) {
      buffer_zeros(hole_begin - begin);  // the zeros before the first whole block
      flush();
      if (::lseek(fd_, static_cast<off_t>(hole_end), SEEK_SET) < 0) {
        const int err = errno;
        throw IoError(err, path_, std::string("lseek failed: ") + std::strerror(err));
      }
      buffer_at_ = hole_end;
      buffer_zeros(end - hole_end);  // those after the last whole block
      return;
    }
  }
  buffer_zeros(end - begin);
}

void FileSink::finish() {
  if (fd_ < 0) return;
  settle_zeros();
  flush();
  // A hole at the end: the file is only as long as its last written byte until
  // ftruncate() sets its length.
  if (buffer_at_ > written_end_ && ::ftruncate(fd_, static_cast<off_t>(buffer_at_)) != 0) {
    const int err = errno;
    throw IoError(err, path_, std::string("ftruncate failed: ") + std::strerror(err));
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && errno != EINTR) {
    const int err = errno;
    throw IoError(err, path_, std::string("close failed: ") + std::strerror(err));
  }
}

void ChunkLayoutWriter::emit(const uint8_t* data, uint64_t n) {
  while (n > 0) {
    if (pos_ % kBlockSize == 0) {
      BlockHeader bh;
      bh.previous_chunk = pos_ - begin_;
      bh.next_chunk = end_ - pos_;
      uint8_t raw[kBlockHeaderSize];
      bh.encode(raw);
      sink_.append(raw, kBlockHeaderSize);
      pos_ += kBlockHeaderSize;
    }
    const uint64_t room = kBlockSize - pos_ % kBlockSize;
    const uint64_t k = n < room ? n : room;
    if (data != nullptr) {
      sink_.append(data, static_cast<size_t>(k));
      data += k;
    } else {
      sink_.append_zeros(static_cast<size_t>(k));
    }
    pos_ += k;
    n -= k;
  }
}

uint64_t ChunkLayoutWriter::write_chunk(const ChunkHeader& header, const uint8_t* data) {
  begin_ = pos_;
  end_ = chunk_end(begin_, header.data_size, header.num_records);
  uint8_t raw[kChunkHeaderSize];
  header.encode(raw);
  emit(raw, kChunkHeaderSize);
  if (header.data_size != 0) emit(data, header.data_size);
  // Chunk padding (spec 4.4): zeros, with block headers at multiples of B.
  if (pos_ < end_) emit(nullptr, distance_without_overhead(pos_, end_));
  return begin_;
}

void ChunkLayoutWriter::write_signature() {
  ChunkHeader h = make_chunk_header(kChunkSignature, nullptr, 0, 0, 0);
  write_chunk(h, nullptr);
}

void ChunkLayoutWriter::pad_to_block_boundary() {
  if (pos_ % kBlockSize == 0) return;
  uint64_t length = kBlockSize - pos_ % kBlockSize;
  while (length < kChunkHeaderSize) length += kBlockSize;
  const uint64_t target = pos_ + length;
  const uint64_t data_size = distance_without_overhead(pos_, target) - kChunkHeaderSize;
  ChunkHeader h;
  h.data_size = data_size;
  h.data_hash = hash_of_zeros(data_size);
  h.chunk_type = kChunkPadding;
  h.num_records = 0;
  h.decoded_data_size = 0;
  h.seal();
  begin_ = pos_;
  end_ = target;
  uint8_t raw[kChunkHeaderSize];
  h.encode(raw);
  emit(raw, kChunkHeaderSize);
  emit(nullptr, data_size);
  if (pos_ != target) throw std::logic_error("padding chunk did not end on a block boundary");
}

const uint8_t* file_signature() {
  static const struct Sig {
    uint8_t bytes[64];
    Sig() {
      BlockHeader bh;
      bh.previous_chunk = 0;
      bh.next_chunk = 64;
      bh.encode(bytes);
      ChunkHeader h = make_chunk_header(kChunkSignature, nullptr, 0, 0, 0);
      h.encode(bytes + kBlockHeaderSize);
    }
  } sig;
  return sig.bytes;
}

}  // namespace arrayds
