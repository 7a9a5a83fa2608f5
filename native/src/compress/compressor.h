// One small interface over the codecs of simple chunks (spec 7.2, 7.3).
// zstd is always built in; brotli and snappy only when their libraries were found
// at build time (ARRAYDS_HAVE_BROTLI / ARRAYDS_HAVE_SNAPPY).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "byte_buffer.h"

namespace arrayds {

enum class Compression : uint8_t {
  kNone = 0,
  kBrotli = 'b',
  kZstd = 'z',
  kSnappy = 's',
};

struct CompressionOptions {
  Compression type = Compression::kZstd;
  int level = 3;
  int window_log = -1;  // -1: the codec's ArrayRecord default (zstd 20, brotli 22)
};

// "uncompressed", "brotli", "zstd", "snappy", or nullptr for an unknown byte.
const char* compression_name(uint8_t type_byte);
bool is_known_compression(uint8_t type_byte);
bool codec_available(Compression type);
// Throws UnsupportedError ("... rebuild arrayds with libbrotli-dev installed") when the
// build lacks the codec. `context` starts the message (e.g. "file.ar: chunk at 64").
void require_codec(Compression type, const std::string& context);

// Appends one complete compressed stream of src to out. Not for kNone.
void compress(const CompressionOptions& options, const uint8_t* src, size_t size,
              ByteBuffer& out);

// Decompresses one stream into exactly `size` bytes at dst. Throws FormatError when
// the stream is damaged or does not decompress to exactly `size` bytes, and
// UnsupportedError when the codec is missing. Not for kNone.
void decompress(Compression type, const uint8_t* src, size_t src_size, uint8_t* dst,
                size_t size);

}  // namespace arrayds
