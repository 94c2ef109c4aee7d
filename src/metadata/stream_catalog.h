// The stream catalog: which objects hold which offsets of which stream. The metadata store's
// half of the stream store: objects become visible to readers only through a commit here.
//
// Embedded default: one SQLite file (WAL journal, synchronous=FULL), so a commit is durable
// when it returns. A cluster will put the same tables in PostgreSQL behind this interface.
//
// Thread-safe: every call takes the catalog's mutex; calls are short transactions.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <tl/expected.hpp>

struct sqlite3;

namespace silt::metadata {

enum class catalog_error : uint8_t {
  discontinuous,   // a range does not start at its stream's end offset (or does not replace
                   // exactly what it claims to)
  unknown_object,  // an object id that is not in the catalog
  io,              // SQLite failed (message logged)
};

[[nodiscard]] std::string_view catalog_error_name(catalog_error e);

enum class object_kind : uint8_t { stream_set = 0, stream = 1 };

// Offsets [start_offset, end_offset) of one stream, stored in one object.
struct stream_range {
  uint64_t stream_id = 0;
  int64_t start_offset = 0;
  int64_t end_offset = 0;
  int64_t max_timestamp = -1;
  uint64_t size = 0;  // bytes of this range's blocks in the object
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
  int64_t start_offset = 0;  // retention/trim point
  int64_t end_offset = 0;    // end of the data committed in objects
};

class stream_catalog {
 public:
  // Opens (creating) the catalog at `path` (":memory:" for a private in-memory one).
  [[nodiscard]] static tl::expected<std::unique_ptr<stream_catalog>, std::string> open(
      const std::string& path);
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

  // Compaction: in one transaction, adds `object` holding `ranges` and removes the ranges of
  // `replaced` objects for the streams `ranges` name. For each such stream, `ranges` (in
  // offset order) must be exactly its replaced ranges merged where they touch. Replaced
  // objects left with no ranges are marked for deletion.
  [[nodiscard]] tl::expected<void, catalog_error> replace(const object_record& object,
                                                          const std::vector<stream_range>& ranges,
                                                          const std::vector<uint64_t>& replaced);

  // Ranges of `stream_id` holding offsets from `offset` on, in offset order, at most `limit`.
  [[nodiscard]] tl::expected<std::vector<located_range>, catalog_error> find(uint64_t stream_id,
                                                                             int64_t offset,
                                                                             size_t limit = 16);
  // Every range of a stream, in offset order.
  [[nodiscard]] tl::expected<std::vector<located_range>, catalog_error> ranges(uint64_t stream_id);
  // The ranges held by one object.
  [[nodiscard]] tl::expected<std::vector<stream_range>, catalog_error> object_ranges(
      uint64_t object_id);

  [[nodiscard]] tl::expected<std::optional<stream_state>, catalog_error> stream(uint64_t stream_id);
  [[nodiscard]] tl::expected<std::vector<uint64_t>, catalog_error> streams();
  // Every stream with its offsets (the stream store loads them all when it opens).
  [[nodiscard]] tl::expected<std::vector<std::pair<uint64_t, stream_state>>, catalog_error>
  stream_states();

  // Moves the start of a stream to `offset` (never backwards): ranges that end at or below it
  // are dropped, objects left with no ranges are marked for deletion.
  [[nodiscard]] tl::expected<void, catalog_error> trim(uint64_t stream_id, int64_t offset);

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
  explicit stream_catalog(sqlite3* db) : db_(db) {}
  tl::expected<void, catalog_error> exec(const char* sql);
  tl::expected<void, catalog_error> mark_orphans_deleting();

  std::mutex mu_;
  sqlite3* db_;  // guarded by mu_
};

}  // namespace silt::metadata
