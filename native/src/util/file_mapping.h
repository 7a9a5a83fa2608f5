// A read-only memory mapping of a whole local file (RAII), guarded against files that
// shrink while mapped.
//
// Reading a mapped page that lies beyond the end of a file that was truncated after it
// was mapped raises SIGBUS, which would kill the interpreter. The first mapping installs
// a process-wide SIGBUS handler (chained to the previous one). A fault inside one of our
// mappings marks that mapping as damaged and replaces the missing page with a page of
// zeros, so the access completes; the reader then finds a hash mismatch and, in any
// case, asks `damaged()` after decoding and raises CorruptionError. Faults anywhere else
// go to the previous handler (faulthandler, or the default: the process dies as before).
//
// The handler is async-signal-safe and may run in several threads at once: its state
// is lock-free atomics in static storage (no lock, no allocation, no thread_local).
// A re-entry guard ends chaining loops: when the previous handler hands the signal back
// (faulthandler enabled after our first mapping chains to us, and our re-installation
// chains to it), the second arrival takes the default action, so the process dies after
// one faulthandler traceback instead of looping.
//
// Remaining risk: code that replaces the SIGBUS handler after a mapping was made (and
// does not chain to ours) turns a truncation during a read into a crash again. The
// handler is re-installed, if needed, every time a file is mapped (at most 256 times;
// after that, files are read with pread while ours is not the current handler).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace arrayds {

class FileMapping {
 public:
  // Maps [0, size) of fd read-only (PROT_READ, MAP_PRIVATE). Returns nullptr when the
  // file cannot be mapped (mmap fails, size 0, no free guard slot): use pread then.
  static std::unique_ptr<FileMapping> map(int fd, uint64_t size);
  ~FileMapping();
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // True once a read of this mapping touched a page beyond the end of the file (it was
  // truncated after it was mapped); the bytes read there were zeros.
  bool damaged() const;

  // Testing aid: the number of SIGBUS faults repaired in any mapping so far.
  static uint64_t repaired_faults();

 private:
  FileMapping(const uint8_t* data, uint64_t size, size_t slot)
      : data_(data), size_(size), slot_(slot) {}
  const uint8_t* data_;
  uint64_t size_;
  size_t slot_;
};

}  // namespace arrayds
