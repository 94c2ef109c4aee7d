// The groups' internal topic __consumer_offsets as Metadata and DescribeTopicPartitions show
// it, once groups are in use (coordinator.h): one partition per coordinator shard, each led by
// the broker coordinating the shard's groups (none while it moves). Its id is derived from the
// cluster id, so it stays across restarts. Its records are a view generated from the group
// store (coordinator/offsets_log.h): Fetch and ListOffsets read it from the broker coordinating
// each shard (offsets_topic.cc); nobody may produce to it.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "handlers/context.h"
#include "handlers/handlers.h"
#include "protocol/types.h"

namespace silt::handlers {

inline constexpr std::string_view offsets_topic_name = "__consumer_offsets";

[[nodiscard]] inline protocol::uuid offsets_topic_id(const context& ctx) {
  protocol::uuid id;
  uint64_t h1 = 1469598103934665603ull;
  uint64_t h2 = 1099511628211ull;
  for (const char c : ctx.cluster_id + "/" + std::string(offsets_topic_name)) {
    h1 = (h1 ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    h2 = (h2 ^ static_cast<uint8_t>(c)) * 6364136223846793005ull + 1442695040888963407ull;
  }
  for (int i = 0; i < 8; ++i) {
    id.bytes[i] = static_cast<uint8_t>(h1 >> (8 * i));
    id.bytes[8 + i] = static_cast<uint8_t>(h2 >> (8 * i));
  }
  return id;
}

[[nodiscard]] inline int32_t offsets_topic_partitions(const context& ctx) {
  return ctx.groups().options().shards;
}

// Its partitions [first, end), as describe_partitions() gives a topic's (at epoch 0): led by
// the shard's coordinator, LEADER_NOT_AVAILABLE while no serving broker holds the shard.
template <typename Partition>
[[nodiscard]] std::vector<Partition> describe_offsets_partitions(const context& ctx, int32_t first,
                                                                 int32_t end) {
  std::vector<Partition> out;
  if (end > first) out.reserve(static_cast<size_t>(end - first));
  for (int32_t p = first; p < end; ++p) {
    auto part = led_here<Partition>(ctx, p, 0);
    const int32_t node = ctx.groups().shard_node(p, ctx.node_id);
    if (node != ctx.node_id) {
      const bool serving = node != -1 && ctx.serving_member(node).has_value();
      part.leader_id = serving ? node : -1;
      part.replica_nodes = {node};
      part.isr_nodes = serving ? std::vector<int32_t>{node} : std::vector<int32_t>{};
      if (!serving) {
        part.error_code = static_cast<int16_t>(protocol::error_code::leader_not_available);
      }
    }
    out.push_back(std::move(part));
  }
  return out;
}

// Whether `name` is the offsets topic while it exists (a Fetch or ListOffsets of it before
// groups are in use finds no such topic, as on Kafka).
[[nodiscard]] inline bool is_offsets_topic(const context& ctx, std::string_view name) {
  return name == offsets_topic_name && ctx.groups().offsets_topic_exists();
}

// A read of one partition of the offsets topic: NOT_LEADER_OR_FOLLOWER where the shard is not
// held here, UNKNOWN_TOPIC_OR_PARTITION past its partitions, OFFSET_OUT_OF_RANGE outside the
// view's log (a new coordinator epoch starts above every offset of the last one).
struct offsets_topic_read {
  protocol::error_code error = protocol::error_code::none;
  int64_t high_watermark = -1;
  int64_t log_start_offset = -1;
  std::shared_ptr<const std::vector<uint8_t>> batch;  // null: no records
};
[[nodiscard]] offsets_topic_read read_offsets_topic(const context& ctx, int32_t partition,
                                                    int64_t offset, size_t max_bytes);

// ListOffsets of one partition of the offsets topic: earliest (-2, -4), latest (-1), max
// timestamp (-3), latest tiered (-5: none) or the first record at or after a timestamp.
struct offsets_topic_offset {
  protocol::error_code error = protocol::error_code::none;
  int64_t offset = -1;
  int64_t timestamp = -1;
  int32_t leader_epoch = -1;
};
[[nodiscard]] offsets_topic_offset list_offsets_topic(const context& ctx, int32_t partition,
                                                      int64_t timestamp);

}  // namespace silt::handlers
