// The workload one silt-perf run executes: topics, clients, records, rate and phases. Both
// front ends fill it (automq_cli.h from AutoMQ perf-test flags, omb.h from OpenMessaging
// Benchmark YAML files); runner.h runs it. A plain value: whoever parsed it owns it, the runner
// reads a copy.
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

namespace silt::perf {

// Kafka client properties by name, as Java clients spell them (client_config.h turns them
// into librdkafka's).
using property_map = std::map<std::string, std::string>;

// Which key each record carries (OMB's keyDistributor). Records without a key go where
// librdkafka's partitioner puts them (sticky, like the Java client's); keyed records by
// the key's hash.
enum class key_distributor {
  no_key,           // NO_KEY
  key_round_robin,  // KEY_ROUND_ROBIN: cycles through a fixed set of keys
  random_nano,      // RANDOM_NANO: a key of that set picked by the clock
};
[[nodiscard]] std::optional<key_distributor> parse_key_distributor(std::string_view name);
[[nodiscard]] const char* to_string(key_distributor k);

// What fills the part of a payload that is not random: zeros (OMB) or one random block
// shared by every payload (AutoMQ: repetition across records, not within one).
enum class payload_fill { zeros, repeated_block };

struct workload {
  std::string name = "silt-perf";
  std::string bootstrap_servers = "localhost:9092";

  // Topics are named <topic_prefix>-<index>, index from 0, four digits.
  std::string topic_prefix;  // empty: "silt-perf-" and a random suffix, new topics each run
  int topics = 1;
  int partitions_per_topic = 1;
  int replication_factor = -1;  // -1: the broker's default
  bool reuse_topics = false;    // use topics that exist, whatever their partition count
  bool delete_topics = false;   // delete this run's topics at the end

  int producers_per_topic = 1;
  int groups_per_topic = 1;  // consumer groups (OMB: subscriptions) per topic; 0: none
  int consumers_per_group = 1;

  int record_size = 1024;       // bytes of each record's value
  double random_ratio = 0.0;    // fraction of each payload that is random bytes
  int random_pool_size = 1000;  // distinct payloads when random_ratio > 0
  payload_fill fill = payload_fill::repeated_block;
  std::string payload_file;  // when set, every record's value is this file's content
  key_distributor keys = key_distributor::no_key;

  // Records per second over all producers; 0: find the maximum sustainable rate first
  // (rate_control.h) and run at it.
  double send_rate = 1000;
  double search_start_rate = 10000;  // where that search starts (OMB's default)

  double warmup_s = 60;  // measured, reported, left out of the aggregates
  double test_s = 300;   // 0: until interrupted (OMB without testDurationMinutes)
  double reporting_interval_s = 1;

  // The catch-up read test, after the test phase: consumers stop reading while producers go
  // on (backlog_s seconds, AutoMQ, or until backlog_bytes are unread, OMB), then read the
  // backlog; it ends when every group has read all but (1 - backlog_drain_ratio) of it.
  double backlog_s = 0;
  double backlog_bytes = 0;
  double backlog_drain_ratio = 1.0;

  // Java client property names; the common ones go to every client, admin included.
  property_map common_configs;
  property_map topic_configs;
  property_map producer_configs;
  property_map consumer_configs;

  [[nodiscard]] bool has_backlog_test() const { return backlog_s > 0 || backlog_bytes > 0; }
  [[nodiscard]] int producer_count() const { return topics * producers_per_topic; }
  [[nodiscard]] int group_count() const { return topics * groups_per_topic; }
  [[nodiscard]] int consumer_count() const { return group_count() * consumers_per_group; }
};

// How a front end names the workload's fields in its error messages ("--record-size" for
// the AutoMQ flags, "messageSize" for OMB). Keys are the workload's member names; a field
// without an entry is called by its member name.
using field_names = std::map<std::string, std::string>;

// Checks the values against each other and their ranges; the error names the field (as
// `names` calls it) and the bad value.
[[nodiscard]] tl::expected<void, std::string> validate(const workload& w,
                                                       const field_names& names = {});

// The topic names of a workload whose prefix is set.
[[nodiscard]] std::string topic_name(const workload& w, int index);

// One `key=value` (split at the first '='; the value may contain more '='); the error
// names the text.
[[nodiscard]] tl::expected<std::pair<std::string, std::string>, std::string> parse_property(
    std::string_view text);

// Java properties text, as OMB's driver files and property files hold it: `key=value` or
// `key: value` lines, blanks around keys and values trimmed, `#` and `!` comment lines,
// blank lines skipped. Lines continued with a trailing backslash are joined.
[[nodiscard]] tl::expected<property_map, std::string> parse_properties_text(std::string_view text);

// The workload as name/value pairs for a report's header (run_result::parameters).
[[nodiscard]] std::map<std::string, std::string> describe(const workload& w);

// The parts one after the other: messages built in loops without temporaries.
[[nodiscard]] std::string concat(std::initializer_list<std::string_view> parts);

// "12.5", "3" — the shortest decimal text of a number, for messages.
[[nodiscard]] std::string format_number(double v);

}  // namespace silt::perf
