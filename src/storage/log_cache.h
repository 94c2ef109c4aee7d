// The log cache: the stream store's in-memory state. Every stream's offsets, owner and epoch,
// and its recent record batches (appended, durable, not yet uploaded, or kept for tailing
// reads); the queue of durable data waiting for upload, in WAL order; and the queue of
// uploaded data that may be evicted, oldest first. No I/O.
//
// Locking: each stream has its own mutex (cached_stream::mu) over its fields and cache; the
// table of streams a shared mutex (a stream is held by a shared pointer, so that one dropped
// from the table, its topic deleted, stays valid for whoever still works on it); the two
// queues one mutex. No call holds two of these at once, except that callers
// of the *_locked functions hold the stream's mutex, and durable() queues an entry under its
// stream's mutex (so the queues' mutex is only ever taken inside a stream's, never around one).
// Byte counts are atomics.
//
// Costs grow with the data that moves, not with the number of streams: upload takes a prefix
// of its queue, eviction pops the front of its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include <tl/expected.hpp>

#include "base/ids.h"
#include "base/mutex.h"
#include "metadata/stream_catalog.h"
#include "storage/stream_types.h"
#include "storage/wal/wal.h"

namespace silt::storage {

// A run of batches appended together: the log cache's unit, and the WAL's record.
struct entry {
  base::stream_id stream_id{};
  base::offset base_offset{};
  base::offset end_offset{};
  int64_t max_timestamp = -1;
  std::shared_ptr<const void> owner;  // keeps `data` alive (a request frame, a WAL replay copy)
  std::span<const uint8_t> data;
  wal::wal_position wal_end = 0;  // set when durable, before the entry is queued for upload
  std::chrono::steady_clock::time_point durable_at;  // set with wal_end (upload lag)
  bool durable = false;                              // guarded by the stream's mutex
  std::atomic<bool> uploaded{false};  // in a committed object (or dropped: stream fenced)
};

struct cached_stream {
  base::mutex mu;
  base::offset start_offset{};               // guarded by mu (and the rest below)
  base::offset next_offset{};                // assigned to appends (durable or not)
  base::offset durable_end{};                // readers see offsets below this
  base::offset committed_end{};              // in objects (catalog)
  std::deque<std::shared_ptr<entry>> cache;  // offset order; everything above committed_end
  int64_t retention_ms = -2;                 // -2: the store's default
  int64_t retention_bytes = -2;
  int64_t segment_ms = -2;  // the active segment's bounds (-2: the store's default)
  int64_t segment_bytes = -2;
  // Cold read-ahead (cold_reader): where the window read ahead ends, the offset whose read
  // queues the next window, and whether one is queued or running.
  std::optional<base::offset> read_ahead_end;
  base::offset read_ahead_refill_at{};
  bool read_ahead_pending = false;
  base::node_id owner{-1};  // owner and epoch as this store holds the stream
  base::leader_epoch epoch{};
  bool fenced = false;     // a commit found a newer owner: no appends, reads or uploads here
  bool releasing = false;  // being handed to another node: no appends (reads go on)
  // Taken over from a dead broker whose WAL is still being read: no appends from clients.
  bool recovering = false;
};

using stream_ref = std::shared_ptr<cached_stream>;

class log_cache {
 public:
  explicit log_cache(size_t capacity_bytes) : capacity_(capacity_bytes) {}
  log_cache(const log_cache&) = delete;
  log_cache& operator=(const log_cache&) = delete;

  // A stream's state, created empty (at offset 0) on first use.
  [[nodiscard]] stream_ref stream(base::stream_id stream_id);
  // A stream's state if this cache has it (null otherwise); creates nothing.
  [[nodiscard]] stream_ref find(base::stream_id stream_id);
  // Forgets a stream (its topic was deleted): its cached entries are let go (never uploaded;
  // a write still in flight is dropped when it ends), appends and reads of it refused, and its
  // state leaves the table. Returns the bytes let go.
  size_t drop(base::stream_id stream_id);
  // How many streams the table holds (tests, and the memory a deleted topic leaves).
  [[nodiscard]] size_t stream_count();
  // What the catalog says of a stream owned by another node than `self` (refresh_owners()):
  // at a newer epoch than this store knows, a stream served here is fenced, and one fenced
  // already follows its owner and epoch.
  void observe_owner(base::stream_id stream_id, const metadata::stream_state& s,
                     base::node_id self);
  // Loads a stream's state from the catalog; one owned by another node is fenced here until
  // this node takes it. One of this node's taken from a dead broker (s.taken_from) recovers.
  void load(base::stream_id stream_id, const metadata::stream_state& s, bool ours);
  // A stream another node handed to this one (catalog state `s`, owned by this node at an epoch
  // newer than this store knows): whatever this store still caches of it is dropped (uploaded
  // long ago, or never committed at a stale epoch), and it is served from the catalog's end.
  // False (nothing changed) unless s.epoch is newer than the stream's epoch here.
  bool adopt(base::stream_id stream_id, const metadata::stream_state& s);
  // Whether adopt() would change the stream now.
  [[nodiscard]] bool adoptable(base::stream_id stream_id, const metadata::stream_state& s);

  // Adds an entry whose offsets the caller assigned under st.mu.
  void push_locked(cached_stream& st, std::shared_ptr<entry> e) REQUIRES(st.mu);
  // Takes back an entry that never became durable: its offsets are the stream's end again
  // (every append after a failed one fails too).
  void forget_locked(cached_stream& st, const std::shared_ptr<entry>& e) REQUIRES(st.mu);
  // Marks an entry durable at WAL position `end` and queues it for upload. Called in WAL
  // order. Returns true when an upload is due: `upload_threshold` bytes or more wait for one
  // (the condition the background thread waits for; a full cache alone is not one: the
  // cache is evicted after each upload, so it holds its capacity plus what waits).
  bool durable(const std::shared_ptr<entry>& e, wal::wal_position end, uint64_t upload_threshold);
  // A durable entry replayed from the WAL at open.
  void replayed(std::shared_ptr<entry> e);

  // The durable entries not yet uploaded, in WAL order, up to WAL position `upto`.
  [[nodiscard]] std::vector<std::shared_ptr<entry>> pending(wal::wal_position upto);
  // Entries now in committed objects (or dropped, their stream fenced): marked uploaded, the
  // streams' committed ends moved, and evictable once every entry queued before them is.
  void uploaded(const std::vector<std::shared_ptr<entry>>& entries);
  // Evicts the oldest uploaded entries until the cache fits its capacity.
  void evict();
  // Lets go of a stream's uploaded entries that end at or below `end` (the log cleaner rewrote
  // their objects: reads below `end` must come from those). Returns the bytes let go.
  size_t release_below(base::stream_id stream_id, base::offset end);

  // After a write the catalog refused as fenced: marks the stream fenced (and says so once)
  // unless this store holds it at the catalog's owner and epoch now (it took the stream itself
  // between reading its epoch for the write and the write: the write is just stale). `now`
  // is the catalog's current state of the stream; nullopt when it has no row. True when the
  // stream is fenced.
  bool fenced_by(base::stream_id stream_id, const std::optional<metadata::stream_state>& now);

  // Readers: from the cache, or nullopt when the offset is below it (needs I/O).
  [[nodiscard]] std::optional<tl::expected<read_result, stream_error>> read(
      base::stream_id stream_id, base::offset offset, size_t max_bytes);
  [[nodiscard]] stream_offsets offsets(base::stream_id stream_id);

  [[nodiscard]] wal::wal_position durable_wal_end() const {
    return durable_wal_end_.load(std::memory_order_acquire);
  }
  [[nodiscard]] uint64_t pending_bytes() const {
    return pending_bytes_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  // How long the oldest entry not yet uploaded has waited since it was durable (zero when
  // everything is uploaded): the upload lag.
  [[nodiscard]] std::chrono::steady_clock::duration upload_lag();
  // Reads from an offset the cache holds, and reads below it (which need the objects).
  [[nodiscard]] uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  [[nodiscard]] uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }

 private:
  const size_t capacity_;
  base::shared_mutex table_mu_;
  std::unordered_map<base::stream_id, stream_ref> streams_ GUARDED_BY(table_mu_);

  base::mutex queue_mu_;
  std::deque<std::shared_ptr<entry>> upload_queue_ GUARDED_BY(queue_mu_);  // durable, WAL order
  std::deque<std::shared_ptr<entry>> evict_queue_ GUARDED_BY(queue_mu_);   // uploaded, WAL order

  std::atomic<size_t> bytes_{0};
  std::atomic<uint64_t> pending_bytes_{0};
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<wal::wal_position> durable_wal_end_{0};
};

}  // namespace silt::storage
