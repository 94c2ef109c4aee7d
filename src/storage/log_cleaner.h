// Log compaction (Kafka's cleanup.policy=compact) on the objects of the streams this node owns:
// the latest record of each key survives, older ones go, tombstones go once they are
// delete.retention.ms past their first cleaning (KIP-534's delete horizon), and offsets never
// change (a cleaned stream has gaps).
//
// A pass over a stream, as Kafka's LogCleaner cleans a log:
//  1. What may be cleaned: the stream's committed ranges (in objects) up to the first range of
//     its active segment (its newest segment.bytes written within segment.ms, as retention
//     counts it) or younger than min.compaction.lag.ms (by the range's largest timestamp).
//     The log cache holds only the head, which is never cleaned.
//  2. Whether it is due: the dirty part (from where the last pass ended) is at least
//     min.cleanable.dirty.ratio of what may be cleaned, or its oldest range is older than
//     max.compaction.lag.ms.
//  3. The key map (offset_map, log.cleaner.dedupe.buffer.size): the dirty part is read, each
//     key mapped to its latest offset, until the map is full (the pass then ends where it
//     stopped; the rest is left for the next pass).
//  4. The rewrite: every range from the stream's start up to the mapped end is read, each
//     batch rebuilt with the records to keep (protocol::filter_batch): a record goes when its
//     key maps to a later offset, when it has no key, or when it is a tombstone whose batch's
//     delete horizon has passed. A batch left empty goes, unless it is the last of its
//     idempotent producer in the pass or the last of its output object (which keeps every
//     object's ranges ending where they ended). The result is written as stream objects of up
//     to max_object_bytes, each committed with catalog.replace() in place of exactly the ranges
//     it was made from, in one metadata transaction; a commit refused (the stream moved, was
//     trimmed or merged meanwhile) leaves the old objects in force and the new one to the
//     sweep.
//
// Readers are never disturbed: an object replaces others only through its commit, and the
// replaced objects are deleted after a delay (compactor::delete_unreferenced). A reader that
// reads on after a commit sees, for each key, a value no older than what it saw (a record goes
// only for a later record of its key, which stays).
//
// Paced by log.cleaner.io.max.bytes.per.second (bytes read and written), and run on threads of
// its own (log.cleaner.threads), so that uploads never wait for it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <tl/expected.hpp>

#include "base/ids.h"
#include "base/mutex.h"
#include "metadata/stream_catalog.h"
#include "storage/log_cache.h"
#include "storage/object/object_store.h"

namespace silt::storage {

struct log_cleaner_options {
  bool enabled = true;                                      // log.cleaner.enable
  uint32_t threads = 1;                                     // log.cleaner.threads
  size_t dedupe_buffer_bytes = size_t{128} << 20;           // log.cleaner.dedupe.buffer.size
  double load_factor = 0.9;                                 // log.cleaner.io.buffer.load.factor
  double io_max_bytes_per_second = 1.7976931348623157e308;  // log.cleaner.io.max.bytes.per.second
  std::chrono::milliseconds backoff{15000};                 // log.cleaner.backoff.ms
  uint32_t block_size = 1u << 20;
  uint64_t max_object_bytes = uint64_t{64} << 20;  // of a cleaned object
  // The active segment's bounds by default (stream_store_options::segment_ms).
  int64_t segment_ms = 604800000;
  int64_t segment_bytes = 1073741824;
  base::node_id node{-1};
};

// A compacted stream's settings (the topic's), as stream_store::set_compaction() sets them.
struct compaction_settings {
  bool compact = false;
  int64_t delete_retention_ms = 86400000;
  int64_t min_compaction_lag_ms = 0;
  int64_t max_compaction_lag_ms = INT64_MAX;
  double min_cleanable_dirty_ratio = 0.5;
};

struct log_cleaner_stats {
  uint64_t passes = 0;         // streams cleaned
  uint64_t bytes_read = 0;     // of objects, map building and rewrite
  uint64_t bytes_written = 0;  // of cleaned objects
  uint64_t records_removed = 0;
  uint64_t failures = 0;
};

class log_cleaner {
 public:
  log_cleaner(const log_cleaner_options& options, metadata::stream_catalog& catalog,
              object_store& store, log_cache& cache);
  ~log_cleaner();
  log_cleaner(const log_cleaner&) = delete;
  log_cleaner& operator=(const log_cleaner&) = delete;

  // Starts the cleaner threads (none when disabled).
  void start();
  void stop();

  // The stream's settings; a stream with compact=false is left alone.
  void set(base::stream_id stream_id, const compaction_settings& settings);
  void forget(base::stream_id stream_id);

  // Cleans every stream of this node that is due (all of them with force: whatever the dirty
  // ratio). On the calling thread; tests and the cleaner threads.
  tl::expected<void, std::string> clean_once(bool force = false);
  // One stream: true when it was cleaned.
  tl::expected<bool, std::string> clean(base::stream_id stream_id, bool force = false);

  [[nodiscard]] log_cleaner_stats stats() const;

 private:
  void loop();
  void pace(uint64_t bytes);
  // Whether stop() was called: a pass in progress ends at its next range (nothing of it
  // committed since its last object stays in force; the rest is the sweep's).
  bool stopping();

  const log_cleaner_options options_;
  metadata::stream_catalog& catalog_;
  object_store& store_;
  log_cache& cache_;

  struct tracked {
    compaction_settings settings;
    base::offset cleaned_end{};       // where the last pass's key map ended: the dirty part starts
    int64_t horizon_due = INT64_MAX;  // the earliest delete horizon of a tombstone kept
    bool busy = false;                // being cleaned
  };

  base::mutex mu_;
  std::map<base::stream_id, tracked> streams_ GUARDED_BY(mu_);  // the compacted ones
  bool stopping_ GUARDED_BY(mu_) = false;
  std::condition_variable wake_;
  std::vector<std::thread> threads_;

  base::mutex pace_mu_;
  std::chrono::steady_clock::time_point pace_start_ GUARDED_BY(pace_mu_);
  double paced_bytes_ GUARDED_BY(pace_mu_) = 0;

  std::atomic<uint64_t> passes_{0};
  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<uint64_t> bytes_written_{0};
  std::atomic<uint64_t> records_removed_{0};
  std::atomic<uint64_t> failures_{0};
};

}  // namespace silt::storage
