// Writer and reader options strings (spec 12.1, 12.2): the official grammar, the
// official error wording, and the canonical writer string stored in the footer.
#pragma once

#include <cstdint>
#include <string>

#include "compress/compressor.h"

namespace arrayds {

struct WriterOptions {
  uint64_t group_size = 1;
  CompressionOptions compression;  // zstd:3, window_log 20 unless set
  bool window_log_set = false;     // an explicit (non-auto) window_log was given
  bool pad_to_block_boundary = false;
  uint64_t max_parallelism = 0;  // 0: "auto" (the number of cores)

  // Throws OptionsError (-> ValueError) naming the offending key.
  static WriterOptions parse(const std::string& text);
  // The string stored in the footer (spec 12.1). It always ends in
  // ",max_parallelism:1" like the official Python writer: the file layout does not
  // depend on the number of encoder threads, and this keeps our bytes identical.
  std::string canonical() const;
};

enum class IndexStorage { kInMemory, kOffloaded };

struct ReaderOptions {
  uint64_t readahead_buffer_size = 16u << 20;
  bool readahead_set = false;
  int64_t max_parallelism = -1;  // -1: "auto" (the number of cores); 0/1: no threads
  IndexStorage index_storage = IndexStorage::kInMemory;
  uint64_t footer_prefetch_bytes = 1u << 20;

  static ReaderOptions parse(const std::string& text);
};

}  // namespace arrayds
