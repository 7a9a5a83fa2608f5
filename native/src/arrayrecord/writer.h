// ArrayRecordWriter core (spec 9, 10): groups records into chunks of group_size,
// encodes (compresses + hashes) batches of chunks on the shared thread pool with at
// most max_parallelism batches in flight, and lays them out in order on the caller's
// thread. Not thread-safe by itself: the bindings serialise calls with a mutex.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "arrayrecord/chunk_io.h"
#include "arrayrecord/options.h"
#include "util/byte_buffer.h"

namespace arrayds {

struct EncodeBatch;

class Writer {
 public:
  // path empty + in_memory: the file is built in memory (take_memory() after close()).
  Writer(const std::string& path, bool in_memory, const WriterOptions& options);
  // Writes to `sink` (a stream the caller provides); `name` names it in messages.
  Writer(std::unique_ptr<ByteSink> sink, const std::string& name, const WriterOptions& options);
  ~Writer();  // finishes the file if close() was not called (errors are swallowed)
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Copies one record; cheap (no encoding, no I/O). After it, call pump() if
  // needs_pump() says so (the bindings do that with the GIL released).
  void add_record(const uint8_t* data, size_t size);
  bool needs_pump() const { return ready_ != nullptr; }
  // Submits a full batch for encoding, writes finished batches in order, and waits
  // when max_parallelism batches are in flight.
  void pump();
  // Writes everything, the footer and the postscript, and closes the file.
  void close();

  bool is_open() const { return !closed_; }
  uint64_t num_records() const { return num_records_; }
  const std::string& options_string() const { return canonical_; }
  const std::string& name() const { return name_; }
  // The whole file of an in-memory writer, after close().
  ByteBuffer take_memory();

 private:
  void start();  // checks the codec, lays out the signature
  void check_usable() const;
  void close_group();
  std::unique_ptr<EncodeBatch> new_batch();  // reuses the memory of a written batch
  void submit(std::unique_ptr<EncodeBatch> batch);
  void drain(bool wait_all, size_t max_in_flight);
  void write_batch(EncodeBatch& batch);
  void fail();  // remembers the current exception; the writer is unusable afterwards

  std::string name_;
  WriterOptions options_;
  std::string canonical_;
  size_t parallelism_;
  std::unique_ptr<ByteSink> sink_;
  MemorySink* memory_ = nullptr;  // non-owning view of sink_ for in-memory writers
  std::unique_ptr<ChunkLayoutWriter> layout_;

  std::unique_ptr<EncodeBatch> current_;  // records being collected
  std::unique_ptr<EncodeBatch> ready_;    // a full batch waiting for pump()
  uint64_t group_records_ = 0;            // records in the open group of current_
  std::deque<std::shared_ptr<EncodeBatch>> in_flight_;
  std::vector<std::shared_ptr<EncodeBatch>> spare_;  // written batches, memory kept

  struct Entry {
    uint64_t offset, decoded_data_size, num_records;
  };
  std::vector<Entry> entries_;
  uint64_t num_records_ = 0;
  bool closed_ = false;
  bool taken_ = false;
  std::exception_ptr failure_;
};

}  // namespace arrayds
