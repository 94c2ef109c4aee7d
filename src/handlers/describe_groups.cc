// DescribeGroups (key 15): a group's state, protocol and members (their metadata and
// assignments while Stable, as Kafka shows them). A group that does not exist is Dead.
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::describe_groups_response> handle_describe_groups(
    context& ctx, const net::request& /*raw*/, const protocol::describe_groups_request& req) {
  protocol::describe_groups_response resp;
  resp.groups.reserve(req.groups.size());
  for (const auto& id : req.groups) {
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
