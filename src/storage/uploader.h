// Upload: moves durable data from the WAL to the object store. Each round takes the log
// cache's upload queue up to the WAL position durable at its start, writes one stream-set
// object (and a stream object for each stream with stream_object_bytes or more), PUTs it,
// commits its ranges to the catalog at the owner and epoch the store holds each stream at,
// and only then marks the data uploaded (evictable) and trims the WAL. The cost of a round
// grows with the data uploaded, not with the number of streams.
//
// Not thread-safe: the stream store runs one object task at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/ids.h"
#include "base/mutex.h"
#include "metadata/stream_catalog.h"
#include "storage/log_cache.h"
#include "storage/object/object_store.h"
#include "storage/wal/wal.h"

namespace silt::storage {

struct upload_stats {
  uint64_t uploads = 0;
  uint64_t uploaded_bytes = 0;
  uint64_t stream_set_objects = 0;
  uint64_t stream_objects = 0;
};

class uploader {
 public:
  uploader(metadata::stream_catalog& catalog, object_store& store, log_cache& cache,
           uint32_t block_size, uint64_t stream_object_bytes)
      : catalog_(catalog),
        store_(store),
        cache_(cache),
        block_size_(block_size),
        stream_object_bytes_(stream_object_bytes) {}

  // One round; then the WAL is trimmed to what is in committed objects.
  [[nodiscard]] tl::expected<void, std::string> run_once(wal::wal& wal);
  [[nodiscard]] upload_stats stats() const;
  // Bytes committed per stream since the last call (thread-safe): what placement by load
  // measures. Counted from the first call on (a single broker never asks). Costs what the
  // streams uploaded, not the number of streams.
  [[nodiscard]] std::unordered_map<base::stream_id, uint64_t> take_ingested();

 private:
  tl::expected<void, std::string> upload_object(metadata::object_kind kind,
                                                const std::vector<std::shared_ptr<entry>>& entries);
  void find_fenced(const std::vector<metadata::stream_range>& ranges);

  metadata::stream_catalog& catalog_;
  object_store& store_;
  log_cache& cache_;
  const uint32_t block_size_;
  const uint64_t stream_object_bytes_;
  std::atomic<uint64_t> uploads_{0};
  std::atomic<uint64_t> uploaded_bytes_{0};
  std::atomic<uint64_t> stream_set_objects_{0};
  std::atomic<uint64_t> stream_objects_{0};
  std::atomic<bool> measure_ingest_{false};
  base::mutex ingested_mu_;
  std::unordered_map<base::stream_id, uint64_t> ingested_ GUARDED_BY(ingested_mu_);
};

}  // namespace silt::storage
