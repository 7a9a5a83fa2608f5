// Simple chunks ('r'), spec section 7: compression byte, sizes section, values section.
#pragma once

#include <cstdint>
#include <vector>

#include "compress/compressor.h"
#include "riegeli/pieces.h"
#include "util/byte_buffer.h"

namespace arrayds {

// Appends the data of a simple chunk holding n records (sizes[i] bytes each, stored
// back to back in values) to out.
void encode_simple_chunk(const CompressionOptions& compression, const uint64_t* sizes,
                         size_t n, const uint8_t* values, size_t values_size, ByteBuffer& out);

// Decodes the data of a simple chunk whose header says num_records records and
// decoded_data_size bytes. Fills sizes (num_records entries) and writes exactly
// decoded_data_size bytes at values_dst. Throws FormatError when the data is damaged
// (the caller adds the file name and position) and UnsupportedError for a codec this
// build lacks.
void decode_simple_chunk(const Pieces& data, uint64_t num_records, uint64_t decoded_data_size,
                         std::vector<uint64_t>& sizes, uint8_t* values_dst);

// Throws FormatError unless a simple chunk of `data` can decode to decoded_data_size
// bytes: at most its stored bytes when uncompressed, at most max_decoded_size() of its
// codec's ratio when compressed (docs/spec.md, "Bounds"). Call before allocating
// decoded_data_size bytes; decode_simple_chunk checks it too.
void check_simple_chunk_size(const Pieces& data, uint64_t decoded_data_size);

// Just the compression byte (0 if the data is empty).
uint8_t simple_chunk_compression(const Pieces& data);

}  // namespace arrayds
