// ArrayRecordReader core: validates a file at open (spec 9.4, 11), keeps the chunk
// index in memory (O(1) lookup), decodes chunks in parallel, caches a few decoded
// chunks for group_size > 1. Thread-safe: one ReaderCore serves many threads.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arrayrecord/chunk_io.h"
#include "arrayrecord/options.h"
#include "util/byte_buffer.h"
#include "util/byte_source.h"

namespace arrayds {

// The records of one chunk: values back to back, offsets[k]..offsets[k+1].
struct DecodedChunk {
  ByteBuffer values;
  std::vector<uint64_t> offsets;
  size_t num_records() const { return offsets.empty() ? 0 : offsets.size() - 1; }
  const uint8_t* record(size_t k) const { return values.data() + offsets[k]; }
  uint64_t record_size(size_t k) const { return offsets[k + 1] - offsets[k]; }
};

// A thread-safe LRU of decoded chunks (by count and by bytes).
class ChunkCache {
 public:
  ChunkCache(size_t max_entries, uint64_t max_bytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}
  std::shared_ptr<const DecodedChunk> get(uint64_t chunk);
  void put(uint64_t chunk, std::shared_ptr<const DecodedChunk> decoded);

 private:
  std::mutex mu_;
  std::list<std::pair<uint64_t, std::shared_ptr<const DecodedChunk>>> entries_;  // MRU first
  size_t max_entries_;
  uint64_t max_bytes_;
  uint64_t bytes_ = 0;
};

// One chunk to decode, in one of three ways: its single record goes straight to `dst`
// (exactly the chunk's decoded_data_size bytes); or, when `deliver` is set, its single
// record is decoded into a reused thread-local buffer and handed to `deliver(data,
// size)` on the decoding thread (which copies it wherever it belongs); or the whole
// chunk goes to `decoded`.
struct ChunkJob {
  uint64_t chunk = 0;
  uint8_t* dst = nullptr;
  std::function<void(const uint8_t*, uint64_t)> deliver;
  std::shared_ptr<const DecodedChunk> decoded;
};

// A piece of a remote file handed over by the caller: bytes [begin, begin + size).
struct Span {
  uint64_t begin;
  const uint8_t* data;
  uint64_t size;
};

class ReaderCore {
 public:
  // Opens and validates the file; throws CorruptionError / IoError / OptionsError.
  static std::shared_ptr<ReaderCore> open(std::shared_ptr<const ByteSource> source,
                                          const ReaderOptions& options);
  // From the last 65536 bytes of a file of file_size bytes: the footer offset.
  static uint64_t footer_offset_from_tail(const uint8_t* tail, uint64_t tail_size,
                                          uint64_t file_size, const std::string& name);
  // An index-only reader from the footer bytes [footer_offset, file_size - 65536).
  static std::shared_ptr<ReaderCore> from_footer(uint64_t file_size, uint64_t footer_offset,
                                                 const uint8_t* footer, uint64_t footer_size,
                                                 const std::string& name,
                                                 const ReaderOptions& options);

  const std::string& name() const { return name_; }
  uint64_t num_records() const { return num_records_; }
  uint64_t num_chunks() const { return num_chunks_; }
  uint64_t group_size() const { return group_size_; }
  uint64_t file_size() const { return file_size_; }
  uint64_t footer_offset() const { return footer_offset_; }
  const std::optional<std::string>& writer_options() const { return writer_options_; }
  bool has_source() const { return source_ != nullptr; }
  // True if chunks are decoded straight from a memory mapping of the file.
  bool mapped() const { return source_ != nullptr && source_->mapped(); }
  size_t parallelism() const { return parallelism_; }

  uint64_t chunk_of(uint64_t record) const { return record / group_size_; }
  uint64_t chunk_begin(uint64_t chunk) const { return offsets_[chunk]; }
  uint64_t chunk_limit(uint64_t chunk) const { return offsets_[chunk + 1]; }
  uint64_t chunk_decoded_size(uint64_t chunk) const { return dds_[chunk]; }
  uint64_t chunk_records(uint64_t chunk) const {
    return chunk + 1 < num_chunks_ ? group_size_ : num_records_ - chunk * group_size_;
  }

  // Decodes one job on the calling thread (one pread).
  void run_one(ChunkJob& job) const;
  // Decodes the jobs (distinct chunks, any order) in parallel from the file; on
  // return they are sorted by chunk.
  void run_jobs(std::vector<ChunkJob>& jobs) const;
  // The same from caller-provided spans (remote files); throws UsageError when the
  // spans do not cover a chunk.
  void run_jobs_from_spans(std::vector<ChunkJob>& jobs, std::vector<Span> spans) const;
  // A decoded chunk, from the cache when possible.
  std::shared_ptr<const DecodedChunk> chunk(uint64_t c);
  // Decoded chunks for several distinct chunk ids, in parallel, using the cache.
  std::vector<std::shared_ptr<const DecodedChunk>> chunks(const std::vector<uint64_t>& ids);

  // The byte ranges holding the given chunks (sorted, adjacent ones merged).
  std::vector<std::pair<uint64_t, uint64_t>> spans_for_chunks(std::vector<uint64_t> ids) const;

 private:
  ReaderCore() : cache_(16, 64u << 20) {}
  void load_index(const ParsedChunk& footer_chunk, uint64_t footer_offset);
  void decode_job(const ParsedChunk& parsed, ChunkJob& job) const;
  void require_source() const;

  std::string name_;
  std::shared_ptr<const ByteSource> source_;
  ReaderOptions options_;
  size_t parallelism_ = 1;
  uint64_t file_size_ = 0;
  uint64_t footer_offset_ = 0;
  uint64_t num_records_ = 0;
  uint64_t num_chunks_ = 0;
  uint64_t group_size_ = 0;
  std::optional<std::string> writer_options_;
  std::vector<uint64_t> offsets_;  // num_chunks + 1; the last is footer_offset
  std::vector<uint64_t> dds_;      // decoded_data_size per chunk
  ChunkCache cache_;
};

}  // namespace arrayds
