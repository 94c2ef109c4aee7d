// DeleteGroups (key 42): removes Empty groups and their committed offsets (NON_EMPTY_GROUP
// while members remain, GROUP_ID_NOT_FOUND for an unknown one). A group named twice is answered
// once, as Kafka does.
//
// ACLs, as Kafka's KafkaApis.handleDeleteGroupsRequest: GROUP:DELETE on each group; the refused
// ones are answered GROUP_AUTHORIZATION_FAILED after the others.
#include <set>

#include "handlers/access.h"
#include "handlers/group_reply.h"
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::delete_groups_response> handle_delete_groups(
    context& ctx, const net::request& raw, const protocol::delete_groups_request& req) {
  using protocol::error_code;
  const access a(ctx, raw);
  protocol::delete_groups_response resp;
  const auto ex = co_await asio::this_coro::executor;
  resp.results.reserve(req.groups_names.size());
  std::set<std::string_view> seen;
  std::vector<std::string_view> refused;
  for (const auto& id : req.groups_names) {
    if (!seen.insert(id).second) continue;
    if (!a.group(security::acl_operation::delete_, id)) {
      refused.push_back(id);
      continue;
    }
    error_code e = error_code::invalid_group_id;
    if (!id.empty()) {
      group_reply<error_code> reply(ex);
      ctx.groups().delete_group(id, reply.callback());
      e = (co_await reply.get_for(
               std::chrono::milliseconds(ctx.groups().options().commit_timeout_ms)))
              .value_or(error_code::request_timed_out);
    }
    resp.results.push_back({id, static_cast<int16_t>(e), {}});
  }
  for (const auto id : refused) {
    resp.results.push_back(
        {std::string(id), static_cast<int16_t>(error_code::group_authorization_failed), {}});
  }
  co_return resp;
}

}  // namespace silt::handlers
