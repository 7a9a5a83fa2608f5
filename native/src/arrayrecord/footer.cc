#include "arrayrecord/footer.h"


#include "riegeli/varint.h"

namespace arrayds {
namespace {

enum WireType : uint64_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Calls on_field(field, wire_type, varint_value, payload, payload_size) for each
// field; returns false on malformed input. Groups (wire types 3/4) are rejected.
template <typename F>
bool for_each_field(const uint8_t* p, size_t n, F&& on_field) {
  const uint8_t* end = p + n;
  while (p < end) {
    uint64_t key;
    if (!read_varint(p, end, key)) return false;
    const uint64_t field = key >> 3;
    const uint64_t wire = key & 7;
    if (field == 0) return false;
    uint64_t value = 0;
    const uint8_t* payload = nullptr;
    size_t payload_size = 0;
    switch (wire) {
      case kVarint:
        if (!read_varint(p, end, value)) return false;
        break;
      case kFixed64:
        if (end - p < 8) return false;
        payload = p;
        payload_size = 8;
        p += 8;
        break;
      case kFixed32:
        if (end - p < 4) return false;
        payload = p;
        payload_size = 4;
        p += 4;
        break;
      case kLengthDelimited: {
        uint64_t len;
        if (!read_varint(p, end, len)) return false;
        if (len > static_cast<uint64_t>(end - p)) return false;
        payload = p;
        payload_size = static_cast<size_t>(len);
        p += len;
        break;
      }
      default:
        return false;
    }
    if (!on_field(field, wire, value, payload, payload_size)) return false;
  }
  return true;
}

void put_key(ByteBuffer& out, uint64_t field, uint64_t wire) {
  append_varint(out, (field << 3) | wire);
}

}  // namespace

void encode_footer_entry(uint64_t chunk_offset, uint64_t decoded_data_size,
                         uint64_t num_records, ByteBuffer& out) {
  put_key(out, 1, kVarint);
  append_varint(out, chunk_offset);
  put_key(out, 2, kVarint);
  append_varint(out, decoded_data_size);
  put_key(out, 3, kVarint);
  append_varint(out, num_records);
}

void encode_footer_metadata(uint64_t num_chunks, uint64_t num_records,
                            const std::string& writer_options, ByteBuffer& out) {
  ByteBuffer inner;
  put_key(inner, 1, kVarint);
  append_varint(inner, 1);  // version
  put_key(inner, 2, kVarint);
  append_varint(inner, num_chunks);
  put_key(inner, 3, kVarint);
  append_varint(inner, num_records);
  put_key(inner, 4, kLengthDelimited);
  append_varint(inner, writer_options.size());
  inner.append(writer_options.data(), writer_options.size());
  put_key(out, 1, kLengthDelimited);
  append_varint(out, inner.size());
  out.append(inner.data(), inner.size());
}

void encode_postscript(uint64_t footer_offset, ByteBuffer& out) {
  put_key(out, 1, kVarint);
  append_varint(out, footer_offset);
  put_key(out, 2, kVarint);
  append_varint(out, kPostscriptMagic);
}

bool is_valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const uint8_t* end = p + s.size();
  while (p < end) {
    const uint8_t c = *p;
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      ++p;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (static_cast<size_t>(end - p) <= n) return false;
    for (size_t i = 1; i <= n; ++i) {
      if ((p[i] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3f);
    }
    static const uint32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    p += n + 1;
  }
  return true;
}

bool parse_footer_entry(const uint8_t* p, size_t n, FooterEntry& out) {
  return for_each_field(p, n, [&](uint64_t field, uint64_t wire, uint64_t v, const uint8_t*,
                                  size_t) {
    if (field >= 1 && field <= 3 && wire != kVarint) return false;
    if (field == 1) out.chunk_offset = v;
    if (field == 2) out.decoded_data_size = v;
    if (field == 3) out.num_records = v;
    return true;
  });
}

bool parse_footer_metadata(const uint8_t* p, size_t n, FooterMetadata& out) {
  return for_each_field(p, n, [&](uint64_t field, uint64_t wire, uint64_t, const uint8_t* q,
                                  size_t qn) {
    if (field != 1) return true;
    if (wire != kLengthDelimited) return false;
    out.has_array_record_metadata = true;
    // A repeated sub-message merges into the one before (protobuf semantics).
    return for_each_field(q, qn, [&](uint64_t f, uint64_t w, uint64_t v, const uint8_t* s,
                                     size_t sn) {
      if (f >= 1 && f <= 3 && w != kVarint) return false;
      if (f == 1) out.version = v;
      if (f == 2) out.num_chunks = v;
      if (f == 3) out.num_records = v;
      if (f == 4) {
        if (w != kLengthDelimited) return false;
        out.writer_options = std::string(reinterpret_cast<const char*>(s), sn);
      }
      return true;
    });
  });
}

bool parse_postscript(const uint8_t* p, size_t n, Postscript& out) {
  return for_each_field(p, n, [&](uint64_t field, uint64_t wire, uint64_t v, const uint8_t*,
                                  size_t) {
    if ((field == 1 || field == 2) && wire != kVarint) return false;
    if (field == 1) out.footer_offset = v;
    if (field == 2) out.magic = v;
    return true;
  });
}

}  // namespace arrayds
