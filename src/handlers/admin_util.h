// What the admin API handlers (CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
// AlterConfigs, IncrementalAlterConfigs) share: Kafka's error results, resource types, the
// checks of topic and broker resource names, and the steps that change a topic.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "handlers/access.h"
#include "handlers/context.h"
#include "protocol/generated/error_code.h"
#include "protocol/types.h"

namespace silt::handlers::admin {

// Kafka's ConfigResource.Type ids.
inline constexpr int8_t resource_topic = 2;
inline constexpr int8_t resource_broker = 4;
inline constexpr int8_t resource_broker_logger = 8;
inline constexpr int8_t resource_client_metrics = 16;
inline constexpr int8_t resource_group = 32;

// Kafka's replica placement limit for one controller operation (QuorumController's
// MAX_RECORDS_PER_USER_OP): larger topic creations are refused with POLICY_VIOLATION.
inline constexpr int64_t max_records_per_operation = 10000;

// An error code and its message (Kafka's ApiError); code 0 is success.
struct api_error {
  int16_t code = 0;
  std::optional<std::string> message;

  api_error() = default;
  api_error(protocol::error_code e, std::optional<std::string> msg)
      : code(static_cast<int16_t>(e)), message(std::move(msg)) {}
  api_error(int16_t c, std::optional<std::string> msg) : code(c), message(std::move(msg)) {}
  [[nodiscard]] bool ok() const { return code == 0; }
};

// Kafka's default message of an error (Errors.message()), for errors raised without one.
[[nodiscard]] std::string default_message(protocol::error_code e);
// The error with its default message.
[[nodiscard]] api_error error_of(protocol::error_code e);

[[nodiscard]] protocol::uuid to_uuid(const metadata::topic_id& id);

// One partition's manual replica list: not empty, only this broker, no broker twice
// (INVALID_REPLICA_ASSIGNMENT otherwise, with Kafka's messages).
[[nodiscard]] api_error check_replicas(const context& ctx, const std::vector<int32_t>& broker_ids);

// AlterConfigs and IncrementalAlterConfigs: a resource named twice in one request is refused
// (INVALID_REQUEST); the others get alter(resource)'s result.
template <typename Resp, typename Req, typename Alter>
[[nodiscard]] Resp alter_each_resource(const Req& req, Alter alter) {
  Resp resp;
  std::set<std::pair<int8_t, std::string>> seen, duplicates;
  for (const auto& r : req.resources) {
    if (!seen.emplace(r.resource_type, r.resource_name).second) {
      duplicates.emplace(r.resource_type, r.resource_name);
    }
  }
  for (const auto& r : req.resources) {
    api_error e;
    if (duplicates.contains({r.resource_type, r.resource_name})) {
      e = {protocol::error_code::invalid_request, "Each resource must appear at most once."};
    } else {
      e = alter(r);
    }
    auto& out = resp.responses.emplace_back();
    out.error_code = e.code;
    out.error_message = e.ok() ? std::nullopt : e.message;
    out.resource_type = r.resource_type;
    out.resource_name = r.resource_name;
  }
  return resp;
}

// AlterConfigs and IncrementalAlterConfigs: whether `a` may alter the configs of a resource
// (Kafka's ControllerApis.authorizeAlterResource; BROKER_LOGGER as ConfigAdminManager checks
// it): CLUSTER:ALTER_CONFIGS for BROKER, BROKER_LOGGER and CLIENT_METRICS, TOPIC:ALTER_CONFIGS
// or GROUP:ALTER_CONFIGS on the resource's name. The refusal carries Kafka's default message.
[[nodiscard]] api_error authorize_alter_configs(const access& a, int8_t resource_type,
                                                const std::string& resource_name);

// The name of a ConfigResource.Type id (TOPIC, BROKER, ...), UNKNOWN for others.
[[nodiscard]] std::string resource_type_name(int8_t type);

// Kafka's checks of a topic name for a new topic: Topic.validate (INVALID_TOPIC_EXCEPTION) and
// a collision with an existing topic when `.` and `_` are treated as equal.
[[nodiscard]] api_error check_new_topic_name(const context& ctx, const std::string& name);

// The name of a BROKER config resource: this node's id as a decimal number (or empty when
// `allow_empty`, the cluster-wide default), as ConfigAdminManager checks it (INVALID_REQUEST).
[[nodiscard]] api_error check_broker_name(const context& ctx, std::string_view name,
                                          bool allow_empty);

// The name of a TOPIC config resource for an alteration: not empty (INVALID_REQUEST), valid
// (INVALID_TOPIC_EXCEPTION); as Kafka's ControllerConfigurationValidator.
[[nodiscard]] api_error check_topic_resource_name(std::string_view name);

// Whether a topic config is a list (APPEND and SUBTRACT apply to it).
[[nodiscard]] bool is_list_config(std::string_view name);

// Serializes the changes of topic configs and partition counts: a read-modify-write of a
// topic's overrides (IncrementalAlterConfigs) must not lose a concurrent change, and the
// snapshots handed to ctx.refresh must be installed in the order they were made.
[[nodiscard]] std::mutex& topic_change_mutex();

// Replaces the config overrides of an existing topic after validating them (INVALID_CONFIG),
// then checks that the topic exists (UNKNOWN_TOPIC_OR_PARTITION), in Kafka's order. With
// `validate_only` nothing changes.
[[nodiscard]] api_error replace_topic_configs(context& ctx, const std::string& topic,
                                              const std::map<std::string, std::string>& configs,
                                              bool validate_only);

// Deletes a topic: removes it from the registry, forgets it and frees its streams' data
// (streams are never reused). `deleted` is set to what the topic was. UNKNOWN_TOPIC_OR_PARTITION
// when there is none of that name.
[[nodiscard]] api_error delete_topic(context& ctx, const std::string& name,
                                     metadata::topic_ptr& deleted);

// How long an admin call that changed topics waits for the other brokers to take the change
// in (context::agree()): its request's timeout_ms when positive; none given (0, which
// librdkafka sends by default) leaves the broker's own bound.
[[nodiscard]] inline std::chrono::milliseconds agreement_cap(int32_t timeout_ms) {
  return timeout_ms > 0 ? std::chrono::milliseconds(timeout_ms) : std::chrono::milliseconds::max();
}

}  // namespace silt::handlers::admin
