// FindCoordinator (key 10): a group's coordinator is the broker holding the group's coordinator
// shard (this one on a single broker), or where the controller placed the shard as last seen;
// COORDINATOR_NOT_AVAILABLE while it is moving. Transactions are not served yet: their
// coordinator is not available. From v4 on, several keys are asked at once.
//
// ACLs, as Kafka's KafkaApis.getCoordinator: GROUP:DESCRIBE on a group key,
// TRANSACTIONAL_ID:DESCRIBE on a transactional id, before anything else (refused:
// GROUP_AUTHORIZATION_FAILED or TRANSACTIONAL_ID_AUTHORIZATION_FAILED, no coordinator).
#include "handlers/access.h"
#include "handlers/admin_util.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using protocol::error_code;

constexpr int8_t group_key = 0;
constexpr int8_t transaction_key = 1;

// Whether `a` may look up the coordinator of `key`; refused keys get this error.
error_code authorize_key(const access& a, int8_t key_type, const std::string& key) {
  if (key_type == group_key && !a.group(security::acl_operation::describe, key)) {
    return error_code::group_authorization_failed;
  }
  if (key_type == transaction_key &&
      !a.allowed(security::acl_operation::describe, security::acl_resource_type::transactional_id,
                 key)) {
    return error_code::transactional_id_authorization_failed;
  }
  return error_code::none;
}

// The error for one key, or none.
std::pair<error_code, std::string> check_key(int8_t key_type, const std::string& key) {
  if (key_type == group_key) {
    if (key.empty()) return {error_code::invalid_request, "the group id is empty"};
    return {error_code::none, {}};
  }
  if (key_type == transaction_key) {
    return {error_code::coordinator_not_available, "transactions are not supported yet"};
  }
  return {error_code::invalid_request, "unknown key type " + std::to_string(key_type)};
}

// Fills the answer for one key: the response itself before v4, each coordinator entry from v4.
template <typename Out>
void answer(const context& ctx, std::string_view listener, int8_t key_type, const std::string& key,
            Out& out) {
  auto [e, message] = check_key(key_type, key);
  // The broker coordinating the group: this one, or where its shard is as last seen.
  const int32_t node = e == error_code::none ? ctx.coordinator_node(key) : -1;
  const auto member = node == ctx.node_id ? std::nullopt : ctx.serving_member(node);
  if (e == error_code::none && node != ctx.node_id && !member) {
    e = error_code::coordinator_not_available;
    message = "the group coordinator is moving to another broker";
  }
  out.error_code = static_cast<int16_t>(e);
  if (e == error_code::none) {
    out.node_id = node;
    if (member) {
      const auto [host, port] = member->endpoint_for(listener);
      out.host = host;
      out.port = port;
    } else {
      const auto& self = ctx.advertised_for(listener);
      out.host = self.host;
      out.port = self.port;
    }
    out.error_message.reset();
  } else {
    out.node_id = -1;
    out.port = -1;
    out.error_message = std::move(message);
  }
}

}  // namespace

asio::awaitable<protocol::find_coordinator_response> handle_find_coordinator(
    context& ctx, const net::request& raw, const protocol::find_coordinator_request& req) {
  const int16_t version = raw.header.header.request_api_version;
  const access a(ctx, raw);
  protocol::find_coordinator_response resp;
  const int8_t key_type = version >= 1 ? req.key_type : group_key;
  // The groups' internal topic comes into use with the first group lookup allowed, as Kafka
  // creates it then.
  bool noted = false;
  // Fills `out` for `key`, refused or answered.
  auto find = [&](const std::string& key, auto& out) {
    if (const auto e = authorize_key(a, key_type, key); e != error_code::none) {
      out.error_code = static_cast<int16_t>(e);
      out.node_id = -1;
      out.host = "";
      out.port = -1;
      // Kafka's default message before v4 (the whole response is the error); a v4 coordinator
      // entry keeps the field's default, an empty message.
      if (version < 4) out.error_message = admin::default_message(e);
      return;
    }
    if (key_type == group_key && !noted) {
      ctx.groups().note_offsets_topic();
      noted = true;
    }
    answer(ctx, listener_of(raw), key_type, key, out);
  };
  if (version < 4) {
    find(req.key, resp);
    co_return resp;
  }
  resp.coordinators.reserve(req.coordinator_keys.size());
  for (const auto& key : req.coordinator_keys) {
    auto& c = resp.coordinators.emplace_back();
    c.key = key;
    find(key, c);
  }
  co_return resp;
}

}  // namespace silt::handlers
