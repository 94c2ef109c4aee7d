// ConsumerGroupHeartbeat (key 68): a member of a KIP-848 consumer group joins, heartbeats,
// acknowledges revocations and leaves; the broker computes the assignment
// (coordinator/consumer_group.h). Topics are named by id in assignments.
#include "handlers/group_topics.h"
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::consumer_group_heartbeat_response> handle_consumer_group_heartbeat(
    context& ctx, const net::request& raw, const protocol::consumer_group_heartbeat_request& req) {
  using protocol::error_code;
  protocol::consumer_group_heartbeat_response resp;
  if (req.group_id.empty()) {
    resp.error_code = static_cast<int16_t>(error_code::invalid_request);
    resp.error_message = "GroupId can't be empty.";
    co_return resp;
  }
  coordinator::consumer_heartbeat hb;
  hb.member_id = req.member_id;
  hb.member_epoch = req.member_epoch;
  hb.instance_id = req.instance_id;
  hb.rack_id = req.rack_id;
  hb.rebalance_timeout_ms = req.rebalance_timeout_ms;
  hb.subscribed_topic_names = req.subscribed_topic_names;
  hb.subscribed_topic_regex = req.subscribed_topic_regex;
  hb.server_assignor = req.server_assignor;
  if (req.topic_partitions) {
    coordinator::member_assignment owned;
    for (const auto& t : *req.topic_partitions) {
      owned[t.topic_id.bytes].insert(t.partitions.begin(), t.partitions.end());
    }
    hb.owned = std::move(owned);
  }
  hb.client_id = raw.header.header.client_id.value_or("");
  hb.client_host = client_host(raw);
  const group_topics topics(ctx);
  auto r = ctx.groups().consumer_heartbeat(req.group_id, std::move(hb), topics);
  resp.error_code = static_cast<int16_t>(r.error);
  if (r.error != error_code::none) {
    if (!r.message.empty()) resp.error_message = std::move(r.message);
    co_return resp;
  }
  resp.member_id = std::move(r.member_id);
  resp.member_epoch = r.member_epoch;
  resp.heartbeat_interval_ms = r.heartbeat_interval_ms;
  if (r.assignment) {
    auto& a = resp.assignment.emplace();
    for (const auto& [topic, parts] : *r.assignment) {
      auto& tp = a.topic_partitions.emplace_back();
      tp.topic_id.bytes = topic;
      tp.partitions.assign(parts.begin(), parts.end());
    }
  }
  co_return resp;
}

}  // namespace silt::handlers
