// OffsetFetch (key 9): a group's committed offsets, of the partitions asked or of all (topics
// null); -1 for a partition without one. From v8 on several groups are asked at once.
// require_stable concerns offsets of open transactions, which Silt does not have yet: every
// committed offset is stable.
//
// ACLs, as Kafka's KafkaApis.handleOffsetFetchRequest: GROUP:DESCRIBE on each group (not READ;
// refused: GROUP_AUTHORIZATION_FAILED as the group's error, or before v2 on every partition
// asked), then TOPIC:DESCRIBE on each topic: of all topics (topics null) those refused are left
// out; a named one refused is answered TOPIC_AUTHORIZATION_FAILED on its partitions (offset -1),
// after the other topics.
#include <algorithm>

#include "handlers/access.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using security::acl_operation;

// A topic's partitions answered `e`, with no offset (Kafka's answer for a refused group before
// v2 and for a refused topic).
template <typename Topic, typename RequestTopic>
Topic unanswered_topic(const RequestTopic& t, protocol::error_code e) {
  Topic out;
  out.name = t.name;
  for (const int32_t index : t.partition_indexes) {
    auto& p = out.partitions.emplace_back();
    p.partition_index = index;
    p.committed_offset = no_offset;
    p.committed_leader_epoch = -1;
    p.metadata = "";
    p.error_code = static_cast<int16_t>(e);
  }
  return out;
}

template <typename Topic, typename Partition, typename RequestTopic>
std::vector<Topic> fetch_group(context& ctx, const access& a, const std::string& group_id,
                               const std::optional<std::vector<RequestTopic>>& topics) {
  std::vector<Topic> out;
  std::vector<coordinator::topic_partitions> asked;
  // Named topics the principal may not describe: answered last, not looked up.
  std::vector<const RequestTopic*> refused;
  if (topics) {
    asked.reserve(topics->size());
    for (const auto& t : *topics) {
      if (a.topic(acl_operation::describe, t.name)) {
        asked.push_back({t.name, t.partition_indexes});
      } else {
        refused.push_back(&t);
      }
    }
  }
  const auto found = ctx.groups().fetch(group_id, topics ? &asked : nullptr);
  auto fill = [](Partition& p, const metadata::committed_offset& o) {
    p.committed_offset = o.offset;
    p.committed_leader_epoch = o.leader_epoch;
    p.metadata = o.metadata;
  };
  if (!topics) {
    // Every committed offset, by topic (they come sorted by topic, then partition), of the
    // topics the principal may describe.
    std::string_view last;
    bool last_allowed = true;
    for (const auto& o : found) {
      if (a.enabled() && o.key.topic != last) {
        last = o.key.topic;
        last_allowed = a.topic(acl_operation::describe, last);
      }
      if (!last_allowed) continue;
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
    if (!refused.empty() && std::find(refused.begin(), refused.end(), &t) != refused.end()) {
      continue;
    }
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
  for (const auto* t : refused) {
    out.push_back(unanswered_topic<Topic>(*t, protocol::error_code::topic_authorization_failed));
  }
  return out;
}

}  // namespace

asio::awaitable<protocol::offset_fetch_response> handle_offset_fetch(
    context& ctx, const net::request& raw, const protocol::offset_fetch_request& req) {
  namespace types = protocol::offset_fetch_response_types;
  const int16_t version = raw.header.header.request_api_version;
  const access a(ctx, raw);
  protocol::offset_fetch_response resp;
  if (version < 8) {
    // The group's error. Before v2 there is no error for the whole response: each partition
    // asked carries it (as Kafka answers).
    auto group_error = [&](protocol::error_code e) {
      resp.error_code = static_cast<int16_t>(e);
      if (version < 2 && req.topics) {
        for (const auto& t : *req.topics) {
          resp.topics.push_back(unanswered_topic<types::OffsetFetchResponseTopic>(t, e));
        }
      }
    };
    if (!a.group(acl_operation::describe, req.group_id)) {
      group_error(protocol::error_code::group_authorization_failed);
      co_return resp;
    }
    if (req.group_id.empty()) {
      resp.error_code = static_cast<int16_t>(protocol::error_code::invalid_group_id);
      co_return resp;
    }
    // Another broker coordinates the group: the client looks it up again.
    if (!ctx.groups().serves(req.group_id)) {
      group_error(protocol::error_code::not_coordinator);
      co_return resp;
    }
    resp.topics = fetch_group<types::OffsetFetchResponseTopic, types::OffsetFetchResponsePartition>(
        ctx, a, req.group_id, req.topics);
    co_return resp;
  }
  resp.groups.reserve(req.groups.size());
  for (const auto& g : req.groups) {
    auto& rg = resp.groups.emplace_back();
    rg.group_id = g.group_id;
    if (!a.group(acl_operation::describe, g.group_id)) {
      rg.error_code = static_cast<int16_t>(protocol::error_code::group_authorization_failed);
      continue;
    }
    if (g.group_id.empty()) {
      rg.error_code = static_cast<int16_t>(protocol::error_code::invalid_group_id);
      continue;
    }
    if (!ctx.groups().serves(g.group_id)) {
      rg.error_code = static_cast<int16_t>(protocol::error_code::not_coordinator);
      continue;
    }
    rg.topics = fetch_group<types::OffsetFetchResponseTopics, types::OffsetFetchResponsePartitions>(
        ctx, a, g.group_id, g.topics);
  }
  co_return resp;
}

}  // namespace silt::handlers
