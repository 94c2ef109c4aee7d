// What happens to objects after upload: compaction (small stream-set objects merged, big
// streams given stream objects of their own, small stream objects merged), retention (whole
// ranges dropped by time and size), deletion of objects nothing references any more (after a
// delay, so that reads that just looked them up still find them), and the sweep of objects
// that were written but never committed.
//
// Not thread-safe: the stream store runs one object task at a time, so the sweep never runs
// between an upload's PUT and its commit.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <string>

#include "metadata/stream_catalog.h"
#include "storage/cold_reader.h"
#include "storage/log_cache.h"
#include "storage/object/object_store.h"

namespace silt::storage {

struct compactor_options {
  uint32_t block_size = 1u << 20;
  uint64_t stream_object_bytes = uint64_t{16} << 20;
  uint64_t max_object_bytes = uint64_t{64} << 20;  // objects up to this size are merged
  std::chrono::milliseconds delete_delay{30000};
  std::chrono::milliseconds sweep_grace{3600000};
  int64_t retention_ms = -1;     // default per stream; -1: keep forever
  int64_t retention_bytes = -1;  // default per stream; -1: no size limit
  // The active segment's bounds, per stream by default (segment.ms, segment.bytes): time
  // retention never removes a stream's newest segment_bytes written within segment_ms.
  int64_t segment_ms = 604800000;
  int64_t segment_bytes = 1073741824;
  base::node_id node{-1};  // the compacting node (its lease is checked at each commit)
};

struct compactor_stats {
  uint64_t compactions = 0;
  uint64_t deleted_objects = 0;
  uint64_t swept_objects = 0;
};

class compactor {
 public:
  compactor(const compactor_options& options, metadata::stream_catalog& catalog,
            object_store& store, log_cache& cache, cold_reader& cold)
      : options_(options), catalog_(catalog), store_(store), cache_(cache), cold_(cold) {}

  [[nodiscard]] tl::expected<void, std::string> compact();
  [[nodiscard]] tl::expected<void, std::string> apply_retention();
  [[nodiscard]] tl::expected<void, std::string> delete_unreferenced();
  // Deletes the objects under objects/ that the catalog does not know and whose id was
  // allocated at least sweep_grace before (as far as earlier sweeps saw); keys of any other
  // form, and ids the catalog has not handed out, are left alone.
  [[nodiscard]] tl::expected<void, std::string> sweep();
  [[nodiscard]] compactor_stats stats() const;

 private:
  tl::expected<void, std::string> compact_stream_sets();
  tl::expected<void, std::string> compact_stream_objects();

  const compactor_options options_;
  metadata::stream_catalog& catalog_;
  object_store& store_;
  log_cache& cache_;
  cold_reader& cold_;
  std::atomic<uint64_t> compactions_{0};
  std::atomic<uint64_t> deleted_objects_{0};
  std::atomic<uint64_t> swept_objects_{0};
  // The sweep's record of the catalog's object id counter: by `at`, every id up to `last_id`
  // had been allocated. Oldest first.
  struct sweep_mark {
    std::chrono::steady_clock::time_point at;
    uint64_t last_id = 0;
  };
  std::deque<sweep_mark> sweep_marks_;
};

}  // namespace silt::storage
