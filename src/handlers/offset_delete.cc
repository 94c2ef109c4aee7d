// OffsetDelete (key 47): removes a group's committed offsets of some partitions, refused for
// topics a live consumer group subscribes to (GROUP_SUBSCRIBED_TO_TOPIC) and for a live group
// of another protocol type (NON_EMPTY_GROUP).
//
// ACLs, as Kafka's KafkaApis.handleOffsetDeleteRequest: GROUP:DELETE on the group (refused:
// GROUP_AUTHORIZATION_FAILED, top-level), then TOPIC:READ on each topic (refused:
// TOPIC_AUTHORIZATION_FAILED on its partitions whether it exists or not; nothing of it deleted).
#include "handlers/access.h"
#include "handlers/group_reply.h"
#include "handlers/group_topics.h"
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::offset_delete_response> handle_offset_delete(
    context& ctx, const net::request& raw, const protocol::offset_delete_request& req) {
  using protocol::error_code;
  const access a(ctx, raw);
  protocol::offset_delete_response resp;
  if (!a.group(security::acl_operation::delete_, req.group_id)) {
    resp.error_code = static_cast<int16_t>(error_code::group_authorization_failed);
    co_return resp;
  }
  if (req.group_id.empty()) {
    resp.error_code = static_cast<int16_t>(error_code::invalid_group_id);
    co_return resp;
  }
  std::vector<coordinator::topic_partitions> known;
  for (const auto& t : req.topics) {
    if (!a.topic(security::acl_operation::read, t.name)) continue;
    const auto topic = ctx.topic(t.name);
    coordinator::topic_partitions tp{t.name, {}};
    for (const auto& p : t.partitions) {
      if (stream_of(topic, p.partition_index)) tp.partitions.push_back(p.partition_index);
    }
    if (!tp.partitions.empty()) known.push_back(std::move(tp));
  }
  using result = std::pair<error_code, std::set<std::string>>;
  group_reply<result> reply(co_await asio::this_coro::executor);
  const group_topics lookup(ctx);
  ctx.groups().delete_offsets(req.group_id, known, lookup,
                              [cb = reply.callback()](error_code e, std::set<std::string> refused) {
                                cb({e, std::move(refused)});
                              });
  const auto [e, refused] =
      (co_await reply.get_for(std::chrono::milliseconds(ctx.groups().options().commit_timeout_ms)))
          .value_or(result{error_code::request_timed_out, {}});
  resp.error_code = static_cast<int16_t>(e);
  if (e != error_code::none) co_return resp;
  for (const auto& t : req.topics) {
    auto& rt = resp.topics.emplace_back();
    rt.name = t.name;
    const bool may_read = a.topic(security::acl_operation::read, t.name);
    const auto topic = ctx.topic(t.name);
    for (const auto& p : t.partitions) {
      error_code pe = error_code::none;
      if (!may_read) {
        pe = error_code::topic_authorization_failed;
      } else if (!stream_of(topic, p.partition_index)) {
        pe = error_code::unknown_topic_or_partition;
      } else if (refused.contains(t.name)) {
        pe = error_code::group_subscribed_to_topic;
      }
      rt.partitions.push_back({p.partition_index, static_cast<int16_t>(pe), {}});
    }
  }
  co_return resp;
}

}  // namespace silt::handlers
