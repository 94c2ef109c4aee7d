// The group coordinator: every consumer group whose shard this broker owns, their committed
// offsets, and the requests of Kafka's classic group protocol routed to them.
//
// Where groups live: a group belongs to shard shard_of(group id) of a fixed number of shards
// (Kafka's rule for __consumer_offsets partitions: the Java hash of the id modulo
// offsets.topic.num.partitions). Shards are owned like streams, by one node at an epoch in the
// group store. The controller places them on the live brokers (cluster/controller.h); each
// broker takes the shards placed on it (take_shards(): the next epoch, then their groups are
// loaded) and drops those placed elsewhere (drop_shards()). On a single broker it takes them
// all. A request for a group of a shard not held here is answered NOT_COORDINATOR, and
// FindCoordinator names the shard's broker as last seen (set_routes()). Offsets and group
// changes go through the offset_writer, fenced by the shard's epoch, so a coordinator that lost
// a shard can no longer write to it.
//
// Ownership: the groups and offsets in memory belong to mu_; every call takes it briefly (no
// I/O under it). Calls come from network threads; writes run on the blocking pool and their
// callbacks after them. The in-memory offsets change only after their write is durable, so a
// fetch never sees an offset a crash could lose. Lifecycle: open() (blocking: loads the
// shards), start() the deadline loop, serve, close() (answers every waiting join and sync).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <tl/expected.hpp>

#include "base/mutex.h"
#include "coordinator/classic_group.h"
#include "coordinator/consumer_group.h"
#include "coordinator/offset_writer.h"
#include "coordinator/offsets_log.h"
#include "metadata/group_store.h"

namespace silt::coordinator {

struct coordinator_options {
  group_limits limits;
  consumer_limits consumer;
  int32_t shards = 50;                                    // offsets.topic.num.partitions
  int64_t offsets_retention_ms = 7LL * 24 * 3600 * 1000;  // offsets.retention.minutes
  int64_t retention_check_interval_ms = 600000;           // offsets.retention.check.interval.ms
  int32_t max_metadata_bytes = 4096;                      // offset.metadata.max.bytes
  int32_t commit_timeout_ms = 5000;                       // offsets.commit.timeout.ms
};

// The shard of a group: Java's String.hashCode of the id (over its bytes), made non-negative
// as Kafka's Utils.abs does, modulo `shards`.
[[nodiscard]] int32_t shard_of(std::string_view group_id, int32_t shards);

struct commit_partition {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  int32_t leader_epoch = -1;
  std::string metadata;
  int64_t expire_ms = -1;
};

struct topic_partitions {
  std::string topic;
  std::vector<int32_t> partitions;
};

struct group_description {
  std::string group_id;
  group_state state = group_state::dead;
  std::string protocol_type;
  std::string protocol;  // Stable only
  std::vector<member_summary> members;
};

struct group_listing {
  std::string group_id;
  std::string protocol_type;
  std::string_view state;  // Kafka's name of the group's state
  std::string_view type;   // "classic" or "consumer"
};

// A group of the consumer protocol as ConsumerGroupDescribe shows it.
struct consumer_group_description {
  std::string group_id;
  std::string_view state;
  int32_t group_epoch = 0;
  int32_t assignment_epoch = 0;
  std::string assignor_name;
  std::vector<consumer_member_summary> members;
};

// The longest group id a group may have (bytes): its offsets are keyed by it in the metadata
// store's indexes, whose entries PostgreSQL caps at about 2.7 KB, topic name included.
inline constexpr size_t max_group_id_bytes = 2048;
// Whether a group with this id may be stored: text the store keeps as given
// (base::is_storable_text), of at most max_group_id_bytes. Others are INVALID_GROUP_ID.
[[nodiscard]] bool storable_group_id(std::string_view group_id);

class group_coordinator {
 public:
  using done_callback = std::function<void(error_code)>;

  // Opens the coordinator; an active one takes every shard for this node and loads their
  // groups (blocking: run at broker open).
  [[nodiscard]] static tl::expected<std::unique_ptr<group_coordinator>, std::string> open(
      const coordinator_options& options, metadata::group_store& store,
      boost::asio::any_io_executor blocking, bool active = true);
  // Whether this broker coordinates `group_id` now (holds its shard and is not closed).
  [[nodiscard]] bool serves(std::string_view group_id) const;
  // The shard of a group.
  [[nodiscard]] int32_t shard(std::string_view group_id) const {
    return shard_of(group_id, options_.shards);
  }
  // Takes every shard at its next epoch and loads their groups (blocking).
  [[nodiscard]] tl::expected<void, std::string> activate();
  // Takes `shards` at their next epoch (another node's writes to them are fenced from then on)
  // and loads their groups (blocking: run on a background thread).
  [[nodiscard]] tl::expected<void, std::string> take_shards(const std::vector<int32_t>& shards);
  // Stops coordinating `shards`: their waiting joins and syncs are answered NOT_COORDINATOR and
  // their groups are forgotten here (their state is in the store).
  void drop_shards(const std::vector<int32_t>& shards);
  // Drops every shard held.
  void deactivate();
  // The shards held, each with the epoch it was taken at.
  [[nodiscard]] std::vector<std::pair<int32_t, base::leader_epoch>> held() const;
  // Where each shard's groups are coordinated, as last seen (by shard; -1: nowhere known), for
  // FindCoordinator of groups not served here.
  void set_routes(std::vector<int32_t> nodes);
  // The node coordinating `group_id`: this one's `self` when it serves it, else the route last
  // set (-1: none known).
  [[nodiscard]] int32_t coordinator_of(std::string_view group_id, int32_t self) const {
    return shard_node(shard(group_id), self);
  }
  // The same for a shard (a partition of __consumer_offsets as Metadata lists it).
  [[nodiscard]] int32_t shard_node(int32_t shard, int32_t self) const;
  ~group_coordinator();
  group_coordinator(const group_coordinator&) = delete;
  group_coordinator& operator=(const group_coordinator&) = delete;

  // Runs tick() when a deadline may have passed, and the offsets' expiry, on `executor` until
  // close().
  void start(const boost::asio::any_io_executor& executor);
  // Answers every waiting join and sync with NOT_COORDINATOR and stops the deadline loop.
  void close();

  [[nodiscard]] const coordinator_options& options() const { return options_; }
  // The view of __consumer_offsets generated from the shards held here (offsets_log.h).
  [[nodiscard]] const offsets_log& offsets_topic_log() const { return log_; }

  void join(const std::string& group_id, join_request req, join_callback done);
  void sync(const std::string& group_id, const std::string& member_id,
            const std::optional<std::string>& instance_id, int32_t generation,
            const std::optional<std::string>& protocol_type,
            const std::optional<std::string>& protocol_name,
            std::map<std::string, std::vector<uint8_t>> assignments, sync_callback done);
  [[nodiscard]] error_code heartbeat(const std::string& group_id, const std::string& member_id,
                                     const std::optional<std::string>& instance_id,
                                     int32_t generation);
  [[nodiscard]] error_code leave(const std::string& group_id, const std::string& member_id,
                                 const std::optional<std::string>& instance_id);

  // The topic patterns to match before a ConsumerGroupHeartbeat of `group_id` carrying `regex`
  // when the topics are at `version` (consumer_group::regexes_to_match; none when the heartbeat
  // will be refused before it looks at patterns). The caller matches them with
  // match_topic_regexes() on regex_executor(), without the coordinator's lock, and passes the
  // matches to consumer_heartbeat().
  [[nodiscard]] std::vector<std::string> regexes_to_match(const std::string& group_id,
                                                          const std::optional<std::string>& regex,
                                                          uint64_t version) const;
  // Where topic patterns are matched: a strand of the blocking pool, so that at most one
  // matching runs at a time whatever clients send.
  [[nodiscard]] boost::asio::any_io_executor regex_executor() const { return matching_; }

  // ConsumerGroupHeartbeat (KIP-848), with what the patterns regexes_to_match() named matched.
  // A first heartbeat to an Empty classic group makes it a consumer group, keeping its offsets;
  // to a classic group with members it is refused (GROUP_ID_NOT_FOUND: not a consumer group).
  [[nodiscard]] consumer_heartbeat_result consumer_heartbeat(const std::string& group_id,
                                                             consumer_heartbeat req,
                                                             const topic_lookup& topics,
                                                             regex_match_map matched = {});
  // ConsumerGroupDescribe: GROUP_ID_NOT_FOUND for a group that is not a consumer group.
  [[nodiscard]] tl::expected<consumer_group_description, error_code> describe_consumer(
      const std::string& group_id) const;

  // OffsetCommit: checks the committer, then writes; `done` gets the error for all of them
  // (GROUP_ID_NOT_FOUND for a group that does not exist and a commit with a generation, which
  // OffsetCommit before v9 calls ILLEGAL_GENERATION).
  void commit(const std::string& group_id, const std::string& member_id,
              const std::optional<std::string>& instance_id, int32_t generation,
              std::vector<commit_partition> offsets, done_callback done);
  // OffsetFetch: the group's committed offsets of `topics` (all of them when null); partitions
  // without one are left out.
  [[nodiscard]] std::vector<metadata::committed_offset> fetch(
      const std::string& group_id, const std::vector<topic_partitions>* topics) const;
  // OffsetDelete: `done` gets the group's error and the topics refused because the group
  // subscribes to them (GROUP_SUBSCRIBED_TO_TOPIC); the others' offsets are deleted.
  void delete_offsets(const std::string& group_id, const std::vector<topic_partitions>& topics,
                      const topic_lookup& lookup,
                      std::function<void(error_code, std::set<std::string>)> done);
  // DeleteGroups of one group: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or deleted with its offsets.
  void delete_group(const std::string& group_id, done_callback done);
  // A deleted topic's offsets are forgotten by every group, in the store first unless
  // `in_store` is false (blocking: run it on the blocking pool). Every broker forgets them in
  // memory when it learns of the deletion; the one that deleted the topic, in the store too.
  void forget_topic(const std::string& topic, bool in_store = true);

  [[nodiscard]] std::optional<group_description> describe(const std::string& group_id) const;
  [[nodiscard]] std::vector<group_listing> list() const;

  // Deadlines and offset expiry at `now` (wall-clock ms); called by the loop of start().
  void tick(int64_t now);

  // Kafka's groups live in its internal topic __consumer_offsets, created on first use;
  // Metadata lists it from then on (its partitions stand for the shards), so that tools looking
  // for it find it. In use once a group coordinator was looked for, the topic was asked for by
  // name, or groups were loaded.
  void note_offsets_topic() { offsets_topic_.store(true, std::memory_order_relaxed); }
  // In a cluster: notes it once any broker has stored a group or an offset (one query while
  // not noted yet; blocking, for the thread that follows the shards).
  void note_offsets_topic_if_used();
  [[nodiscard]] bool offsets_topic_exists() const {
    return offsets_topic_.load(std::memory_order_relaxed);
  }

 private:
  struct offset_value {
    int64_t offset = 0;
    int32_t leader_epoch = -1;
    std::string metadata;
    int64_t commit_ms = 0;
    int64_t expire_ms = -1;
  };
  // An answer held back until a write ends: none when durable, else the write's error.
  using reply = std::function<void(error_code)>;
  // A group of one protocol or the other: exactly one of `group` and `consumer` is set.
  struct group_entry {
    std::unique_ptr<classic_group> group;
    std::unique_ptr<consumer_group> consumer;
    // (topic, partition) -> committed offset
    std::map<std::pair<std::string, int32_t>, offset_value> offsets;
    // Answers that show state the group keeps across restarts (a SyncGroup's assignment, a
    // static member's new id): sent once the group's record holding it is durable.
    std::vector<reply> awaiting;
    // The answers to send when the group's last queued write ends; null when none is queued.
    std::shared_ptr<std::vector<reply>> last_write;
  };

  group_coordinator(const coordinator_options& options, metadata::group_store& store,
                    boost::asio::any_io_executor blocking);
  // What was loaded for `shards`, by shard (each shard's snapshot for the offsets topic's view).
  [[nodiscard]] std::map<int32_t, metadata::group_store::loaded> split_by_shard(
      const std::vector<int32_t>& shards, const metadata::group_store::loaded& state) const;
  // Whether the shard of `group_id` is held here, and the coordinator not closed.
  [[nodiscard]] bool holds(std::string_view group_id) const REQUIRES(mu_);
  // The epoch `shard` is held at while the coordinator serves it (not closed), else none.
  [[nodiscard]] std::optional<base::leader_epoch> serving_epoch(int32_t shard) const REQUIRES(mu_);
  // Closes and forgets the groups of `shards` here, answering what waits on them with
  // NOT_COORDINATOR.
  void forget_groups_of(const std::set<int32_t>& shards, int64_t now) REQUIRES(mu_);
  // The epoch `shard` is held at, none when it is not held.
  [[nodiscard]] std::optional<base::leader_epoch> epoch_of(int32_t shard) const REQUIRES(mu_);
  void note_deadline(const group_entry& e) REQUIRES(mu_);
  // After a call that may have changed what a group keeps across restarts: queues the write of
  // its record, and sends the group's awaiting answers once it (or, when nothing changed, the
  // write already queued) is durable. Other answers (heartbeats, joins of dynamic members) do
  // not wait: a crash before the record lands costs those members a rejoin, not data.
  void persist(const std::string& group_id, group_entry& e) REQUIRES(mu_);
  // Wraps a SyncGroup or JoinGroup callback so that a successful answer waits in the group's
  // `awaiting` for persist(). The wrapped callback runs under mu_ (classic_group answers from
  // within the calls the coordinator makes with mu_ held).
  sync_callback durable(const std::string& group_id, sync_callback done);
  join_callback durable(const std::string& group_id, join_callback done);
  void await_persist(const std::string& group_id, reply r) NO_THREAD_SAFETY_ANALYSIS;
  // Whether the group has no members (and so may be deleted, converted, or lose its offsets).
  [[nodiscard]] static bool is_empty(const group_entry& e);
  // When an empty group became empty.
  [[nodiscard]] static int64_t empty_since(const group_entry& e);
  void expire_offsets(int64_t now);

  const coordinator_options options_;
  metadata::group_store& store_;
  boost::asio::strand<boost::asio::any_io_executor> matching_;
  offsets_log log_;  // before writer_, which feeds it
  offset_writer writer_;
  std::unique_ptr<boost::asio::steady_timer> timer_;
  std::atomic<bool> closed_{false};
  std::atomic<bool> offsets_topic_{false};
  int64_t next_expiry_check_ = 0;  // the loop's

  mutable base::mutex mu_;
  std::map<std::string, group_entry, std::less<>> groups_ GUARDED_BY(mu_);
  // By shard: the epoch it is held at here (none: not held), and where it is coordinated.
  std::vector<std::optional<base::leader_epoch>> held_ GUARDED_BY(mu_);
  std::vector<int32_t> routes_ GUARDED_BY(mu_);
  int64_t next_deadline_ GUARDED_BY(mu_) = INT64_MAX;
};

}  // namespace silt::coordinator
