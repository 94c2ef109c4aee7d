// DescribeClientQuotas (key 48, v0-1): the client quotas that match a filter, from those this
// broker holds (client_quotas.h: the store's, as of the follow loop's last round).
//
// Without DESCRIBE_CONFIGS on CLUSTER (ACLs on) the whole request is CLUSTER_AUTHORIZATION_FAILED.
// The filter is checked as Kafka 4.1's ClientQuotasImage.describe does, an error refusing the
// whole request (error_code and error_message, entries null): an empty entity type, or one named
// twice, is INVALID_REQUEST; a type other than "user", "client-id" and "ip" UNSUPPORTED_VERSION;
// a match string with MATCH_TYPE_DEFAULT (1) or MATCH_TYPE_SPECIFIED (2), none with
// MATCH_TYPE_EXACT (0), another match type, or "ip" with "user" or "client-id" INVALID_REQUEST.
#include <set>

#include "handlers/access.h"
#include "handlers/admin_util.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using protocol::describe_client_quotas_response;
using protocol::error_code;

constexpr int8_t match_exact = 0;
constexpr int8_t match_default = 1;
constexpr int8_t match_specified = 2;

describe_client_quotas_response refuse(error_code e, std::string message) {
  describe_client_quotas_response resp;
  resp.error_code = static_cast<int16_t>(e);
  resp.error_message = std::move(message);
  resp.entries = std::nullopt;
  return resp;
}

}  // namespace

asio::awaitable<describe_client_quotas_response> handle_describe_client_quotas(
    context& ctx, const net::request& raw, const protocol::describe_client_quotas_request& req) {
  const access acl(ctx, raw);
  if (!acl.cluster(security::acl_operation::describe_configs)) {
    co_return refuse(error_code::cluster_authorization_failed,
                     admin::default_message(error_code::cluster_authorization_failed));
  }
  std::set<std::string> types;
  // The filter: each type's exact name (none: the default), and the types of any name.
  std::map<std::string, std::optional<std::string>> exact;
  std::set<std::string> specified;
  for (const auto& c : req.components) {
    if (c.entity_type.empty())
      co_return refuse(error_code::invalid_request, "Invalid empty entity type.");
    if (!types.insert(c.entity_type).second) {
      co_return refuse(
          error_code::invalid_request,
          "Entity type " + c.entity_type + " cannot appear more than once in the filter.");
    }
    if (c.entity_type != "ip" && c.entity_type != "user" && c.entity_type != "client-id") {
      co_return refuse(error_code::unsupported_version, "Unsupported entity type " + c.entity_type);
    }
    switch (c.match_type) {
      case match_exact:
        if (!c.match) {
          co_return refuse(error_code::invalid_request,
                           "Request specified MATCH_TYPE_EXACT, but set match string to null.");
        }
        exact[c.entity_type] = c.match;
        break;
      case match_default:
        if (c.match) {
          co_return refuse(error_code::invalid_request,
                           "Request specified MATCH_TYPE_DEFAULT, but also specified a match "
                           "string.");
        }
        exact[c.entity_type] = std::nullopt;
        break;
      case match_specified:
        if (c.match) {
          co_return refuse(error_code::invalid_request,
                           "Request specified MATCH_TYPE_SPECIFIED, but also specified a match "
                           "string.");
        }
        specified.insert(c.entity_type);
        break;
      default:
        co_return refuse(error_code::invalid_request,
                         "Unknown match type " + std::to_string(c.match_type));
    }
  }
  if (types.contains("ip") && (types.contains("user") || types.contains("client-id"))) {
    co_return refuse(error_code::invalid_request,
                     "Invalid entity filter component combination. IP filter component should not "
                     "be used with user or clientId filter component.");
  }
  describe_client_quotas_response resp;
  auto& entries = resp.entries.emplace();
  for (const auto& [entity, values] : ctx.quotas.snapshot()) {
    // The entity's parts by type (Silt keeps no "ip" entities).
    std::map<std::string, std::optional<std::string>> parts;
    auto add_part = [&parts](const char* type, const metadata::quota_entity_part& p) {
      if (!p.present()) return;
      parts[type] = p.k == metadata::quota_entity_part::kind::named
                        ? std::optional<std::string>(p.name)
                        : std::nullopt;
    };
    add_part("user", entity.user);
    add_part("client-id", entity.client_id);
    if (req.strict && parts.size() != exact.size() + specified.size()) continue;
    bool match = true;
    for (const auto& [type, name] : exact) {
      const auto it = parts.find(type);
      match = match && it != parts.end() && it->second == name;
    }
    for (const auto& type : specified) match = match && parts.contains(type);
    if (!match) continue;
    auto& e = entries.emplace_back();
    for (const auto& [type, name] : parts) e.entity.push_back({type, name, {}});
    for (const auto& [key, value] : values) e.values.push_back({key, value, {}});
  }
  co_return resp;
}

}  // namespace silt::handlers
