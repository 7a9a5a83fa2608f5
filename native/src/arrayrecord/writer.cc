#include "arrayrecord/writer.h"

#include "arrayrecord/footer.h"
#include "errors.h"
#include "riegeli/chunk.h"
#include "riegeli/simple_chunk.h"
#include "util/thread_pool.h"

namespace arrayds {

namespace {
constexpr size_t kBatchBytes = 1u << 20;  // submit a batch once it holds this much
constexpr size_t kBatchGroups = 4096;     // ... or this many chunks
}  // namespace

// Records of whole groups, and after encoding, their chunks.
struct EncodeBatch {
  ByteBuffer values;
  std::vector<uint64_t> sizes;        // one per record
  std::vector<size_t> group_ends;     // record index one past each group
  // Results.
  struct Chunk {
    ChunkHeader header;
    size_t data_offset;
  };
  ByteBuffer encoded;
  std::vector<Chunk> chunks;
  // Completion.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;

  void encode(const CompressionOptions& compression) {
    chunks.reserve(group_ends.size());
    encoded.reserve(values.size() / 2 + 64 * group_ends.size());
    size_t first = 0;
    uint64_t value_pos = 0;
    for (size_t end : group_ends) {
      uint64_t group_bytes = 0;
      for (size_t i = first; i < end; ++i) group_bytes += sizes[i];
      if (group_bytes > kMaxChunkDecodedSize) {  // readers refuse it (docs/spec.md, Bounds)
        throw UsageError("a chunk of " + std::to_string(end - first) + " records would hold " +
                         std::to_string(group_bytes) + " bytes, more than the 4 GiB a chunk "
                         "may hold; use a smaller group_size");
      }
      const size_t data_offset = encoded.size();
      encode_simple_chunk(compression, sizes.data() + first, end - first,
                          values.data() + value_pos, static_cast<size_t>(group_bytes), encoded);
      Chunk c;
      c.data_offset = data_offset;
      c.header = make_chunk_header(kChunkSimple, encoded.data() + data_offset,
                                   encoded.size() - data_offset, end - first, group_bytes);
      chunks.push_back(c);
      value_pos += group_bytes;
      first = end;
    }
    // The records are no longer needed (the memory is kept for reuse).
    values.clear();
    sizes.clear();
  }

  // Empties the batch but keeps its memory, so the next batch does not fault in
  // fresh pages.
  void recycle() {
    values.clear();
    sizes.clear();
    group_ends.clear();
    encoded.clear();
    chunks.clear();
    done = false;
    error = nullptr;
  }
};

Writer::Writer(const std::string& path, bool in_memory, const WriterOptions& options)
    : name_(in_memory ? std::string("<memory>") : path),
      options_(options),
      canonical_(options.canonical()),
      parallelism_(options.max_parallelism == 0 ? hardware_threads()
                                                : static_cast<size_t>(options.max_parallelism)) {
  if (options_.compression.type != Compression::kNone) {
    require_codec(options_.compression.type, name_);  // before a file is created
  }
  if (in_memory) {
    auto sink = std::make_unique<MemorySink>();
    memory_ = sink.get();
    sink_ = std::move(sink);
  } else {
    sink_ = std::make_unique<FileSink>(path);
  }
  start();
}

Writer::Writer(std::unique_ptr<ByteSink> sink, const std::string& name,
               const WriterOptions& options)
    : name_(name),
      options_(options),
      canonical_(options.canonical()),
      parallelism_(options.max_parallelism == 0 ? hardware_threads()
                                                : static_cast<size_t>(options.max_parallelism)),
      sink_(std::move(sink)) {
  if (options_.compression.type != Compression::kNone) {
    require_codec(options_.compression.type, name_);
  }
  start();
}

void Writer::start() {
  layout_ = std::make_unique<ChunkLayoutWriter>(*sink_);
  layout_->write_signature();
  current_ = new_batch();
}

Writer::~Writer() {
  try {
    if (!closed_) close();
  } catch (...) {
  }
}

void Writer::check_usable() const {
  if (closed_) throw ClosedError("ArrayRecordWriter(" + name_ + ") is closed");
  if (failure_) std::rethrow_exception(failure_);
}

void Writer::fail() {
  if (!failure_) failure_ = std::current_exception();
}

void Writer::add_record(const uint8_t* data, size_t size) {
  check_usable();
  if (ready_) throw std::logic_error("add_record() before pump()");
  EncodeBatch& b = *current_;
  b.values.append(data, size);
  b.sizes.push_back(size);
  ++num_records_;
  if (++group_records_ == options_.group_size) {
    close_group();
    if (b.values.size() >= kBatchBytes || b.group_ends.size() >= kBatchGroups) {
      ready_ = std::move(current_);
      current_ = new_batch();
    }
  }
}

std::unique_ptr<EncodeBatch> Writer::new_batch() {
  auto b = std::make_unique<EncodeBatch>();
  if (!spare_.empty()) {
    std::shared_ptr<EncodeBatch> reuse = std::move(spare_.back());
    spare_.pop_back();
    std::swap(b->values, reuse->values);
    std::swap(b->sizes, reuse->sizes);
    std::swap(b->group_ends, reuse->group_ends);
    std::swap(b->encoded, reuse->encoded);
    std::swap(b->chunks, reuse->chunks);
  }
  return b;
}

void Writer::close_group() {
  current_->group_ends.push_back(current_->sizes.size());
  group_records_ = 0;
}

void Writer::pump() {
  check_usable();
  if (!ready_) return;
  try {
    submit(std::move(ready_));
    drain(false, parallelism_);
  } catch (...) {
    fail();
    throw;
  }
}

void Writer::submit(std::unique_ptr<EncodeBatch> batch) {
  std::shared_ptr<EncodeBatch> shared(std::move(batch));
  in_flight_.push_back(shared);
  // Make room: at most parallelism_ batches encoding at once.
  drain(false, parallelism_);
  const CompressionOptions compression = options_.compression;
  ThreadPool::shared().submit([shared, compression] {
    try {
      shared->encode(compression);
    } catch (...) {
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(shared->mu);
    shared->done = true;
    shared->cv.notify_all();
  });
}

// Writes finished batches from the front; waits while more than max_in_flight are
// outstanding (or for all of them when wait_all).
void Writer::drain(bool wait_all, size_t max_in_flight) {
  while (!in_flight_.empty()) {
    std::shared_ptr<EncodeBatch> front = in_flight_.front();
    {
      std::unique_lock<std::mutex> lock(front->mu);
      const bool must_wait = wait_all || in_flight_.size() > max_in_flight;
      if (!front->done) {
        if (!must_wait) return;
        front->cv.wait(lock, [&] { return front->done; });
      }
    }
    in_flight_.pop_front();
    if (front->error) std::rethrow_exception(front->error);
    write_batch(*front);
    if (spare_.size() < parallelism_ + 1 && front.use_count() == 1) {
      front->recycle();
      spare_.push_back(std::move(front));
    }
  }
}

void Writer::write_batch(EncodeBatch& batch) {
  for (const EncodeBatch::Chunk& c : batch.chunks) {
    const uint64_t begin = layout_->write_chunk(c.header, batch.encoded.data() + c.data_offset);
    entries_.push_back({begin, c.header.decoded_data_size, c.header.num_records});
    if (options_.pad_to_block_boundary) layout_->pad_to_block_boundary();
  }
}

void Writer::close() {
  if (closed_) return;
  if (failure_) {
    closed_ = true;
    in_flight_.clear();
    sink_.reset();  // closes the file
    std::rethrow_exception(failure_);
  }
  try {
    if (ready_) submit(std::move(ready_));
    if (group_records_ != 0) close_group();
    if (!current_->group_ends.empty()) {
      if (in_flight_.empty()) {
        // Nothing else is encoding (a small file is one batch): encode the last batch
        // here instead of handing it to a pool thread and waiting for it.
        current_->encode(options_.compression);
        write_batch(*current_);
      } else {
        submit(std::move(current_));
      }
    }
    drain(true, 0);

    // Footer: metadata + one entry per data chunk, same compression as the data.
    EncodeBatch footer;
    ByteBuffer rec;
    encode_footer_metadata(entries_.size(), num_records_, canonical_, rec);
    footer.sizes.push_back(rec.size());
    footer.values.append(rec.data(), rec.size());
    for (const Entry& e : entries_) {
      rec.clear();
      encode_footer_entry(e.offset, e.decoded_data_size, e.num_records, rec);
      footer.sizes.push_back(rec.size());
      footer.values.append(rec.data(), rec.size());
    }
    footer.group_ends.push_back(footer.sizes.size());
    footer.encode(options_.compression);
    const uint64_t footer_offset = layout_->pos();
    layout_->write_chunk(footer.chunks[0].header, footer.encoded.data());
    layout_->pad_to_block_boundary();

    // Postscript: always uncompressed, 3 identical copies, on a block boundary.
    EncodeBatch post;
    rec.clear();
    encode_postscript(footer_offset, rec);
    for (int i = 0; i < 3; ++i) {
      post.sizes.push_back(rec.size());
      post.values.append(rec.data(), rec.size());
    }
    post.group_ends.push_back(3);
    CompressionOptions none;
    none.type = Compression::kNone;
    post.encode(none);
    layout_->write_chunk(post.chunks[0].header, post.encoded.data());
    layout_->pad_to_block_boundary();
    sink_->finish();
    closed_ = true;
  } catch (...) {
    fail();
    closed_ = true;
    sink_.reset();
    throw;
  }
}

ByteBuffer Writer::take_memory() {
  if (memory_ == nullptr) {
    throw UsageError("getvalue() is only for in-memory writers (path None); " + name_ +
                     " was written to a file");
  }
  if (!closed_ || failure_) {
    throw UsageError("getvalue() is available after close(); the in-memory file is not "
                     "complete yet");
  }
  if (taken_) throw UsageError("getvalue() was already called");
  taken_ = true;
  return std::move(memory_->buffer());
}

}  // namespace arrayds
