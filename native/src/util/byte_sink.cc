#include "util/byte_sink.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "errors.h"

namespace arrayds {

namespace {
constexpr size_t kSinkBuffer = 1u << 20;
// Holes are left in units of the filesystem block, up to this size (the ArrayRecord
// block, so every padding run of the format can become a hole).
constexpr uint64_t kMaxHoleUnit = 1u << 16;

// The unit of holes for the open file `fd`: its filesystem block size when it is a
// regular file (a power of two up to the format's block size), else 0 (no holes: a
// pipe or a device cannot seek).
uint64_t hole_unit_of(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  const uint64_t b = st.st_blksize > 0 ? static_cast<uint64_t>(st.st_blksize) : 0;
  const bool usable = b >= 512 && b <= kMaxHoleUnit && (b & (b - 1)) == 0;
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

}  // namespace arrayds
