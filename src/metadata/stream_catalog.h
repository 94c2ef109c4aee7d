// The stream catalog: which objects hold which offsets of which stream, who owns each stream
// and at which epoch, and each stream's producer state. The metadata store's half of the
// stream store: objects become visible to readers only through a commit here.
//
// Stored through sql::database (SQLite by default, PostgreSQL for a cluster); every change
// is one transaction, durable when the call returns. Calls block on the database: run them
// on the blocking pool or a background thread, never on a network thread.
//
// Ownership: a stream is owned by one node at an epoch. take() gives it to a node with the
// next epoch. Commits, trims and producer-state writes name the owner and epoch the writer
// holds the stream at and are refused (`fenced`) in the same transaction when the stream has
// moved on, and (`lapsed`) when the owner's broker lease has lapsed. A stream never taken has
// owner -1 at epoch 0.
//
// Thread-safe: every call takes the catalog's mutex (one connection).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "base/ids.h"
#include "base/mutex.h"
#include "metadata/sql.h"

namespace silt::metadata {

enum class catalog_error : uint8_t {
  discontinuous,   // a range does not start at its stream's end offset (or does not replace
                   // exactly what it claims to)
  unknown_object,  // an object id that is not in the catalog
  fenced,          // the writer's owner or epoch of a stream is no longer the stream's
  lapsed,          // the writer's broker lease has lapsed (broker_registry.h): try again
                   // once it registered anew, if it still owns the stream then
  unavailable,     // a handover's target is not live or is stopping: it takes no streams
  io,              // the database failed (message logged)
};

[[nodiscard]] std::string_view catalog_error_name(catalog_error e);

enum class object_kind : uint8_t { stream_set = 0, stream = 1 };

// Offsets [start_offset, end_offset) of one stream, stored in one object.
struct stream_range {
  base::stream_id stream_id{};
  base::offset start_offset{};
  base::offset end_offset{};
  int64_t max_timestamp = -1;
  uint64_t size = 0;  // bytes of this range's blocks in the object
  // The owner and epoch the committing writer holds the stream at (not stored with the range).
  base::node_id owner{-1};
  base::leader_epoch epoch{};
  // When the object holding the range was written (its created_ms; filled by all_ranges()
  // only): no earlier than the range's records were appended.
  int64_t written_ms = 0;
  bool operator==(const stream_range&) const = default;
};

struct object_record {
  uint64_t object_id = 0;
  std::string key;
  uint64_t size = 0;
  object_kind kind = object_kind::stream_set;
  int64_t created_ms = 0;
};

// A range together with the object holding it, as readers look them up.
struct located_range {
  stream_range range;
  uint64_t object_id = 0;
  std::string key;
};

struct stream_state {
  base::offset start_offset{};  // retention/trim point
  base::offset end_offset{};    // end of the data committed in objects
  base::node_id owner{-1};      // -1 until taken
  base::leader_epoch epoch{};
  base::node_id target{-1};  // the owner it is to move to (controller.h); -1: none
  // A dead broker whose WAL may still hold data of the stream beyond end_offset: the owner
  // took it over (take_over()) and has not finished; -1: none.
  base::node_id taken_from{-1};
};

// The streams whose owner, epoch or target changed after a version of the ownership counter.
struct ownership_changes {
  int64_t version = 0;  // the counter as of this read
  std::vector<std::pair<base::stream_id, stream_state>> streams;
};

// A stream's target owner, as the controller or an admin request sets it.
struct stream_target {
  base::stream_id stream_id{};
  base::node_id target{-1};
  bool operator==(const stream_target&) const = default;
};

// The controller lease a placement is made under (broker_registry.h).
struct controller_lease {
  base::node_id node{-1};
  int64_t epoch = 0;
};

// What a node takes a stream at: the offset its first epoch begins at.
struct stream_take {
  base::stream_id stream_id{};
  base::offset start_offset{};
};

// One epoch of a stream and the offset it began at.
struct epoch_start {
  base::leader_epoch epoch{};
  base::offset start_offset{};
};

class stream_catalog {
 public:
  // Opens the catalog in `db` (whose schema open_database() created).
  [[nodiscard]] static tl::expected<std::unique_ptr<stream_catalog>, std::string> open(
      std::shared_ptr<sql::database> db);
  // The same on open_database(uri); a bare path or ":memory:" is an SQLite database.
  [[nodiscard]] static tl::expected<std::unique_ptr<stream_catalog>, std::string> open(
      const std::string& uri);
  ~stream_catalog();
  stream_catalog(const stream_catalog&) = delete;
  stream_catalog& operator=(const stream_catalog&) = delete;

  // A fresh object id (for naming the object before it is written).
  [[nodiscard]] tl::expected<uint64_t, catalog_error> next_object_id();

  // Commits one uploaded object with its ranges in one transaction. Every range must start
  // at its stream's current end offset (ranges of one stream in offset order); otherwise
  // nothing is committed and the result is discontinuous.
  [[nodiscard]] tl::expected<void, catalog_error> commit_object(
      const object_record& object, const std::vector<stream_range>& ranges);

  // Compaction: in one transaction, adds `object` holding `ranges` and removes the `replaced`
  // ranges (each as committed: stream, start and end offset). For each stream, `ranges` (in
  // offset order) must be exactly its replaced ranges merged where they touch, and every
  // replaced range must still exist; otherwise nothing changes (discontinuous). Objects left
  // with no ranges are marked for deletion. Refused (`lapsed`) while the lease of the
  // compacting node `writer` has lapsed.
  [[nodiscard]] tl::expected<void, catalog_error> replace(const object_record& object,
                                                          const std::vector<stream_range>& ranges,
                                                          const std::vector<stream_range>& replaced,
                                                          base::node_id writer = base::node_id(-1));

  // Ranges of `stream_id` holding offsets from `offset` on, in offset order, at most `limit`.
  [[nodiscard]] tl::expected<std::vector<located_range>, catalog_error> find(
      base::stream_id stream_id, base::offset offset, size_t limit = 16);
  // Every range of a stream, in offset order.
  [[nodiscard]] tl::expected<std::vector<located_range>, catalog_error> ranges(
      base::stream_id stream_id);
  // ranges() with each range's written_ms (log compaction reads its ages).
  [[nodiscard]] tl::expected<std::vector<located_range>, catalog_error> ranges_with_age(
      base::stream_id stream_id);
  // Every range of every stream, by stream and offset, with written_ms (retention reads them
  // in one go).
  [[nodiscard]] tl::expected<std::vector<stream_range>, catalog_error> all_ranges();
  // The ranges held by one object.
  [[nodiscard]] tl::expected<std::vector<stream_range>, catalog_error> object_ranges(
      uint64_t object_id);

  [[nodiscard]] tl::expected<std::optional<stream_state>, catalog_error> stream(
      base::stream_id stream_id);
  // Every stream with its offsets (the stream store loads them all when it opens).
  [[nodiscard]] tl::expected<std::vector<std::pair<base::stream_id, stream_state>>, catalog_error>
  stream_states();

  // Moves the start of a stream to `offset` (never backwards): ranges that end at or below it
  // are dropped, objects left with no ranges are marked for deletion. Fenced unless the
  // stream is at (owner, epoch).
  [[nodiscard]] tl::expected<void, catalog_error> trim(base::stream_id stream_id,
                                                       base::offset offset,
                                                       base::node_id owner = base::node_id(-1),
                                                       base::leader_epoch epoch = {});

  // Gives each stream to `node` at its next epoch (0 for a stream the catalog has not seen,
  // which is created empty) and records the offset the epoch begins at. One transaction;
  // returns the new epochs in the order of `streams` (a stream listed twice is taken once).
  [[nodiscard]] tl::expected<std::vector<base::leader_epoch>, catalog_error> take(
      base::node_id node, const std::vector<stream_take>& streams);
  // Moves with every take(), assign() and handover(): a node that saw it unchanged knows of no
  // new owner, epoch or target.
  [[nodiscard]] tl::expected<int64_t, catalog_error> ownership_version();
  // The streams changed after ownership version `since` (every stream for since < 0), and the
  // version they are read at.
  [[nodiscard]] tl::expected<ownership_changes, catalog_error> ownership_changes_since(
      int64_t since);
  // Sets streams' targets (-1 clears one); a stream the catalog has not seen is created empty,
  // owned by no node. Under `lease`, refused (`fenced`) with nothing changed unless that node
  // holds the controller lease at that epoch (controller_holds()).
  [[nodiscard]] tl::expected<void, catalog_error> assign(
      const std::vector<stream_target>& targets, std::optional<controller_lease> lease = {});
  // Hands a stream held by `from` at `epoch` to `to` at the next epoch, which begins at the
  // stream's committed end; that end must be `end` (the caller uploaded all it had), else
  // discontinuous. Fenced unless the stream is at (from, epoch), lapsed while from's lease has
  // lapsed, unavailable while `to` is not live or stops (broker_registry.h: takes_streams()).
  // Clears the target. Returns the new epoch.
  [[nodiscard]] tl::expected<base::leader_epoch, catalog_error> handover(base::stream_id stream_id,
                                                                         base::node_id from,
                                                                         base::leader_epoch epoch,
                                                                         base::node_id to,
                                                                         base::offset end);
  // Failover: gives every stream owned by one of `from` (dead brokers whose WALs `holder` is
  // taking over) to `holder` at its next epoch, which begins at the stream's committed end;
  // clears their targets. So are streams taken from them earlier by a holder that did not
  // finish. Each keeps, until finish_take_over(), the node it was taken from (`taken_from`).
  // Fenced, with nothing changed, unless `holder` holds the takeover of every node of `from`
  // (broker_registry.h, takeover_held()); lapsed while holder's lease has lapsed. Returns the
  // streams taken, as they are now.
  [[nodiscard]] tl::expected<std::vector<std::pair<base::stream_id, stream_state>>, catalog_error>
  take_over(base::node_id holder, const std::vector<base::node_id>& from);
  // Ends the takeovers of `from` that `holder` still holds (what their WALs held is durable in
  // the holder's): their rows go and the streams taken from them are plain streams of the
  // holder. One transaction; returns how many ended.
  [[nodiscard]] tl::expected<size_t, catalog_error> finish_take_over(
      base::node_id holder, const std::vector<base::node_id>& from);
  // A stream's epochs, oldest first.
  [[nodiscard]] tl::expected<std::vector<epoch_start>, catalog_error> epochs(
      base::stream_id stream_id);

  // Producer state of a stream (empty when none is stored). put is fenced like trim.
  [[nodiscard]] tl::expected<std::vector<uint8_t>, catalog_error> producer_state(
      base::stream_id stream_id);
  [[nodiscard]] tl::expected<void, catalog_error> put_producer_state(
      base::stream_id stream_id, base::node_id owner, base::leader_epoch epoch,
      const std::vector<uint8_t>& data);
  // Forgets streams (their topic was deleted): rows, epochs and producer state; their ranges
  // are dropped and objects left with no ranges are marked for deletion.
  [[nodiscard]] tl::expected<void, catalog_error> drop_streams(
      const std::vector<base::stream_id>& ids);

  // Live objects of a kind, oldest first.
  [[nodiscard]] tl::expected<std::vector<object_record>, catalog_error> objects(object_kind kind);
  // Objects marked for deletion at or before `before_ms`, which no range references.
  [[nodiscard]] tl::expected<std::vector<object_record>, catalog_error> deletable(
      int64_t before_ms);
  // Forgets an object after it was deleted from the store.
  [[nodiscard]] tl::expected<void, catalog_error> forget(uint64_t object_id);

  // The highest object id next_object_id() has handed out (0 before the first).
  [[nodiscard]] tl::expected<uint64_t, catalog_error> last_object_id();
  // The keys of every object the catalog knows, live or marked for deletion, in key order.
  // A key missing here was never committed, or was deleted and forgotten.
  [[nodiscard]] tl::expected<std::vector<std::string>, catalog_error> object_keys();

 private:
  stream_catalog(std::shared_ptr<sql::database> db, std::unique_ptr<sql::connection> c)
      : db_(std::move(db)), c_(std::move(c)) {}
  // Caller holds mu_ and a transaction. Fenced unless the stream is at (owner, epoch).
  tl::expected<void, catalog_error> check_owner_locked(base::stream_id stream_id,
                                                       base::node_id owner,
                                                       base::leader_epoch epoch) REQUIRES(mu_);
  tl::expected<void, catalog_error> mark_orphans_deleting_locked() REQUIRES(mu_);
  // Caller holds mu_ and a transaction. Lapsed when `owner` registered and its lease lapsed.
  tl::expected<void, catalog_error> check_lease_locked(base::node_id owner) REQUIRES(mu_);
  // Caller holds mu_ and a transaction: moves the ownership counter, returns its new value.
  tl::expected<int64_t, catalog_error> bump_ownership_locked() REQUIRES(mu_);

  base::mutex mu_;
  std::shared_ptr<sql::database> db_;
  std::unique_ptr<sql::connection> c_ GUARDED_BY(mu_);
};

}  // namespace silt::metadata
