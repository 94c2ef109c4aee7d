// Cold reads: a stream's data below the log cache, found through the catalog and read from
// objects block by block through the block cache, reading ahead on sequential catch-up.
// Keeps the parsed indexes of recently read objects. Every call does catalog and object store
// I/O on the calling thread, which must be one that may block.
//
// Thread-safe: the index cache has its own mutex, the block cache its own; a stream's
// read-ahead mark is in its log cache state (under the stream's mutex).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
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
  cold_reader(metadata::stream_catalog& catalog, object_store& store, log_cache& cache,
              size_t block_cache_bytes, uint32_t read_ahead_blocks)
      : catalog_(catalog),
        store_(store),
        cache_(cache),
        blocks_(block_cache_bytes),
        read_ahead_blocks_(read_ahead_blocks) {}

  // Reads batches from `offset` out of the object holding it. offset_out_of_range when no
  // committed object holds it (trimmed meanwhile); object_store when the store failed (or the
  // object is gone: compaction or retention removed it since the catalog was read).
  [[nodiscard]] tl::expected<read_result, stream_error> read(base::stream_id stream_id,
                                                             base::offset offset, size_t max_bytes);
  // Forgets what is cached of a deleted object.
  void forget(const std::string& key);

  [[nodiscard]] uint64_t reads() const { return reads_.load(std::memory_order_relaxed); }
  [[nodiscard]] uint64_t gets() const { return gets_.load(std::memory_order_relaxed); }

 private:
  tl::expected<std::shared_ptr<const std::vector<block_entry>>, stream_error> object_index(
      const std::string& key);

  metadata::stream_catalog& catalog_;
  object_store& store_;
  log_cache& cache_;
  block_cache blocks_;
  const uint32_t read_ahead_blocks_;
  base::mutex index_mu_;
  std::map<std::string, std::shared_ptr<const std::vector<block_entry>>> indexes_
      GUARDED_BY(index_mu_);
  std::atomic<uint64_t> reads_{0};
  std::atomic<uint64_t> gets_{0};
};

}  // namespace silt::storage
