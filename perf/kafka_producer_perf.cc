// `silt-perf producer`: Kafka's ProducerPerformance (kafka-producer-perf-test) on librdkafka.
//
// The main thread builds each record and sends it, paced by Kafka's throttler; a poller thread
// serves librdkafka's queue, so that delivery reports are timed when they arrive, as the Java
// client's I/O thread times its callbacks, and not when the sending thread gets round to them.
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <regex>
#include <sstream>
#include <stop_token>
#include <thread>

#include "base/clock.h"
#include "kafka_perf.h"

namespace silt::perf {
namespace {

constexpr std::string_view producer_usage =
    R"(usage: silt-perf producer [-h] --topic TOPIC --num-records NUM-RECORDS
                          (--record-size RECORD-SIZE | --payload-file PAYLOAD-FILE |
                          --payload-monotonic) [--payload-delimiter PAYLOAD-DELIMITER]
                          --throughput THROUGHPUT
                          [--producer-props PROP-NAME=PROP-VALUE [PROP-NAME=PROP-VALUE ...]]
                          [--producer.config CONFIG-FILE] [--bootstrap-server SERVERS]
                          [--print-metrics] [--transactional-id TRANSACTIONAL-ID]
                          [--transaction-duration-ms TRANSACTION-DURATION]
)";

constexpr std::string_view producer_help = R"(
Kafka's producer performance test (kafka-producer-perf-test) on librdkafka, with its flags and
its output. Producer properties take Java client names, mapped to librdkafka's, or librdkafka's
own; the Java producer's defaults apply (batch.size=16384, linger.ms=5, acks=all, idempotence).

named arguments:
  -h, --help             show this help message and exit
  --topic TOPIC          produce records to this topic
  --num-records NUM-RECORDS
                         number of records to produce
  --record-size RECORD-SIZE
                         record size in bytes, random upper-case letters as Kafka's tool sends
  --payload-file PAYLOAD-FILE
                         send records picked at random from this UTF-8 text file, cut at
                         --payload-delimiter
  --payload-monotonic    send the record's number as its payload
  --payload-delimiter PAYLOAD-DELIMITER
                         regular expression separating the payloads of --payload-file
                         (default: \n)
  --throughput THROUGHPUT
                         send at most about THROUGHPUT records/s; -1: as fast as possible
  --producer-props PROP-NAME=PROP-VALUE [PROP-NAME=PROP-VALUE ...]
                         producer properties, e.g. bootstrap.servers=HOST:PORT acks=1; they
                         win over --producer.config
  --producer.config CONFIG-FILE
                         producer properties file
  --bootstrap-server SERVERS
                         the brokers to connect to (silt-perf's; wins over bootstrap.servers)
  --print-metrics        print librdkafka's statistics at the end
  --transactional-id TRANSACTIONAL-ID
                         send in transactions, with this transactional.id
  --transaction-duration-ms TRANSACTION-DURATION
                         commit each transaction after this long (default 3000 when a
                         transactional id is given); turns transactions on
)";

cli_exit usage_error(const std::string& message) {
  return {1, "", std::string(producer_usage) + "silt-perf producer: error: " + message + "\n"};
}

std::string could_not_convert(std::string_view flag, const std::string& text,
                              std::string_view type) {
  return "argument " + std::string(flag) + ": could not convert '" + text + "' to " +
         std::string(type);
}

// Java's Long.parseLong, Integer.parseInt and Double.valueOf.
std::optional<int64_t> java_long(std::string_view s) {
  if (s.size() > 1 && s.front() == '+') s.remove_prefix(1);
  int64_t v = 0;
  const auto res = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || res.ec != std::errc() || res.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}
std::optional<double> java_double(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  if (!s.empty() && std::strchr("dDfF", s.back()) != nullptr && s.size() > 1) s.pop_back();
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

tl::expected<producer_options, cli_exit> parse_producer_args(const std::vector<std::string>& args) {
  if (args.empty()) {
    // As Kafka's tool: no arguments at all is a request for help.
    return tl::unexpected(
        cli_exit{0, std::string(producer_usage) + std::string(producer_help), ""});
  }
  static const std::vector<flag_spec> specs = {
      {"-h", flag_arity::none},
      {"--help", flag_arity::none},
      {"--topic", flag_arity::one},
      {"--num-records", flag_arity::one},
      {"--record-size", flag_arity::one},
      {"--payload-file", flag_arity::one},
      {"--payload-monotonic", flag_arity::none},
      {"--payload-delimiter", flag_arity::one},
      {"--throughput", flag_arity::one},
      {"--producer-props", flag_arity::one_or_more},
      {"--producer.config", flag_arity::one},
      {"--bootstrap-server", flag_arity::one},
      {"--print-metrics", flag_arity::none},
      {"--transactional-id", flag_arity::one},
      {"--transaction-duration-ms", flag_arity::one},
  };
  const auto parsed = parse_flags(args, specs, flag_dialect::argparse);
  if (!parsed) return tl::unexpected(usage_error(parsed.error()));
  const parsed_flags& f = *parsed;
  if (f.has("-h") || f.has("--help")) {
    return tl::unexpected(
        cli_exit{0, std::string(producer_usage) + std::string(producer_help), ""});
  }

  producer_options o;
  // argparse4j converts each value as it parses it, then checks the groups and the required
  // flags; Kafka's tool then checks the values.
  if (auto v = f.value("--num-records")) {
    const auto n = java_long(*v);
    if (!n) return tl::unexpected(usage_error(could_not_convert("--num-records", *v, "Long")));
    o.num_records = *n;
  }
  if (auto v = f.value("--record-size")) {
    const auto n = java_long(*v);
    if (!n || *n < std::numeric_limits<int32_t>::min() ||
        *n > std::numeric_limits<int32_t>::max()) {
      return tl::unexpected(usage_error(could_not_convert("--record-size", *v, "Integer")));
    }
    o.record_size = static_cast<int32_t>(*n);
  }
  if (auto v = f.value("--throughput")) {
    const auto d = java_double(*v);
    if (!d) return tl::unexpected(usage_error(could_not_convert("--throughput", *v, "Double")));
    o.throughput = *d;
  }
  if (auto v = f.value("--transaction-duration-ms")) {
    const auto n = java_long(*v);
    if (!n) {
      return tl::unexpected(
          usage_error(could_not_convert("--transaction-duration-ms", *v, "Long")));
    }
    o.transaction_duration_ms = *n;
  }
  const char* payload_flags[] = {"--record-size", "--payload-file", "--payload-monotonic"};
  const char* first_payload_flag = nullptr;
  for (const char* flag : payload_flags) {
    if (!f.has(flag)) continue;
    if (first_payload_flag != nullptr) {
      return tl::unexpected(usage_error("argument " + std::string(flag) +
                                        ": not allowed with argument " + first_payload_flag));
    }
    first_payload_flag = flag;
  }
  for (const char* flag : {"--topic", "--num-records", "--throughput"}) {
    if (!f.has(flag)) {
      return tl::unexpected(usage_error("argument " + std::string(flag) + " is required"));
    }
  }
  if (first_payload_flag == nullptr) {
    return tl::unexpected(usage_error(
        "one of the arguments --record-size --payload-file --payload-monotonic is required"));
  }
  o.topic = *f.value("--topic");
  o.payload_file = f.value("--payload-file");
  o.payload_monotonic = f.has("--payload-monotonic");
  if (auto v = f.value("--payload-delimiter")) o.payload_delimiter = *v == "\\n" ? "\n" : *v;
  if (f.has("--producer-props")) o.producer_props = f.values.at("--producer-props");
  o.producer_config = f.value("--producer.config");
  o.bootstrap_server = f.value("--bootstrap-server");
  o.print_metrics = f.has("--print-metrics");
  o.transactional_id = f.value("--transactional-id");

  if (o.num_records <= 0) {
    return tl::unexpected(usage_error("--num-records should be greater than zero"));
  }
  if (o.record_size && *o.record_size <= 0) {
    return tl::unexpected(usage_error("--record-size should be greater than zero"));
  }
  if (!f.has("--producer-props") && !o.producer_config && !o.bootstrap_server) {
    return tl::unexpected(
        usage_error("Either --producer-props or --producer.config must be specified."));
  }
  if (o.transaction_duration_ms && *o.transaction_duration_ms <= 0) {
    return tl::unexpected(usage_error("--transaction-duration-ms should be greater than zero"));
  }
  return o;
}

tl::expected<std::vector<std::string>, std::string> split_payloads(const std::string& text,
                                                                   const std::string& delimiter) {
  // A delimiter without regular expression syntax is searched as plain text: faster, and
  // std::regex is slow on long inputs.
  const bool literal = delimiter.find_first_of(R"(\^$.|?*+()[]{})") == std::string::npos;
  std::optional<std::regex> re;
  if (!literal) {
    try {
      re.emplace(delimiter);
    } catch (const std::regex_error& e) {
      return tl::unexpected("invalid --payload-delimiter '" + delimiter + "': " + e.what());
    }
  }
  // The next delimiter at or after pos: its start and end, or nothing.
  auto find = [&](size_t pos) -> std::optional<std::pair<size_t, size_t>> {
    if (literal) {
      const size_t at = delimiter.empty() ? std::string::npos : text.find(delimiter, pos);
      if (at == std::string::npos) return std::nullopt;
      return std::pair{at, at + delimiter.size()};
    }
    std::smatch m;
    if (!std::regex_search(text.cbegin() + static_cast<std::ptrdiff_t>(pos), text.cend(), m, *re) ||
        m.length(0) == 0) {
      return std::nullopt;
    }
    const auto at = static_cast<size_t>(m.position(0)) + pos;
    return std::pair{at, at + static_cast<size_t>(m.length(0))};
  };
  // Scanner skips a delimiter before each token: one at the very start opens no payload, and
  // one at the very end closes the last payload without opening an empty one.
  std::vector<std::string> payloads;
  size_t pos = 0;
  if (auto d = find(0); d && d->first == 0) pos = d->second;
  for (;;) {
    const auto d = find(pos);
    if (!d) {
      payloads.push_back(text.substr(pos));
      break;
    }
    payloads.push_back(text.substr(pos, d->first - pos));
    pos = d->second;
  }
  if (!payloads.empty() && payloads.back().empty()) payloads.pop_back();
  return payloads;
}

namespace {

// --payload-file: Kafka's tool prints where it reads and how many payloads it found.
tl::expected<std::vector<std::string>, std::string> read_payloads(const std::string& path,
                                                                  const std::string& delimiter) {
  print_line("Reading payloads from: " + std::filesystem::absolute(path).string());
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0 || ec) {
    return tl::unexpected(std::string("File does not exist or empty file provided."));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  auto payloads = split_payloads(buf.str(), delimiter);
  if (payloads) print_line("Number of messages read: " + std::to_string(payloads->size()));
  return payloads;
}

// A transactional id as Kafka's tool makes one: its prefix and a random Uuid in Kafka's
// base64url form.
std::string random_transactional_id() {
  constexpr std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::random_device rd;
  std::string id;
  do {
    std::array<uint8_t, 16> bytes{};
    for (auto& b : bytes) b = static_cast<uint8_t>(rd());
    id.clear();
    uint32_t acc = 0;
    int bits = 0;
    for (uint8_t b : bytes) {
      acc = (acc << 8) | b;
      bits += 8;
      while (bits >= 6) {
        bits -= 6;
        id += alphabet[(acc >> bits) & 0x3F];
      }
    }
    if (bits > 0) id += alphabet[(acc << (6 - bits)) & 0x3F];
  } while (id.front() == '-');  // as Kafka's Uuid, which avoids ids that read like a flag
  return "performance-producer-" + id;
}

// The producer properties as Kafka's tool assembles them: the file, then --producer-props,
// then its own client.id when none is given; --bootstrap-server last.
tl::expected<properties, std::string> producer_properties(const producer_options& o) {
  properties props;
  if (o.producer_config) {
    auto file = load_java_properties(*o.producer_config);
    if (!file) return tl::unexpected(file.error());
    props = std::move(*file);
  }
  for (const std::string& prop : o.producer_props) {
    // Kafka splits at '=' and wants exactly two non-empty-tailed pieces: "a=b=c" and "a=" are
    // refused, so a value cannot hold '='.
    const size_t eq = prop.find('=');
    if (eq == std::string::npos || prop.find('=', eq + 1) != std::string::npos ||
        eq + 1 == prop.size()) {
      return tl::unexpected("Invalid property: " + prop);
    }
    props.emplace_back(prop.substr(0, eq), prop.substr(eq + 1));
  }
  const bool has_client_id =
      std::any_of(props.begin(), props.end(), [](const auto& p) { return p.first == "client.id"; });
  if (!has_client_id) props.emplace_back("client.id", "perf-producer-client");
  if (o.bootstrap_server) props.emplace_back("bootstrap.servers", *o.bootstrap_server);
  return props;
}

std::optional<std::string> last_value(const properties& props, std::string_view name) {
  std::optional<std::string> v;
  for (const auto& [k, value] : props) {
    if (k == name) v = value;
  }
  return v;
}

// Sleeps at least d (Kafka's throttler waits out its whole deficit); nanoseconds::max(): for
// good.
void sleep_at_least(std::chrono::nanoseconds d) {
  if (d == std::chrono::nanoseconds::max()) {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  const auto deadline = std::chrono::steady_clock::now() + d;
  for (auto now = std::chrono::steady_clock::now(); now < deadline;
       now = std::chrono::steady_clock::now()) {
    std::this_thread::sleep_for(deadline - now);
  }
}

// Delivery reports: Kafka's PerfCallback. Whichever thread serves the producer's queue runs
// dr_cb (the poller thread; the main thread too while it commits a transaction): the mutex
// serialises them, and the lines they print.
class delivery_stats : public RdKafka::DeliveryReportCb {
 public:
  explicit delivery_stats(int64_t num_records)
      : num_records_(num_records), stats_(num_records, 0) {}

  // The run starts: Kafka's Stats are made just before the first send.
  void start(int64_t start_ms) EXCLUDES(mu_) {
    base::lock_guard lock(mu_);
    stats_ = producer_stats(num_records_, start_ms);
  }

  void dr_cb(RdKafka::Message& message) override EXCLUDES(mu_) {
    const int64_t now = base::now_ms();
    const std::unique_ptr<int64_t> send_start(static_cast<int64_t*>(message.msg_opaque()));
    if (message.err() == RdKafka::ERR_NO_ERROR) {
      base::lock_guard lock(mu_);
      const auto line = stats_.record(static_cast<int32_t>(now - *send_start),
                                      static_cast<int32_t>(message.len()), now);
      if (line) print_line(*line);
      return;
    }
    failed(message.errstr());
  }

  // A record that failed: Kafka's callback prints each exception; the first ones are printed
  // here, all are counted.
  void failed(const std::string& why) EXCLUDES(mu_) {
    constexpr int64_t printed = 100;
    base::lock_guard lock(mu_);
    ++failed_;
    if (failed_ <= printed) print_error("record not sent: " + why);
    if (failed_ == printed) print_error("further failures are counted but not printed");
  }

  [[nodiscard]] std::string total_line(int64_t now) EXCLUDES(mu_) {
    base::lock_guard lock(mu_);
    return stats_.total_line(now);
  }
  [[nodiscard]] int64_t failures() EXCLUDES(mu_) {
    base::lock_guard lock(mu_);
    return failed_;
  }

 private:
  const int64_t num_records_;
  base::mutex mu_;
  producer_stats stats_ GUARDED_BY(mu_);
  int64_t failed_ GUARDED_BY(mu_) = 0;
};

// Kafka's producer.send(): hands the record to librdkafka, waiting up to max.block.ms for room
// in its buffer as the Java producer does (the wait counts into the record's latency, which
// starts at send_start_ms).
void send(RdKafka::Producer& producer, RdKafka::Topic& topic, const std::string& value,
          int64_t send_start_ms, int64_t max_block_ms, delivery_stats& stats) {
  auto send_start = std::make_unique<int64_t>(send_start_ms);
  for (;;) {
    const RdKafka::ErrorCode err = producer.produce(
        &topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY,
        const_cast<char*>(value.data()), value.size(), nullptr, 0, send_start.get());
    if (err == RdKafka::ERR_NO_ERROR) {
      [[maybe_unused]] int64_t* owned_by_the_report = send_start.release();
      return;
    }
    if (err == RdKafka::ERR__QUEUE_FULL && base::now_ms() - send_start_ms < max_block_ms) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // the poller makes room
      continue;
    }
    stats.failed(err == RdKafka::ERR__QUEUE_FULL
                     ? "the producer's buffer stayed full for max.block.ms (" +
                           std::to_string(max_block_ms) + " ms)"
                     : RdKafka::err2str(err));
    return;
  }
}

// Prints a transactional call's error; true if there was one.
bool failed_call(const char* what, RdKafka::Error* error) {
  const std::unique_ptr<RdKafka::Error> owned(error);
  if (!owned) return false;
  print_error(std::string(what) + " failed: " + owned->str());
  return true;
}

}  // namespace

int producer_perf_main(const std::vector<std::string>& args) {
  const auto parsed = parse_producer_args(args);
  if (!parsed) {
    std::fputs(parsed.error().out.c_str(), stdout);
    std::fputs(parsed.error().err.c_str(), stderr);
    return parsed.error().code;
  }
  const producer_options& o = *parsed;

  std::vector<std::string> payloads;
  if (o.payload_file) {
    auto read = read_payloads(*o.payload_file, o.payload_delimiter);
    if (!read) {
      print_error(read.error());
      return 1;
    }
    payloads = std::move(*read);
    if (payloads.empty()) {
      print_error("no payload File Path or record Size or payload-monotonic option provided");
      return 1;
    }
  }
  auto props = producer_properties(o);
  if (!props) {
    print_error(props.error());
    return 1;
  }
  // Transactions, as Kafka's tool turns them on: by a duration, an id, or transactional.id.
  const bool transactions = o.transaction_duration_ms || o.transactional_id ||
                            last_value(*props, "transactional.id").has_value();
  const int64_t transaction_duration_ms = o.transaction_duration_ms.value_or(3000);
  if (transactions) {
    props->emplace_back(
        "transactional.id",
        o.transactional_id.value_or(
            last_value(*props, "transactional.id").value_or(random_transactional_id())));
  }
  if (!last_value(*props, "bootstrap.servers") && !last_value(*props, "metadata.broker.list")) {
    print_error("Missing required configuration \"bootstrap.servers\" which has no default value.");
    return 1;
  }

  librdkafka_settings mapped = map_java_properties(*props, client_kind::producer);
  if (o.print_metrics) mapped.settings.push_back({"statistics.interval.ms", "1000", ""});
  for (const std::string& note : mapped.notes) print_error("note: " + note);
  auto conf = make_librdkafka_conf(mapped.settings);
  if (!conf) {
    print_error(conf.error());
    return 1;
  }
  for (const std::string& warning : conf->warnings) print_error("warning: " + warning);
  delivery_stats stats(o.num_records);
  client_events events;
  std::string err;
  if (conf->conf->set("dr_cb", &stats, err) != RdKafka::Conf::CONF_OK ||
      conf->conf->set("event_cb", &events, err) != RdKafka::Conf::CONF_OK) {
    print_error(err);
    return 1;
  }
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(conf->conf.get(), err));
  if (!producer) {
    print_error("cannot create the producer: " + err);
    return 1;
  }
  std::unique_ptr<RdKafka::Topic> topic(
      RdKafka::Topic::create(producer.get(), o.topic, nullptr, err));
  if (!topic) {
    print_error("cannot use topic '" + o.topic + "': " + err);
    return 1;
  }
  // Declared after the producer: stopped and joined before it is destroyed.
  std::jthread poller([&producer](const std::stop_token& stop) {
    while (!stop.stop_requested()) producer->poll(50);
  });

  if (transactions && failed_call("initTransactions", producer->init_transactions(
                                                          static_cast<int>(mapped.max_block_ms)))) {
    return 1;
  }
  if (o.throughput == 0) {
    print_error("--throughput 0 stops the run after its first records, as in Kafka's tool");
  }

  java_splittable_random random(0);
  std::string payload(static_cast<size_t>(o.record_size.value_or(0)), 'A');
  const int64_t start_ms = base::now_ms();
  stats.start(start_ms);
  throughput_throttler throttler(o.throughput, start_ms, sleep_at_least);
  int64_t transaction_size = 0;
  int64_t transaction_start_ms = 0;
  for (int64_t i = 0; i < o.num_records && !events.fatal(); ++i) {
    const std::string* value = &payload;
    if (!payloads.empty()) {
      value =
          &payloads[static_cast<size_t>(random.next_int(static_cast<int32_t>(payloads.size())))];
    } else if (o.record_size) {
      for (char& c : payload) c = static_cast<char>(random.next_int(26) + 65);
    } else {
      payload = std::to_string(i);
    }
    if (transactions && transaction_size == 0) {
      if (failed_call("beginTransaction", producer->begin_transaction())) return 1;
      transaction_start_ms = base::now_ms();
    }
    const int64_t send_start_ms = base::now_ms();
    send(*producer, *topic, *value, send_start_ms, mapped.max_block_ms, stats);
    ++transaction_size;
    if (transactions && transaction_duration_ms <= send_start_ms - transaction_start_ms) {
      if (failed_call("commitTransaction",
                      producer->commit_transaction(static_cast<int>(mapped.max_block_ms)))) {
        return 1;
      }
      transaction_size = 0;
    }
    if (throttler.should_throttle(i, send_start_ms)) throttler.throttle();
  }
  if (transactions && transaction_size != 0 &&
      failed_call("commitTransaction",
                  producer->commit_transaction(static_cast<int>(mapped.max_block_ms)))) {
    return 1;
  }
  // Kafka's tool closes (or, with --print-metrics, flushes) the producer: every record's
  // outcome is in before the final line.
  while (producer->outq_len() > 0 && !events.fatal()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!o.print_metrics) {
    poller.request_stop();
    poller.join();
    topic.reset();
    producer.reset();
    print_line(stats.total_line(base::now_ms()));
  } else {
    print_line(stats.total_line(base::now_ms()));
    // A statistics document from after the last delivery (the drain above served any older
    // one still queued), at most one interval away.
    const uint64_t seen = events.latest_stats().second;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    while (events.latest_stats().second <= seen && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    print_error("--print-metrics: librdkafka's statistics, not the Java client's metrics");
    std::fputs(librdkafka_metrics_table(events.latest_stats().first).c_str(), stdout);
    std::fflush(stdout);
    poller.request_stop();
    poller.join();
    topic.reset();
    producer.reset();
  }
  if (const int64_t failures = stats.failures(); failures > 0) {
    print_error(std::to_string(failures) + " of " + std::to_string(o.num_records) +
                " records were not sent");
  }
  return events.fatal() ? 1 : 0;
}

}  // namespace silt::perf
