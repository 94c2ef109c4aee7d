// Topic configs: the names, types, defaults, broker synonyms and validation rules of Kafka 4.1's
// topic configs (LogConfig), and which of them Silt acts on.
#include "config/topic_config.h"

#include <algorithm>
#include <climits>
#include <set>
#include <string_view>
#include <utility>

#include "config/internal.h"

namespace silt::config {
namespace {

using detail::parse_int;
using detail::trim;

constexpr int16_t kInvalidConfig = 40;

// How a value is checked (and the Kafka ConfigDef validator it mirrors).
enum class check : uint8_t {
  boolean,       // true or false, any case
  int32,         // INT in [lo, hi]
  int64,         // LONG in [lo, hi]
  ratio,         // DOUBLE in [0, 1]
  choice,        // one of `choices`
  choice_list,   // a list of `choices`
  replica_list,  // "*" or partition:broker,...
  gzip_level,    // 1..9 or -1
};

enum class effect : uint8_t {
  honoured,  // Silt acts on it
  none,      // accepted, stored and described; no effect
};

struct topic_setting {
  std::string name;
  config_type type;
  std::string kafka_default;
  // The broker settings it falls back on, highest precedence first (Kafka's synonyms).
  std::vector<std::string> broker_names;
  check kind;
  int64_t lo = LLONG_MIN;
  int64_t hi = LLONG_MAX;
  std::vector<std::string> choices;
  effect use = effect::none;
  std::string doc;
};

const std::vector<topic_setting>& topic_settings() {
  using ct = config_type;
  static const std::vector<topic_setting> table = {
      {"cleanup.policy",
       ct::list,
       "delete",
       {"log.cleanup.policy"},
       check::choice_list,
       0,
       0,
       {"compact", "delete"},
       effect::honoured,
       "`delete`: data past `retention.ms` or `retention.bytes` is deleted. `compact`: the log "
       "cleaner keeps the latest record of each key (records without a key are refused). Both "
       "(`compact,delete`): compacted, and old data deleted too. An empty list keeps data "
       "forever."},
      {"compression.gzip.level",
       ct::int_,
       "-1",
       {"compression.gzip.level"},
       check::gzip_level,
       0,
       0,
       {},
       effect::none,
       "The gzip level when `compression.type` is gzip."},
      {"compression.lz4.level",
       ct::int_,
       "9",
       {"compression.lz4.level"},
       check::int32,
       1,
       17,
       {},
       effect::none,
       "The lz4 level when `compression.type` is lz4."},
      {"compression.type",
       ct::string,
       "producer",
       {"compression.type"},
       check::choice,
       0,
       0,
       {"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"},
       effect::none,
       "The codec the broker recompresses batches with; Silt always keeps the producer's."},
      {"compression.zstd.level",
       ct::int_,
       "3",
       {"compression.zstd.level"},
       check::int32,
       -131072,
       22,
       {},
       effect::none,
       "The zstd level when `compression.type` is zstd."},
      {"delete.retention.ms",
       ct::long_,
       "86400000",
       {"log.cleaner.delete.retention.ms"},
       check::int64,
       0,
       LLONG_MAX,
       {},
       effect::honoured,
       "How long tombstones are kept in compacted topics."},
      {"file.delete.delay.ms",
       ct::long_,
       "60000",
       {"log.segment.delete.delay.ms"},
       check::int64,
       0,
       LLONG_MAX,
       {},
       effect::none,
       "Delay before a deleted segment's file is removed."},
      {"flush.messages",
       ct::long_,
       "9223372036854775807",
       {"log.flush.interval.messages"},
       check::int64,
       1,
       LLONG_MAX,
       {},
       effect::none,
       "Messages between forced flushes; Silt acknowledges writes once they are durable in the "
       "WAL."},
      {"flush.ms",
       ct::long_,
       "9223372036854775807",
       {"log.flush.interval.ms"},
       check::int64,
       0,
       LLONG_MAX,
       {},
       effect::none,
       "Milliseconds between forced flushes; Silt acknowledges writes once they are durable in "
       "the WAL."},
      {"follower.replication.throttled.replicas",
       ct::list,
       "",
       {},
       check::replica_list,
       0,
       0,
       {},
       effect::none,
       "Replicas whose replication is throttled on the follower side."},
      {"index.interval.bytes",
       ct::int_,
       "4096",
       {"log.index.interval.bytes"},
       check::int32,
       0,
       INT_MAX,
       {},
       effect::none,
       "Bytes between offset index entries of a segment."},
      {"leader.replication.throttled.replicas",
       ct::list,
       "",
       {},
       check::replica_list,
       0,
       0,
       {},
       effect::none,
       "Replicas whose replication is throttled on the leader side."},
      {"local.retention.bytes",
       ct::long_,
       "-2",
       {"log.local.retention.bytes"},
       check::int64,
       -2,
       LLONG_MAX,
       {},
       effect::none,
       "Local bytes kept with tiered storage; -2: `retention.bytes`."},
      {"local.retention.ms",
       ct::long_,
       "-2",
       {"log.local.retention.ms"},
       check::int64,
       -2,
       LLONG_MAX,
       {},
       effect::none,
       "Local time kept with tiered storage; -2: `retention.ms`."},
      {"max.compaction.lag.ms",
       ct::long_,
       "9223372036854775807",
       {"log.cleaner.max.compaction.lag.ms"},
       check::int64,
       1,
       LLONG_MAX,
       {},
       effect::honoured,
       "Longest time a record stays uncompacted."},
      {"max.message.bytes",
       ct::int_,
       "1048588",
       {"message.max.bytes"},
       check::int32,
       0,
       INT_MAX,
       {},
       effect::honoured,
       "The largest record batch a producer may send to the topic."},
      {"message.timestamp.after.max.ms",
       ct::long_,
       "3600000",
       {"log.message.timestamp.after.max.ms"},
       check::int64,
       0,
       LLONG_MAX,
       {},
       effect::honoured,
       "With CreateTime, batches stamped more than this far in the future are refused."},
      {"message.timestamp.before.max.ms",
       ct::long_,
       "9223372036854775807",
       {"log.message.timestamp.before.max.ms"},
       check::int64,
       0,
       LLONG_MAX,
       {},
       effect::honoured,
       "With CreateTime, batches stamped more than this far in the past are refused."},
      {"message.timestamp.type",
       ct::string,
       "CreateTime",
       {"log.message.timestamp.type"},
       check::choice,
       0,
       0,
       {"CreateTime", "LogAppendTime"},
       effect::honoured,
       "Whether records keep the producer's timestamp or get the broker's at append."},
      {"min.cleanable.dirty.ratio",
       ct::double_,
       "0.5",
       {"log.cleaner.min.cleanable.ratio"},
       check::ratio,
       0,
       1,
       {},
       effect::honoured,
       "Share of uncompacted log that triggers compaction."},
      {"min.compaction.lag.ms",
       ct::long_,
       "0",
       {"log.cleaner.min.compaction.lag.ms"},
       check::int64,
       0,
       LLONG_MAX,
       {},
       effect::honoured,
       "Shortest time a record stays uncompacted. At most `max.compaction.lag.ms`."},
      {"min.insync.replicas",
       ct::int_,
       "1",
       {"min.insync.replicas"},
       check::int32,
       1,
       INT_MAX,
       {},
       effect::honoured,
       "Replicas that must have a write for acks=all to succeed; Silt has one replica per "
       "partition, so a value above 1 makes acks=all produce fail with NOT_ENOUGH_REPLICAS."},
      {"preallocate",
       ct::boolean,
       "false",
       {"log.preallocate"},
       check::boolean,
       0,
       0,
       {},
       effect::none,
       "Preallocate segment files."},
      {"remote.log.copy.disable",
       ct::boolean,
       "false",
       {},
       check::boolean,
       0,
       0,
       {},
       effect::none,
       "Stop copying to tiered storage."},
      {"remote.log.delete.on.disable",
       ct::boolean,
       "false",
       {},
       check::boolean,
       0,
       0,
       {},
       effect::none,
       "Delete tiered data when tiered storage is turned off."},
      {"remote.storage.enable",
       ct::boolean,
       "false",
       {},
       check::boolean,
       0,
       0,
       {},
       effect::none,
       "Kafka's tiered storage. Only false is accepted (as by a Kafka broker without tiered "
       "storage); Silt keeps all data in the object store anyway."},
      {"retention.bytes",
       ct::long_,
       "-1",
       {"log.retention.bytes"},
       check::int64,
       LLONG_MIN,
       LLONG_MAX,
       {},
       effect::honoured,
       "Bytes kept per partition at most; oldest data is deleted first. Negative: no limit."},
      {"retention.ms",
       ct::long_,
       "604800000",
       {"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
       check::int64,
       -1,
       LLONG_MAX,
       {},
       effect::honoured,
       "How long data is kept, in milliseconds; -1: forever."},
      {"segment.bytes",
       ct::int_,
       "1073741824",
       {"log.segment.bytes"},
       check::int32,
       1048576,
       INT_MAX,
       {},
       effect::honoured,
       "Silt has no segment files; its active segment is a partition's newest `segment.bytes`, "
       "which time retention never removes while they were written within `segment.ms`."},
      {"segment.index.bytes",
       ct::int_,
       "10485760",
       {"log.index.size.max.bytes"},
       check::int32,
       4,
       INT_MAX,
       {},
       effect::none,
       "Offset index size of a segment."},
      {"segment.jitter.ms",
       ct::long_,
       "0",
       {"log.roll.jitter.ms", "log.roll.jitter.hours"},
       check::int64,
       0,
       LLONG_MAX,
       {},
       effect::none,
       "Random jitter on `segment.ms`."},
      {"segment.ms",
       ct::long_,
       "604800000",
       {"log.roll.ms", "log.roll.hours"},
       check::int64,
       1,
       LLONG_MAX,
       {},
       effect::honoured,
       "How long a partition's newest `segment.bytes` are kept from time retention after they "
       "were written (Kafka's segment roll time)."},
      {"unclean.leader.election.enable",
       ct::boolean,
       "false",
       {"unclean.leader.election.enable"},
       check::boolean,
       0,
       0,
       {},
       effect::none,
       "Let an out-of-sync replica become leader; Silt has one replica per partition."},
  };
  return table;
}

const topic_setting* find_topic_setting(std::string_view name) {
  for (const auto& s : topic_settings()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

bool is_replica_list(std::string_view v) {
  if (trim(v) == "*") return true;
  for (const auto& item : detail::split_list(v)) {
    const auto colon = item.find(':');
    if (colon == std::string::npos) return false;
    const auto partition = parse_int(trim(std::string_view(item).substr(0, colon)));
    const auto broker = parse_int(trim(std::string_view(item).substr(colon + 1)));
    if (!partition || !broker) return false;
  }
  return true;
}

// Why `value` is not valid for `s`, in Kafka's words; nullopt when it is.
std::optional<std::string> why_invalid(const topic_setting& s, std::string_view value) {
  const auto v = trim(value);
  switch (s.kind) {
    case check::boolean:
      if (!detail::parse_bool(v)) return "Expected value to be either true or false";
      return std::nullopt;
    case check::int32:
    case check::int64: {
      const auto n = parse_int(v);
      const bool is_int = s.kind == check::int32;
      if (!n || (is_int && (*n < INT_MIN || *n > INT_MAX))) {
        return is_int ? "Not a number of type INT" : "Not a number of type LONG";
      }
      if (*n < s.lo) return "Value must be at least " + std::to_string(s.lo);
      if (*n > s.hi) return "Value must be no more than " + std::to_string(s.hi);
      return std::nullopt;
    }
    case check::ratio: {
      const auto d = detail::parse_double(v);
      if (!d) return "Not a number of type DOUBLE";
      if (*d < 0) return "Value must be at least 0";
      if (*d > 1) return "Value must be no more than 1";
      return std::nullopt;
    }
    case check::choice:
      if (std::find(s.choices.begin(), s.choices.end(), v) == s.choices.end()) {
        return "String must be one of: " + join(s.choices);
      }
      return std::nullopt;
    case check::choice_list:
      for (const auto& item : detail::split_list(v)) {
        if (std::find(s.choices.begin(), s.choices.end(), item) == s.choices.end()) {
          return "String must be one of: " + join(s.choices);
        }
      }
      return std::nullopt;
    case check::replica_list:
      if (!is_replica_list(v)) {
        return s.name +
               " must be the literal '*' or a list of replicas in the following format: "
               "[partitionId]:[brokerId],[partitionId]:[brokerId],...";
      }
      return std::nullopt;
    case check::gzip_level: {
      const auto n = parse_int(v);
      if (!n || *n < INT_MIN || *n > INT_MAX) return "Not a number of type INT";
      if (*n != -1 && (*n < 1 || *n > 9)) return "Value must be between 1 and 9 or equal to -1";
      return std::nullopt;
    }
  }
  return std::nullopt;
}

bool has_item(std::string_view list, std::string_view item) {
  const auto items = detail::split_list(list);
  return std::find(items.begin(), items.end(), item) != items.end();
}

// The value of `name` among the overrides, or Kafka's default.
int64_t int_or_default(const std::map<std::string, std::string>& overrides,
                       const std::string& name) {
  if (const auto it = overrides.find(name); it != overrides.end()) {
    if (const auto n = parse_int(trim(it->second))) return *n;
  }
  return parse_int(find_topic_setting(name)->kafka_default).value_or(0);
}

std::string cell(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    if (ch == '|') out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

tl::expected<void, config_error> validate_topic_configs(
    const std::map<std::string, std::string>& overrides) {
  for (const auto& [name, value] : overrides) {
    const auto* s = find_topic_setting(name);
    if (s == nullptr) {
      return tl::unexpected(config_error{kInvalidConfig, "Unknown topic config name: " + name});
    }
    if (auto why = why_invalid(*s, value)) {
      std::string message = "Invalid value ";
      message.append(value).append(" for configuration ").append(name).append(": ").append(*why);
      return tl::unexpected(config_error{kInvalidConfig, std::move(message)});
    }
  }
  if (const auto it = overrides.find("remote.storage.enable");
      it != overrides.end() && detail::parse_bool(trim(it->second)).value_or(false)) {
    return tl::unexpected(config_error{
        kInvalidConfig,
        "remote.storage.enable=true is not supported: Silt has no tiered storage (all data "
        "lives in the object store already)"});
  }
  const auto min_lag = int_or_default(overrides, "min.compaction.lag.ms");
  const auto max_lag = int_or_default(overrides, "max.compaction.lag.ms");
  if (min_lag > max_lag) {
    return tl::unexpected(
        config_error{kInvalidConfig, "conflict topic config setting min.compaction.lag.ms (" +
                                         std::to_string(min_lag) + ") > max.compaction.lag.ms (" +
                                         std::to_string(max_lag) + ")"});
  }
  return {};
}

topic_config effective_topic_config(const broker_config& broker,
                                    const std::map<std::string, std::string>& overrides) {
  topic_config t;
  t.retention_ms = broker.log_retention_ms;
  t.retention_bytes = broker.log_retention_bytes;
  t.max_message_bytes = broker.message_max_bytes;
  t.message_timestamp_type = broker.log_message_timestamp_type;
  t.message_timestamp_before_max_ms = broker.log_message_timestamp_before_max_ms;
  t.message_timestamp_after_max_ms = broker.log_message_timestamp_after_max_ms;
  t.min_insync_replicas = broker.min_insync_replicas;
  auto get_int = [&overrides](const char* name) -> std::optional<int64_t> {
    const auto it = overrides.find(name);
    if (it == overrides.end()) return std::nullopt;
    return parse_int(trim(it->second));
  };
  if (const auto v = get_int("retention.ms")) t.retention_ms = *v;
  if (const auto v = get_int("retention.bytes")) t.retention_bytes = *v < 0 ? -1 : *v;
  if (const auto v = get_int("max.message.bytes")) t.max_message_bytes = static_cast<int32_t>(*v);
  if (const auto v = get_int("segment.ms")) t.segment_ms = *v;
  if (const auto v = get_int("segment.bytes")) t.segment_bytes = *v;
  if (const auto v = get_int("message.timestamp.before.max.ms")) {
    t.message_timestamp_before_max_ms = *v;
  }
  if (const auto v = get_int("message.timestamp.after.max.ms")) {
    t.message_timestamp_after_max_ms = *v;
  }
  if (const auto v = get_int("min.insync.replicas")) {
    t.min_insync_replicas = static_cast<int32_t>(*v);
  }
  if (const auto it = overrides.find("message.timestamp.type"); it != overrides.end()) {
    t.message_timestamp_type = trim(it->second) == "LogAppendTime" ? timestamp_type::log_append_time
                                                                   : timestamp_type::create_time;
  }
  t.delete_retention_ms = broker.log_cleaner_delete_retention_ms;
  t.min_compaction_lag_ms = broker.log_cleaner_min_compaction_lag_ms;
  t.max_compaction_lag_ms = broker.log_cleaner_max_compaction_lag_ms;
  t.min_cleanable_dirty_ratio = broker.log_cleaner_min_cleanable_ratio;
  if (const auto v = get_int("delete.retention.ms")) t.delete_retention_ms = *v;
  if (const auto v = get_int("min.compaction.lag.ms")) t.min_compaction_lag_ms = *v;
  if (const auto v = get_int("max.compaction.lag.ms")) t.max_compaction_lag_ms = *v;
  if (const auto it = overrides.find("min.cleanable.dirty.ratio"); it != overrides.end()) {
    if (const auto d = detail::parse_double(trim(it->second))) {
      t.min_cleanable_dirty_ratio = *d;
    }
  }
  if (const auto it = overrides.find("cleanup.policy"); it != overrides.end()) {
    t.compact = has_item(it->second, "compact");
  }
  // Without the delete policy nothing is deleted (as in Kafka, where retention applies only to
  // topics whose cleanup.policy includes delete).
  if (const auto it = overrides.find("cleanup.policy");
      it != overrides.end() && !has_item(it->second, "delete")) {
    t.retention_ms = -1;
    t.retention_bytes = -1;
  }
  return t;
}

std::vector<config_entry> describe_topic_configs(
    const broker_config& broker, const std::map<std::string, std::string>& overrides) {
  std::vector<config_entry> out;
  for (const auto& s : topic_settings()) {
    config_entry e;
    e.name = s.name;
    e.type = s.type;
    e.documentation = s.doc;
    if (const auto it = overrides.find(s.name); it != overrides.end()) {
      e.synonyms.push_back(
          {s.name, std::string(trim(it->second)), config_source::dynamic_topic_config});
    }
    for (const auto& b : s.broker_names) {
      if (!broker.given.contains(b)) continue;
      std::optional<std::string> value;
      if (const auto it = broker.values.find(b); it != broker.values.end()) value = it->second;
      e.synonyms.push_back({b, value, config_source::static_broker_config});
    }
    // The default: the broker setting's default when Silt has that setting, else Kafka's.
    const std::string& default_name = s.broker_names.empty() ? s.name : s.broker_names.front();
    e.synonyms.push_back({default_name,
                          s.broker_names.empty()
                              ? s.kafka_default
                              : detail::broker_default(default_name).value_or(s.kafka_default),
                          config_source::default_config});
    const auto& first = e.synonyms.front();
    e.source = first.source;
    e.value = first.value;
    // A broker setting that only stands in for another (log.retention.hours) has its effect in
    // that one: the value is the effective one.
    if (e.source == config_source::static_broker_config) {
      if (const auto it = broker.values.find(default_name); it != broker.values.end()) {
        e.value = it->second;
      }
    }
    e.is_default = e.source == config_source::default_config;
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(),
            [](const config_entry& a, const config_entry& b) { return a.name < b.name; });
  return out;
}

namespace detail {

std::string topic_docs_table() {
  std::string md =
      "| name | default (or the broker setting it falls back on) | meaning | supported? |\n"
      "|---|---|---|---|\n";
  for (const auto& s : topic_settings()) {
    std::string fallback;
    if (!s.broker_names.empty() && broker_default(s.broker_names.front())) {
      fallback = "broker setting `" + s.broker_names.front() + "`";
    } else {
      fallback = s.kafka_default.empty() ? "(empty)" : "`" + s.kafka_default + "`";
    }
    std::string supported;
    if (s.name == "cleanup.policy") {
      supported = "yes";
    } else if (s.name == "remote.storage.enable") {
      supported = "only `false`";
    } else {
      supported = s.use == effect::honoured ? "yes" : "no effect";
    }
    md +=
        "| `" + s.name + "` | " + cell(fallback) + " | " + cell(s.doc) + " | " + supported + " |\n";
  }
  return md;
}

}  // namespace detail
}  // namespace silt::config
