// The stream store: Silt's storage engine. A stream is a partition's log: append-only record
// batches at dense, increasing offsets.
//
// Data flow: append() assigns offsets, keeps the batches in the log cache and writes them to
// the WAL; the callback runs once they are durable, and from then on readers see them. The
// upload task gathers durable data of many streams into one stream-set object (a stream with
// enough data gets a stream object of its own), puts it in the object store, commits its
// ranges to the catalog, and only then trims the WAL and lets the cache evict that data.
// Reads below the log cache find objects through the catalog and fetch only the blocks they
// need through the block cache, reading ahead on sequential catch-up. Compaction merges
// stream-set objects into per-stream stream objects; retention drops whole ranges by time
// and size. A sweep deletes objects under objects/ that the catalog does not know and whose id
// was allocated at least a grace period ago: leftovers of uploads whose PUT reply was lost,
// whose commit failed, or that a crash cut short between PUT and commit. Layout of objects:
// docs/formats/object.md; of the WAL: docs/formats/wal.md.
//
// Parts, each with one owner of its state:
//  - log_cache.h: every stream's in-memory state (offsets, owner and epoch, recent batches)
//    and the queues of data waiting for upload and for eviction. A mutex per stream.
//  - uploader.h: WAL data to objects, committed to the catalog, then the WAL trimmed.
//  - compactor.h: compaction, retention, deletion of unreferenced objects, the sweep.
//  - cold_reader.h: reads below the log cache, through the catalog and the block cache.
//  - this class: opens them (replaying the WAL), appends, reads, trims and runs the background
//    thread (stream_store.cc); takes streams, follows other brokers' owners, moves streams and
//    takes a dead broker's WAL over (stream_ownership.cc).
//
// Threads:
//  - append() and read() may be called from any thread. An append holds only its stream's
//    mutex while it assigns offsets and hands the batches to the WAL (which copies them
//    outside its own lock), so appends of different streams never wait on each other and
//    offsets of a stream are assigned in its WAL order. No lock is held while waiting for
//    room: append() never waits for the WAL (wal_full instead). Every stream's offsets are
//    loaded from the catalog at open. A read from the log cache does no I/O; a read below it
//    does catalog and object store I/O on the calling thread, which must be one that may
//    block.
//  - trim(), take(), epochs() and the producer-state calls do a catalog call on the calling
//    thread.
//  - The WAL's threads run durability callbacks (marks entries durable and queues them
//    for upload, then calls the caller's callback).
//  - One background thread runs upload, compaction, retention, deletions and the sweep in
//    turn (run_*_once() run them directly, for tests); task_mu_ lets one run at a time, so
//    the sweep never sees an upload between its PUT and its commit. Compaction, deletions
//    and the sweep concern every broker's objects: in a cluster only one broker runs them
//    (set_maintains_objects()); uploads and retention concern the streams this one owns.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <tl/expected.hpp>

#include "base/ids.h"
#include "base/log.h"
#include "base/mutex.h"
#include "metadata/stream_catalog.h"
#include "storage/cold_reader.h"
#include "storage/compactor.h"
#include "storage/log_cache.h"
#include "storage/log_cleaner.h"
#include "storage/object/object_store.h"
#include "storage/stream_types.h"
#include "storage/uploader.h"
#include "storage/wal/object_wal.h"
#include "storage/wal/wal.h"

namespace silt::storage {

struct stream_store_options {
  wal::wal_options wal;
  // Set: the WAL is in the object store given to open() (its `store` is set there), and
  // `wal` is not used.
  std::optional<wal::object_wal_options> object_wal;
  // The metadata store holding the stream catalog: `metadata` if set, else the database at
  // `metadata_uri` (sql::open_database(): a URI, or a bare SQLite path).
  std::shared_ptr<metadata::sql::database> metadata;
  std::string metadata_uri = ":memory:";
  size_t log_cache_bytes = size_t{512} << 20;
  size_t block_cache_bytes = size_t{256} << 20;
  uint32_t object_block_size = 1u << 20;
  // Upload when this much durable data waits, or every upload_interval.
  uint64_t upload_threshold_bytes = uint64_t{64} << 20;
  std::chrono::milliseconds upload_interval{1000};
  // A stream with at least this much data in an upload gets a stream object of its own.
  uint64_t stream_object_bytes = uint64_t{16} << 20;
  std::chrono::milliseconds compaction_interval{60000};
  // Stream-set objects up to this size are merged by compaction.
  uint64_t compaction_max_object_bytes = uint64_t{64} << 20;
  // Compacted-away objects are deleted this long after they stop being referenced, so that
  // reads that looked them up just before still find them.
  std::chrono::milliseconds delete_delay{30000};
  std::chrono::milliseconds retention_interval{300000};
  // How often the sweep looks for objects that were written but never committed, and how
  // long after its id was allocated such an object is deleted.
  std::chrono::milliseconds sweep_interval{600000};
  std::chrono::milliseconds sweep_grace{3600000};
  int64_t retention_ms = -1;     // default per stream; -1: keep forever
  int64_t retention_bytes = -1;  // default per stream; -1: no size limit
  // The active segment's bounds by default (Kafka's segment.ms and segment.bytes): time
  // retention never removes a stream's newest segment_bytes written within segment_ms, whatever
  // their timestamps, as Kafka never deletes the segment it appends to for its age.
  int64_t segment_ms = 604800000;
  int64_t segment_bytes = 1073741824;
  // Blocks of a cold-reading stream read ahead of it, and the threads that read them (see
  // cold_reader.h; 0 of either: no read-ahead).
  uint32_t read_ahead_blocks = 4;
  uint32_t read_ahead_threads = 4;
  // Log compaction of the streams set_compaction() marks (log_cleaner.h); its threads run only
  // with `background`. block_size, max_object_bytes, segment bounds and node are taken from
  // the options above.
  log_cleaner_options cleaner;
  bool background = true;    // run the background thread (tests drive run_*_once() instead)
  base::node_id node_id{1};  // the owner take() names
};

struct stream_store_stats {
  uint64_t uploads = 0;
  uint64_t uploaded_bytes = 0;
  uint64_t stream_set_objects = 0;
  uint64_t stream_objects = 0;
  uint64_t compactions = 0;
  uint64_t deleted_objects = 0;
  uint64_t swept_objects = 0;  // never committed, deleted by the sweep
  uint64_t cold_reads = 0;
  uint64_t object_gets = 0;  // ranged reads of objects, read-ahead included
  uint64_t read_ahead_gets = 0;
  uint64_t read_ahead_waits = 0;  // reads that waited for a block being read ahead
  size_t log_cache_bytes = 0;
  uint64_t not_uploaded_bytes = 0;          // durable in the WAL, not yet in an object
  std::chrono::milliseconds upload_lag{0};  // how long the oldest of those has waited
  uint64_t block_cache_hits = 0;
  uint64_t block_cache_misses = 0;
  uint64_t log_cache_hits = 0;    // reads the log cache answered
  uint64_t log_cache_misses = 0;  // reads below it (object reads)
};

class stream_store {
 public:
  using append_callback = std::function<void(tl::expected<base::offset, stream_error>)>;

  // Opens the catalog and the WAL, replays the WAL's durable records above what the catalog
  // already holds into the log cache, and starts the background thread. `store` must outlive
  // the stream store.
  [[nodiscard]] static tl::expected<std::unique_ptr<stream_store>, std::string> open(
      const stream_store_options& options, object_store& store);
  ~stream_store();
  stream_store(const stream_store&) = delete;
  stream_store& operator=(const stream_store&) = delete;

  // Appends whole record batches (Kafka v2) to a stream: rewrites their base offsets to the
  // stream's next offsets and calls `done` with the first offset once they are durable.
  void append(base::stream_id stream_id, std::vector<uint8_t> batches, const append_callback& done);
  // The same without a copy: `batches` lie inside memory `owner` keeps alive (a request
  // frame); they are modified in place and kept in the log cache until uploaded. Returns the
  // first offset assigned, or an error (and then `done` is not called, and nothing of the
  // append is left). Never waits for the WAL: wal_full when it has no room now. If the
  // WAL write fails later, `done` gets wal_failed and the append leaves no trace: its offsets
  // are given to the next append (every append after it in the WAL fails too).
  [[nodiscard]] tl::expected<base::offset, stream_error> append(base::stream_id stream_id,
                                                                std::shared_ptr<const void> owner,
                                                                std::span<uint8_t> batches,
                                                                append_callback done);
  // Called (on the WAL's thread; keep it short) when an append refused with wal_full or
  // wal_failed may succeed now. Set before appends start.
  void set_room_listener(std::function<void()> listener);
  // Whether this store's background thread compacts objects, deletes those no longer
  // referenced and sweeps those never committed (true until set otherwise). In a cluster one
  // broker does, the controller: every broker doing so would do the work several times over,
  // and all but one commit of each compaction would be refused.
  void set_maintains_objects(bool on) { maintains_objects_.store(on, std::memory_order_relaxed); }

  // Reads batches from `offset` (the batch holding it first), up to about max_bytes but at
  // least one batch when there is one. Empty at the end of the stream.
  [[nodiscard]] tl::expected<read_result, stream_error> read(base::stream_id stream_id,
                                                             base::offset offset, size_t max_bytes);
  // read() when it needs no I/O (the offset is in the log cache, at the end or out of range);
  // std::nullopt when it would read the catalog or the object store. For threads that must not
  // block on I/O: they hand the read to one that may.
  [[nodiscard]] std::optional<tl::expected<read_result, stream_error>> read_cached(
      base::stream_id stream_id, base::offset offset, size_t max_bytes);

  [[nodiscard]] stream_offsets offsets(base::stream_id stream_id);
  // A read of a stream another node owns (a read replica, KIP-392): what its committed objects
  // hold from `offset` on, and where the catalog says the stream starts and where its
  // committed data ends now. `data` is empty when `offset` is outside [start, committed end)
  // or max_bytes is 0.
  // Catalog and object store I/O on the calling thread, which must be one that may block.
  struct committed_read {
    base::offset start_offset{};
    base::offset committed_end{};
    read_result data;
  };
  [[nodiscard]] tl::expected<committed_read, stream_error> read_committed(base::stream_id stream_id,
                                                                          base::offset offset,
                                                                          size_t max_bytes);
  // Moves a stream's start offset forward (DeleteRecords); whole objects are freed later.
  [[nodiscard]] tl::expected<void, stream_error> trim(base::stream_id stream_id,
                                                      base::offset offset);
  // Forgets streams whose topic was deleted: their state and cached batches leave memory (what
  // waits for upload is never uploaded), and appends and reads of them are refused. No I/O.
  void forget(const std::vector<base::stream_id>& stream_ids);
  // forget(), and the streams leave the catalog too: their rows, epochs, producer state and
  // ranges; objects left with no ranges are deleted later. A catalog transaction on the calling
  // thread.
  [[nodiscard]] tl::expected<void, stream_error> drop(
      const std::vector<base::stream_id>& stream_ids);
  // How many streams the store holds in memory.
  [[nodiscard]] size_t stream_count() { return cache_.stream_count(); }
  // Takes streams for this node (options.node_id) at their next epoch, each beginning at the
  // stream's current end. A catalog transaction on the calling thread; appends go on.
  [[nodiscard]] tl::expected<void, stream_error> take(
      const std::vector<base::stream_id>& stream_ids);
  // Streams of topics another broker created: reads their state from the catalog and serves
  // none of them unless this node owns it. Returns those without a catalog row yet (their
  // creator has not taken them): fenced, with no owner, until learned again.
  [[nodiscard]] tl::expected<std::vector<base::stream_id>, stream_error> learn(
      const std::vector<base::stream_id>& stream_ids);
  // Follows the catalog's ownership changes since the last call (one query while nothing
  // changed): streams another node took are fenced here; streams another node handed to this
  // one are served from their committed end (adopted: returned, so that state kept elsewhere of
  // them, such as producer state, is read again); targets are noted for moves(). Catalog I/O.
  // `everything`: every stream's state is read, not only the changes (after a lapse of this
  // broker's lease, when its view may be stale). `before_serving` gets the streams about to be
  // adopted while they still refuse appends, so that state kept elsewhere of them (producer
  // state) is dropped before the first append.
  using stream_list_callback = std::function<void(const std::vector<base::stream_id>&)>;
  [[nodiscard]] tl::expected<std::vector<base::stream_id>, stream_error> refresh_owners(
      bool everything = false, const stream_list_callback& before_serving = {});
  // What this node is to do about targets, as of the last refresh_owners(): streams it owns
  // whose target is another node (release: prepare_release() then handover()), and streams no
  // node owns whose target is this node (take()).
  struct move {
    base::stream_id stream_id{};
    base::node_id target{-1};
  };
  [[nodiscard]] std::vector<move> moves();
  // Sets streams' targets in the catalog (an admin's reassignment; -1 cancels one). Catalog
  // I/O on the calling thread.
  [[nodiscard]] tl::expected<void, stream_error> assign(
      const std::vector<metadata::stream_target>& targets);
  // Every target set, as of the last refresh_owners(): stream, owner and target.
  [[nodiscard]] std::vector<std::pair<base::stream_id, metadata::stream_state>> targets();
  // The first half of handing streams to other nodes: stops appends to them (NOT_LEADER answers
  // meanwhile), waits up to `timeout` for their writes in flight, uploads what they have in the
  // WAL and commits it. Returns the streams ready for handover(); the others are served again.
  [[nodiscard]] tl::expected<std::vector<base::stream_id>, stream_error> prepare_release(
      const std::vector<base::stream_id>& stream_ids, std::chrono::milliseconds timeout);
  // The second half: gives a prepared stream to `to` at its next epoch (catalog). On failure
  // the stream is served here again, unless another node took it meanwhile.
  [[nodiscard]] tl::expected<void, stream_error> handover(base::stream_id stream_id,
                                                          base::node_id to);
  // Failover: takes over the WALs of dead brokers (`from`: node id and WAL location each, their
  // takeovers held by this node in the broker registry). Takes every stream they owned, and
  // those taken from them before by a holder that did not finish (stream_catalog::take_over()),
  // appends what their WALs hold of those streams beyond the committed ends to this store's
  // WAL at the same offsets, waits up to `timeout` for that to be durable, and ends the
  // takeovers (finish_take_over()). Until then the streams refuse appends (moving) and serve
  // what is committed. Catalog and file I/O on the calling thread. Returns the streams taken,
  // served from now on; on failure they stay refused until a later call succeeds.
  // `location`: the WAL's path, or object_wal_location_prefix and its prefix in the object
  // store (wal.type=object), as the broker registers it.
  struct dead_wal {
    base::node_id node{-1};
    std::string location;
  };
  static constexpr std::string_view object_wal_location_prefix = "object:";
  [[nodiscard]] tl::expected<std::vector<base::stream_id>, std::string> take_over(
      const std::vector<dead_wal>& from, std::chrono::milliseconds timeout,
      const stream_list_callback& before_serving = {});
  // A stream's epochs and the offsets they began at (catalog I/O on the calling thread).
  [[nodiscard]] tl::expected<std::vector<metadata::epoch_start>, stream_error> epochs(
      base::stream_id stream_id);
  // A stream's producer state, stored in the catalog and fenced with the stream's epoch
  // (catalog I/O on the calling thread). Empty data erases it.
  [[nodiscard]] tl::expected<std::vector<uint8_t>, stream_error> producer_state(
      base::stream_id stream_id);
  [[nodiscard]] tl::expected<void, stream_error> put_producer_state(
      base::stream_id stream_id, const std::vector<uint8_t>& data);
  // Per-stream retention, overriding the defaults (-1: unlimited).
  void set_retention(base::stream_id stream_id, int64_t retention_ms, int64_t retention_bytes);
  // The bounds of a stream's active segment (-2: the store's default): see
  // stream_store_options::segment_ms.
  void set_active_segment(base::stream_id stream_id, int64_t segment_ms, int64_t segment_bytes);

  // A stream's log compaction (its topic's cleanup.policy and compaction settings).
  void set_compaction(base::stream_id stream_id, const compaction_settings& settings) {
    cleaner_.set(stream_id, settings);
  }
  // One pass of the log cleaner over this node's compacted streams (force: whatever their dirty
  // ratio), on the calling thread (tests).
  [[nodiscard]] tl::expected<void, std::string> run_cleaner_once(bool force = false) {
    return cleaner_.clean_once(force);
  }
  [[nodiscard]] log_cleaner_stats cleaner_stats() const { return cleaner_.stats(); }

  // One round of each background task.
  [[nodiscard]] tl::expected<void, std::string> run_upload_once();
  [[nodiscard]] tl::expected<void, std::string> run_compaction_once();
  // Waits up to 10 s until no cold read-ahead is queued or running (tests); false if one
  // still is.
  [[nodiscard]] bool wait_read_ahead_idle() {
    return cold_.wait_read_ahead_idle(std::chrono::seconds(10));
  }
  [[nodiscard]] tl::expected<void, std::string> run_retention_once();
  [[nodiscard]] tl::expected<void, std::string> run_deletions_once();
  // Deletes the objects under objects/ that the catalog does not know and whose id was
  // allocated at least sweep_grace before (as far as earlier sweeps saw); keys of any other
  // form, and ids the catalog has not handed out, are left alone.
  [[nodiscard]] tl::expected<void, std::string> run_sweep_once();

  [[nodiscard]] stream_store_stats stats();
  // Bytes uploaded per stream since the last call: each stream's ingest (placement by load).
  [[nodiscard]] std::unordered_map<base::stream_id, uint64_t> take_ingested() {
    return uploader_.take_ingested();
  }
  [[nodiscard]] wal::wal_position wal_trim_point() const { return wal_->trim_point(); }
  [[nodiscard]] wal::wal_stats wal_stats() const { return wal_->stats(); }
  // The WAL's write buffers that stayed unused since the previous call go back (see
  // wal::release_idle_buffers()); returns the bytes freed.
  size_t release_idle_buffers() { return wal_->release_idle_buffers(); }

  // Stops the background thread and closes the WAL (pending appends complete first).
  void close();

 private:
  stream_store(const stream_store_options& options, object_store& store,
               std::unique_ptr<metadata::stream_catalog> catalog);
  // append(); `recovery`: an append of take_over(), which a recovering stream takes.
  [[nodiscard]] tl::expected<base::offset, stream_error> append_impl(
      base::stream_id stream_id, std::shared_ptr<const void> owner, std::span<uint8_t> batches,
      append_callback done, bool recovery);
  void on_durable(const std::shared_ptr<entry>& e,
                  tl::expected<wal::wal_position, wal::wal_error> r, const append_callback& done);
  // The stream error for a catalog failure; a fenced stream is marked so.
  stream_error catalog_failure(metadata::catalog_error e, base::stream_id stream_id);
  void background_loop();

  const stream_store_options options_;
  object_store& objects_;  // the object store (and with wal.type=object, the WAL's)
  std::unique_ptr<metadata::stream_catalog> catalog_;
  std::unique_ptr<wal::wal> wal_;
  log_cache cache_;
  cold_reader cold_;
  uploader uploader_;
  compactor compactor_;
  log_cleaner cleaner_;
  // Ownership: take() and refresh_owners() one at a time, so that a refresh never mistakes
  // this node's own take for a handover.
  base::mutex owners_mu_;
  int64_t owners_seen_ GUARDED_BY(owners_mu_) = -1;  // the version refresh_owners() last read
  base::mutex targets_mu_;
  std::map<base::stream_id, metadata::stream_state> targets_ GUARDED_BY(targets_mu_);

  base::mutex bg_mu_;
  base::log_limiter task_failures_{std::chrono::seconds(10)};  // background failures logged
  std::condition_variable upload_wanted_;
  bool stopping_ GUARDED_BY(bg_mu_) = false;

  base::mutex room_mu_;
  std::function<void()> room_listener_ GUARDED_BY(room_mu_);

  base::mutex task_mu_;  // one object task at a time (background thread or run_*_once())
  std::atomic<bool> maintains_objects_{true};
  std::thread background_;
};

}  // namespace silt::storage
