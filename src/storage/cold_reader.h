// Cold reads: a stream's data below the log cache, found through the catalog and read from
// objects block by block through the block cache. Keeps the parsed indexes of recently read
// objects. read() does catalog and object store I/O on the calling thread, which must be one
// that may block.
//
// Read-ahead: a consumer reading below the log cache reads on, so after each cold read the
// stream's next blocks (read_ahead_blocks of them, across objects) are brought into the block
// cache by the reader's own threads, while the data read is sent and the consumer asks for
// more. A read that wants a block being read ahead waits for it instead of reading it again;
// one that wants a block nobody reads reads it itself. The window is refilled once the reads
// pass its middle, so a catch-up finds its blocks cached and object reads overlap the
// consumer's round trips (and one another, across streams: the disk's or the object store's
// parallelism, not one read at a time).
//
// Thread-safe: the index cache has its own mutex, the block cache its own, the blocks being
// read and the read-ahead queue theirs; a stream's read-ahead marks are in its log cache state
// (under the stream's mutex).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/ids.h"
#include "base/mutex.h"
#include "metadata/stream_catalog.h"
#include "storage/block_cache.h"
#include "storage/log_cache.h"
#include "storage/object/object_store.h"
#include "storage/object_format.h"
#include "storage/stream_types.h"

namespace silt::storage {

class cold_reader {
 public:
  // read_ahead_blocks: how many blocks a stream's window holds; read_ahead_threads: how many
  // windows are read at once (either 0: no read-ahead).
  cold_reader(metadata::stream_catalog& catalog, object_store& store, log_cache& cache,
              size_t block_cache_bytes, uint32_t read_ahead_blocks, uint32_t read_ahead_threads);
  // Stops the read-ahead threads (a read under way finishes first; queued ones are dropped).
  ~cold_reader();
  cold_reader(const cold_reader&) = delete;
  cold_reader& operator=(const cold_reader&) = delete;

  // Reads batches from `offset` out of the object holding it. offset_out_of_range when no
  // committed object holds it (trimmed meanwhile); object_store when the store failed (or the
  // object is gone: compaction or retention removed it since the catalog was read).
  [[nodiscard]] tl::expected<read_result, stream_error> read(base::stream_id stream_id,
                                                             base::offset offset, size_t max_bytes);
  // Forgets what is cached of a deleted object.
  void forget(const std::string& key);

  [[nodiscard]] uint64_t reads() const { return reads_.load(std::memory_order_relaxed); }
  [[nodiscard]] block_cache_stats block_stats() const { return blocks_.stats(); }
  // Ranged reads of objects, those of read-ahead included.
  [[nodiscard]] uint64_t gets() const { return gets_.load(std::memory_order_relaxed); }
  [[nodiscard]] uint64_t read_ahead_gets() const {
    return read_ahead_gets_.load(std::memory_order_relaxed);
  }
  // Reads that found blocks being read ahead and waited for them.
  [[nodiscard]] uint64_t read_ahead_waits() const {
    return read_ahead_waits_.load(std::memory_order_relaxed);
  }
  // Waits until no read-ahead is queued or running (tests); false after `timeout`.
  [[nodiscard]] bool wait_read_ahead_idle(std::chrono::milliseconds timeout);

 private:
  using block_key = std::pair<std::string, uint64_t>;  // object key, block position
  struct located {
    std::string key;
    std::shared_ptr<const std::vector<block_entry>> index;  // keeps `blocks` alive
    std::span<const block_entry> blocks;
  };
  struct read_ahead_job {
    base::stream_id stream_id;
    base::offset from;
  };

  tl::expected<std::shared_ptr<const std::vector<block_entry>>, stream_error> object_index(
      const std::string& key);
  // The stream's blocks from the one holding `offset` up to max_bytes (at least one), in the
  // object that holds `offset`.
  tl::expected<located, stream_error> locate(base::stream_id stream_id, base::offset offset,
                                             size_t max_bytes);
  // The blocks, from the cache, from a read-ahead under way (waited for) or read in one GET.
  tl::expected<std::vector<block_cache::block_ptr>, stream_error> load(
      const std::string& key, std::span<const block_entry> blocks, bool for_read_ahead);
  // Reads blocks[first, last] in one GET and caches those `out` lacks; the caller marked them
  // in flight.
  tl::expected<void, stream_error> get_blocks(const std::string& key,
                                              std::span<const block_entry> blocks, size_t first,
                                              size_t last,
                                              std::vector<block_cache::block_ptr>& out);
  void end_flight(const std::string& key, std::span<const block_entry> blocks, size_t first,
                  size_t last);

  // After a cold read whose last block ends at `block_end`: queues the stream's next window
  // unless one is under way or the read has not reached the middle of the last one.
  void maybe_read_ahead(base::stream_id stream_id, base::offset block_end,
                        base::offset next_offset);
  void read_ahead_loop();
  void read_ahead(const read_ahead_job& job);

  metadata::stream_catalog& catalog_;
  object_store& store_;
  log_cache& cache_;
  block_cache blocks_;
  const uint32_t read_ahead_blocks_;
  base::mutex index_mu_;
  std::map<std::string, std::shared_ptr<const std::vector<block_entry>>> indexes_
      GUARDED_BY(index_mu_);

  // Blocks being read by some thread; waiters on flight_cv_.
  base::mutex flight_mu_;
  std::condition_variable flight_cv_;
  std::map<block_key, int> in_flight_ GUARDED_BY(flight_mu_);

  base::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::condition_variable idle_cv_;
  std::deque<read_ahead_job> queue_ GUARDED_BY(queue_mu_);
  size_t running_ GUARDED_BY(queue_mu_) = 0;
  bool stopping_ GUARDED_BY(queue_mu_) = false;
  std::vector<std::thread> threads_;

  std::atomic<uint64_t> reads_{0};
  std::atomic<uint64_t> gets_{0};
  std::atomic<uint64_t> read_ahead_gets_{0};
  std::atomic<uint64_t> read_ahead_waits_{0};
};

}  // namespace silt::storage
