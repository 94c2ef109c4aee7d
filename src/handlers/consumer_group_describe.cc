// ConsumerGroupDescribe (key 69): a KIP-848 consumer group's state, epochs, assignor and
// members with their current and target assignments; GROUP_ID_NOT_FOUND for a group that is
// not a consumer group (the admin client then asks DescribeGroups).
#include "handlers/group_topics.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using described_assignment = protocol::consumer_group_describe_response_types::Assignment;

described_assignment describe(const context& ctx, const coordinator::member_assignment& a) {
  described_assignment out;
  for (const auto& [topic, parts] : a) {
    auto& tp = out.topic_partitions.emplace_back();
    tp.topic_id.bytes = topic;
    if (auto t = ctx.topic(topic)) tp.topic_name = t->info->name;
    tp.partitions.assign(parts.begin(), parts.end());
  }
  return out;
}

}  // namespace

asio::awaitable<protocol::consumer_group_describe_response> handle_consumer_group_describe(
    context& ctx, const net::request& /*raw*/,
    const protocol::consumer_group_describe_request& req) {
  protocol::consumer_group_describe_response resp;
  resp.groups.reserve(req.group_ids.size());
  for (const auto& id : req.group_ids) {
    auto& g = resp.groups.emplace_back();
    g.group_id = id;
    auto d = ctx.groups().describe_consumer(id);
    if (!d) {
      g.error_code = static_cast<int16_t>(d.error());
      g.error_message = "Group " + id + " not found.";
      g.group_state = "Dead";
      continue;
    }
    g.group_state = std::string(d->state);
    g.group_epoch = d->group_epoch;
    g.assignment_epoch = d->assignment_epoch;
    g.assignor_name = d->assignor_name;
    for (auto& m : d->members) {
      auto& out = g.members.emplace_back();
      out.member_id = m.member_id;
      out.instance_id = m.instance_id;
      out.rack_id = m.rack_id;
      out.member_epoch = m.member_epoch;
      out.client_id = m.client_id;
      out.client_host = m.client_host;
      out.subscribed_topic_names = m.subscribed_topic_names;
      out.subscribed_topic_regex = m.subscribed_topic_regex;
      out.assignment = describe(ctx, m.assignment);
      out.target_assignment = describe(ctx, m.target_assignment);
    }
  }
  co_return resp;
}

}  // namespace silt::handlers
