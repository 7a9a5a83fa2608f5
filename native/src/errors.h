// Exception types of the engine. python/exceptions.cc maps each one to a Python exception:
//   CorruptionError   -> arrayds._native.CorruptionError (subclass of OSError)
//   UnsupportedError  -> NotImplementedError (transposed chunks, missing codecs)
//   OptionsError      -> ValueError
//   ClosedError       -> ValueError ("... is closed")
//   UsageError        -> ValueError (an API used in a state that does not allow it)
//   IndexOutOfRange   -> IndexError
//   IoError           -> OSError with errno and filename (FileNotFoundError, ...)
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace arrayds {

class CorruptionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class UnsupportedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class OptionsError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class ClosedError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

class UsageError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

class IndexOutOfRange : public std::out_of_range {
 public:
  using std::out_of_range::out_of_range;
};

class IoError : public std::runtime_error {
 public:
  IoError(int err, std::string filename, const std::string& what)
      : std::runtime_error(what), errno_(err), filename_(std::move(filename)) {}
  int error_number() const { return errno_; }
  const std::string& filename() const { return filename_; }

 private:
  int errno_;
  std::string filename_;
};

// A problem found while decoding bytes, before the file name and position are
// known. Callers that know them rethrow it as a CorruptionError.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "<name>: <what> (at byte <pos>)"
[[noreturn]] inline void throw_corruption(const std::string& name, uint64_t pos,
                                          const std::string& what) {
  throw CorruptionError(name + ": " + what + " (at byte " + std::to_string(pos) + ")");
}

}  // namespace arrayds
