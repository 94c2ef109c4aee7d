// ListGroups (key 16): every group this broker coordinates, classic and consumer (KIP-848),
// filtered by state (v4+) and type (v5+). Filters match case-insensitively.
//
// ACLs, as Kafka's KafkaApis.handleListGroupsRequest: with CLUSTER:DESCRIBE every group is
// listed; without, only the groups the principal may DESCRIBE (never an error).
#include <algorithm>

#include "handlers/access.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool matches(const std::vector<std::string>& filter, std::string_view value) {
  return filter.empty() || std::any_of(filter.begin(), filter.end(),
                                       [&](const std::string& f) { return iequal(f, value); });
}

}  // namespace

asio::awaitable<protocol::list_groups_response> handle_list_groups(
    context& ctx, const net::request& raw, const protocol::list_groups_request& req) {
  const access a(ctx, raw);
  const bool every_group = a.cluster(security::acl_operation::describe);
  protocol::list_groups_response resp;
  for (const auto& g : ctx.groups().list()) {
    if (!matches(req.states_filter, g.state) || !matches(req.types_filter, g.type)) continue;
    if (!every_group && !a.group(security::acl_operation::describe, g.group_id)) continue;
    resp.groups.push_back(
        {g.group_id, g.protocol_type, std::string(g.state), std::string(g.type), {}});
  }
  co_return resp;
}

}  // namespace silt::handlers
