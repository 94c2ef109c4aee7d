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

// The TLS settings of one listener, as Kafka names them (ssl.*): the broker-wide ones,
// overridden for a listener by listener.name.<listener, lower case>.ssl.*. Checked for form
// here; the files and passwords are checked when the listener's TLS context is built, at start.
struct ssl_config {
  std::string keystore_type = "PKCS12";    // ssl.keystore.type: PEM | PKCS12
  std::string keystore_location;           // ssl.keystore.location
  std::string keystore_password;           // ssl.keystore.password
  std::string key_password;                // ssl.key.password
  std::string keystore_certificate_chain;  // ssl.keystore.certificate.chain
  std::string keystore_key;                // ssl.keystore.key
  std::string truststore_type = "PKCS12";  // ssl.truststore.type: PEM | PKCS12
  std::string truststore_location;         // ssl.truststore.location
  std::string truststore_password;         // ssl.truststore.password
  std::string truststore_certificates;     // ssl.truststore.certificates
  std::string client_auth = "none";        // ssl.client.auth
  std::vector<std::string> enabled_protocols = {"TLSv1.2", "TLSv1.3"};  // ssl.enabled.protocols
  std::vector<std::string> cipher_suites;           // ssl.cipher.suites (empty: OpenSSL's)
  std::string principal_mapping_rules = "DEFAULT";  // ssl.principal.mapping.rules
  // The listener these settings are for (empty: the broker-wide ones) and which settings it
  // overrides: key() gives the name a message should use for a setting.
  std::string listener_name;
  std::set<std::string> overridden;
  // "ssl.keystore.password", or "listener.name.ssl.ssl.keystore.password" when overridden.
  [[nodiscard]] std::string key(std::string_view setting) const;
};

// Kafka's OAUTHBEARER validation settings (sasl.oauthbearer.*), broker-wide, or for one listener as
// listener.name.<listener>.oauthbearer.sasl.oauthbearer.*.
struct oauthbearer_config {
  std::string jwks_endpoint_url;                       // sasl.oauthbearer.jwks.endpoint.url
  int64_t jwks_endpoint_refresh_ms = 3600000;          // ...jwks.endpoint.refresh.ms
  int64_t jwks_endpoint_retry_backoff_ms = 100;        // ...jwks.endpoint.retry.backoff.ms
  int64_t jwks_endpoint_retry_backoff_max_ms = 10000;  // ...jwks.endpoint.retry.backoff.max.ms
  std::vector<std::string> expected_audience;          // sasl.oauthbearer.expected.audience
  std::string expected_issuer;                         // sasl.oauthbearer.expected.issuer
  std::string sub_claim_name = "sub";                  // sasl.oauthbearer.sub.claim.name
  std::string scope_claim_name = "scope";              // sasl.oauthbearer.scope.claim.name
  int32_t clock_skew_seconds = 30;                     // sasl.oauthbearer.clock.skew.seconds
  // sasl.oauthbearer.jwt.validator.class (Kafka 4.1): those that check the JWKS only.
  std::string jwt_validator_class =
      "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator";
};

// The SASL settings of one SASL_PLAINTEXT or SASL_SSL listener, as Kafka names them: the
// broker-wide ones, overridden for a listener by listener.name.<listener>.sasl.enabled.mechanisms,
// listener.name.<listener>.connections.max.reauth.ms and, per mechanism,
// listener.name.<listener>.<mechanism>.sasl.jaas.config. Checked at start (a PLAIN listener
// needs users, OAUTHBEARER a JWKS).
struct sasl_config {
  std::vector<std::string> enabled_mechanisms = {"GSSAPI"};  // sasl.enabled.mechanisms
  std::string jaas_config;  // sasl.jaas.config (for every mechanism without its own)
  // listener.name.<listener>.<mechanism>.sasl.jaas.config, by mechanism (upper case).
  std::map<std::string, std::string> mechanism_jaas_config;
  int64_t connections_max_reauth_ms = 0;  // connections.max.reauth.ms (0: never)
  // listener.name.<listener>.<mechanism>.connections.max.reauth.ms, by mechanism.
  std::map<std::string, int64_t> mechanism_reauth_ms;
  // sasl.server.callback.handler.class, broker-wide ("") or per mechanism; only Kafka's JWT
  // validator for OAUTHBEARER is understood.
  std::map<std::string, std::string> callback_handler_class;
  // OAUTHBEARER's token checks: the broker-wide ones with the listener's overrides.
  oauthbearer_config oauthbearer;
  std::string listener_name;  // empty: the broker-wide settings
  // The JAAS config text for `mechanism` (upper case); empty: none.
  [[nodiscard]] const std::string& jaas_for(const std::string& mechanism) const {
    const auto it = mechanism_jaas_config.find(mechanism);
    return it == mechanism_jaas_config.end() ? jaas_config : it->second;
  }
  [[nodiscard]] int64_t reauth_ms_for(const std::string& mechanism) const {
    const auto it = mechanism_reauth_ms.find(mechanism);
    return it == mechanism_reauth_ms.end() ? connections_max_reauth_ms : it->second;
  }
};

// The SASL mechanisms Silt serves, as sasl.enabled.mechanisms names them.
inline constexpr std::string_view kSaslMechanisms[] = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512",
                                                       "OAUTHBEARER"};
// The class names of Kafka's JWT validator (OAUTHBEARER), which Silt's validation stands for.
[[nodiscard]] bool is_oauthbearer_validator_class(std::string_view name);
// Whether a security protocol runs over TLS (SSL, SASL_SSL) / authenticates with SASL.
[[nodiscard]] inline bool protocol_uses_tls(std::string_view p) {
  return p == "SSL" || p == "SASL_SSL";
}
[[nodiscard]] inline bool protocol_uses_sasl(std::string_view p) {
  return p == "SASL_PLAINTEXT" || p == "SASL_SSL";
}

struct broker_config {
  // Network
  // The broker's listeners (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); those of Kafka's
  // controller (controller.listener.names) dropped.
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
  // ssl.*: the broker-wide TLS settings, and the effective ones of each SSL listener (by name).
  ssl_config ssl;
  std::map<std::string, ssl_config> listener_ssl;
  // sasl.*: the broker-wide SASL settings, and the effective ones of each SASL listener.
  sasl_config sasl;
  std::map<std::string, sasl_config> listener_sasl;
  oauthbearer_config oauthbearer;
  // authorizer.class.name: empty (no authorization: every client may do everything) or Kafka's
  // StandardAuthorizer, which turns ACLs on.
  std::string authorizer_class_name;
  std::string super_users;                        // super.users (';'-separated principals)
  bool allow_everyone_if_no_acl_found = false;    // allow.everyone.if.no.acl.found
  int32_t quota_window_num = 11;                  // quota.window.num
  int32_t quota_window_size_seconds = 1;          // quota.window.size.seconds
  int32_t sasl_server_max_receive_size = 524288;  // sasl.server.max.receive.size
  int64_t connection_failed_authentication_delay_ms =
      100;                                        // connection.failed.authentication.delay.ms
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
  int32_t max_inflight_requests = 64;          // connections.max.inflight.requests (per connection)
  int64_t connections_max_idle_ms = 600000;    // connections.max.idle.ms
  int32_t max_connections = 10000;             // max.connections
  int32_t max_connections_per_ip = INT32_MAX;  // max.connections.per.ip
  std::string max_connections_per_ip_overrides;  // max.connections.per.ip.overrides
  int64_t metrics_log_interval_ms = 0;           // metrics.log.interval.ms (0: at shutdown only)
  std::string metrics_listener;                  // metrics.listener (empty: no endpoint)
  std::string log_level = "info";                // log.level: error | warn | info | debug
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
  // Log compaction (storage::log_cleaner)
  bool log_cleaner_enable = true;                      // log.cleaner.enable
  int32_t log_cleaner_threads = 1;                     // log.cleaner.threads
  int64_t log_cleaner_dedupe_buffer_size = 134217728;  // log.cleaner.dedupe.buffer.size
  double log_cleaner_io_buffer_load_factor = 0.9;      // log.cleaner.io.buffer.load.factor
  double log_cleaner_io_max_bytes_per_second = 1.7976931348623157e308;
  int64_t log_cleaner_backoff_ms = 15000;                 // log.cleaner.backoff.ms
  double log_cleaner_min_cleanable_ratio = 0.5;           // log.cleaner.min.cleanable.ratio
  int64_t log_cleaner_min_compaction_lag_ms = 0;          // log.cleaner.min.compaction.lag.ms
  int64_t log_cleaner_max_compaction_lag_ms = INT64_MAX;  // log.cleaner.max.compaction.lag.ms
  int64_t log_cleaner_delete_retention_ms = 86400000;     // log.cleaner.delete.retention.ms
  int32_t message_max_bytes = 1048588;                    // message.max.bytes
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
  // stand in for. Kafka settings that Silt ignores are not kept. The values of sensitive
  // settings (the store URIs) are here as given: describe_broker_configs leaves them out, and
  // nothing else may log or send them unmasked (base/redact.h).
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
// properties file"). The error names the bad key or value (and the file and line); the value
// of a sensitive setting is quoted with its credentials masked.
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

// metrics.listener parsed: http[s]://host:port/path (an empty host: all interfaces; no path:
// /metrics). Nullopt for anything else.
struct http_endpoint {
  bool tls = false;  // https://: served over TLS with the broker-wide ssl.* settings
  std::string host;
  uint16_t port = 0;
  std::string path;
};
[[nodiscard]] std::optional<http_endpoint> parse_http_endpoint(std::string_view uri);

// max.connections.per.ip.overrides parsed: "host:count[,...]" (a host name or an IP address,
// a bracketed or bare IPv6 one; the count the last colon's), as Kafka reads it. Nullopt for
// anything else.
[[nodiscard]] std::optional<std::vector<std::pair<std::string, int32_t>>> parse_ip_overrides(
    std::string_view v);

// The security protocol of a listener name (PLAINTEXT, SSL...), from
// listener.security.protocol.map; empty for a name it does not map.
[[nodiscard]] std::string security_protocol(const broker_config& c, std::string_view listener);

// Where clients are told to reach this broker (Metadata, the broker registry): the first
// advertised listener, an empty host as "localhost" (localhost:9092 when none is set).
[[nodiscard]] endpoint advertised_endpoint(const broker_config& c);

}  // namespace silt::config
