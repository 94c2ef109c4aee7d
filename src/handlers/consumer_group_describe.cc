// ConsumerGroupDescribe (key 69): a KIP-848 consumer group's state, epochs, assignor and
// members with their current and target assignments; GROUP_ID_NOT_FOUND for a group that is
// not a consumer group (the admin client then asks DescribeGroups).
//
// ACLs, as Kafka's KafkaApis.handleConsumerGroupDescribe: GROUP:DESCRIBE on each group; the
// refused ones come first, GROUP_AUTHORIZATION_FAILED, then the others, with their authorized
// operations when asked (those answered without error). Then a group one of whose members'
// current or target assignments names a topic the principal may not DESCRIBE is answered
// TOPIC_AUTHORIZATION_FAILED as a whole, without members.
#include <algorithm>

#include "handlers/access.h"
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

// Whether `g` names, in a member's assignment or target assignment, a topic `a` may not
// describe.
bool names_hidden_topic(const access& a,
                        const protocol::consumer_group_describe_response::DescribedGroup& g) {
  auto hidden = [&](const described_assignment& assignment) {
    return std::any_of(assignment.topic_partitions.begin(), assignment.topic_partitions.end(),
                       [&](const auto& tp) {
                         // (A topic deleted meanwhile has no name left to check.)
                         return !tp.topic_name.empty() &&
                                !a.topic(security::acl_operation::describe, tp.topic_name);
                       });
  };
  return std::any_of(g.members.begin(), g.members.end(), [&](const auto& m) {
    return hidden(m.assignment) || hidden(m.target_assignment);
  });
}

}  // namespace

asio::awaitable<protocol::consumer_group_describe_response> handle_consumer_group_describe(
    context& ctx, const net::request& raw, const protocol::consumer_group_describe_request& req) {
  const access a(ctx, raw);
  protocol::consumer_group_describe_response resp;
  resp.groups.reserve(req.group_ids.size());
  // The refused groups, before the others: nothing else is looked up for them.
  std::vector<bool> refused;
  if (a.enabled()) {
    refused.resize(req.group_ids.size());
    for (size_t i = 0; i < req.group_ids.size(); ++i) {
      if (a.group(security::acl_operation::describe, req.group_ids[i])) continue;
      refused[i] = true;
      auto& g = resp.groups.emplace_back();
      g.group_id = req.group_ids[i];
      g.error_code = static_cast<int16_t>(protocol::error_code::group_authorization_failed);
    }
  }
  for (size_t i = 0; i < req.group_ids.size(); ++i) {
    if (!refused.empty() && refused[i]) continue;
    const auto& id = req.group_ids[i];
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
    if (req.include_authorized_operations) {
      g.authorized_operations = a.operations(security::acl_resource_type::group, id);
    }
    if (a.enabled() && names_hidden_topic(a, g)) {
      g = {};
      g.group_id = id;
      g.error_code = static_cast<int16_t>(protocol::error_code::topic_authorization_failed);
      g.error_message =
          "The group has described topic(s) that the client is not authorized to describe.";
    }
  }
  co_return resp;
}

}  // namespace silt::handlers
