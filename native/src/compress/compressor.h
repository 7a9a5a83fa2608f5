// One small interface over the codecs of simple chunks (spec 7.2, 7.3).
// zstd is always built in; brotli and snappy only when their libraries were found
// at build time (ARRAYDS_HAVE_BROTLI / ARRAYDS_HAVE_SNAPPY).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/byte_buffer.h"

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

// Bounds on what stored bytes may decode to (docs/spec.md, "Bounds"). A size read
// from a file is checked against them before anything of that size is allocated.
//
// The largest expansion each codec can produce, from its format: a zstd block holds
// at most 128 KiB and costs at least 4 bytes (a run-length block: 3-byte header + the
// byte), so zstd stays under 32768:1; a brotli meta-block holds at most 16 MiB and
// its header alone takes more than 4 bytes, so brotli stays under 2^22:1; a snappy
// copy element yields at most 64 bytes for 3 bytes, under 22:1.
constexpr uint64_t kMaxZstdRatio = 32768;
constexpr uint64_t kMaxBrotliRatio = uint64_t{1} << 22;
constexpr uint64_t kMaxSnappyRatio = 22;
// No chunk decodes to more than 4 GiB: every reader (this one and the official one)
// decodes a whole chunk into memory, and the writer refuses larger chunks.
constexpr uint64_t kMaxChunkDecodedSize = uint64_t{1} << 32;

// The expansion ratio bound of `type` (1 for kNone).
uint64_t max_expansion(Compression type);
// The largest of max_expansion() over the codecs this build can decode.
uint64_t max_expansion_of_build();
// The most `stored` bytes may decode to with ratio `ratio`, never above
// kMaxChunkDecodedSize (no overflow).
uint64_t max_decoded_size(uint64_t ratio, uint64_t stored);

// Decompresses one stream into exactly `size` bytes at dst. Throws FormatError when
// the stream is damaged or does not decompress to exactly `size` bytes (decoding
// stops at `size`: a stream that wants more is damaged), or when `size` is more than
// max_decoded_size(max_expansion(type), src_size) (checked before any output is
// written), and UnsupportedError when the codec is missing. Not for kNone.
void decompress(Compression type, const uint8_t* src, size_t src_size, uint8_t* dst,
                size_t size);

}  // namespace arrayds
