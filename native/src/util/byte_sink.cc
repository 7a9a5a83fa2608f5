#include "util/byte_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "errors.h"

namespace arrayds {

FileSink::FileSink(const std::string& path) : path_(path) {
  do {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  } while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0) {
    const int err = errno;
    throw IoError(err, path, std::strerror(err));
  }
  buffer_.reserve(1u << 20);
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
  buffer_.clear();
}

void FileSink::append(const uint8_t* data, size_t size) {
  constexpr size_t kCap = 1u << 20;
  if (buffer_.size() + size > kCap) {
    flush();
    if (size >= kCap) {
      write_all(data, size);
      return;
    }
  }
  buffer_.append(data, size);
}

void FileSink::append_zeros(size_t size) {
  constexpr size_t kCap = 1u << 20;
  while (size > 0) {
    if (buffer_.size() >= kCap) flush();
    const size_t k = size < kCap - buffer_.size() ? size : kCap - buffer_.size();
    buffer_.append_zeros(k);
    size -= k;
  }
}

void FileSink::finish() {
  if (fd_ < 0) return;
  flush();
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && errno != EINTR) {
    const int err = errno;
    throw IoError(err, path_, std::string("close failed: ") + std::strerror(err));
  }
}

}  // namespace arrayds
