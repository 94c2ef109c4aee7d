// The Kafka broker settings Silt accepts but ignores, grouped by why they have no effect. Names
// and types are Kafka 4.1's (KafkaConfig's ConfigDef); a value must still parse as that type, so
// that a mistyped value stops start-up as it would in Kafka.
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/internal.h"

namespace silt::config::detail {
namespace {

// Kafka's config types, as far as checking a value goes (LIST, STRING and CLASS: any text).
enum class kind : uint8_t { text, boolean, int16, int32, int64, real };

struct group {
  std::string reason;
  std::vector<std::pair<std::string, kind>> names;
};

std::vector<group> groups() {
  using enum kind;
  return {
      {"Silt has no KRaft controller",
       {{"process.roles", text},
        {"controller.quorum.bootstrap.servers", text},
        {"controller.quorum.voters", text},
        {"controller.quorum.election.timeout.ms", int32},
        {"controller.quorum.election.backoff.max.ms", int32},
        {"controller.quorum.fetch.timeout.ms", int32},
        {"controller.quorum.request.timeout.ms", int32},
        {"controller.quorum.retry.backoff.ms", int32},
        {"controller.quorum.append.linger.ms", int32},
        {"controller.socket.timeout.ms", int32},
        {"sasl.mechanism.controller.protocol", text},
        {"metadata.log.dir", text},
        {"metadata.log.segment.bytes", int32},
        {"metadata.log.segment.ms", int64},
        {"metadata.log.max.record.bytes.between.snapshots", int64},
        {"metadata.log.max.snapshot.interval.ms", int64},
        {"metadata.max.retention.bytes", int64},
        {"metadata.max.retention.ms", int64},
        {"metadata.max.idle.interval.ms", int32},
        {"initial.broker.registration.timeout.ms", int32}}},
      {"no replication: durability comes from the WAL, not replicas",
       {{"inter.broker.listener.name", text},
        {"security.inter.broker.protocol", text},
        {"sasl.mechanism.inter.broker.protocol", text},
        {"num.replica.fetchers", int32},
        {"replica.fetch.max.bytes", int32},
        {"replica.fetch.min.bytes", int32},
        {"replica.fetch.wait.max.ms", int32},
        {"replica.fetch.backoff.ms", int32},
        {"replica.fetch.response.max.bytes", int32},
        {"replica.lag.time.max.ms", int64},
        {"replica.socket.timeout.ms", int32},
        {"replica.socket.receive.buffer.bytes", int32},
        {"replica.high.watermark.checkpoint.interval.ms", int64},
        {"unclean.leader.election.enable", boolean},
        {"auto.leader.rebalance.enable", boolean},
        {"leader.imbalance.check.interval.seconds", int64},
        {"controlled.shutdown.enable", boolean}}},
      {"Silt keeps no internal topics",
       {{"offsets.topic.replication.factor", int16},
        {"offsets.topic.segment.bytes", int32},
        {"offsets.topic.compression.codec", int32},
        {"offsets.load.buffer.size", int32},
        {"transaction.state.log.replication.factor", int16},
        {"transaction.state.log.min.isr", int32},
        {"transaction.state.log.num.partitions", int32},
        {"transaction.state.log.segment.bytes", int32},
        {"transaction.state.log.load.buffer.size", int32},
        {"share.coordinator.state.topic.replication.factor", int16},
        {"share.coordinator.state.topic.min.isr", int16},
        {"share.coordinator.state.topic.num.partitions", int32},
        {"share.coordinator.state.topic.segment.bytes", int32},
        {"share.coordinator.state.topic.compression.codec", int32}}},
      {"Silt stores objects, not segment files",
       {{"log.segment.bytes", int32},
        {"log.roll.ms", int64},
        {"log.roll.hours", int32},
        {"log.roll.jitter.ms", int64},
        {"log.roll.jitter.hours", int32},
        {"log.index.size.max.bytes", int32},
        {"log.index.interval.bytes", int32},
        {"log.segment.delete.delay.ms", int64},
        {"log.preallocate", boolean},
        {"num.recovery.threads.per.data.dir", int32}}},
      {"every write is durable in the WAL before it is acknowledged",
       {{"log.flush.interval.messages", int64},
        {"log.flush.interval.ms", int64},
        {"log.flush.scheduler.interval.ms", int64},
        {"log.flush.offset.checkpoint.interval.ms", int32},
        {"log.flush.start.offset.checkpoint.interval.ms", int32}}},
      {"Silt's log cleaner reads and writes whole objects",
       {{"log.cleaner.io.buffer.size", int32}}},
      {"Silt leaves socket buffers and the listen backlog to the system",
       {{"socket.send.buffer.bytes", int32},
        {"socket.receive.buffer.bytes", int32},
        {"socket.listen.backlog.size", int32}}},
  };
}

template <typename T>
bool fits(std::string_view v) {
  const auto n = parse_int(v);
  return n && *n >= std::numeric_limits<T>::min() && *n <= std::numeric_limits<T>::max();
}

// The value check of a Kafka type, and what it accepts in words.
std::pair<std::function<bool(std::string_view)>, std::string> check_of(kind k) {
  switch (k) {
    case kind::boolean:
      return {[](std::string_view v) { return parse_bool(v).has_value(); }, "true or false"};
    case kind::int16:
      return {fits<int16_t>, "a 16-bit integer"};
    case kind::int32:
      return {fits<int32_t>, "a 32-bit integer"};
    case kind::int64:
      return {fits<int64_t>, "an integer"};
    case kind::real:
      return {[](std::string_view v) { return parse_double(v).has_value(); }, "a number"};
    case kind::text:
      break;
  }
  return {[](std::string_view) { return true; }, "any text"};
}

std::vector<ignored_setting> make_table() {
  std::vector<ignored_setting> t;
  for (const auto& g : groups()) {
    for (const auto& [name, k] : g.names) {
      auto [check, valid] = check_of(k);
      t.push_back({name, g.reason, std::move(valid), std::move(check)});
    }
  }
  // Silt is always a broker: a controller-only node's settings describe another process.
  for (auto& s : t) {
    if (s.name != "process.roles") continue;
    s.valid = "a list of broker and controller that includes broker";
    s.check = [](std::string_view v) {
      const auto roles = split_list(v);
      bool broker = false;
      for (const auto& r : roles) {
        if (r != "broker" && r != "controller") return false;
        broker = broker || r == "broker";
      }
      return broker;
    };
  }
  return t;
}

}  // namespace

const std::vector<ignored_setting>& ignored_settings() {
  static const std::vector<ignored_setting> table = make_table();
  return table;
}

const ignored_setting* find_ignored(std::string_view name) {
  for (const auto& s : ignored_settings()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string ignored_docs_table() {
  std::string md =
      "| settings | why they have no effect |\n"
      "|---|---|\n";
  for (const auto& g : groups()) {
    std::string names;
    for (const auto& [name, k] : g.names) {
      if (!names.empty()) names += ", ";
      names += "`" + name + "`";
    }
    md += "| " + names + " | " + g.reason + " |\n";
  }
  return md;
}

}  // namespace silt::config::detail
