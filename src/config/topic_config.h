// Topic-level configs (retention.ms, max.message.bytes, ...): validation, defaults taken
// from the broker's settings, and the entries DescribeConfigs returns.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "config/config.h"

namespace silt::config {

// The effective settings of one topic.
struct topic_config {
  int64_t retention_ms = 604800000;
  int64_t retention_bytes = -1;
  int32_t max_message_bytes = 1048588;
  timestamp_type message_timestamp_type = timestamp_type::create_time;
  int64_t message_timestamp_before_max_ms = INT64_MAX;
  int64_t message_timestamp_after_max_ms = 3600000;
  int32_t min_insync_replicas = 1;
  // The active segment's bounds: time retention never removes a partition's newest
  // segment_bytes written within segment_ms (storage::stream_store_options::segment_ms).
  int64_t segment_ms = 604800000;
  int64_t segment_bytes = 1073741824;
  // Log compaction: cleanup.policy has `compact` (storage::log_cleaner).
  bool compact = false;
  int64_t delete_retention_ms = 86400000;
  int64_t min_compaction_lag_ms = 0;
  int64_t max_compaction_lag_ms = INT64_MAX;
  double min_cleanable_dirty_ratio = 0.5;
};

// Why a topic config was refused, with the Kafka error code to return. Always INVALID_CONFIG
// (40) so far, also for values that are valid Kafka but not supported
// (remote.storage.enable=true): that is what a Kafka broker returns
// for a feature it lacks (tiered storage turned off), while POLICY_VIOLATION (44) means a
// create-topic or alter-config policy said no.
struct config_error {
  int16_t error_code = 40;
  std::string message;  // names the key and the value
};

// Checks overrides (name -> value) of one topic: unknown names, unparsable or out-of-range
// values, unsupported values (remote.storage.enable=true) are errors, with Kafka's messages
// ("Unknown topic config name: foo", "Invalid value abc for configuration retention.ms: Not a
// number of type LONG"). Names Kafka knows but that have no effect here (segment.bytes, ...) are
// accepted and stored. Values are trimmed and booleans read in any case, as Kafka does.
[[nodiscard]] tl::expected<void, config_error> validate_topic_configs(
    const std::map<std::string, std::string>& overrides);

// The effective config: the broker's defaults with the topic's overrides applied.
// The overrides must have passed validate_topic_configs. A cleanup.policy without `delete`
// means nothing is deleted: retention_ms and retention_bytes are then -1.
[[nodiscard]] topic_config effective_topic_config(
    const broker_config& broker, const std::map<std::string, std::string>& overrides);

// DescribeConfigs entry sources (the Kafka ConfigSource values).
enum class config_source : int8_t {
  unknown = 0,
  dynamic_topic_config = 1,
  dynamic_broker_config = 2,
  dynamic_default_broker_config = 3,
  static_broker_config = 4,
  default_config = 5,
};

// Kafka ConfigType values for DescribeConfigs v3+.
enum class config_type : int8_t {
  unknown = 0,
  boolean = 1,
  string = 2,
  int_ = 3,
  short_ = 4,
  long_ = 5,
  double_ = 6,
  list = 7,
  class_ = 8,
  password = 9,
};

struct config_entry {
  std::string name;
  std::optional<std::string> value;  // nullopt for sensitive values
  bool read_only = false;
  bool is_default = false;
  config_source source = config_source::default_config;
  bool sensitive = false;
  config_type type = config_type::string;
  std::string documentation;
  // Synonyms (DescribeConfigs v1+ when asked): the topic override, then the broker setting
  // it falls back on (log.retention.ms for retention.ms), then the default.
  struct synonym {
    std::string name;
    std::optional<std::string> value;
    config_source source = config_source::default_config;
  };
  std::vector<synonym> synonyms;
};

// Every topic config Kafka's DescribeConfigs returns for a topic, with the effective value
// and its source, in name order.
[[nodiscard]] std::vector<config_entry> describe_topic_configs(
    const broker_config& broker, const std::map<std::string, std::string>& overrides);

// Every broker setting with its value (static_broker_config when set in the file or an
// override, default_config otherwise), in name order. Broker settings are read-only. A setting
// that can carry a secret (object.store.uri, metadata.store.uri; every *.password, key and
// JAAS configuration to come) is sensitive, of type PASSWORD, without a value in the entry
// and its synonym, whatever its value: as Kafka answers its PASSWORD settings.
[[nodiscard]] std::vector<config_entry> describe_broker_configs(const broker_config& broker);

}  // namespace silt::config
