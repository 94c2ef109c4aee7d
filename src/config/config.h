// Broker configuration: a Kafka-style properties file plus --override key=value, checked
// against one table of settings (name, type, default, validation, documentation). An unknown
// key or an invalid value is an error naming it. Kafka broker settings that have no effect in
// Silt (the controller quorum, replication, segment files...) are accepted with a notice, so
// that Apache Kafka's own config/server.properties loads. docs/configuration.md is generated
// from the same tables (`silt --print-config-docs`) and a test keeps the two equal.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

namespace silt::config {

struct endpoint {
  std::string listener_name;  // e.g. PLAINTEXT, upper case (as Kafka normalises it)
  std::string host;           // empty: all interfaces
  uint16_t port = 0;
};

enum class timestamp_type : uint8_t { create_time, log_append_time };

struct broker_config {
  // Network
  // Only PLAINTEXT listeners; those of Kafka's controller (controller.listener.names) dropped.
  std::vector<endpoint> listeners = {{"PLAINTEXT", "localhost", 9092}};  // listeners
  std::vector<endpoint> advertised_listeners;  // advertised.listeners (default: listeners;
                                               // an empty, 0.0.0.0 or :: host becomes
                                               // "localhost")
  std::vector<std::string> controller_listener_names = {"CONTROLLER"};  // controller.listener.names
  // listener.security.protocol.map: listener name -> security protocol, in the given order.
  std::vector<std::pair<std::string, std::string>> listener_security_protocol_map = {
      {"SASL_SSL", "SASL_SSL"},
      {"PLAINTEXT", "PLAINTEXT"},
      {"SSL", "SSL"},
      {"SASL_PLAINTEXT", "SASL_PLAINTEXT"}};
  int32_t node_id = 1;                            // node.id
  std::string cluster_id;                         // cluster.id (default: generated once, stored)
  std::string broker_rack;                        // broker.rack (empty: none)
  std::string replica_selector_class;             // replica.selector.class (empty: none)
  int64_t broker_heartbeat_interval_ms = 500;     // broker.heartbeat.interval.ms
  int64_t broker_session_timeout_ms = 3000;       // broker.session.timeout.ms
  uint32_t num_network_threads = 2;               // num.network.threads
  uint32_t num_io_threads = 2;                    // num.io.threads (blocking object reads)
  int32_t latency_threads_nice = -10;             // latency.threads.nice
  int32_t socket_request_max_bytes = 104857600;   // socket.request.max.bytes
  int64_t queued_max_request_bytes = 268435456;   // queued.max.request.bytes (all conns)
  int64_t queued_max_response_bytes = 268435456;  // queued.max.response.bytes (all conns)
  int32_t max_inflight_requests = 64;        // connections.max.inflight.requests (per connection)
  int64_t connections_max_idle_ms = 600000;  // connections.max.idle.ms
  int32_t max_connections = 10000;           // max.connections
  int64_t metrics_log_interval_ms = 0;       // metrics.log.interval.ms (0: at shutdown only)
  std::string metrics_listener;              // metrics.listener (empty: no endpoint)
  std::string log_level = "info";            // log.level: error | warn | info | debug
  // Storage
  std::string data_dir = "./data";               // data.dir
  std::string wal_type = "file";                 // wal.type: file | object
  uint32_t wal_object_flush_interval_ms = 20;    // wal.object.flush.interval.ms
  uint64_t wal_object_flush_bytes = 4ull << 20;  // wal.object.flush.bytes
  std::string wal_path;                          // wal.path (default: <data.dir>/wal)
  uint64_t wal_capacity_bytes = 1ull << 30;      // wal.capacity.bytes
  uint32_t wal_iodepth = 32;                     // wal.iodepth
  uint32_t wal_iops = 0;                         // wal.iops (0: unlimited)
  uint32_t wal_commit_delay_us = 1000;           // wal.commit.delay.us (0: none)
  std::string wal_sync = "dsync";                // wal.sync: dsync | fdatasync
  std::string wal_io_engine = "threads";         // wal.io.engine: threads | uring
  std::string object_store_uri;    // object.store.uri (default: file://<data.dir>/objects)
  std::string metadata_store_uri;  // metadata.store.uri (default: sqlite://<data.dir>/metadata.db)
  std::string metadata_path;       // metadata.path, the SQLite form of the same
  uint64_t log_cache_bytes = 512ull << 20;        // log.cache.bytes
  uint64_t block_cache_bytes = 256ull << 20;      // block.cache.bytes
  int64_t upload_interval_ms = 1000;              // upload.interval.ms
  uint64_t upload_threshold_bytes = 64ull << 20;  // upload.threshold.bytes
  int64_t compaction_interval_ms = 60000;         // compaction.interval.ms
  int64_t retention_check_interval_ms = 300000;   // log.retention.check.interval.ms
  int64_t object_sweep_interval_ms = 600000;      // object.sweep.interval.ms
  int64_t object_sweep_grace_ms = 3600000;        // object.sweep.grace.ms
  // Topics (broker-wide defaults of the topic configs)
  int32_t num_partitions = 1;              // num.partitions
  int16_t default_replication_factor = 1;  // default.replication.factor
  bool auto_create_topics_enable = true;   // auto.create.topics.enable
  bool delete_topic_enable = true;         // delete.topic.enable
  int64_t log_retention_ms = 604800000;    // log.retention.ms
  int64_t log_retention_bytes = -1;        // log.retention.bytes
  int32_t message_max_bytes = 1048588;     // message.max.bytes
  timestamp_type log_message_timestamp_type = timestamp_type::create_time;
  // log.message.timestamp.type
  int64_t log_message_timestamp_before_max_ms = INT64_MAX;  // log.message.timestamp.before.max.ms
  int64_t log_message_timestamp_after_max_ms = 3600000;     // log.message.timestamp.after.max.ms
  int32_t min_insync_replicas = 1;                          // min.insync.replicas
  // Producers and fetch sessions
  int64_t producer_id_expiration_ms = 86400000;  // producer.id.expiration.ms
  int32_t max_incremental_fetch_session_cache_slots = 1000;
  // max.incremental.fetch.session.cache.slots
  int32_t group_initial_rebalance_delay_ms = 3000;  // group.initial.rebalance.delay.ms (0
                                                    // without a properties file: config.cc)
  int32_t group_min_session_timeout_ms = 6000;      // group.min.session.timeout.ms
  int32_t group_max_session_timeout_ms = 1800000;   // group.max.session.timeout.ms
  int32_t group_max_size = INT32_MAX;               // group.max.size
  int32_t offsets_topic_num_partitions = 50;        // offsets.topic.num.partitions
  int64_t offsets_retention_minutes = 10080;        // offsets.retention.minutes
  int64_t offsets_retention_check_interval_ms = 600000;
  // offsets.retention.check.interval.ms
  int32_t offset_metadata_max_bytes = 4096;  // offset.metadata.max.bytes
  int32_t offsets_commit_timeout_ms = 5000;  // offsets.commit.timeout.ms
  // Every setting as given or defaulted, by name (DescribeConfigs on the broker resource).
  // Settings that only stand in for another (log.retention.hours, log.retention.minutes,
  // log.dirs, log.dir, broker.id) appear only when given; their effect is in the setting they
  // stand in for. Kafka settings that Silt ignores are not kept.
  std::map<std::string, std::string> values;
  // The names of `values` set in the properties file or by --override (the rest are defaults).
  std::set<std::string> given;
  // What was accepted but is not used, one line each, without the "silt: " prefix: "ignoring
  // Kafka setting 'log.segment.bytes' (Silt stores objects, not segment files)", "ignoring
  // Kafka listener 'CONTROLLER://:9093' in listeners (Silt has no KRaft controller)". A key
  // given twice is named once.
  std::vector<std::string> notices;
};

// "NAME://host:port" (an IPv6 host in brackets).
[[nodiscard]] std::string to_string(const endpoint& e);

// What the command line asked for.
struct command_line {
  std::optional<std::string> properties_file;
  std::vector<std::string> overrides;  // "key=value", in order (later ones win)
  bool help = false;
  bool print_config_docs = false;
};

// Parses argv: [properties-file] [--override key=value]... [--help] [--print-config-docs].
[[nodiscard]] tl::expected<command_line, std::string> parse_command_line(int argc,
                                                                         const char* const* argv);

// Reads the properties file (if any), applies the overrides, checks every key and value and
// fills in derived defaults. Without a properties file, a few settings default to what suits a
// first try rather than to Kafka's default (docs/configuration.md, "Defaults without a
// properties file"). The error names the bad key or value (and the file and line).
// Once loaded, writes each of the configuration's notices to stderr as "silt: <notice>".
[[nodiscard]] tl::expected<broker_config, std::string> load(const command_line& cmd);

// Same, from already-parsed properties as if read from a properties file (Kafka's defaults
// throughout), writing nothing (tests).
[[nodiscard]] tl::expected<broker_config, std::string> from_properties(
    const std::vector<std::pair<std::string, std::string>>& properties);

// docs/configuration.md: every broker setting and every topic setting with default and meaning.
[[nodiscard]] std::string config_docs_markdown();

// replica.selector.class's one value: Kafka's selector of a replica in the client's rack.
inline constexpr std::string_view rack_aware_selector =
    "org.apache.kafka.common.replica.RackAwareReplicaSelector";

// metrics.listener parsed: http://host:port/path (an empty host: all interfaces; no path:
// /metrics). Nullopt for anything else.
struct http_endpoint {
  std::string host;
  uint16_t port = 0;
  std::string path;
};
[[nodiscard]] std::optional<http_endpoint> parse_http_endpoint(std::string_view uri);

// Where clients are told to reach this broker (Metadata, the broker registry): the first
// advertised listener, an empty host as "localhost" (localhost:9092 when none is set).
[[nodiscard]] endpoint advertised_endpoint(const broker_config& c);

}  // namespace silt::config
