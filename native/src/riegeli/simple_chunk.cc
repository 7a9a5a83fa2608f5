#include "riegeli/simple_chunk.h"

#include <string>

#include "errors.h"
#include "riegeli/varint.h"

namespace arrayds {
namespace {

constexpr size_t kKeepScratch = 64u << 20;

// Scratch buffers reused by each thread; freed again when they grew very large.
struct Scratch {
  ByteBuffer join;
  ByteBuffer sizes;
  ByteBuffer stream;
  ~Scratch() = default;
  void trim() {
    join.shrink_if_larger(kKeepScratch);
    sizes.shrink_if_larger(kKeepScratch);
    stream.shrink_if_larger(kKeepScratch);
  }
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

struct TrimOnExit {
  ~TrimOnExit() { scratch().trim(); }
};

void parse_sizes(const uint8_t* p, size_t len, uint64_t num_records, uint64_t total,
                 std::vector<uint64_t>& sizes) {
  if (num_records > len) {
    throw FormatError("the sizes section has " + std::to_string(len) + " bytes, too few for " +
                      std::to_string(num_records) + " records");
  }
  sizes.resize(num_records);
  const uint8_t* end = p + len;
  uint64_t sum = 0;
  for (uint64_t i = 0; i < num_records; ++i) {
    uint64_t v;
    if (!read_varint(p, end, v)) {
      throw FormatError("bad varint in the sizes section (record " + std::to_string(i) + ")");
    }
    sizes[i] = v;
    if (v > total - sum) {
      throw FormatError("record sizes add up to more than decoded_data_size " +
                        std::to_string(total));
    }
    sum += v;
  }
  if (p != end) {
    throw FormatError("the sizes section has " + std::to_string(end - p) +
                      " unexpected bytes after the last size");
  }
  if (sum != total) {
    throw FormatError("record sizes add up to " + std::to_string(sum) +
                      ", but decoded_data_size is " + std::to_string(total));
  }
}

}  // namespace

void encode_simple_chunk(const CompressionOptions& compression, const uint64_t* sizes,
                         size_t n, const uint8_t* values, size_t values_size,
                         ByteBuffer& out) {
  Scratch& s = scratch();
  TrimOnExit trim;
  s.sizes.clear();
  for (size_t i = 0; i < n; ++i) append_varint(s.sizes, sizes[i]);
  out.append_byte(static_cast<uint8_t>(compression.type));
  if (compression.type == Compression::kNone) {
    append_varint(out, s.sizes.size());
    out.append(s.sizes.data(), s.sizes.size());
    out.append(values, values_size);
    return;
  }
  s.stream.clear();
  append_varint(s.stream, s.sizes.size());
  compress(compression, s.sizes.data(), s.sizes.size(), s.stream);
  append_varint(out, s.stream.size());
  out.append(s.stream.data(), s.stream.size());
  append_varint(out, values_size);
  compress(compression, values, values_size, out);
}

uint8_t simple_chunk_compression(const Pieces& data) {
  return data.count() == 0 ? 0 : data[0].data[0];
}

void check_simple_chunk_size(const Pieces& data, uint64_t decoded_data_size) {
  const uint8_t type_byte = simple_chunk_compression(data);
  if (!is_known_compression(type_byte)) {
    throw FormatError("unknown compression type byte " + std::to_string(type_byte));
  }
  const Compression type = static_cast<Compression>(type_byte);
  const uint64_t stored = data.total();
  const uint64_t bound = max_decoded_size(max_expansion(type), stored);
  if (decoded_data_size > bound) {
    throw FormatError(
        "decoded_data_size " + std::to_string(decoded_data_size) + " is more than the " +
        std::to_string(bound) + " bytes that " + std::to_string(stored) + " stored bytes " +
        (type == Compression::kNone
             ? std::string("hold uncompressed")
             : std::string("of ") + compression_name(type_byte) +
                   " can decode to (its maximum expansion, at most 4 GiB per chunk)"));
  }
}

void decode_simple_chunk(const Pieces& data, uint64_t num_records, uint64_t decoded_data_size,
                         std::vector<uint64_t>& sizes, uint8_t* values_dst) {
  check_simple_chunk_size(data, decoded_data_size);
  Scratch& s = scratch();
  TrimOnExit trim;
  PieceCursor cur(data);
  uint8_t type_byte;
  if (!cur.read_byte(type_byte)) throw FormatError("simple chunk has no data");
  if (!is_known_compression(type_byte)) {
    throw FormatError("unknown compression type byte " + std::to_string(type_byte));
  }
  const Compression type = static_cast<Compression>(type_byte);
  if (type != Compression::kNone) require_codec(type, "");

  uint64_t sizes_len;
  if (!cur.read_varint(sizes_len)) throw FormatError("bad varint for the sizes section length");
  if (sizes_len > cur.remaining()) {
    throw FormatError("the sizes section length " + std::to_string(sizes_len) +
                      " exceeds the chunk data");
  }
  if (type == Compression::kNone) {
    const uint8_t* p = cur.contiguous(static_cast<size_t>(sizes_len), s.join);
    parse_sizes(p, static_cast<size_t>(sizes_len), num_records, decoded_data_size, sizes);
  } else {
    const uint64_t before = cur.remaining();
    uint64_t plain_len;
    if (!cur.read_varint(plain_len)) throw FormatError("bad varint in the sizes section");
    const uint64_t prefix = before - cur.remaining();
    if (prefix > sizes_len) throw FormatError("the sizes section is truncated");
    if (plain_len < num_records || plain_len > kMaxVarintLength * num_records) {
      throw FormatError("the sizes section claims " + std::to_string(plain_len) +
                        " bytes for " + std::to_string(num_records) + " records");
    }
    const size_t stream_len = static_cast<size_t>(sizes_len - prefix);
    const uint8_t* p = cur.contiguous(stream_len, s.join);
    s.sizes.resize(static_cast<size_t>(plain_len));
    decompress(type, p, stream_len, s.sizes.data(), static_cast<size_t>(plain_len));
    parse_sizes(s.sizes.data(), static_cast<size_t>(plain_len), num_records, decoded_data_size,
                sizes);
  }

  if (type == Compression::kNone) {
    if (cur.remaining() != decoded_data_size) {
      throw FormatError("the values section has " + std::to_string(cur.remaining()) +
                        " bytes, expected " + std::to_string(decoded_data_size));
    }
    cur.copy_to(values_dst, static_cast<size_t>(decoded_data_size));
    return;
  }
  uint64_t plain_len;
  if (!cur.read_varint(plain_len)) throw FormatError("bad varint in the values section");
  if (plain_len != decoded_data_size) {
    throw FormatError("the values section claims " + std::to_string(plain_len) +
                      " bytes, expected " + std::to_string(decoded_data_size));
  }
  const size_t stream_len = static_cast<size_t>(cur.remaining());
  const uint8_t* p = cur.contiguous(stream_len, s.join);
  decompress(type, p, stream_len, values_dst, static_cast<size_t>(decoded_data_size));
}

}  // namespace arrayds
