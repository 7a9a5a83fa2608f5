// The three protobuf messages of the ArrayRecord layer (spec 9.2), with a hand-written
// wire codec. Parsing is tolerant like protobuf: any field order, unknown fields
// skipped, a repeated scalar field keeps the last value, repeated sub-messages merge.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "util/byte_buffer.h"

namespace arrayds {

constexpr uint64_t kPostscriptMagic = 0x71930e704fdae05eULL;

struct FooterEntry {  // ArrayRecordFooter
  std::optional<uint64_t> chunk_offset;
  uint64_t decoded_data_size = 0;
  uint64_t num_records = 0;
};

struct FooterMetadata {  // RiegeliFooterMetadata.array_record_metadata
  bool has_array_record_metadata = false;
  uint64_t version = 0;
  uint64_t num_chunks = 0;
  uint64_t num_records = 0;
  std::optional<std::string> writer_options;
};

struct Postscript {  // RiegeliPostscript
  std::optional<uint64_t> footer_offset;
  std::optional<uint64_t> magic;
};

// Encoders write every field, in field-number order, as the official writer does.
void encode_footer_entry(uint64_t chunk_offset, uint64_t decoded_data_size,
                         uint64_t num_records, ByteBuffer& out);
void encode_footer_metadata(uint64_t num_chunks, uint64_t num_records,
                            const std::string& writer_options, ByteBuffer& out);
void encode_postscript(uint64_t footer_offset, ByteBuffer& out);

// True if s is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF): the writer options string must be, as Python reads it as text.
bool is_valid_utf8(const std::string& s);

// Parsers return false when the bytes are not a valid protobuf message.
bool parse_footer_entry(const uint8_t* p, size_t n, FooterEntry& out);
bool parse_footer_metadata(const uint8_t* p, size_t n, FooterMetadata& out);
bool parse_postscript(const uint8_t* p, size_t n, Postscript& out);

}  // namespace arrayds
