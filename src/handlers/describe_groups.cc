// DescribeGroups (key 15): a group's state, protocol and members (their metadata and
// assignments while Stable, as Kafka shows them). A group that does not exist is Dead.
//
// ACLs, as Kafka's KafkaApis.handleDescribeGroupsRequest: GROUP:DESCRIBE on each group; the
// refused ones come first, GROUP_AUTHORIZATION_FAILED with no state, protocol or members, then
// the others. The authorized operations (v3+, when asked) are given for the groups answered
// without error.
#include "handlers/access.h"
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::describe_groups_response> handle_describe_groups(
    context& ctx, const net::request& raw, const protocol::describe_groups_request& req) {
  const int16_t version = raw.header.header.request_api_version;
  const access a(ctx, raw);
  protocol::describe_groups_response resp;
  resp.groups.reserve(req.groups.size());
  // The refused groups, before the others: nothing else is looked up for them.
  std::vector<bool> refused;
  if (a.enabled()) {
    refused.resize(req.groups.size());
    for (size_t i = 0; i < req.groups.size(); ++i) {
      if (a.group(security::acl_operation::describe, req.groups[i])) continue;
      refused[i] = true;
      auto& g = resp.groups.emplace_back();
      g.group_id = req.groups[i];
      g.error_code = static_cast<int16_t>(protocol::error_code::group_authorization_failed);
    }
  }
  const bool operations = version >= 3 && req.include_authorized_operations;
  for (size_t i = 0; i < req.groups.size(); ++i) {
    if (!refused.empty() && refused[i]) continue;
    const auto& id = req.groups[i];
    auto& g = resp.groups.emplace_back();
    g.group_id = id;
    if (id.empty()) {
      g.error_code = static_cast<int16_t>(protocol::error_code::invalid_group_id);
      g.group_state = std::string(coordinator::state_name(coordinator::group_state::dead));
      continue;
    }
    if (!ctx.groups().serves(id)) {
      g.error_code = static_cast<int16_t>(protocol::error_code::not_coordinator);
      continue;
    }
    if (operations) g.authorized_operations = a.operations(security::acl_resource_type::group, id);
    const auto d = ctx.groups().describe(id);
    if (!d) {
      g.group_state = std::string(coordinator::state_name(coordinator::group_state::dead));
      continue;
    }
    g.group_state = std::string(coordinator::state_name(d->state));
    g.protocol_type = d->protocol_type;
    g.protocol_data = d->protocol;
    g.members.reserve(d->members.size());
    for (const auto& m : d->members) {
      g.members.push_back({m.member_id,
                           m.group_instance_id,
                           m.client_id,
                           m.client_host,
                           m.metadata,
                           m.assignment,
                           {}});
    }
  }
  co_return resp;
}

}  // namespace silt::handlers
