// AlterConfigs (key 33, v0-2), the legacy API: replaces a topic's whole set of config overrides
// (keys not named go back to their defaults), as Kafka 4.1 (ConfigAdminManager.preprocess, then
// ConfigurationControlManager.legacyAlterConfigs): a resource named twice, a key given twice or
// a null value are INVALID_REQUEST; the new set is validated (INVALID_CONFIG) before the topic's
// existence is checked (UNKNOWN_TOPIC_OR_PARTITION). validate_only checks and changes nothing.
//
// BROKER resources: Kafka lets some broker settings change at runtime (dynamic broker configs);
// Silt's are all static (the properties file and --override). A change is answered as Kafka
// answers a change to a setting that is not dynamically updatable: INVALID_REQUEST, with a
// message saying the broker settings are read-only. An empty change (nothing to set) succeeds.
//
// ACLs, as Kafka (ControllerApis.authorizeAlterResource, after the broker's preprocessing):
// checked once the request passed the checks above that Kafka's broker makes before forwarding
// it (resources and keys named twice, null values, a BROKER resource's name and its read-only
// settings, unknown resource types), and before the rest (a topic's name, configs, existence):
// BROKER and CLIENT_METRICS need CLUSTER:ALTER_CONFIGS, a TOPIC TOPIC:ALTER_CONFIGS, a GROUP
// GROUP:ALTER_CONFIGS; refused: CLUSTER_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED or
// GROUP_AUTHORIZATION_FAILED with Kafka's default message.
#include <set>
#include <utility>

#include "handlers/admin_util.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using admin::alter_each_resource;
using admin::api_error;
using protocol::alter_configs_request;
using protocol::alter_configs_response;
using protocol::error_code;

api_error alter(context& ctx, const access& a,
                const alter_configs_request::AlterConfigsResource& res, bool validate_only) {
  std::set<std::string> keys;
  std::string nulls;
  for (const auto& c : res.configs) {
    if (!keys.insert(c.name).second) {
      return {error_code::invalid_request, "Error due to duplicate config keys"};
    }
    if (!c.value) nulls += (nulls.empty() ? "" : ", ") + c.name;
  }
  if (!nulls.empty()) {
    return {error_code::invalid_request, "Null value not supported for : " + nulls};
  }
  switch (res.resource_type) {
    case admin::resource_topic: {
      if (auto e = admin::authorize_alter_configs(a, res.resource_type, res.resource_name);
          !e.ok()) {
        return e;
      }
      if (auto e = admin::check_topic_resource_name(res.resource_name); !e.ok()) return e;
      std::map<std::string, std::string> configs;
      for (const auto& c : res.configs) configs[c.name] = *c.value;
      std::lock_guard lock(admin::topic_change_mutex());
      return admin::replace_topic_configs(ctx, res.resource_name, configs, validate_only);
    }
    case admin::resource_broker: {
      if (auto e = admin::check_broker_name(ctx, res.resource_name, true); !e.ok()) return e;
      if (res.configs.empty()) {
        return admin::authorize_alter_configs(a, res.resource_type, res.resource_name);
      }
      std::string names;
      for (const auto& k : keys) names += (names.empty() ? "" : ", ") + k;
      return {error_code::invalid_request,
              "Cannot update these configs dynamically: " + names +
                  " (Silt's broker settings are read-only at runtime: set them in the properties "
                  "file or with --override and restart)"};
    }
    case admin::resource_client_metrics:
    case admin::resource_group:
      // Kafka's, not Silt's yet: refused as unknown once the ACLs let them through.
      if (auto e = admin::authorize_alter_configs(a, res.resource_type, res.resource_name);
          !e.ok()) {
        return e;
      }
      return {error_code::invalid_request,
              "Unknown resource type " + std::to_string(res.resource_type)};
    default:
      return {error_code::invalid_request,
              "Unknown resource type " + std::to_string(res.resource_type)};
  }
}

}  // namespace

asio::awaitable<alter_configs_response> handle_alter_configs(context& ctx, const net::request& raw,
                                                             const alter_configs_request& req) {
  const int64_t since = ctx.registry.last_change();
  const access a(ctx, raw);
  auto resp = alter_each_resource<alter_configs_response>(
      req, [&](const auto& r) { return alter(ctx, a, r, req.validate_only); });
  // Answered once every broker serves the topics' new configs.
  (void)co_await ctx.agree(since);
  co_return resp;
}

}  // namespace silt::handlers
