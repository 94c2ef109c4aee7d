// A read-only view of Kafka's internal topic __consumer_offsets, generated from the group
// store: per coordinator shard held here (= partition of the topic), an in-memory log of the
// records Kafka's group coordinator would have written (offsets_records.h), for Fetch and
// ListOffsets of the topic (handlers/offsets_topic.h). docs/architecture.md ("The offsets
// topic") states what a reader gets.
//
// Lifecycle of a shard's log: load() when the coordinator takes the shard, at its new epoch:
// the log starts at offset epoch << 40 with a snapshot of the shard's state (a GroupMetadata
// or ConsumerGroupMetadata record per group, an OffsetCommit record per committed offset);
// apply() then appends the records of every write to the shard that became durable (commits,
// group changes, deletions as tombstones), in the order the store applied them; drop() when
// the shard leaves. Offsets increase for as long as the shard is held, and a later epoch's log
// starts above every offset of an earlier one.
//
// Memory: like Kafka's compacted topic, the log keeps the latest record of each key and every
// record of its tail (the last `tail_records`); older superseded records and tombstones are
// removed once the log holds more than twice its live keys plus the tail, leaving gaps in the
// offsets as a compacted log does.
//
// Thread-safe: every call takes the log's mutex (appends come from the offset writer's thread
// and the coordinator, reads from network threads); none does I/O.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "base/ids.h"
#include "base/mutex.h"
#include "coordinator/offsets_records.h"
#include "metadata/group_store.h"

namespace silt::coordinator {

class offsets_log {
 public:
  // For `shards` coordinator shards; `tail_records` records of each log's tail are never
  // compacted away.
  explicit offsets_log(int32_t shards, size_t tail_records = 4096);

  // The first offset of a shard's log taken at `epoch`.
  [[nodiscard]] static int64_t base_offset(base::leader_epoch epoch) {
    return static_cast<int64_t>(std::max(epoch.value(), 0)) << 40;
  }

  // Starts the log of `shard` over at `epoch`, its first records describing `state`, stamped
  // `now` (offsets with their commit time).
  void load(int32_t shard, base::leader_epoch epoch, const metadata::group_store::loaded& state,
            int64_t now);
  // Forgets the log of `shard` (no longer held here).
  void drop(int32_t shard);
  // Appends the records of `w`, which the store has applied, when the log of its shard is at
  // its epoch (a write of an epoch no longer held here is not this log's).
  void apply(const metadata::shard_write& w, int64_t now);
  // Appends tombstones for the offsets of a deleted topic, in every shard's log.
  void forget_topic(std::string_view topic, int64_t now);

  struct bounds {
    int64_t start = 0;  // the log start offset
    int64_t end = 0;    // the high watermark: the next offset
  };
  // The bounds of a shard's log; none when it is not held here.
  [[nodiscard]] std::optional<bounds> offsets(int32_t shard) const;

  enum class read_error : uint8_t { not_held, out_of_range };
  struct read_result {
    bounds at;
    // One record batch holding the records from the offset read on, at most `max_bytes` of
    // record data but at least one record; null when there is nothing to read.
    std::shared_ptr<const std::vector<uint8_t>> batch;
  };
  // The records of `shard` from offset `from` (start <= from <= end) on.
  [[nodiscard]] tl::expected<read_result, read_error> read(int32_t shard, int64_t from,
                                                           size_t max_bytes) const;

  struct found {
    int64_t offset = -1;  // -1: none
    int64_t timestamp = -1;
  };
  // The first record with a timestamp at or after `timestamp`, or (timestamp -3) the first
  // record with the largest timestamp; none when the shard is not held here.
  [[nodiscard]] std::optional<found> offset_for_time(int32_t shard, int64_t timestamp) const;

 private:
  struct entry {
    int64_t offset = 0;
    int64_t timestamp = 0;
    std::vector<uint8_t> key;
    std::optional<std::vector<uint8_t>> value;  // none: a tombstone
  };
  // What a group has live in the log, to delete it all when the group goes.
  struct group_keys {
    std::set<std::pair<std::string, int32_t>> offsets;
    std::optional<offsets_record_type> metadata;
  };
  struct shard_log {
    base::leader_epoch epoch{};
    int64_t start = 0;
    int64_t next = 0;
    std::deque<entry> entries;                              // by offset
    std::map<std::vector<uint8_t>, int64_t> latest;         // key -> offset of its last record
    std::map<std::string, group_keys, std::less<>> groups;  // live keys by group
  };

  void append(shard_log& s, int64_t timestamp, std::vector<uint8_t> key,
              std::optional<std::vector<uint8_t>> value) REQUIRES(mu_);
  void put_offset(shard_log& s, const metadata::committed_offset& o) REQUIRES(mu_);
  void delete_offset(shard_log& s, const metadata::offset_key& k, int64_t now) REQUIRES(mu_);
  void put_group(shard_log& s, const metadata::group_record& g, int64_t now) REQUIRES(mu_);
  void delete_group(shard_log& s, const std::string& group, int64_t now) REQUIRES(mu_);
  void compact(shard_log& s) REQUIRES(mu_);

  const size_t tail_records_;
  mutable base::mutex mu_;
  std::vector<std::optional<shard_log>> shards_ GUARDED_BY(mu_);
};

}  // namespace silt::coordinator
