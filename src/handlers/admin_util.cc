#include "handlers/admin_util.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "base/log.h"

namespace silt::handlers::admin {

using protocol::error_code;

std::string default_message(error_code e) {
  switch (e) {
    case error_code::unknown_topic_or_partition:
      return "This server does not host this topic-partition.";
    case error_code::unknown_topic_id:
      return "This server does not host this topic ID.";
    case error_code::topic_deletion_disabled:
      return "Topic deletion is disabled.";
    case error_code::invalid_request:
      return "This most likely occurs because of a request being malformed by the client library "
             "or the message was sent to an incompatible broker. See the broker logs for more "
             "details.";
    case error_code::unknown_server_error:
      return "The server experienced an unexpected error when processing the request.";
    case error_code::topic_authorization_failed:
      return "Topic authorization failed.";
    case error_code::group_authorization_failed:
      return "Group authorization failed.";
    case error_code::cluster_authorization_failed:
      return "Cluster authorization failed.";
    case error_code::transactional_id_authorization_failed:
      return "Transactional Id authorization failed.";
    default:
      return {};
  }
}

api_error error_of(error_code e) {
  return {e, default_message(e)};
}

protocol::uuid to_uuid(const metadata::topic_id& id) {
  protocol::uuid u;
  u.bytes = id;
  return u;
}

api_error authorize_alter_configs(const access& a, int8_t resource_type,
                                  const std::string& resource_name) {
  using security::acl_operation;
  switch (resource_type) {
    case resource_topic:
      if (a.topic(acl_operation::alter_configs, resource_name)) return {};
      return error_of(error_code::topic_authorization_failed);
    case resource_group:
      if (a.group(acl_operation::alter_configs, resource_name)) return {};
      return error_of(error_code::group_authorization_failed);
    default:
      if (a.cluster(acl_operation::alter_configs)) return {};
      return error_of(error_code::cluster_authorization_failed);
  }
}

std::string resource_type_name(int8_t type) {
  switch (type) {
    case 2:
      return "TOPIC";
    case 4:
      return "BROKER";
    case 8:
      return "BROKER_LOGGER";
    case 16:
      return "CLIENT_METRICS";
    case 32:
      return "GROUP";
    default:
      return "UNKNOWN";
  }
}

namespace {

std::string unify_collision_chars(std::string s) {
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

}  // namespace

api_error check_new_topic_name(const context& ctx, const std::string& name) {
  if (auto why = metadata::check_topic_name(name); !why.empty()) {
    return {error_code::invalid_topic_exception, std::move(why)};
  }
  // Kafka refuses a name that differs from an existing one only in '.' versus '_' (both map to
  // the same metric names).
  if (name.find_first_of("._") != std::string::npos) {
    const auto unified = unify_collision_chars(name);
    for (const auto& t : ctx.registry.all()) {
      if (t->name != name && unify_collision_chars(t->name) == unified) {
        return {error_code::invalid_topic_exception,
                "Topic '" + name + "' collides with existing topic: " + t->name};
      }
    }
  }
  return {};
}

api_error check_broker_name(const context& ctx, std::string_view name, bool allow_empty) {
  if (name.empty()) {
    if (allow_empty) return {};
    return {error_code::invalid_request, "Broker id must not be empty"};
  }
  int32_t id = 0;
  const auto* end = name.data() + name.size();
  const auto [ptr, ec] = std::from_chars(name.data(), end, id);
  if (ec != std::errc{} || ptr != end) {
    return {error_code::invalid_request,
            "Node id must be an integer, but it is: " + std::string(name)};
  }
  if (id != ctx.node_id) {
    return {error_code::invalid_request, "Unexpected broker id, expected " +
                                             std::to_string(ctx.node_id) + ", but received " +
                                             std::string(name)};
  }
  return {};
}

api_error check_topic_resource_name(std::string_view name) {
  if (name.empty()) {
    return {error_code::invalid_request, "Default topic resources are not allowed."};
  }
  if (auto why = metadata::check_topic_name(name); !why.empty()) {
    return {error_code::invalid_topic_exception, std::move(why)};
  }
  return {};
}

bool is_list_config(std::string_view name) {
  return name == "cleanup.policy" || name == "leader.replication.throttled.replicas" ||
         name == "follower.replication.throttled.replicas";
}

std::mutex& topic_change_mutex() {
  static std::mutex mu;
  return mu;
}

api_error replace_topic_configs(context& ctx, const std::string& topic,
                                const std::map<std::string, std::string>& configs,
                                bool validate_only) {
  if (auto v = config::validate_topic_configs(configs); !v) {
    return {v.error().error_code, v.error().message};
  }
  if (!ctx.registry.find(topic)) {
    return {error_code::unknown_topic_or_partition, "The topic '" + topic + "' does not exist."};
  }
  if (validate_only) return {};
  auto info = ctx.registry.set_configs(topic, configs);
  if (!info) {
    if (info.error() == metadata::registry_error::not_found) {
      return {error_code::unknown_topic_or_partition, "The topic '" + topic + "' does not exist."};
    }
    return {error_code::unknown_server_error, "Cannot store the configs of topic " + topic};
  }
  ctx.refresh(*info);
  return {};
}

api_error delete_topic(context& ctx, const std::string& name, metadata::topic_ptr& deleted) {
  auto removed = ctx.registry.remove(name);
  if (!removed) {
    if (removed.error() == metadata::registry_error::not_found) {
      return error_of(error_code::unknown_topic_or_partition);
    }
    return {error_code::unknown_server_error, "Cannot delete topic " + name};
  }
  deleted = *removed;
  ctx.forget(deleted);
  // Free the data: the streams leave the catalog (ranges, epochs, producer state), and the
  // objects left without ranges are deleted later. A stream id is never reused. Another broker
  // that owns one of them forgets it when it sees the topic gone; an upload of it that it
  // commits meanwhile is refused, the stream having no row.
  if (auto r = ctx.store.drop(deleted->streams); !r) {
    SILT_LOG(warn, "silt: topic %s deleted, but its %zu stream(s) stay in the catalog: %s",
             name.c_str(), deleted->streams.size(),
             std::string(storage::stream_error_name(r.error())).c_str());
  }
  return {};
}

api_error check_replicas(const context& ctx, const std::vector<int32_t>& broker_ids) {
  if (broker_ids.empty()) {
    return {protocol::error_code::invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list."};
  }
  std::set<int32_t> replicas;
  for (const int32_t b : broker_ids) {
    if (b != ctx.node_id) {
      return {protocol::error_code::invalid_replica_assignment,
              "The manual partition assignment includes broker " + std::to_string(b) +
                  ", but no such broker is registered."};
    }
    if (!replicas.insert(b).second) {
      return {protocol::error_code::invalid_replica_assignment,
              "The manual partition assignment includes the broker " + std::to_string(b) +
                  " more than once."};
    }
  }
  return {};
}

}  // namespace silt::handlers::admin
