// OffsetFetch (key 9): a group's committed offsets, of the partitions asked or of all (topics
// null); -1 for a partition without one. From v8 on several groups are asked at once.
// require_stable concerns offsets of open transactions, which Silt does not have yet: every
// committed offset is stable.
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

template <typename Topic, typename Partition, typename RequestTopic>
std::vector<Topic> fetch_group(context& ctx, const std::string& group_id,
                               const std::optional<std::vector<RequestTopic>>& topics) {
  std::vector<Topic> out;
  std::vector<coordinator::topic_partitions> asked;
  if (topics) {
    asked.reserve(topics->size());
    for (const auto& t : *topics) asked.push_back({t.name, t.partition_indexes});
  }
  const auto found = ctx.groups().fetch(group_id, topics ? &asked : nullptr);
  auto fill = [](Partition& p, const metadata::committed_offset& o) {
    p.committed_offset = o.offset;
    p.committed_leader_epoch = o.leader_epoch;
    p.metadata = o.metadata;
  };
  if (!topics) {
    // Every committed offset, by topic (they come sorted by topic, then partition).
    for (const auto& o : found) {
      if (out.empty() || out.back().name != o.key.topic) out.emplace_back().name = o.key.topic;
      auto& p = out.back().partitions.emplace_back();
      p.partition_index = o.key.partition;
      fill(p, o);
    }
    return out;
  }
  std::map<std::pair<std::string_view, int32_t>, const metadata::committed_offset*> by_key;
  for (const auto& o : found) by_key[{o.key.topic, o.key.partition}] = &o;
  out.reserve(topics->size());
  for (const auto& t : *topics) {
    auto& rt = out.emplace_back();
    rt.name = t.name;
    for (const int32_t index : t.partition_indexes) {
      auto& p = rt.partitions.emplace_back();
      p.partition_index = index;
      auto it = by_key.find({t.name, index});
      if (it != by_key.end()) {
        fill(p, *it->second);
      } else {
        p.committed_offset = no_offset;
        p.committed_leader_epoch = -1;
        p.metadata = "";
      }
    }
  }
  return out;
}

}  // namespace

asio::awaitable<protocol::offset_fetch_response> handle_offset_fetch(
    context& ctx, const net::request& raw, const protocol::offset_fetch_request& req) {
  namespace types = protocol::offset_fetch_response_types;
  const int16_t version = raw.header.header.request_api_version;
  protocol::offset_fetch_response resp;
  if (version < 8) {
    if (req.group_id.empty()) {
      resp.error_code = static_cast<int16_t>(protocol::error_code::invalid_group_id);
      co_return resp;
    }
    // Another broker coordinates the group: the client looks it up again. Before v2 there is
    // no error for the whole response: each partition asked carries it (as Kafka answers).
    if (!ctx.groups().serves(req.group_id)) {
      const auto e = static_cast<int16_t>(protocol::error_code::not_coordinator);
      resp.error_code = e;
      if (version < 2 && req.topics) {
        for (const auto& t : *req.topics) {
          auto& rt = resp.topics.emplace_back();
          rt.name = t.name;
          for (const int32_t index : t.partition_indexes) {
            auto& p = rt.partitions.emplace_back();
            p.partition_index = index;
            p.committed_offset = no_offset;
            p.committed_leader_epoch = -1;
            p.metadata = "";
            p.error_code = e;
          }
        }
      }
      co_return resp;
    }
    resp.topics = fetch_group<types::OffsetFetchResponseTopic, types::OffsetFetchResponsePartition>(
        ctx, req.group_id, req.topics);
    co_return resp;
  }
  resp.groups.reserve(req.groups.size());
  for (const auto& g : req.groups) {
    auto& rg = resp.groups.emplace_back();
    rg.group_id = g.group_id;
    if (g.group_id.empty()) {
      rg.error_code = static_cast<int16_t>(protocol::error_code::invalid_group_id);
      continue;
    }
    if (!ctx.groups().serves(g.group_id)) {
      rg.error_code = static_cast<int16_t>(protocol::error_code::not_coordinator);
      continue;
    }
    rg.topics = fetch_group<types::OffsetFetchResponseTopics, types::OffsetFetchResponsePartitions>(
        ctx, g.group_id, g.topics);
  }
  co_return resp;
}

}  // namespace silt::handlers
