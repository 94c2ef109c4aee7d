// `silt-perf consumer`: Kafka's ConsumerPerformance (kafka-consumer-perf-test) on librdkafka.
//
// One thread: it subscribes in a group, reads records until it has --messages of them or none
// came for --timeout ms, and prints Kafka's rows. librdkafka serves the rebalance and event
// callbacks inside consume(), on that thread.
#include <charconv>
#include <cstdio>
#include <limits>
#include <random>
#include <set>

#include "base/clock.h"
#include "kafka_perf.h"

namespace silt::perf {
namespace {

constexpr std::string_view consumer_description =
    "This tool is used to verify the consumer performance.\n";

// jopt-simple's layout, as Kafka's tool prints its options.
constexpr std::string_view consumer_help =
    R"(Option                                   Description
------                                   -----------
--bootstrap-server <String: server to    REQUIRED: The server(s) to connect to.
  connect to>
--consumer.config <String: config file>  Consumer config properties file (Java client
                                           names or librdkafka's).
--date-format <String: date format>      The date format of the time fields, as
                                           java.text.SimpleDateFormat. (default:
                                           yyyy-MM-dd HH:mm:ss:SSS)
--fetch-size <Integer: size>             The amount of data to fetch in a single
                                           request. (default: 1048576)
--from-latest                            Without a committed offset, start at the
                                           end of the log instead of its start.
--group <String: gid>                    The group id to consume in. (default:
                                           perf-consumer-<random number>)
--help                                   Print usage information.
--hide-header                            Do not print the header of the stats.
--include <String: regex>                Consume the topics this regular
                                           expression matches (instead of --topic).
--messages <Long: count>                 REQUIRED: The number of messages to
                                           consume.
--print-metrics                          Print librdkafka's statistics at the end.
--reporting-interval <Long:              Interval in milliseconds at which to
  interval_ms>                             print progress info. (default: 5000)
--show-detailed-stats                    Print stats for each reporting interval.
--socket-buffer-size <Integer: size>     The size of the TCP receive buffer.
                                           (default: 2097152)
--timeout [Long: milliseconds]           The longest wait in milliseconds between
                                           two records. (default: 10000)
--topic <String: topic>                  The topic to consume from.
--version                                Display the version.
)";

cli_exit usage_error(const std::string& message) {
  return {1, "", message + "\n" + std::string(consumer_help)};
}

template <class Int>
std::optional<Int> java_integer(std::string_view s) {
  if (s.size() > 1 && s.front() == '+') s.remove_prefix(1);
  Int v = 0;
  const auto res = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || res.ec != std::errc() || res.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string cannot_parse(const std::string& value, std::string_view option) {
  return "Cannot parse argument '" + value + "' of option " + std::string(option);
}

}  // namespace

tl::expected<consumer_options, cli_exit> parse_consumer_args(const std::vector<std::string>& args) {
  if (args.empty()) {
    return tl::unexpected(
        cli_exit{1, "", std::string(consumer_description) + std::string(consumer_help)});
  }
  static const std::vector<flag_spec> specs = {
      {"--bootstrap-server", flag_arity::one},
      {"--topic", flag_arity::one},
      {"--include", flag_arity::one},
      {"--group", flag_arity::one},
      {"--fetch-size", flag_arity::one},
      {"--from-latest", flag_arity::none},
      {"--socket-buffer-size", flag_arity::one},
      {"--consumer.config", flag_arity::one},
      {"--print-metrics", flag_arity::none},
      {"--show-detailed-stats", flag_arity::none},
      {"--timeout", flag_arity::optional},
      {"--messages", flag_arity::one},
      {"--reporting-interval", flag_arity::one},
      {"--date-format", flag_arity::one},
      {"--hide-header", flag_arity::none},
      {"--help", flag_arity::none},
      {"-h", flag_arity::none},
      {"--version", flag_arity::none},
  };
  const auto parsed = parse_flags(args, specs, flag_dialect::jopt);
  if (!parsed) return tl::unexpected(usage_error(parsed.error()));
  const parsed_flags& f = *parsed;
  if (f.has("--help") || f.has("-h")) {
    return tl::unexpected(
        cli_exit{0, std::string(consumer_description) + std::string(consumer_help), ""});
  }
  if (f.has("--version")) {
    return tl::unexpected(
        cli_exit{0, "silt-perf (librdkafka " + RdKafka::version_str() + ")\n", ""});
  }
  if (!f.has("--messages")) {
    return tl::unexpected(usage_error("Missing required argument \"[messages]\""));
  }
  if (f.has("--topic") == f.has("--include")) {
    return tl::unexpected(
        usage_error("Exactly one of the following arguments is required: [topic], [include]"));
  }
  // Kafka's tool does not check this one and fails later on a null; say so plainly.
  if (!f.has("--bootstrap-server")) {
    return tl::unexpected(usage_error("Missing required argument \"[bootstrap-server]\""));
  }

  consumer_options o;
  o.bootstrap_server = *f.value("--bootstrap-server");
  o.topic = f.value("--topic");
  o.include = f.value("--include");
  if (auto v = f.value("--group")) {
    o.group = *v;
  } else {
    std::random_device rd;
    o.group = "perf-consumer-" + std::to_string(std::uniform_int_distribution<int>(0, 99'999)(rd));
  }
  struct int32_flag {
    const char* flag;
    int32_t* out;
  };
  for (const int32_flag& i : {int32_flag{"--fetch-size", &o.fetch_size},
                              int32_flag{"--socket-buffer-size", &o.socket_buffer_size}}) {
    if (auto v = f.value(i.flag)) {
      const auto n = java_integer<int32_t>(*v);
      if (!n) return tl::unexpected(usage_error(cannot_parse(*v, i.flag + 2)));
      *i.out = *n;
    }
  }
  struct int64_flag {
    const char* flag;
    int64_t* out;
  };
  for (const int64_flag& i :
       {int64_flag{"--timeout", &o.timeout_ms}, int64_flag{"--messages", &o.messages},
        int64_flag{"--reporting-interval", &o.reporting_interval_ms}}) {
    if (auto v = f.value(i.flag)) {
      const auto n = java_integer<int64_t>(*v);
      // The reporting interval must also match ^\d+$.
      if (!n || (std::string_view(i.flag) == "--reporting-interval" &&
                 v->find_first_not_of("0123456789") != std::string::npos)) {
        return tl::unexpected(usage_error(cannot_parse(*v, i.flag + 2)));
      }
      *i.out = *n;
    }
  }
  if (o.reporting_interval_ms <= 0) {
    return tl::unexpected(usage_error("Reporting interval must be greater than 0."));
  }
  if (auto v = f.value("--date-format")) o.date_format = *v;
  if (auto compiled = java_date_format::compile(o.date_format); !compiled) {
    return tl::unexpected(usage_error(compiled.error()));
  }
  o.from_latest = f.has("--from-latest");
  o.consumer_config = f.value("--consumer.config");
  o.print_metrics = f.has("--print-metrics");
  o.show_detailed_stats = f.has("--show-detailed-stats");
  o.hide_header = f.has("--hide-header");
  return o;
}

namespace {

// Kafka's ConsumerPerfRebListener: rebalance time runs from the subscription, or from the
// moment the consumer lost its last partition, to the next assignment. (Kafka 4.1's tool
// reports, on its detailed rows, the rebalance time of the first row only, because it replaces
// the counter its listener holds; here each row has the rebalance time of its interval.)
// librdkafka runs rebalance_cb inside consume(), on the consuming thread.
class rebalance_timer : public RdKafka::RebalanceCb {
 public:
  void start(int64_t join_start_ms) { join_start_ms_ = join_start_ms; }

  void rebalance_cb(RdKafka::KafkaConsumer* consumer, RdKafka::ErrorCode err,
                    std::vector<RdKafka::TopicPartition*>& partitions) override {
    const bool cooperative = consumer->rebalance_protocol() == "COOPERATIVE";
    if (err == RdKafka::ERR__ASSIGN_PARTITIONS) {
      if (assigned_.empty()) {
        const int64_t elapsed = base::now_ms() - join_start_ms_;
        total_ms_ += elapsed;
        round_ms_ += elapsed;
      }
      for (const RdKafka::TopicPartition* p : partitions) {
        assigned_.emplace(p->topic(), p->partition());
      }
      if (cooperative) {
        report(consumer->incremental_assign(partitions));
      } else {
        report(consumer->assign(partitions));
      }
      return;
    }
    if (err == RdKafka::ERR__REVOKE_PARTITIONS) {
      for (const RdKafka::TopicPartition* p : partitions) {
        assigned_.erase({p->topic(), p->partition()});
      }
      if (assigned_.empty()) join_start_ms_ = base::now_ms();
    } else {
      print_error("rebalance failed: " + RdKafka::err2str(err));
      assigned_.clear();
      join_start_ms_ = base::now_ms();
    }
    if (cooperative && err == RdKafka::ERR__REVOKE_PARTITIONS) {
      report(consumer->incremental_unassign(partitions));
    } else {
      report(consumer->unassign());
    }
  }

  [[nodiscard]] int64_t total_ms() const { return total_ms_; }
  // The rebalance time since the previous call.
  [[nodiscard]] int64_t take_round_ms() { return std::exchange(round_ms_, 0); }

 private:
  static void report(RdKafka::Error* error) {
    const std::unique_ptr<RdKafka::Error> owned(error);
    if (owned) print_error("assignment failed: " + owned->str());
  }
  static void report(RdKafka::ErrorCode err) {
    if (err != RdKafka::ERR_NO_ERROR) print_error("assignment failed: " + RdKafka::err2str(err));
  }

  int64_t join_start_ms_ = 0;
  int64_t total_ms_ = 0;
  int64_t round_ms_ = 0;
  std::set<std::pair<std::string, int32_t>> assigned_;
};

// The consumer properties as Kafka's tool assembles them: the file, then what its flags say.
tl::expected<properties, std::string> consumer_properties(const consumer_options& o) {
  properties props;
  if (o.consumer_config) {
    auto file = load_java_properties(*o.consumer_config);
    if (!file) return tl::unexpected(file.error());
    props = std::move(*file);
  }
  props.emplace_back("bootstrap.servers", o.bootstrap_server);
  props.emplace_back("group.id", o.group);
  props.emplace_back("receive.buffer.bytes", std::to_string(o.socket_buffer_size));
  props.emplace_back("max.partition.fetch.bytes", std::to_string(o.fetch_size));
  props.emplace_back("auto.offset.reset", o.from_latest ? "latest" : "earliest");
  props.emplace_back("check.crcs", "false");
  const bool has_client_id =
      std::any_of(props.begin(), props.end(), [](const auto& p) { return p.first == "client.id"; });
  if (!has_client_id) props.emplace_back("client.id", "perf-consumer-client");
  return props;
}

}  // namespace

int consumer_perf_main(const std::vector<std::string>& args) {
  const auto parsed = parse_consumer_args(args);
  if (!parsed) {
    std::fputs(parsed.error().out.c_str(), stdout);
    std::fputs(parsed.error().err.c_str(), stderr);
    return parsed.error().code;
  }
  const consumer_options& o = *parsed;
  const java_date_format date_format = *java_date_format::compile(o.date_format);

  auto props = consumer_properties(o);
  if (!props) {
    print_error(props.error());
    return 1;
  }
  librdkafka_settings mapped = map_java_properties(*props, client_kind::consumer);
  // Statistics reach the consumer only while it reads: often, so that the last one is recent.
  if (o.print_metrics) mapped.settings.push_back({"statistics.interval.ms", "100", ""});
  for (const std::string& note : mapped.notes) print_error("note: " + note);
  auto conf = make_librdkafka_conf(mapped.settings);
  if (!conf) {
    print_error(conf.error());
    return 1;
  }
  for (const std::string& warning : conf->warnings) print_error("warning: " + warning);
  rebalance_timer rebalance;
  client_events events;
  std::string err;
  if (conf->conf->set("rebalance_cb", &rebalance, err) != RdKafka::Conf::CONF_OK ||
      conf->conf->set("event_cb", &events, err) != RdKafka::Conf::CONF_OK) {
    print_error(err);
    return 1;
  }

  if (!o.hide_header) print_line(consumer_header(o.show_detailed_stats));
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(
      RdKafka::KafkaConsumer::create(conf->conf.get(), err));
  if (!consumer) {
    print_error("cannot create the consumer: " + err);
    return 1;
  }
  const int64_t start_ms = base::now_ms();
  rebalance.start(start_ms);
  if (o.topic) {
    // The Java consumer's metadata requests let the broker create a missing topic; librdkafka
    // 2.0's group join does not ask that, but its metadata() call does.
    std::unique_ptr<RdKafka::Topic> topic(
        RdKafka::Topic::create(consumer.get(), *o.topic, nullptr, err));
    RdKafka::Metadata* metadata = nullptr;
    if (topic && consumer->metadata(false, topic.get(), &metadata, 5000) == RdKafka::ERR_NO_ERROR) {
      delete metadata;
    }
  }
  // Java matches a subscription pattern against whole topic names; librdkafka searches with
  // a pattern that starts with '^'.
  const std::string subscription = o.topic ? *o.topic : "^(" + *o.include + ")$";
  if (const RdKafka::ErrorCode e = consumer->subscribe({subscription});
      e != RdKafka::ERR_NO_ERROR) {
    print_error("cannot subscribe to '" + subscription + "': " + RdKafka::err2str(e));
    return 1;
  }

  int64_t messages = 0;
  int64_t bytes = 0;
  int64_t last_messages = 0;
  int64_t last_bytes = 0;
  int64_t current_ms = base::now_ms();
  int64_t last_report_ms = current_ms;
  int64_t last_consumed_ms = current_ms;
  std::set<RdKafka::ErrorCode> errors_said;
  while (messages < o.messages && current_ms - last_consumed_ms <= o.timeout_ms) {
    const std::unique_ptr<RdKafka::Message> m(consumer->consume(100));
    current_ms = base::now_ms();
    if (m->err() == RdKafka::ERR__TIMED_OUT || m->err() == RdKafka::ERR__PARTITION_EOF) continue;
    if (m->err() != RdKafka::ERR_NO_ERROR) {
      // The Java consumer logs such conditions and carries on; so does this loop, and the
      // timeout ends a run that stops getting records.
      if (errors_said.insert(m->err()).second) print_error("consumer: " + m->errstr());
      continue;
    }
    last_consumed_ms = current_ms;
    ++messages;
    bytes += static_cast<int64_t>(m->key_len() + m->len());
    if (current_ms - last_report_ms >= o.reporting_interval_ms) {
      const int64_t join_ms = rebalance.take_round_ms();
      if (o.show_detailed_stats) {
        print_line(consumer_progress_line(
            {bytes, last_bytes, messages, last_messages, last_report_ms, current_ms, join_ms},
            date_format));
      }
      last_report_ms = current_ms;
      last_messages = messages;
      last_bytes = bytes;
    }
  }
  if (messages < o.messages) print_line(consumer_timeout_warning(o.timeout_ms));
  const int64_t end_ms = base::now_ms();

  const std::string stats = o.print_metrics ? events.latest_stats().first : std::string();
  consumer->close();
  consumer.reset();
  if (!o.show_detailed_stats) {
    print_line(consumer_summary_line(start_ms, end_ms, bytes, messages, rebalance.total_ms(),
                                     date_format));
  }
  if (o.print_metrics) {
    print_error("--print-metrics: librdkafka's statistics, not the Java client's metrics");
    if (stats.empty()) print_error("librdkafka sent no statistics during the run");
    std::fputs(librdkafka_metrics_table(stats).c_str(), stdout);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace silt::perf
