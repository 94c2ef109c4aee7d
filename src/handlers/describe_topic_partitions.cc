// DescribeTopicPartitions (key 75, KIP-966): topics and their partitions as Metadata gives them,
// sorted by name and paged. One response holds at most response_partition_limit partitions
// (capped at Kafka's broker default of 2000); next_cursor names the first partition left out
// and the client sends it back as the request's cursor. The Java admin client (3.8 on)
// describes topics with it and falls back to Metadata only when a broker lacks it. Topics are
// never auto-created here.
//
// ACLs, as Kafka's DescribeTopicPartitionsRequestHandler: TOPIC:DESCRIBE on each topic, once the
// cursor is found valid. Of all topics those refused are left out; a named one refused is
// answered TOPIC_AUTHORIZATION_FAILED (its name, a zero id, no partitions) after the answered
// topics, if the page reached it (a refused topic takes no room in the page and is never the
// next cursor). topic_authorized_operations is set on every answered topic.
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "handlers/access.h"
#include "handlers/admin_util.h"
#include "handlers/handlers.h"
#include "handlers/offsets_topic.h"

namespace silt::handlers {

namespace {

using protocol::describe_topic_partitions_request;
using protocol::describe_topic_partitions_response;
using protocol::error_code;
using response_topic = describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic;
using response_partition =
    describe_topic_partitions_response::DescribeTopicPartitionsResponsePartition;

// Kafka's max.request.partition.size.limit: the most partitions one response carries, whatever
// the request asks for. A limit below 1 is taken as 1, as Kafka does.
constexpr int32_t max_partitions_per_response = 2000;

// Kafka answers a request it refuses as a whole with the error in every topic the request
// names (none when it names none), without partitions, ids or a cursor.
describe_topic_partitions_response refuse(const describe_topic_partitions_request& req,
                                          error_code e) {
  describe_topic_partitions_response resp;
  for (const auto& t : req.topics)
    resp.topics.push_back(topic_error<response_topic>(t.name, {}, e));
  return resp;
}

// A topic missing or with an invalid name, answered with its name and a zero id.
response_topic missing_topic(const std::string& name) {
  const error_code e = metadata::check_topic_name(name).empty()
                           ? error_code::unknown_topic_or_partition
                           : error_code::invalid_topic_exception;
  return topic_error<response_topic>(name, {}, e);
}

}  // namespace

asio::awaitable<describe_topic_partitions_response> handle_describe_topic_partitions(
    context& ctx, const net::request& raw, const describe_topic_partitions_request& req) {
  const bool all = req.topics.empty();  // an empty list means every topic
  const std::string cursor_topic = req.cursor ? req.cursor->topic_name : std::string();
  // The cursor must point into the topics asked for, at a partition index of 0 or more.
  if (req.cursor) {
    const bool named = std::any_of(req.topics.begin(), req.topics.end(),
                                   [&](const auto& t) { return t.name == cursor_topic; });
    if ((!all && !named) || req.cursor->partition_index < 0) {
      co_return refuse(req, error_code::invalid_request);
    }
  }

  // The topics from the cursor's topic on, by name, each once. Every topic (ctx.topics()) comes
  // sorted by name already; a named one is looked up when its turn comes. The groups' internal
  // topic is among them once groups are in use, as in Kafka (`kafka-topics --describe` asks
  // for every topic Metadata lists).
  const bool offsets_topic = ctx.groups().offsets_topic_exists();
  std::vector<std::pair<std::string, topic_entry_ptr>> existing;
  std::set<std::string> named;
  if (all) {
    for (auto& t : ctx.topics()) {
      if (t->info->name >= cursor_topic) existing.emplace_back(t->info->name, std::move(t));
    }
    if (offsets_topic && std::string(offsets_topic_name) >= cursor_topic) {
      existing.emplace_back(std::string(offsets_topic_name), nullptr);
      std::sort(existing.begin(), existing.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
    }
  } else {
    for (const auto& t : req.topics) {
      if (t.name >= cursor_topic) named.insert(t.name);
    }
  }
  const size_t count = all ? existing.size() : named.size();
  auto named_it = named.begin();

  const access a(ctx, raw);
  // Named topics refused, answered after the others.
  std::vector<std::string> refused;
  describe_topic_partitions_response resp;
  int32_t remaining =
      std::max(std::min(max_partitions_per_response, req.response_partition_limit), 1);
  for (size_t i = 0; i < count; ++i) {
    const std::string name = all ? existing[i].first : *named_it++;
    if (!a.topic(security::acl_operation::describe, name)) {
      if (!all) refused.push_back(name);
      continue;
    }
    if (remaining == 0) {
      // The previous topic ended exactly at the limit: the next page starts with this one
      // (which need not exist, as in Kafka).
      resp.next_cursor = describe_topic_partitions_response::Cursor{name, 0, {}};
      break;
    }
    const bool internal = offsets_topic && name == offsets_topic_name;
    const topic_entry_ptr t = all ? existing[i].second : internal ? nullptr : ctx.topic(name);
    if (!t && !internal) {
      resp.topics.push_back(missing_topic(name));
      continue;
    }
    const int32_t partitions = internal ? offsets_topic_partitions(ctx) : t->info->partitions();
    // Only the cursor's topic starts past 0. Kafka 4.1.1 also matches a topic named "" with an
    // absent cursor and fails the whole request (UNKNOWN_SERVER_ERROR in every topic); here ""
    // is an invalid name like any other.
    const int32_t first = req.cursor && name == cursor_topic ? req.cursor->partition_index : 0;
    // 64 bits: a cursor near INT32_MAX plus the limit must not overflow (in Kafka it does, and
    // the next cursor comes back negative).
    const auto end = static_cast<int32_t>(
        std::min<int64_t>(partitions, static_cast<int64_t>(first) + remaining));
    response_topic out;
    out.name = name;
    if (internal) {
      out.topic_id = offsets_topic_id(ctx);
      out.is_internal = true;
      out.partitions = describe_offsets_partitions<response_partition>(ctx, first, end);
    } else {
      out.topic_id = admin::to_uuid(t->info->id);
      out.partitions = describe_partitions<response_partition>(ctx, *t->info, first, end);
    }
    for (auto& p : out.partitions) {
      // No eligible leader replicas (KIP-966) on a single broker: empty lists, not null.
      p.eligible_leader_replicas.emplace();
      p.last_known_elr.emplace();
    }
    remaining -= static_cast<int32_t>(out.partitions.size());
    resp.topics.push_back(std::move(out));
    if (end < partitions) {
      resp.next_cursor = describe_topic_partitions_response::Cursor{name, end, {}};
      break;
    }
  }
  // Unlike Metadata, the request has no flag to ask for them: Kafka fills them in every topic it
  // answers, those with an error included.
  const int32_t every_operation =
      a.enabled() ? 0 : a.operations(security::acl_resource_type::topic, {});
  for (auto& t : resp.topics) {
    t.topic_authorized_operations =
        a.enabled() ? a.operations(security::acl_resource_type::topic, *t.name) : every_operation;
  }
  for (auto& name : refused) {
    resp.topics.push_back(
        topic_error<response_topic>(std::move(name), {}, error_code::topic_authorization_failed));
  }
  co_return resp;
}

}  // namespace silt::handlers
