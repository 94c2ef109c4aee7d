// SyncGroup (key 14): the leader hands in the assignment; every member waits for its part.
#include "handlers/group_reply.h"
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::sync_group_response> handle_sync_group(
    context& ctx, const net::request& /*raw*/, const protocol::sync_group_request& req) {
  protocol::sync_group_response resp;
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
