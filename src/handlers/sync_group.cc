// SyncGroup (key 14): the leader hands in the assignment; every member waits for its part.
// ACLs: GROUP:READ on the group, before anything else but the protocol type and name v5
// requires (refused: GROUP_AUTHORIZATION_FAILED, an empty assignment).
#include "handlers/access.h"
#include "handlers/group_reply.h"
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::sync_group_response> handle_sync_group(
    context& ctx, const net::request& raw, const protocol::sync_group_request& req) {
  protocol::sync_group_response resp;
  // From v5 on the protocol type and name are mandatory (Kafka's
  // SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent), checked before the ACLs.
  if (raw.header.header.request_api_version >= 5 && (!req.protocol_type || !req.protocol_name)) {
    resp.error_code = static_cast<int16_t>(protocol::error_code::inconsistent_group_protocol);
    co_return resp;
  }
  if (!access(ctx, raw).group(security::acl_operation::read, req.group_id)) {
    resp.error_code = static_cast<int16_t>(protocol::error_code::group_authorization_failed);
    co_return resp;
  }
  if (req.group_id.empty()) {
    resp.error_code = static_cast<int16_t>(protocol::error_code::invalid_group_id);
    co_return resp;
  }
  std::map<std::string, std::vector<uint8_t>> assignments;
  for (const auto& a : req.assignments) assignments[a.member_id] = a.assignment;
  group_reply<coordinator::sync_result> reply(co_await asio::this_coro::executor);
  ctx.groups().sync(req.group_id, req.member_id, req.group_instance_id, req.generation_id,
                    req.protocol_type, req.protocol_name, std::move(assignments), reply.callback());
  coordinator::sync_result r = co_await reply.get();
  resp.error_code = static_cast<int16_t>(r.error);
  if (r.error == protocol::error_code::none) {
    resp.protocol_type = std::move(r.protocol_type);
    resp.protocol_name = std::move(r.protocol_name);
    resp.assignment = std::move(r.assignment);
  }
  co_return resp;
}

}  // namespace silt::handlers
