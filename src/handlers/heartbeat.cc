// Heartbeat (key 12): keeps a classic member's session alive and tells it of a rebalance.
// ACLs: GROUP:READ on the group, before anything else (refused: GROUP_AUTHORIZATION_FAILED).
#include "handlers/access.h"
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::heartbeat_response> handle_heartbeat(
    context& ctx, const net::request& raw, const protocol::heartbeat_request& req) {
  protocol::heartbeat_response resp;
  const auto e = !access(ctx, raw).group(security::acl_operation::read, req.group_id)
                     ? protocol::error_code::group_authorization_failed
                 : req.group_id.empty()
                     ? protocol::error_code::invalid_group_id
                     : ctx.groups().heartbeat(req.group_id, req.member_id, req.group_instance_id,
                                              req.generation_id);
  resp.error_code = static_cast<int16_t>(e);
  co_return resp;
}

}  // namespace silt::handlers
