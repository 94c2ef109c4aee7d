// The group store: consumer groups' committed offsets and the group state that must survive a
// restart (static members, KIP-848 assignment epochs), kept by coordinator shard.
//
// A group belongs to one coordinator shard (coordinator::shard_of(group id)); a shard is owned
// by one node at an epoch, like a stream. take() gives shards to a node at their next epoch;
// every write names the shard and the epoch its writer holds it at and is refused (`fenced`) in
// the same transaction when the shard has moved on, so that a broker that lost a shard can no
// longer change its groups.
//
// Stored through sql::database (SQLite by default, PostgreSQL for a cluster). Every call blocks
// on the database: run it on the blocking pool or a background thread, never on a network
// thread. Thread-safe: every call takes the store's mutex (one connection).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "base/ids.h"
#include "base/mutex.h"
#include "metadata/sql.h"

namespace silt::metadata {

enum class group_store_error : uint8_t {
  fenced,  // the writer's owner or epoch of a shard is no longer the shard's
  lapsed,  // the writing broker's lease has lapsed (broker_registry.h): nothing was written
  io,      // the database failed (logged)
};

// Where a committed offset belongs.
struct offset_key {
  std::string group;
  std::string topic;
  int32_t partition = 0;
  friend auto operator<=>(const offset_key&, const offset_key&) = default;
};

// One committed offset, as OffsetCommit stores it and OffsetFetch returns it.
struct committed_offset {
  offset_key key;
  int64_t offset = 0;
  int32_t leader_epoch = -1;  // -1: the client gave none
  std::string metadata;       // the client's metadata string, kept as given
  int64_t commit_ms = 0;      // when it was committed (broker clock)
  int64_t expire_ms = -1;     // OffsetCommit v1's explicit expiry, -1 for none
};

// The durable state of one group other than offsets, opaque to the store (the coordinator
// encodes it).
struct group_record {
  std::string group;
  std::vector<uint8_t> data;
};

// The changes of one shard in one write: applied together or not at all. Deletions are
// applied before insertions (a group deleted and created again keeps its new rows); of two
// entries with one key, the last counts. Rows are found by key: the groups of a write must
// be of its shard.
struct shard_write {
  int32_t shard = 0;
  base::leader_epoch epoch{};               // the epoch the writer holds the shard at
  std::vector<committed_offset> offsets;    // inserted or replaced
  std::vector<offset_key> deleted_offsets;  // removed (absent ones are ignored)
  std::vector<group_record> groups;         // inserted or replaced
  std::vector<std::string> deleted_groups;  // the group row and all its offsets removed
};

// A coordinator shard as stored: who holds it at which epoch, and where the controller places
// it (cluster/controller.h). A shard never taken nor placed has no row.
struct shard_state {
  int32_t shard = 0;
  base::node_id owner{-1};
  base::leader_epoch epoch{};
  base::node_id target{-1};  // -1: not placed
  bool operator==(const shard_state&) const = default;
};

// Where the controller places a shard.
struct shard_target {
  int32_t shard = 0;
  base::node_id target{-1};
  bool operator==(const shard_target&) const = default;
};

class group_store {
 public:
  // Opens the store in `db` (its tables are created by sql::open_database's migrations).
  [[nodiscard]] static tl::expected<std::unique_ptr<group_store>, std::string> open(
      std::shared_ptr<sql::database> db, base::node_id node);
  ~group_store();
  group_store(const group_store&) = delete;
  group_store& operator=(const group_store&) = delete;

  // Gives each shard to this store's node at its next epoch (0 for a shard never taken). One
  // transaction; returns the new epochs in the order of `shards`.
  [[nodiscard]] tl::expected<std::vector<base::leader_epoch>, group_store_error> take(
      std::span<const int32_t> shards);

  // Every shard taken or placed, by shard.
  [[nodiscard]] tl::expected<std::vector<shard_state>, group_store_error> shard_states();
  // Whether any group has state or committed offsets here, in any shard (Kafka's
  // __consumer_offsets exists from then on, for every broker).
  [[nodiscard]] tl::expected<bool, group_store_error> in_use();

  // The controller's: sets the targets of shards, in one transaction and only while `controller`
  // holds the controller lease at `controller_epoch` (fenced otherwise). A shard's owner and
  // epoch do not change: its target takes it.
  [[nodiscard]] tl::expected<void, group_store_error> place(std::span<const shard_target> targets,
                                                            base::node_id controller,
                                                            int64_t controller_epoch);

  // Everything stored for the groups of `shards` (each row keeps the shard it was written
  // under): offsets and group records.
  struct loaded {
    std::vector<committed_offset> offsets;
    std::vector<group_record> groups;
  };
  [[nodiscard]] tl::expected<loaded, group_store_error> load(std::span<const int32_t> shards);

  // Applies the writes of several shards in one transaction. A shard whose epoch is stale
  // (or owned by another node) has none of its changes applied and is named in the result;
  // the others are applied. io: nothing is applied. Writes are applied in the order given;
  // several may name one shard (to keep the order of changes that one write would reorder).
  [[nodiscard]] tl::expected<std::vector<int32_t>, group_store_error> apply(
      std::span<const shard_write> writes);

  // Removes the offsets of a deleted topic from every group (not fenced: a topic deletion
  // comes from the topic registry, which every node obeys).
  [[nodiscard]] tl::expected<void, group_store_error> forget_topic(const std::string& topic);

 private:
  group_store(std::shared_ptr<sql::database> db, std::unique_ptr<sql::connection> c,
              base::node_id node)
      : db_(std::move(db)), c_(std::move(c)), node_(node) {}

  mutable base::mutex mu_;
  std::shared_ptr<sql::database> db_;
  std::unique_ptr<sql::connection> c_ GUARDED_BY(mu_);
  const base::node_id node_;
};

}  // namespace silt::metadata
