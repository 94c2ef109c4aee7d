// JoinGroup (key 11): a member joins (or rejoins) a classic group and waits until the rebalance
// completes; the coordinator's state machine decides (coordinator/classic_group.h). From v4 on
// a first join gets MEMBER_ID_REQUIRED and a member id to join with.
//
// ACLs: GROUP:READ on the group, before anything else (refused: GROUP_AUTHORIZATION_FAILED,
// generation -1, no member id, no members, as Kafka's JoinGroupRequest.getErrorResponse).
#include "handlers/access.h"
#include "handlers/group_reply.h"
#include "handlers/handlers.h"

namespace silt::handlers {

// Kafka shows a member's host as "/address".
std::string client_host(const net::request& raw) {
  const std::string& peer = raw.peer;
  const size_t colon = peer.rfind(':');
  std::string host = colon == std::string::npos ? peer : peer.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return "/" + host;
}

asio::awaitable<protocol::join_group_response> handle_join_group(
    context& ctx, const net::request& raw, const protocol::join_group_request& req) {
  const int16_t version = raw.header.header.request_api_version;
  protocol::join_group_response resp;
  // A string in every version up to 6, nullable from 7.
  resp.protocol_name = version >= 7 ? std::nullopt : std::optional<std::string>("");
  if (!access(ctx, raw).group(security::acl_operation::read, req.group_id)) {
    resp.error_code = static_cast<int16_t>(protocol::error_code::group_authorization_failed);
    co_return resp;
  }
  if (req.group_id.empty()) {
    resp.error_code = static_cast<int16_t>(protocol::error_code::invalid_group_id);
    resp.member_id = req.member_id;
    co_return resp;
  }
  coordinator::join_request jr;
  jr.member_id = req.member_id;
  jr.group_instance_id = req.group_instance_id;
  jr.client_id = raw.header.header.client_id.value_or("");
  jr.client_host = client_host(raw);
  jr.session_timeout_ms = req.session_timeout_ms;
  jr.rebalance_timeout_ms = version >= 1 ? req.rebalance_timeout_ms : req.session_timeout_ms;
  jr.protocol_type = req.protocol_type;
  jr.protocols.reserve(req.protocols.size());
  for (const auto& p : req.protocols) jr.protocols.push_back({p.name, p.metadata});
  jr.require_known_member_id = version >= 4;
  jr.supports_skip_assignment = version >= 9;
  group_reply<coordinator::join_result> reply(co_await asio::this_coro::executor);
  ctx.groups().join(req.group_id, std::move(jr), reply.callback());
  coordinator::join_result r = co_await reply.get();
  resp.error_code = static_cast<int16_t>(r.error);
  resp.generation_id = r.generation_id;
  resp.member_id = std::move(r.member_id);
  if (r.error == protocol::error_code::none) {
    resp.protocol_type = std::move(r.protocol_type);
    if (r.protocol_name) resp.protocol_name = std::move(r.protocol_name);
    resp.leader = std::move(r.leader);
    resp.skip_assignment = r.skip_assignment && version >= 9;
    resp.members.reserve(r.members.size());
    for (auto& m : r.members) {
      resp.members.push_back(
          {std::move(m.member_id), std::move(m.group_instance_id), std::move(m.metadata), {}});
    }
  }
  co_return resp;
}

}  // namespace silt::handlers
