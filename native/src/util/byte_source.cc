#include "util/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "errors.h"

namespace arrayds {

FileSource::FileSource(const std::string& path, bool use_mmap) : ByteSource(path) {
  do {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0) {
    const int err = errno;
    throw IoError(err, path, std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw IoError(err, path, std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw IoError(EISDIR, path, std::strerror(EISDIR));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (use_mmap && S_ISREG(st.st_mode)) mapping_ = FileMapping::map(fd_, size_);
}

FileSource::~FileSource() {
  if (fd_ >= 0) ::close(fd_);
}

Region FileSource::fetch(uint64_t pos, uint64_t n, ByteBuffer& buf) const {
  if (pos > size_ || n > size_ - pos) {
    throw_corruption(name(), pos,
                     "file is truncated: needed " + std::to_string(n) + " bytes at " +
                         std::to_string(pos) + " but the file has " + std::to_string(size_) +
                         " bytes");
  }
  if (mapping_ != nullptr && !mapping_->damaged()) {
    return Region{mapping_->data() + pos, pos, size_ - pos, true};
  }
  buf.resize(static_cast<size_t>(n));
  uint64_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, buf.data() + done, static_cast<size_t>(n - done),
                              static_cast<off_t>(pos + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      throw IoError(err, name(), std::string("read failed: ") + std::strerror(err));
    }
    if (r == 0) {
      throw_corruption(name(), pos + done,
                       "file is truncated: it ended while reading " + std::to_string(n) +
                           " bytes at " + std::to_string(pos) + " (was it changed after opening?)");
    }
    done += static_cast<uint64_t>(r);
  }
  return Region{buf.data(), pos, n};
}

void FileSource::verify(const Region& region) const {
  if (region.mapped && mapping_ != nullptr && mapping_->damaged()) {
    throw_corruption(name(), region.begin,
                     "file is truncated: it became shorter than the " + std::to_string(size_) +
                         " bytes it had when it was opened, while it was being read (was it "
                         "changed after opening?)");
  }
}

MemorySource::MemorySource(std::string name, const uint8_t* data, uint64_t size,
                           std::shared_ptr<const void> keepalive)
    : ByteSource(std::move(name)), data_(data), size_(size), keepalive_(std::move(keepalive)) {}

Region MemorySource::fetch(uint64_t pos, uint64_t n, ByteBuffer&) const {
  if (pos > size_ || n > size_ - pos) {
    throw_corruption(name(), pos,
                     "data is truncated: needed " + std::to_string(n) + " bytes at " +
                         std::to_string(pos) + " but there are " + std::to_string(size_) +
                         " bytes");
  }
  return Region{data_ + pos, pos, size_ - pos};
}

}  // namespace arrayds
