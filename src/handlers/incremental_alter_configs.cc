// IncrementalAlterConfigs (key 44, v0-1): changes some of a topic's config overrides, as Kafka
// 4.1 (ConfigAdminManager.preprocess, then ConfigurationControlManager): a resource named twice,
// a key given twice or a null value for anything but DELETE are INVALID_REQUEST. Operations:
// SET (0) sets the override, DELETE (1) removes it (back to the broker's value), APPEND (2) and
// SUBTRACT (3) add items to or remove them from a list config (cleanup.policy, the
// *.replication.throttled.replicas), starting from its current value; on other configs they are
// INVALID_CONFIG. The resulting overrides are validated (INVALID_CONFIG, e.g. "Unknown topic
// config name: x") before the topic's existence is checked (UNKNOWN_TOPIC_OR_PARTITION); all of
// a resource's changes apply or none. validate_only checks and changes nothing.
//
// BROKER resources: Silt's broker settings are static (see alter_configs.cc): SET, APPEND and
// SUBTRACT are INVALID_REQUEST saying so; DELETE succeeds with nothing to do (there are no
// dynamic values to delete).
//
// ACLs, as Kafka (ConfigAdminManager.preprocess on the broker, then
// ControllerApis.authorizeAlterResource): BROKER and CLIENT_METRICS need CLUSTER:ALTER_CONFIGS,
// checked after what Kafka's broker checks first (resources and keys named twice, null values,
// a BROKER resource's operations, name and read-only settings); BROKER_LOGGER needs
// CLUSTER:ALTER_CONFIGS too, before anything of it is looked at; a TOPIC needs
// TOPIC:ALTER_CONFIGS, a GROUP GROUP:ALTER_CONFIGS, before their operations, name, configs and
// existence are checked. Refused: CLUSTER_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED or
// GROUP_AUTHORIZATION_FAILED with Kafka's default message (BROKER_LOGGER: no message).
#include <algorithm>
#include <set>
#include <utility>

#include "handlers/admin_util.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using admin::alter_each_resource;
using admin::api_error;
using protocol::error_code;
using protocol::incremental_alter_configs_request;
using protocol::incremental_alter_configs_response;

constexpr int8_t op_set = 0;
constexpr int8_t op_delete = 1;
constexpr int8_t op_append = 2;
constexpr int8_t op_subtract = 3;

const char* op_name(int8_t op) {
  switch (op) {
    case op_set:
      return "SET";
    case op_delete:
      return "DELETE";
    case op_append:
      return "APPEND";
    default:
      return "SUBTRACT";
  }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ",") + i;
  return s;
}

// The value APPEND and SUBTRACT start from when the topic has no override of `name`: its
// default (as Kafka's ConfigurationControlManager, which uses the config's default).
std::string default_value(const context& ctx, const std::string& name) {
  for (const auto& e : config::describe_topic_configs(ctx.config, {})) {
    if (e.name != name) continue;
    for (const auto& s : e.synonyms) {
      if (s.source == config::config_source::default_config) return s.value.value_or("");
    }
    return e.value.value_or("");
  }
  return {};
}

api_error alter_topic(context& ctx,
                      const incremental_alter_configs_request::AlterConfigsResource& res,
                      bool validate_only) {
  if (auto e = admin::check_topic_resource_name(res.resource_name); !e.ok()) return e;
  std::lock_guard lock(admin::topic_change_mutex());
  auto info = ctx.registry.find(res.resource_name);
  std::map<std::string, std::string> configs;
  if (info) configs = info->configs;
  for (const auto& c : res.configs) {
    switch (c.config_operation) {
      case op_set:
        configs[c.name] = *c.value;
        break;
      case op_delete:
        configs.erase(c.name);
        break;
      case op_append:
      case op_subtract: {
        if (!admin::is_list_config(c.name)) {
          return {error_code::invalid_config, std::string("Can't ") + op_name(c.config_operation) +
                                                  " to key " + c.name +
                                                  " because its type is not LIST."};
        }
        const auto it = configs.find(c.name);
        auto items = split(it != configs.end() ? it->second : default_value(ctx, c.name));
        for (const auto& v : split(*c.value)) {
          const auto pos = std::find(items.begin(), items.end(), v);
          if (c.config_operation == op_append && pos == items.end()) items.push_back(v);
          if (c.config_operation == op_subtract && pos != items.end()) items.erase(pos);
        }
        configs[c.name] = join(items);
        break;
      }
      default:
        break;  // refused before
    }
  }
  return admin::replace_topic_configs(ctx, res.resource_name, configs, validate_only);
}

// A resource's operations, each one Kafka knows (INVALID_REQUEST).
api_error check_operations(const incremental_alter_configs_request::AlterConfigsResource& res) {
  for (const auto& c : res.configs) {
    if (c.config_operation < op_set || c.config_operation > op_subtract) {
      return {error_code::invalid_request,
              "Unknown operations type " + std::to_string(c.config_operation)};
    }
  }
  return {};
}

api_error alter(context& ctx, const access& a,
                const incremental_alter_configs_request::AlterConfigsResource& res,
                bool validate_only) {
  std::set<std::string> keys;
  std::string nulls;
  for (const auto& c : res.configs) {
    if (!keys.insert(c.name).second) {
      return {error_code::invalid_request, "Error due to duplicate config keys"};
    }
    if (c.config_operation != op_delete && !c.value) nulls += (nulls.empty() ? "" : ", ") + c.name;
  }
  if (!nulls.empty()) {
    return {error_code::invalid_request, "Null value not supported for : " + nulls};
  }
  const auto authorize = [&] {
    return admin::authorize_alter_configs(a, res.resource_type, res.resource_name);
  };
  switch (res.resource_type) {
    case admin::resource_topic:
      if (auto e = authorize(); !e.ok()) return e;
      if (auto e = check_operations(res); !e.ok()) return e;
      return alter_topic(ctx, res, validate_only);
    case admin::resource_broker: {
      if (auto e = check_operations(res); !e.ok()) return e;
      if (auto e = admin::check_broker_name(ctx, res.resource_name, true); !e.ok()) return e;
      std::string names;
      for (const auto& c : res.configs) {
        if (c.config_operation != op_delete) names += (names.empty() ? "" : ", ") + c.name;
      }
      if (names.empty()) return authorize();
      return {error_code::invalid_request,
              "Cannot update these configs dynamically: " + names +
                  " (Silt's broker settings are read-only at runtime: set them in the properties "
                  "file or with --override and restart)"};
    }
    case admin::resource_broker_logger:
      // Kafka's broker refuses it itself, with an exception whose message is the error's
      // default, which its ApiError leaves out.
      if (auto e = authorize(); !e.ok()) return {e.code, std::nullopt};
      if (auto e = check_operations(res); !e.ok()) return e;
      return {error_code::invalid_request,
              "Unsupported resource type: BROKER_LOGGER (Silt has no adjustable loggers)"};
    case admin::resource_client_metrics:
    case admin::resource_group:
      // Kafka's, not Silt's yet: refused as unknown once the ACLs let them through.
      if (auto e = authorize(); !e.ok()) return e;
      if (auto e = check_operations(res); !e.ok()) return e;
      return {error_code::invalid_request,
              "Unknown resource type " + std::to_string(res.resource_type)};
    default:
      if (auto e = check_operations(res); !e.ok()) return e;
      return {error_code::invalid_request,
              "Unknown resource type " + std::to_string(res.resource_type)};
  }
}

}  // namespace

asio::awaitable<incremental_alter_configs_response> handle_incremental_alter_configs(
    context& ctx, const net::request& raw, const incremental_alter_configs_request& req) {
  const int64_t since = ctx.registry.last_change();
  const access a(ctx, raw);
  auto resp = alter_each_resource<incremental_alter_configs_response>(
      req, [&](const auto& r) { return alter(ctx, a, r, req.validate_only); });
  // Answered once every broker serves the topics' new configs.
  (void)co_await ctx.agree(since);
  co_return resp;
}

}  // namespace silt::handlers
