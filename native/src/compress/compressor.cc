#include "compress/compressor.h"

#include <zstd.h>

#include <memory>

#include "errors.h"

#ifdef ARRAYDS_HAVE_BROTLI
#include <brotli/decode.h>
#include <brotli/encode.h>
#endif
#ifdef ARRAYDS_HAVE_SNAPPY
#include <snappy-c.h>
#endif

namespace arrayds {
namespace {

constexpr int kDefaultZstdWindowLog = 20;    // ArrayRecord's choice (spec 7.3)
constexpr int kDefaultBrotliWindowLog = 22;  // the brotli library default

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// One compression and one decompression context per thread, reused across chunks.
ZSTD_CCtx* thread_cctx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxDeleter> cctx(ZSTD_createCCtx());
  if (!cctx) throw std::bad_alloc();
  return cctx.get();
}

ZSTD_DCtx* thread_dctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx = [] {
    std::unique_ptr<ZSTD_DCtx, DCtxDeleter> d(ZSTD_createDCtx());
    // Files may be written with window_log up to 31.
    if (d) ZSTD_DCtx_setParameter(d.get(), ZSTD_d_windowLogMax, 31);
    return d;
  }();
  if (!dctx) throw std::bad_alloc();
  return dctx.get();
}

void check_zstd(size_t code, const char* what) {
  if (ZSTD_isError(code)) {
    throw std::runtime_error(std::string("zstd ") + what + " failed: " +
                             ZSTD_getErrorName(code));
  }
}

void zstd_compress(const CompressionOptions& o, const uint8_t* src, size_t n,
                   ByteBuffer& out) {
  ZSTD_CCtx* cctx = thread_cctx();
  check_zstd(ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters), "reset");
  check_zstd(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, o.level), "level");
  check_zstd(ZSTD_CCtx_setParameter(
                 cctx, ZSTD_c_windowLog,
                 o.window_log < 0 ? kDefaultZstdWindowLog : o.window_log),
             "window_log");
  const size_t bound = ZSTD_compressBound(n);
  const size_t before = out.size();
  uint8_t* dst = out.extend(bound);
  const size_t r = ZSTD_compress2(cctx, dst, bound, src, n);
  check_zstd(r, "compression");
  out.resize(before + r);
}

void zstd_decompress(const uint8_t* src, size_t n, uint8_t* dst, size_t size) {
  uint8_t dummy = 0;
  const size_t r = ZSTD_decompressDCtx(thread_dctx(), size ? dst : &dummy, size, src, n);
  if (ZSTD_isError(r)) {
    throw FormatError(std::string("zstd stream is damaged: ") + ZSTD_getErrorName(r) +
                      " (expected " + std::to_string(size) + " bytes)");
  }
  if (r != size) {
    throw FormatError("zstd stream decompressed to " + std::to_string(r) +
                      " bytes, expected " + std::to_string(size));
  }
}

#ifdef ARRAYDS_HAVE_BROTLI
struct BrotliEncDeleter {
  void operator()(BrotliEncoderState* s) const { BrotliEncoderDestroyInstance(s); }
};
struct BrotliDecDeleter {
  void operator()(BrotliDecoderState* s) const { BrotliDecoderDestroyInstance(s); }
};

void brotli_compress(const CompressionOptions& o, const uint8_t* src, size_t n,
                     ByteBuffer& out) {
  std::unique_ptr<BrotliEncoderState, BrotliEncDeleter> s(
      BrotliEncoderCreateInstance(nullptr, nullptr, nullptr));
  if (!s) throw std::bad_alloc();
  const int lgwin = o.window_log < 0 ? kDefaultBrotliWindowLog : o.window_log;
  BrotliEncoderSetParameter(s.get(), BROTLI_PARAM_QUALITY, static_cast<uint32_t>(o.level));
  BrotliEncoderSetParameter(s.get(), BROTLI_PARAM_LGWIN, static_cast<uint32_t>(lgwin));
  if (lgwin > BROTLI_MAX_WINDOW_BITS) {
    BrotliEncoderSetParameter(s.get(), BROTLI_PARAM_LARGE_WINDOW, 1);
  }
  BrotliEncoderSetParameter(s.get(), BROTLI_PARAM_SIZE_HINT,
                            n > (1u << 30) ? (1u << 30) : static_cast<uint32_t>(n));
  size_t avail_in = n;
  const uint8_t* next_in = src;
  const size_t before = out.size();
  size_t produced = 0;
  for (;;) {
    const size_t room = 65536 + n / 8;
    out.resize(before + produced + room);
    size_t avail_out = room;
    uint8_t* next_out = out.data() + before + produced;
    if (!BrotliEncoderCompressStream(s.get(), BROTLI_OPERATION_FINISH, &avail_in, &next_in,
                                     &avail_out, &next_out, nullptr)) {
      throw std::runtime_error("brotli compression failed");
    }
    produced += room - avail_out;
    if (BrotliEncoderIsFinished(s.get())) break;
  }
  out.resize(before + produced);
}

void brotli_decompress(const uint8_t* src, size_t n, uint8_t* dst, size_t size) {
  std::unique_ptr<BrotliDecoderState, BrotliDecDeleter> s(
      BrotliDecoderCreateInstance(nullptr, nullptr, nullptr));
  if (!s) throw std::bad_alloc();
  BrotliDecoderSetParameter(s.get(), BROTLI_DECODER_PARAM_LARGE_WINDOW, 1);
  size_t avail_in = n;
  const uint8_t* next_in = src;
  size_t avail_out = size;
  uint8_t dummy = 0;
  uint8_t* next_out = size ? dst : &dummy;
  const BrotliDecoderResult r = BrotliDecoderDecompressStream(s.get(), &avail_in, &next_in,
                                                              &avail_out, &next_out, nullptr);
  if (r == BROTLI_DECODER_RESULT_SUCCESS && avail_out == 0 && avail_in == 0) return;
  if (r == BROTLI_DECODER_RESULT_SUCCESS) {
    if (avail_out != 0) {
      throw FormatError("brotli stream decompressed to " + std::to_string(size - avail_out) +
                        " bytes, expected " + std::to_string(size));
    }
    throw FormatError("brotli stream is followed by " + std::to_string(avail_in) +
                      " unexpected bytes");
  }
  if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT) {
    throw FormatError("brotli stream decompresses to more than the expected " +
                      std::to_string(size) + " bytes");
  }
  if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT) {
    throw FormatError("brotli stream is truncated");
  }
  throw FormatError(std::string("brotli stream is damaged: ") +
                    BrotliDecoderErrorString(BrotliDecoderGetErrorCode(s.get())));
}
#endif

#ifdef ARRAYDS_HAVE_SNAPPY
void snappy_compress_to(const uint8_t* src, size_t n, ByteBuffer& out) {
  const size_t bound = snappy_max_compressed_length(n);
  const size_t before = out.size();
  uint8_t* dst = out.extend(bound);
  size_t len = bound;
  if (snappy_compress(reinterpret_cast<const char*>(src), n, reinterpret_cast<char*>(dst),
                      &len) != SNAPPY_OK) {
    throw std::runtime_error("snappy compression failed");
  }
  out.resize(before + len);
}

void snappy_decompress(const uint8_t* src, size_t n, uint8_t* dst, size_t size) {
  size_t claimed = 0;
  if (snappy_uncompressed_length(reinterpret_cast<const char*>(src), n, &claimed) !=
      SNAPPY_OK) {
    throw FormatError("snappy block is damaged (bad length header)");
  }
  if (claimed != size) {
    throw FormatError("snappy block holds " + std::to_string(claimed) +
                      " bytes, expected " + std::to_string(size));
  }
  char dummy = 0;
  size_t len = size;
  if (snappy_uncompress(reinterpret_cast<const char*>(src), n,
                        size ? reinterpret_cast<char*>(dst) : &dummy, &len) != SNAPPY_OK ||
      len != size) {
    throw FormatError("snappy block is damaged");
  }
}
#endif

}  // namespace

const char* compression_name(uint8_t type_byte) {
  switch (type_byte) {
    case 0:
      return "uncompressed";
    case 'b':
      return "brotli";
    case 'z':
      return "zstd";
    case 's':
      return "snappy";
    default:
      return nullptr;
  }
}

bool is_known_compression(uint8_t type_byte) { return compression_name(type_byte) != nullptr; }

bool codec_available(Compression type) {
  switch (type) {
    case Compression::kNone:
    case Compression::kZstd:
      return true;
    case Compression::kBrotli:
#ifdef ARRAYDS_HAVE_BROTLI
      return true;
#else
      return false;
#endif
    case Compression::kSnappy:
#ifdef ARRAYDS_HAVE_SNAPPY
      return true;
#else
      return false;
#endif
  }
  return false;
}

void require_codec(Compression type, const std::string& context) {
  if (codec_available(type)) return;
  const char* name = compression_name(static_cast<uint8_t>(type));
  const char* package = type == Compression::kBrotli ? "libbrotli-dev" : "libsnappy-dev";
  throw UnsupportedError(context + (context.empty() ? "" : ": ") + "the " + name +
                         " codec is not available in this build of arrayds; rebuild "
                         "arrayds with " + package + " installed");
}

void compress(const CompressionOptions& options, const uint8_t* src, size_t size,
              ByteBuffer& out) {
  static const uint8_t kEmpty = 0;
  if (src == nullptr) src = &kEmpty;
  switch (options.type) {
    case Compression::kZstd:
      zstd_compress(options, src, size, out);
      return;
    case Compression::kBrotli:
#ifdef ARRAYDS_HAVE_BROTLI
      brotli_compress(options, src, size, out);
      return;
#else
      break;
#endif
    case Compression::kSnappy:
#ifdef ARRAYDS_HAVE_SNAPPY
      snappy_compress_to(src, size, out);
      return;
#else
      break;
#endif
    case Compression::kNone:
      throw std::logic_error("compress() called for uncompressed data");
  }
  require_codec(options.type, "");
}

uint64_t max_expansion(Compression type) {
  switch (type) {
    case Compression::kNone:
      return 1;
    case Compression::kZstd:
      return kMaxZstdRatio;
    case Compression::kBrotli:
      return kMaxBrotliRatio;
    case Compression::kSnappy:
      return kMaxSnappyRatio;
  }
  return kMaxBrotliRatio;
}

uint64_t max_expansion_of_build() {
  uint64_t r = kMaxZstdRatio;
  for (Compression c : {Compression::kBrotli, Compression::kSnappy}) {
    if (codec_available(c) && max_expansion(c) > r) r = max_expansion(c);
  }
  return r;
}

uint64_t max_decoded_size(uint64_t ratio, uint64_t stored) {
  if (ratio != 0 && stored > kMaxChunkDecodedSize / ratio) return kMaxChunkDecodedSize;
  return stored * ratio;
}

void decompress(Compression type, const uint8_t* src, size_t src_size, uint8_t* dst,
                size_t size) {
  if (type != Compression::kNone && size > max_decoded_size(max_expansion(type), src_size)) {
    throw FormatError(std::string(compression_name(static_cast<uint8_t>(type))) +
                      " stream of " + std::to_string(src_size) + " bytes claims to decode to " +
                      std::to_string(size) + " bytes, more than " +
                      std::to_string(max_decoded_size(max_expansion(type), src_size)) +
                      " (the codec's maximum expansion, at most 4 GiB per chunk)");
  }
  switch (type) {
    case Compression::kZstd:
      zstd_decompress(src, src_size, dst, size);
      return;
    case Compression::kBrotli:
#ifdef ARRAYDS_HAVE_BROTLI
      brotli_decompress(src, src_size, dst, size);
      return;
#else
      break;
#endif
    case Compression::kSnappy:
#ifdef ARRAYDS_HAVE_SNAPPY
      snappy_decompress(src, src_size, dst, size);
      return;
#else
      break;
#endif
    case Compression::kNone:
      throw std::logic_error("decompress() called for uncompressed data");
  }
  require_codec(type, "");
}

}  // namespace arrayds
