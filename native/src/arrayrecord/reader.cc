#include "arrayrecord/reader.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "arrayrecord/footer.h"
#include "errors.h"
#include "riegeli/block_layout.h"
#include "riegeli/simple_chunk.h"
#include "util/thread_pool.h"

namespace arrayds {
namespace {

constexpr uint64_t kMinFileSize = 2 * kBlockSize;
constexpr uint64_t kFirstChunkOffset = 64;  // right after the signature chunk
constexpr size_t kKeepIoBuffer = 64u << 20;

std::string type_name(uint8_t t) {
  if (t >= 0x20 && t < 0x7f) return std::string("'") + static_cast<char>(t) + "'";
  return "byte " + std::to_string(t);
}

std::string at(uint64_t pos) { return std::to_string(pos); }

// Decodes a verified simple chunk into sizes + dst; adds the file and position to errors.
void decode_into(const std::string& name, const ParsedChunk& c, std::vector<uint64_t>& sizes,
                 uint8_t* dst) {
  try {
    decode_simple_chunk(c.data, c.header.num_records, c.header.decoded_data_size, sizes, dst);
  } catch (const FormatError& e) {
    throw_corruption(name, c.begin, std::string(e.what()) + " in the chunk at " + at(c.begin));
  } catch (const UnsupportedError& e) {
    throw UnsupportedError(name + ": chunk at " + at(c.begin) + ": " + e.what());
  }
}

// Refuses a chunk whose decoded_data_size its stored bytes cannot justify (before
// anything of that size is allocated).
void check_decoded_size(const std::string& name, const ParsedChunk& c) {
  try {
    check_simple_chunk_size(c.data, c.header.decoded_data_size);
  } catch (const FormatError& e) {
    throw_corruption(name, c.begin, std::string(e.what()) + " in the chunk at " + at(c.begin));
  }
}

std::shared_ptr<DecodedChunk> decode_whole(const std::string& name, const ParsedChunk& c) {
  check_decoded_size(name, c);
  auto d = std::make_shared<DecodedChunk>();
  d->values.resize(static_cast<size_t>(c.header.decoded_data_size));
  std::vector<uint64_t> sizes;
  decode_into(name, c, sizes, d->values.data());
  d->offsets.resize(sizes.size() + 1);
  uint64_t sum = 0;
  d->offsets[0] = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sum += sizes[i];
    d->offsets[i + 1] = sum;
  }
  return d;
}

void require_simple(const std::string& name, const ParsedChunk& c, const char* what) {
  if (c.header.chunk_type == kChunkSimple) return;
  throw_corruption(name, c.begin, std::string(what) + ": expected a simple chunk ('r') at " +
                                      at(c.begin) + ", found chunk type " +
                                      type_name(c.header.chunk_type));
}

uint64_t postscript_footer_offset(const Region& region, uint64_t file_size,
                                  const std::string& name) {
  const uint64_t ps_begin = file_size - kBlockSize;
  ParsedChunk pc;
  if (parse_chunk(region, ps_begin, file_size, name, pc) != 0) {
    throw std::logic_error("postscript region too short");
  }
  require_simple(name, pc, "Failed to read RiegeliPostscript");
  if (pc.header.num_records < 1) {
    throw_corruption(name, ps_begin, "Failed to read RiegeliPostscript: the postscript chunk "
                                     "holds no records");
  }
  std::shared_ptr<DecodedChunk> d = decode_whole(name, pc);
  Postscript ps;
  if (!parse_postscript(d->record(0), static_cast<size_t>(d->record_size(0)), ps)) {
    throw_corruption(name, ps_begin, "Failed to read RiegeliPostscript: not a valid message");
  }
  if (!ps.footer_offset || !ps.magic || *ps.magic != kPostscriptMagic) {
    throw_corruption(name, ps_begin,
                     "Failed to read RiegeliPostscript: missing footer_offset or wrong magic "
                     "number (not an ArrayRecord file?)");
  }
  const uint64_t fo = *ps.footer_offset;
  if (fo < kFirstChunkOffset || fo >= ps_begin || !is_valid_chunk_begin(fo)) {
    throw_corruption(name, ps_begin, "the postscript gives footer_offset " + at(fo) +
                                         ", which is not a chunk position in [64, " +
                                         at(ps_begin) + ")");
  }
  return fo;
}

void check_file_size(uint64_t size, const std::string& name) {
  if (size < kMinFileSize) {
    throw_corruption(name, size, "not an ArrayRecord file: it has " + at(size) +
                                     " bytes, but an ArrayRecord file is at least " +
                                     at(kMinFileSize) + " bytes");
  }
  if (size % kBlockSize != 0) {
    throw_corruption(name, size, "not a valid ArrayRecord file: its size " + at(size) +
                                     " is not a multiple of 65536 (truncated, or bytes "
                                     "appended)");
  }
}

// Runs fn, which reads the bytes of `region`, then checks that they were the file's
// (a mapped file truncated meanwhile reads as zeros): CorruptionError otherwise, also
// in place of an error fn raised about those zeros.
template <typename Fn>
auto checked(const ByteSource& source, const Region& region, Fn&& fn) -> decltype(fn()) {
  if (!region.mapped) return fn();
  try {
    if constexpr (std::is_void_v<decltype(fn())>) {
      fn();
      source.verify(region);
    } else {
      auto result = fn();
      source.verify(region);
      return result;
    }
  } catch (const CorruptionError&) {
    source.verify(region);
    throw;
  } catch (const UnsupportedError&) {
    source.verify(region);
    throw;
  }
}

size_t parallelism_from(const ReaderOptions& o) {
  if (o.max_parallelism < 0) return hardware_threads();
  return o.max_parallelism == 0 ? 1 : static_cast<size_t>(o.max_parallelism);
}

}  // namespace

// ---- ChunkCache

std::shared_ptr<const DecodedChunk> ChunkCache::get(uint64_t chunk) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->first == chunk) {
      entries_.splice(entries_.begin(), entries_, it);
      return entries_.front().second;
    }
  }
  return nullptr;
}

void ChunkCache::put(uint64_t chunk, std::shared_ptr<const DecodedChunk> decoded) {
  const uint64_t size = decoded->values.size() + decoded->offsets.size() * 8;
  if (max_entries_ == 0 || size > max_bytes_) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->first == chunk) return;
  }
  entries_.emplace_front(chunk, std::move(decoded));
  bytes_ += size;
  while (entries_.size() > max_entries_ || bytes_ > max_bytes_) {
    const auto& last = entries_.back().second;
    bytes_ -= last->values.size() + last->offsets.size() * 8;
    entries_.pop_back();
  }
}

// ---- opening

std::shared_ptr<ReaderCore> ReaderCore::open(std::shared_ptr<const ByteSource> source,
                                             const ReaderOptions& options) {
  std::shared_ptr<ReaderCore> core(new ReaderCore());
  core->name_ = source->name();
  core->options_ = options;
  core->parallelism_ = parallelism_from(options);
  const std::string& name = core->name_;
  const uint64_t size = source->size();
  check_file_size(size, name);
  core->file_size_ = size;

  ByteBuffer sig_buf;
  const Region sig = source->fetch(0, 64, sig_buf);
  const bool signed_ok = std::memcmp(sig.data, file_signature(), 64) == 0;
  source->verify(sig);
  if (!signed_ok) {
    throw_corruption(name, 0, "missing file signature: not a Riegeli/ArrayRecord file");
  }

  uint64_t tail_len = options.footer_prefetch_bytes - options.footer_prefetch_bytes % kBlockSize;
  if (tail_len < kBlockSize) tail_len = kBlockSize;
  if (tail_len > size) tail_len = size;
  ByteBuffer tail_buf;
  const Region tail = source->fetch(size - tail_len, tail_len, tail_buf);
  const uint64_t fo =
      checked(*source, tail, [&] { return postscript_footer_offset(tail, size, name); });

  ByteBuffer footer_buf;
  Region footer = tail;
  if (fo < tail.begin) footer = source->fetch(fo, size - kBlockSize - fo, footer_buf);
  checked(*source, footer, [&] {
    ParsedChunk fc;
    if (parse_chunk(footer, fo, size - kBlockSize, name, fc) != 0) {
      throw std::logic_error("footer region too short");
    }
    core->load_index(fc, fo);
  });
  core->source_ = std::move(source);
  return core;
}

uint64_t ReaderCore::footer_offset_from_tail(const uint8_t* tail, uint64_t tail_size,
                                             uint64_t file_size, const std::string& name) {
  check_file_size(file_size, name);
  if (tail_size != kBlockSize) {
    throw UsageError(name + ": footer_offset() needs exactly the last 65536 bytes of the file, "
                            "got " + at(tail_size));
  }
  const Region region{tail, file_size - kBlockSize, tail_size};
  return postscript_footer_offset(region, file_size, name);
}

std::shared_ptr<ReaderCore> ReaderCore::from_footer(uint64_t file_size, uint64_t footer_offset,
                                                    const uint8_t* footer, uint64_t footer_size,
                                                    const std::string& name,
                                                    const ReaderOptions& options) {
  check_file_size(file_size, name);
  const uint64_t limit = file_size - kBlockSize;
  if (footer_offset < kFirstChunkOffset || footer_offset >= limit ||
      !is_valid_chunk_begin(footer_offset)) {
    throw_corruption(name, footer_offset, "footer_offset " + at(footer_offset) +
                                              " is not a chunk position in [64, " + at(limit) +
                                              ")");
  }
  if (footer_size != limit - footer_offset) {
    throw UsageError(name + ": from_footer() needs the bytes [" + at(footer_offset) + ", " +
                     at(limit) + ") of the file (" + at(limit - footer_offset) + " bytes), got " +
                     at(footer_size));
  }
  std::shared_ptr<ReaderCore> core(new ReaderCore());
  core->name_ = name;
  core->options_ = options;
  core->parallelism_ = parallelism_from(options);
  core->file_size_ = file_size;
  const Region region{footer, footer_offset, footer_size};
  ParsedChunk fc;
  if (parse_chunk(region, footer_offset, limit, name, fc) != 0) {
    throw std::logic_error("footer region too short");
  }
  core->load_index(fc, footer_offset);
  return core;
}

void ReaderCore::load_index(const ParsedChunk& fc, uint64_t fo) {
  const std::string& name = name_;
  require_simple(name, fc, "Failed to read the footer");
  std::shared_ptr<DecodedChunk> d = decode_whole(name, fc);
  if (d->num_records() < 1) {
    throw_corruption(name, fo, "Failed to read RiegeliFooterMetadata: the footer chunk at " +
                                   at(fo) + " holds no records");
  }
  FooterMetadata meta;
  if (!parse_footer_metadata(d->record(0), static_cast<size_t>(d->record_size(0)), meta)) {
    throw_corruption(name, fo, "Failed to read RiegeliFooterMetadata: not a valid message");
  }
  if (!meta.has_array_record_metadata) {
    throw_corruption(name, fo, "Failed to read RiegeliFooterMetadata: array_record_metadata "
                               "is missing");
  }
  if (meta.version != 1) {
    throw_corruption(name, fo, "Unrecognized version number " + at(meta.version) +
                                   " in the footer metadata");
  }
  if (meta.writer_options && !is_valid_utf8(*meta.writer_options)) {
    throw_corruption(name, fo, "Failed to read RiegeliFooterMetadata: the writer options "
                               "are not valid UTF-8 text");
  }
  const uint64_t entries = d->num_records() - 1;
  if (meta.num_chunks != entries) {
    throw_corruption(name, fo, "the footer metadata says " + at(meta.num_chunks) +
                                   " chunks, but the footer has " + at(entries) + " entries");
  }
  // Before a chunk is read, its decoded size is bounded by the bytes it spans and
  // the largest expansion of the codec the writer options name (of any codec of
  // this build when they name none): read() allocates that size before decoding.
  uint64_t ratio = max_expansion_of_build();
  if (meta.writer_options) {
    try {
      ratio = max_expansion(WriterOptions::parse(*meta.writer_options).compression.type);
    } catch (const std::logic_error&) {  // OptionsError and kin: options not understood
    }
  }
  offsets_.assign(entries + 1, 0);
  dds_.assign(entries, 0);
  offsets_[entries] = fo;
  uint64_t group = 0;
  uint64_t total = 0;
  for (uint64_t k = 0; k < entries; ++k) {
    FooterEntry e;
    if (!parse_footer_entry(d->record(k + 1), static_cast<size_t>(d->record_size(k + 1)), e)) {
      throw_corruption(name, fo, "Failed to read ArrayRecordFooter entry " + at(k));
    }
    if (!e.chunk_offset) {
      throw_corruption(name, fo, "footer entry " + at(k) + " has no chunk_offset");
    }
    const uint64_t off = *e.chunk_offset;
    const uint64_t low = k == 0 ? kFirstChunkOffset : offsets_[k - 1] + 1;
    if (off < low || off >= fo || !is_valid_chunk_begin(off)) {
      throw_corruption(name, fo, "footer entry " + at(k) + ": chunk_offset " + at(off) +
                                     " is not a chunk position after the previous chunk and "
                                     "before the footer at " + at(fo));
    }
    offsets_[k] = off;
    dds_[k] = e.decoded_data_size;
    if (k == 0) group = e.num_records;
    if (group == 0) {
      throw_corruption(name, fo, "footer entry 0 says its chunk holds 0 records");
    }
    const bool last = k + 1 == entries;
    if ((!last && e.num_records != group) || (last && (e.num_records < 1 || e.num_records > group))) {
      throw_corruption(name, fo, "footer entry " + at(k) + " says its chunk holds " +
                                     at(e.num_records) + " records, but the group size is " +
                                     at(group) + " (every chunk but the last must hold exactly "
                                     "that many, the last 1 to that many)");
    }
    total += e.num_records;
  }
  // A chunk spans at least num_records bytes (spec 4.3), so counts are bounded.
  for (uint64_t k = 0; k < entries; ++k) {
    const uint64_t n = k + 1 < entries ? group : total - group * (entries - 1);
    const uint64_t span = offsets_[k + 1] - offsets_[k];
    if (n > span) {
      throw_corruption(name, fo, "footer entry " + at(k) + " claims " + at(n) +
                                     " records for a chunk of " + at(span) + " bytes");
    }
    const uint64_t stored = span > kChunkHeaderSize ? span - kChunkHeaderSize : 0;
    const uint64_t bound = max_decoded_size(ratio, stored);
    if (dds_[k] > bound) {
      throw_corruption(name, offsets_[k],
                       "footer entry " + at(k) + " says the chunk at " + at(offsets_[k]) +
                           " decodes to " + at(dds_[k]) + " bytes, more than the " +
                           at(bound) + " that its at most " + at(stored) +
                           " stored bytes can decode to (docs/spec.md, Bounds)");
    }
  }
  if (total != meta.num_records) {
    throw_corruption(name, fo, "the footer entries hold " + at(total) +
                                   " records, but the footer metadata says " +
                                   at(meta.num_records));
  }
  footer_offset_ = fo;
  num_records_ = total;
  num_chunks_ = entries;
  group_size_ = group;
  writer_options_ = meta.writer_options;
}

// ---- decoding

void ReaderCore::require_source() const {
  if (!source_) {
    throw UsageError(name_ + ": this reader was made by from_footer() and holds only the "
                             "index; fetch chunk_spans() and call decode_spans()");
  }
}

void ReaderCore::decode_job(const ParsedChunk& pc, ChunkJob& job) const {
  const uint64_t c = job.chunk;
  if (pc.header.chunk_type == kChunkTransposed) {
    throw UnsupportedError(name_ + ": transposed chunk ('t') at offset " + at(pc.begin) +
                           "; files written with transpose:true are not supported by arrayds");
  }
  require_simple(name_, pc, "data chunk");
  check_decoded_size(name_, pc);
  if (pc.header.num_records != chunk_records(c) || pc.header.decoded_data_size != dds_[c]) {
    throw_corruption(name_, pc.begin, "the chunk at " + at(pc.begin) + " holds " +
                                          at(pc.header.num_records) + " records and " +
                                          at(pc.header.decoded_data_size) +
                                          " bytes, but the footer says " +
                                          at(chunk_records(c)) + " records and " + at(dds_[c]) +
                                          " bytes");
  }
  if (job.dst != nullptr) {
    thread_local std::vector<uint64_t> sizes;
    decode_into(name_, pc, sizes, job.dst);
  } else if (job.deliver) {
    // Reused across chunks: no fresh (page-faulting) memory per chunk.
    thread_local std::vector<uint64_t> sizes;
    thread_local ByteBuffer scratch;
    scratch.resize(std::max<size_t>(static_cast<size_t>(dds_[c]), 1));  // never null
    decode_into(name_, pc, sizes, scratch.data());
    job.deliver(scratch.data(), dds_[c]);
    scratch.shrink_if_larger(kKeepIoBuffer);
  } else {
    job.decoded = decode_whole(name_, pc);
  }
}

void ReaderCore::run_one(ChunkJob& job) const {
  require_source();
  thread_local ByteBuffer buf;
  const uint64_t begin = chunk_begin(job.chunk);
  const uint64_t limit = chunk_limit(job.chunk);
  const Region region = source_->fetch(begin, limit - begin, buf);
  checked(*source_, region, [&] {
    ParsedChunk pc;
    if (parse_chunk(region, begin, limit, name_, pc) != 0) {
      throw std::logic_error("chunk region too short");
    }
    decode_job(pc, job);
  });
  buf.shrink_if_larger(kKeepIoBuffer);
}

void ReaderCore::run_jobs(std::vector<ChunkJob>& jobs) const {
  require_source();
  if (jobs.empty()) return;
  std::sort(jobs.begin(), jobs.end(),
            [](const ChunkJob& a, const ChunkJob& b) { return a.chunk < b.chunk; });
  if (jobs.size() == 1) {
    run_one(jobs[0]);
    return;
  }
  // Group runs of adjacent chunks into units read with one pread each; size the units
  // so that there are several per thread.
  uint64_t total = 0;
  for (const ChunkJob& j : jobs) total += chunk_limit(j.chunk) - chunk_begin(j.chunk);
  uint64_t target = total / (4 * static_cast<uint64_t>(parallelism_));
  target = std::min<uint64_t>(std::max<uint64_t>(target, 64u << 10), 4u << 20);
  if (source_->mapped()) target = 0;  // nothing to read: one chunk per unit
  std::vector<std::pair<size_t, size_t>> units;
  uint64_t unit_bytes = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const uint64_t span = chunk_limit(jobs[i].chunk) - chunk_begin(jobs[i].chunk);
    if (i == 0 || jobs[i].chunk != jobs[i - 1].chunk + 1 || unit_bytes + span > target) {
      units.emplace_back(i, i + 1);
      unit_bytes = span;
    } else {
      units.back().second = i + 1;
      unit_bytes += span;
    }
  }
  parallel_for(units.size(), parallelism_, [&](size_t u) {
    thread_local ByteBuffer buf;
    const size_t a = units[u].first, b = units[u].second;
    const uint64_t begin = chunk_begin(jobs[a].chunk);
    const uint64_t end = chunk_limit(jobs[b - 1].chunk);
    const Region region = source_->fetch(begin, end - begin, buf);
    checked(*source_, region, [&] {
      ParsedChunk pc;
      for (size_t i = a; i < b; ++i) {
        const uint64_t c = jobs[i].chunk;
        if (parse_chunk(region, chunk_begin(c), chunk_limit(c), name_, pc) != 0) {
          throw std::logic_error("chunk region too short");
        }
        decode_job(pc, jobs[i]);
      }
    });
    buf.shrink_if_larger(kKeepIoBuffer);
  });
}

void ReaderCore::run_jobs_from_spans(std::vector<ChunkJob>& jobs, std::vector<Span> spans) const {
  if (jobs.empty()) return;
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  parallel_for(jobs.size(), parallelism_, [&](size_t i) {
    const uint64_t c = jobs[i].chunk;
    const uint64_t begin = chunk_begin(c);
    auto it = std::upper_bound(spans.begin(), spans.end(), begin,
                               [](uint64_t pos, const Span& s) { return pos < s.begin; });
    const uint64_t limit = chunk_limit(c);
    auto missing = [&] {
      return UsageError(name_ + ": the spans given do not cover the chunk at " + at(begin) +
                        " (bytes [" + at(begin) + ", " + at(limit) +
                        ")); pass the ranges returned by chunk_spans()");
    };
    if (it == spans.begin()) throw missing();
    const Span& s = *(it - 1);
    if (s.begin + s.size <= begin) throw missing();
    const Region region{s.data, s.begin, s.size};
    ParsedChunk pc;
    if (parse_chunk(region, begin, limit, name_, pc) != 0) throw missing();
    decode_job(pc, jobs[i]);
  });
}

std::shared_ptr<const DecodedChunk> ReaderCore::chunk(uint64_t c) {
  if (std::shared_ptr<const DecodedChunk> hit = cache_.get(c)) return hit;
  ChunkJob job;
  job.chunk = c;
  run_one(job);
  cache_.put(c, job.decoded);
  return job.decoded;
}

std::vector<std::shared_ptr<const DecodedChunk>> ReaderCore::chunks(
    const std::vector<uint64_t>& ids) {
  std::vector<std::shared_ptr<const DecodedChunk>> out(ids.size());
  std::vector<ChunkJob> jobs;
  for (size_t i = 0; i < ids.size(); ++i) {
    out[i] = cache_.get(ids[i]);
    if (!out[i]) {
      ChunkJob j;
      j.chunk = ids[i];
      jobs.push_back(std::move(j));
    }
  }
  if (jobs.empty()) return out;
  run_jobs(jobs);  // sorts jobs by chunk
  for (size_t i = 0; i < ids.size(); ++i) {
    if (out[i]) continue;
    auto it = std::lower_bound(jobs.begin(), jobs.end(), ids[i],
                               [](const ChunkJob& j, uint64_t c) { return j.chunk < c; });
    out[i] = it->decoded;
  }
  // Keep the last few for neighbours of the next call.
  const size_t keep = std::min<size_t>(jobs.size(), 4);
  for (size_t i = jobs.size() - keep; i < jobs.size(); ++i) cache_.put(jobs[i].chunk, jobs[i].decoded);
  return out;
}

std::vector<std::pair<uint64_t, uint64_t>> ReaderCore::spans_for_chunks(
    std::vector<uint64_t> ids) const {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  constexpr uint64_t kMaxMerged = 8u << 20;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (uint64_t c : ids) {
    const uint64_t b = chunk_begin(c), e = chunk_limit(c);
    if (!spans.empty() && spans.back().second == b && e - spans.back().first <= kMaxMerged) {
      spans.back().second = e;
    } else {
      spans.emplace_back(b, e);
    }
  }
  return spans;
}

}  // namespace arrayds
