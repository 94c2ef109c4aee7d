// The Kafka perf-test modes of silt-perf: `silt-perf producer` and `silt-perf consumer` take
// the flags of Apache Kafka 4.1's ProducerPerformance and ConsumerPerformance tools
// (kafka-producer-perf-test.sh, kafka-consumer-perf-test.sh) and print their lines to the
// character, so that scripts written for those tools parse silt-perf's output unchanged. They
// run on librdkafka instead of the Java client: Java client property names are mapped to
// librdkafka's (map_java_properties), and the Java client's defaults are applied first so that
// a run compares with one of Kafka's tool.
//
// The pieces, each testable on its own:
//   parse_producer_args / parse_consumer_args   the command lines, with Kafka's checks
//   load_java_properties, map_java_properties   --producer.config / --consumer.config files,
//                                               --producer-props, and their librdkafka names
//   throughput_throttler                        Kafka's ThroughputThrottler
//   producer_stats                              Kafka's producer Stats: windows, sampled
//                                               latencies and their percentiles
//   java_fixed, java_date_format, *_line        Java's String.format and SimpleDateFormat,
//                                               and the tools' lines built with them
// The two *_main functions own the clients and every thread they start; each returns when its
// run is over and the client is closed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <librdkafka/rdkafkacpp.h>
#include <tl/expected.hpp>

#include "base/mutex.h"

namespace silt::perf {

// `silt-perf producer ARGS...` and `silt-perf consumer ARGS...` (ARGS without the mode word).
// Return the process's exit code: 0 after a run (also when records failed, as Kafka's tools
// do) and for --help; 1 for a bad command line, a client that cannot start, a failed
// transactional call or a fatal client error.
[[nodiscard]] int producer_perf_main(const std::vector<std::string>& args);
[[nodiscard]] int consumer_perf_main(const std::vector<std::string>& args);

// ---------------------------------------------------------------- Java's formatting

// String.format("%.<decimals>f", v) as Java prints it: Java rounds the shortest decimal that
// reads back as v half up (0.125 -> "0.13", 2.675 -> "2.68"), where C's printf rounds the
// binary value (0.12, 2.67); NaN and infinities print as "NaN", "Infinity", "-Infinity".
// (Java 17's Double.toString digits are not always the shortest; the two differ only beyond
// the 16th significant digit, far below the 1 to 4 decimals printed here.)
[[nodiscard]] std::string java_fixed(double v, int decimals);

// java.text.SimpleDateFormat for --date-format, in the local time zone with Locale.US names:
// the letters G y Y M L w W D d F E u a H k K h m s S z Z X and 'quoted' text. A time zone is
// named by its abbreviation (z and zzzz alike).
class java_date_format {
 public:
  // Errors as SimpleDateFormat's constructor words them ("Illegal pattern character 'q'").
  [[nodiscard]] static tl::expected<java_date_format, std::string> compile(
      std::string_view pattern);
  [[nodiscard]] std::string format(int64_t epoch_ms) const;

 private:
  struct field {
    char letter = 0;  // 0: literal text
    int count = 0;
    std::string text;
  };
  std::vector<field> fields_;
};

// java.util.SplittableRandom, bit for bit: with seed 0, as Kafka's tool seeds it, the record
// payloads are the very bytes Kafka's tool sends (which matters once they are compressed).
class java_splittable_random {
 public:
  explicit java_splittable_random(int64_t seed) : seed_(static_cast<uint64_t>(seed)) {}
  // Uniform in [0, bound); bound > 0.
  [[nodiscard]] int32_t next_int(int32_t bound);

 private:
  uint64_t seed_;
};

// ---------------------------------------------------------------- command lines

// A command line that does not lead to a run: help (exit 0) or a usage error (exit 1), with
// the text for each stream.
struct cli_exit {
  int code = 1;
  std::string out;
  std::string err;
};

// How a flag takes its values.
enum class flag_arity {
  none,         // a switch
  one,          // --flag VALUE or --flag=VALUE
  optional,     // --flag [VALUE]
  one_or_more,  // --flag V1 V2 ... (up to the next flag)
};
struct flag_spec {
  std::string_view name;  // with the dashes: "--topic"
  flag_arity arity = flag_arity::one;
};
// argparse4j (the producer tool's parser) and jopt-simple (the consumer's) word their errors
// differently; the messages follow the tool's parser. Both take a long flag by any unambiguous
// prefix, as argparse4j does.
enum class flag_dialect { argparse, jopt };

// The flags of one command line: for each flag given, the values of its last occurrence.
struct parsed_flags {
  std::map<std::string, std::vector<std::string>, std::less<>> values;

  [[nodiscard]] bool has(std::string_view name) const { return values.contains(name); }
  // The flag's value, if given with one.
  [[nodiscard]] std::optional<std::string> value(std::string_view name) const;
};
// Errors name the flag, in the words of the dialect's parser.
[[nodiscard]] tl::expected<parsed_flags, std::string> parse_flags(
    const std::vector<std::string>& args, const std::vector<flag_spec>& specs,
    flag_dialect dialect);

// `silt-perf producer`: ProducerPerformance's flags, plus --bootstrap-server (Kafka 4.1's tool
// takes the servers only through the producer properties).
struct producer_options {
  std::string topic;
  int64_t num_records = 0;
  std::optional<int32_t> record_size;
  std::optional<std::string> payload_file;
  std::string payload_delimiter = "\n";  // a regular expression, as Java's Scanner reads it
  bool payload_monotonic = false;
  double throughput = -1;                   // records/s; negative: unthrottled
  std::vector<std::string> producer_props;  // "name=value", as given
  std::optional<std::string> producer_config;
  std::optional<std::string> bootstrap_server;
  bool print_metrics = false;
  std::optional<std::string> transactional_id;
  std::optional<int64_t> transaction_duration_ms;
};
[[nodiscard]] tl::expected<producer_options, cli_exit> parse_producer_args(
    const std::vector<std::string>& args);
// The payloads in a --payload-file's text, cut at the delimiter (a regular expression) as
// Java's Scanner cuts them; the error names a delimiter that is no regular expression.
[[nodiscard]] tl::expected<std::vector<std::string>, std::string> split_payloads(
    const std::string& text, const std::string& delimiter);

// `silt-perf consumer`: ConsumerPerformance's flags, with --include (a later Kafka's regular
// expression subscription) besides --topic.
struct consumer_options {
  std::string bootstrap_server;
  std::optional<std::string> topic;
  std::optional<std::string> include;
  std::string group;  // default: "perf-consumer-" and a random number below 100000, as Kafka's
  int32_t fetch_size = 1024 * 1024;
  int32_t socket_buffer_size = 2 * 1024 * 1024;
  bool from_latest = false;
  std::optional<std::string> consumer_config;
  bool print_metrics = false;
  bool show_detailed_stats = false;
  int64_t timeout_ms = 10'000;  // the longest wait between two records
  int64_t messages = 0;
  int64_t reporting_interval_ms = 5'000;
  std::string date_format = "yyyy-MM-dd HH:mm:ss:SSS";
  bool hide_header = false;
};
[[nodiscard]] tl::expected<consumer_options, cli_exit> parse_consumer_args(
    const std::vector<std::string>& args);

// ---------------------------------------------------------------- client properties

// Client properties in the order they were set; a later setting of a name wins.
using properties = std::vector<std::pair<std::string, std::string>>;

// A .properties file's text as java.util.Properties.load reads it: '#' and '!' comments,
// "k=v", "k: v" and "k v", backslash escapes (\t \n \r \f \uXXXX, the latter as UTF-8) and
// continuation lines.
[[nodiscard]] properties parse_java_properties(std::string_view text);
// The file at path, parsed; the error says why it could not be read.
[[nodiscard]] tl::expected<properties, std::string> load_java_properties(const std::string& path);

enum class client_kind { producer, consumer };

// One librdkafka property to set, and the Java property it comes from (empty for a default),
// which an error names.
struct librdkafka_setting {
  std::string name;
  std::string value;
  std::string from;
};

// Java client properties turned into librdkafka ones.
struct librdkafka_settings {
  // In order: the Java client's defaults first, then the user's properties (mapped).
  std::vector<librdkafka_setting> settings;
  // Said on stderr before the run: what was renamed in a way that changes meaning, ignored, or
  // has no librdkafka equivalent.
  std::vector<std::string> notes;
  // The producer's max.block.ms, which librdkafka has not: how long a send may wait for room
  // in the producer's buffer, and how long transactional calls may block.
  int64_t max_block_ms = 60'000;
};
// Names librdkafka shares with the Java client pass through, as do librdkafka's own names;
// renamed ones are translated (buffer.memory -> queue.buffering.max.kbytes, fetch.max.wait.ms ->
// fetch.wait.max.ms, ...); the (de)serializers are dropped, as Kafka's tools replace them.
[[nodiscard]] librdkafka_settings map_java_properties(const properties& java, client_kind kind);

// A librdkafka configuration with the settings made. A name librdkafka does not know is left
// out with a warning naming it (the Java client, too, only warns about unknown names); a value
// librdkafka refuses is an error naming the property.
struct librdkafka_conf {
  std::unique_ptr<RdKafka::Conf> conf;
  std::vector<std::string> warnings;
};
[[nodiscard]] tl::expected<librdkafka_conf, std::string> make_librdkafka_conf(
    const std::vector<librdkafka_setting>& settings);

// librdkafka's events for a client of the perf-test modes: errors and log lines go to stderr
// (an error repeated back to back only once), the latest statistics document is kept for
// --print-metrics. Any thread that serves the client's queue may deliver events.
class client_events : public RdKafka::EventCb {
 public:
  void event_cb(RdKafka::Event& event) override EXCLUDES(mu_);
  // The latest statistics document, and how many have come so far.
  [[nodiscard]] std::pair<std::string, uint64_t> latest_stats() EXCLUDES(mu_);
  // Whether librdkafka reported a fatal error: the client cannot go on.
  [[nodiscard]] bool fatal() const { return fatal_.load(std::memory_order_relaxed); }

 private:
  base::mutex mu_;
  std::string stats_ GUARDED_BY(mu_);
  uint64_t stats_count_ GUARDED_BY(mu_) = 0;
  std::string last_error_ GUARDED_BY(mu_);
  std::atomic<bool> fatal_{false};
};

// ---------------------------------------------------------------- the producer's pacing and stats

// Kafka's ThroughputThrottler: after the record numbered amount_so_far was sent, should_throttle
// says whether the average rate since start_ms is above the target; throttle() then sleeps off
// 1/target s per call, in sleeps of at least 2 ms. A negative target never throttles; a target
// of 0 blocks for good at the first throttle(), as Kafka's does.
class throughput_throttler {
 public:
  // Sleeps at least the given time (the test's sleeper only records it).
  using sleeper = std::function<void(std::chrono::nanoseconds)>;

  throughput_throttler(double target_per_s, int64_t start_ms, sleeper sleep);
  [[nodiscard]] bool should_throttle(int64_t amount_so_far, int64_t send_start_ms) const;
  void throttle();

 private:
  int64_t start_ms_;
  double target_;
  int64_t sleep_time_ns_;
  int64_t sleep_deficit_ns_ = 0;
  sleeper sleep_;
};

// Kafka's producer Stats: counts acknowledged records, prints a window line every reporting
// interval, and keeps one latency in `sampling` (all of them up to 500,000 records) for the
// final percentiles, which are taken as Kafka takes them: the sorted samples' element
// (int)(p * n). Latencies are whole milliseconds from send to acknowledgement, as Kafka's.
// Not thread-safe: its owner serialises the calls.
class producer_stats {
 public:
  producer_stats(int64_t num_records, int64_t start_ms, int64_t reporting_interval_ms = 5000);
  // One acknowledged record; returns the window line when this record closes a window.
  [[nodiscard]] std::optional<std::string> record(int32_t latency_ms, int32_t bytes,
                                                  int64_t now_ms);
  // The final line, for a run that ends at now_ms.
  [[nodiscard]] std::string total_line(int64_t now_ms);
  [[nodiscard]] int64_t count() const { return count_; }

 private:
  int64_t start_ms_;
  int64_t reporting_interval_ms_;
  int64_t sampling_;
  std::vector<int32_t> latencies_;
  int64_t iteration_ = 0;
  size_t index_ = 0;
  int64_t count_ = 0;
  int64_t bytes_ = 0;
  int32_t max_latency_ = 0;
  int64_t total_latency_ = 0;
  int64_t window_count_ = 0;
  int32_t window_max_latency_ = 0;
  int64_t window_total_latency_ = 0;
  int64_t window_bytes_ = 0;
  int64_t window_start_ms_;
};

// ---------------------------------------------------------------- the tools' lines

// "N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency."
[[nodiscard]] std::string producer_window_line(int64_t count, int64_t bytes, int64_t elapsed_ms,
                                               int64_t total_latency_ms, int32_t max_latency_ms);
// The final line: as the window's, with two decimals for the latencies, then the 50th, 95th,
// 99th and 99.9th percentiles.
[[nodiscard]] std::string producer_total_line(int64_t count, int64_t bytes, int64_t elapsed_ms,
                                              int64_t total_latency_ms, int32_t max_latency_ms,
                                              const std::vector<int32_t>& percentiles);
// Kafka's percentiles of the first n samples (sorts them in place).
[[nodiscard]] std::vector<int32_t> kafka_percentiles(std::vector<int32_t>& samples, size_t n,
                                                     const std::vector<double>& ps);

// The consumer's header: the summary's, or with --show-detailed-stats the progress rows'.
[[nodiscard]] std::string consumer_header(bool detailed);
// The summary row of a run from start_ms to end_ms, join_ms of which went to rebalances.
[[nodiscard]] std::string consumer_summary_line(int64_t start_ms, int64_t end_ms, int64_t bytes,
                                                int64_t messages, int64_t join_ms,
                                                const java_date_format& date_format);
// One --show-detailed-stats row, for the interval from start_ms to end_ms; bytes and messages
// are totals since the start of the run, the last_* ones those at the previous row.
struct consumer_interval {
  int64_t bytes = 0;
  int64_t last_bytes = 0;
  int64_t messages = 0;
  int64_t last_messages = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  int64_t join_ms = 0;  // rebalance time within the interval
};
[[nodiscard]] std::string consumer_progress_line(const consumer_interval& interval,
                                                 const java_date_format& date_format);
// What Kafka's tool prints when the records stop coming for --timeout ms.
[[nodiscard]] std::string consumer_timeout_warning(int64_t timeout_ms);

// librdkafka's statistics (one JSON document of its stats callback) laid out as Kafka's tools
// print a client's metrics with --print-metrics ("group:name:{tags} : value", sorted, padded):
// the client's totals, and per broker and per topic their counters and window averages.
// librdkafka's statistics are not the Java client's metrics: names and meanings differ.
[[nodiscard]] std::string librdkafka_metrics_table(const std::string& stats_json);

// A line of the tool's output on stdout, flushed at once (scripts read it as it comes).
void print_line(const std::string& line);
// A message on stderr, prefixed "silt-perf: ".
void print_error(const std::string& text);

}  // namespace silt::perf
