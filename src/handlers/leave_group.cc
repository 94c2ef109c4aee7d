// LeaveGroup (key 13): members leave a classic group (one before v3, a batch from v3 on; a
// static member may be removed by its instance id alone, as an admin does).
// ACLs: GROUP:READ on the group, before anything else (refused: GROUP_AUTHORIZATION_FAILED, no
// member entries).
#include "handlers/access.h"
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::leave_group_response> handle_leave_group(
    context& ctx, const net::request& raw, const protocol::leave_group_request& req) {
  const int16_t version = raw.header.header.request_api_version;
  protocol::leave_group_response resp;
  if (!access(ctx, raw).group(security::acl_operation::read, req.group_id)) {
    resp.error_code = static_cast<int16_t>(protocol::error_code::group_authorization_failed);
    co_return resp;
  }
  if (req.group_id.empty()) {
    resp.error_code = static_cast<int16_t>(protocol::error_code::invalid_group_id);
    co_return resp;
  }
  if (version < 3) {
    resp.error_code =
        static_cast<int16_t>(ctx.groups().leave(req.group_id, req.member_id, std::nullopt));
    co_return resp;
  }
  resp.members.reserve(req.members.size());
  for (const auto& m : req.members) {
    const auto e = ctx.groups().leave(req.group_id, m.member_id, m.group_instance_id);
    resp.members.push_back({m.member_id, m.group_instance_id, static_cast<int16_t>(e), {}});
  }
  co_return resp;
}

}  // namespace silt::handlers
