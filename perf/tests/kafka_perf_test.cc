// The Kafka perf-test modes' pieces (kafka_perf.h) against what Apache Kafka 4.1.1's own tools
// and the JDK print. The expected lines were captured from ProducerPerformance and
// ConsumerPerformance runs (tests/kafka-reference.sh tool ...) against the reference broker;
// the inputs are the ones that produce them (the counts, sizes and times those runs had).
#include "kafka_perf.h"

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

namespace silt::perf {
namespace {

// Sets the local time zone (TZ) for its lifetime. setenv is not thread-safe; the tests run on
// one thread.
class scoped_time_zone {
 public:
  explicit scoped_time_zone(const char* zone) {
    const char* tz = std::getenv("TZ");  // NOLINT(concurrency-mt-unsafe)
    if (tz != nullptr) saved_ = tz;
    setenv("TZ", zone, 1);  // NOLINT(concurrency-mt-unsafe)
    tzset();
  }
  ~scoped_time_zone() {
    if (saved_) {
      setenv("TZ", saved_->c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    } else {
      unsetenv("TZ");  // NOLINT(concurrency-mt-unsafe)
    }
    tzset();
  }
  scoped_time_zone(const scoped_time_zone&) = delete;
  scoped_time_zone& operator=(const scoped_time_zone&) = delete;

 private:
  std::optional<std::string> saved_;
};

// The consumer's times print in the local time zone: the captures were made in UTC.
class InUtc : public ::testing::Test {
 private:
  scoped_time_zone zone_{"UTC"};
};

java_date_format kafka_default_format() {
  return *java_date_format::compile("yyyy-MM-dd HH:mm:ss:SSS");
}

// ---------------------------------------------------------------- Java's formatting

TEST(JavaFixed, RoundsTheShortestDecimalHalfUpAsJavaDoes) {
  // String.format results of OpenJDK 17, where C's printf gives 0.12, 2.67, 1.00, 0.1, ...
  EXPECT_EQ(java_fixed(0.125, 2), "0.13");
  EXPECT_EQ(java_fixed(0.125, 1), "0.1");
  EXPECT_EQ(java_fixed(2.675, 2), "2.68");
  EXPECT_EQ(java_fixed(1.005, 2), "1.01");
  EXPECT_EQ(java_fixed(0.15, 1), "0.2");
  EXPECT_EQ(java_fixed(0.35, 1), "0.4");
  EXPECT_EQ(java_fixed(4.35, 1), "4.4");
  EXPECT_EQ(java_fixed(9.95, 1), "10.0");
  EXPECT_EQ(java_fixed(99.95, 1), "100.0");
  EXPECT_EQ(java_fixed(1234567.85, 1), "1234567.9");
  EXPECT_EQ(java_fixed(2.5, 2), "2.50");
  EXPECT_EQ(java_fixed(1e-5, 4), "0.0000");
  EXPECT_EQ(java_fixed(5e-324, 1), "0.0");
  EXPECT_EQ(java_fixed(0.0, 4), "0.0000");
  EXPECT_EQ(java_fixed(1e20, 2), "100000000000000000000.00");
  // Java pads the shortest digits with zeros, not with the binary value's digits.
  EXPECT_EQ(java_fixed(123456789012345678.5, 1), "123456789012345680.0");
}

TEST(JavaFixed, SpellsSignsNaNAndInfinitiesAsJava) {
  EXPECT_EQ(java_fixed(-0.0, 1), "-0.0");
  EXPECT_EQ(java_fixed(-0.04, 1), "-0.0");
  EXPECT_EQ(java_fixed(-2.675, 2), "-2.68");
  EXPECT_EQ(java_fixed(std::nan(""), 2), "NaN");
  EXPECT_EQ(java_fixed(1.0 / 0.0, 4), "Infinity");
  EXPECT_EQ(java_fixed(-1.0 / 0.0, 4), "-Infinity");
}

TEST_F(InUtc, DateFormatPrintsAsSimpleDateFormat) {
  // SimpleDateFormat's output for 2026-12-02 06:46:52.511 UTC and 2026-12-30 23:59:59.999.
  const int64_t t = 1796194012511;
  const int64_t year_end = 1798675199999;
  auto format = [](const char* pattern, int64_t ms) {
    return java_date_format::compile(pattern)->format(ms);
  };
  EXPECT_EQ(format("yyyy-MM-dd HH:mm:ss:SSS", t), "2026-12-02 06:46:52:511");
  EXPECT_EQ(format("EEE, d MMM yyyy hh:mm:ss a z Z X", t),
            "Wed, 2 Dec 2026 06:46:52 AM UTC +0000 Z");
  EXPECT_EQ(format("yy M MMMM D k K w W F u E EEEE G YYYY", t),
            "26 12 December 336 6 6 49 1 1 3 Wed Wednesday AD 2026");
  // The week of December 30th holds January 1st: week 1 of the next week-year.
  EXPECT_EQ(format("yy M MMMM D k K w W F u E EEEE G YYYY", year_end),
            "26 12 December 364 23 11 1 5 5 3 Wed Wednesday AD 2027");
  EXPECT_EQ(format("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", 1767225600007), "2026-01-01T00:00:00.007Z");
  EXPECT_EQ(format("'o''clock' h a, ''yy", 1767225600007), "o'clock 12 AM, '26");
  EXPECT_EQ(format("S SS SSSS y yyyyy XX", 1767225600007), "7 07 0007 2026 02026 Z");
}

TEST(JavaDateFormat, PrintsOffsetsOfTheLocalZone) {
  const scoped_time_zone zone("America/New_York");
  EXPECT_EQ(java_date_format::compile("yyyy-MM-dd'T'HH:mm:ss.SSSXXX")->format(1767225600007),
            "2025-12-31T19:00:00.007-05:00");
  EXPECT_EQ(java_date_format::compile("EEE, d MMM yyyy hh:mm:ss a z Z X")->format(1704067200000),
            "Sun, 31 Dec 2023 07:00:00 PM EST -0500 -05");
}

TEST(JavaDateFormat, RefusesWhatSimpleDateFormatRefuses) {
  EXPECT_EQ(java_date_format::compile("yyyy-qq").error(), "Illegal pattern character 'q'");
  EXPECT_EQ(java_date_format::compile("'abc").error(), "Unterminated quote");
  EXPECT_EQ(java_date_format::compile("XXXX").error(), "invalid ISO 8601 format: length=4");
}

TEST(JavaSplittableRandom, SendsTheBytesKafkasToolSends) {
  // new SplittableRandom(0), nextInt(26) + 65, forty times: Kafka's first record payload.
  java_splittable_random r(0);
  std::string payload;
  for (int i = 0; i < 40; ++i) payload += static_cast<char>(r.next_int(26) + 65);
  EXPECT_EQ(payload, "YQHHNEBSEPDNSEIFGAMSUJXKOLTXSPLGHDIOYZJF");
  java_splittable_random p(0);
  for (int i = 0; i < 1000; ++i) {
    const int32_t v = p.next_int(1 << 10);  // a power of two takes the mask path
    ASSERT_GE(v, 0);
    ASSERT_LT(v, 1 << 10);
  }
}

// ---------------------------------------------------------------- the tools' lines

TEST(ProducerLines, WindowLineIsKafkasToTheCharacter) {
  // Kafka 4.1.1, 100-byte and 200-byte records, 5 s windows.
  EXPECT_EQ(producer_window_line(12494, 12494 * 100, 5004, 461029, 684),
            "12494 records sent, 2496.8 records/sec (0.24 MB/sec), 36.9 ms avg latency, 684.0 ms "
            "max latency.");
  EXPECT_EQ(producer_window_line(12508, 12508 * 100, 5004, 170109, 135),
            "12508 records sent, 2499.6 records/sec (0.24 MB/sec), 13.6 ms avg latency, 135.0 ms "
            "max latency.");
  EXPECT_EQ(producer_window_line(24956, 24956 * 200, 5003, 316941, 576),
            "24956 records sent, 4988.2 records/sec (0.95 MB/sec), 12.7 ms avg latency, 576.0 ms "
            "max latency.");
}

TEST(ProducerLines, TotalLineIsKafkasToTheCharacter) {
  EXPECT_EQ(producer_total_line(30000, 30000 * 100, 12019, 660600, 684, {7, 190, 221, 228}),
            "30000 records sent, 2496.0 records/sec (0.24 MB/sec), 22.02 ms avg latency, 684.00 "
            "ms max latency, 7 ms 50th, 190 ms 95th, 221 ms 99th, 228 ms 99.9th.");
  EXPECT_EQ(producer_total_line(60000, 60000 * 200, 12030, 502800, 576, {6, 40, 56, 71}),
            "60000 records sent, 4987.5 records/sec (0.95 MB/sec), 8.38 ms avg latency, 576.00 ms "
            "max latency, 6 ms 50th, 40 ms 95th, 56 ms 99th, 71 ms 99.9th.");
}

TEST(ProducerLines, NothingSentPrintsNaNAsKafka) {
  // Three records refused as too large: Kafka's final line.
  producer_stats stats(3, 1000);
  EXPECT_EQ(stats.total_line(1700),
            "0 records sent, 0.0 records/sec (0.00 MB/sec), NaN ms avg latency, 0.00 ms max "
            "latency, 0 ms 50th, 0 ms 95th, 0 ms 99th, 0 ms 99.9th.");
}

TEST_F(InUtc, ConsumerSummaryIsKafkasToTheCharacter) {
  const java_date_format f = kafka_default_format();
  EXPECT_EQ(consumer_header(false),
            "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
            "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec");
  // 30,000 records of 100 bytes.
  EXPECT_EQ(consumer_summary_line(1796193966951, 1796193968297, 3'000'000, 30000, 862, f),
            "2026-12-02 06:46:06:951, 2026-12-02 06:46:08:297, 2.8610, 2.1256, 30000, "
            "22288.2615, 862, 484, 5.9112, 61983.4711");
  // Nothing came before the timeout.
  EXPECT_EQ(consumer_summary_line(1796193996001, 1796193998046, 0, 0, 598, f),
            "2026-12-02 06:46:36:001, 2026-12-02 06:46:38:046, 0.0000, 0.0000, 0, 0.0000, 598, "
            "1447, 0.0000, 0.0000");
  EXPECT_EQ(consumer_timeout_warning(2000),
            "WARNING: Exiting before consuming the expected number of messages: timeout (2000 "
            "ms) exceeded. You can use the --timeout option to increase the timeout.");
}

TEST_F(InUtc, ConsumerDetailedRowsAreKafkasToTheCharacter) {
  const java_date_format f = kafka_default_format();
  EXPECT_EQ(consumer_header(true),
            "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
            "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec");
  // 200-byte records, --reporting-interval 2000; the first row holds the join.
  EXPECT_EQ(
      consumer_progress_line({27572 * 200, 0, 27572, 0, 1796193983829, 1796193985838, 758}, f),
      "2026-12-02 06:46:25:838, 0, 5.2589, 2.6177, 27572, 13724.2409, 758, 1251, 4.2038, "
      "22039.9680");
  EXPECT_EQ(consumer_progress_line(
                {37611 * 200, 27572 * 200, 37611, 27572, 1796193985838, 1796193987838, 0}, f),
            "2026-12-02 06:46:27:838, 0, 7.1737, 0.9574, 37611, 5019.5000, 0, 2000, 0.9574, "
            "5019.5000");
}

// ---------------------------------------------------------------- Kafka's producer Stats

TEST(ProducerStats, PrintsAWindowLineWhenTheIntervalHasPassed) {
  producer_stats stats(10, 0);
  EXPECT_FALSE(stats.record(3, 100, 1000).has_value());
  EXPECT_FALSE(stats.record(5, 100, 4999).has_value());
  const auto line = stats.record(7, 100, 5000);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line,
            "3 records sent, 0.6 records/sec (0.00 MB/sec), 5.0 ms avg latency, 7.0 ms max "
            "latency.");
  // The next window starts at the record that closed the previous one.
  EXPECT_FALSE(stats.record(1, 100, 9999).has_value());
  EXPECT_EQ(*stats.record(1, 100, 10000),
            "2 records sent, 0.4 records/sec (0.00 MB/sec), 1.0 ms avg latency, 1.0 ms max "
            "latency.");
  EXPECT_EQ(stats.count(), 5);
}

TEST(ProducerStats, PercentilesAreTheSortedSamplesAtIntPTimesN) {
  producer_stats stats(1000, 0, 1'000'000);
  for (int32_t i = 1000; i >= 1; --i) static_cast<void>(stats.record(i, 10, 1));
  // n = 1000: elements 500, 950, 990 and 999 of 1..1000.
  EXPECT_EQ(stats.total_line(1000),
            "1000 records sent, 1000.0 records/sec (0.01 MB/sec), 500.50 ms avg latency, 1000.00 "
            "ms max latency, 501 ms 50th, 951 ms 95th, 991 ms 99th, 1000 ms 99.9th.");
}

TEST(ProducerStats, SamplesOneLatencyInNAbove500000Records) {
  // 1,000,000 records: Kafka keeps every second latency.
  producer_stats stats(1'000'000, 0, 1'000'000'000);
  for (int i = 0; i < 1'000'000; ++i) static_cast<void>(stats.record(i % 2 == 0 ? 1 : 99, 1, 1));
  const std::string line = stats.total_line(1000);
  EXPECT_NE(line.find("50.00 ms avg latency, 99.00 ms max latency, 1 ms 50th, 1 ms 95th"),
            std::string::npos)
      << line;
}

TEST(KafkaPercentiles, EmptyOrShortSampleSetsGiveZeroOrTheirElements) {
  std::vector<int32_t> none(1, 0);
  EXPECT_EQ(kafka_percentiles(none, 0, {0.5, 0.999}), (std::vector<int32_t>{0, 0}));
  std::vector<int32_t> three = {30, 10, 20, 0};
  EXPECT_EQ(kafka_percentiles(three, 3, {0.5, 0.95, 0.999}), (std::vector<int32_t>{20, 30, 30}));
}

// ---------------------------------------------------------------- Kafka's throttler

TEST(ThroughputThrottler, NegativeTargetNeverThrottles) {
  throughput_throttler t(-1, 0, [](std::chrono::nanoseconds) { FAIL(); });
  EXPECT_FALSE(t.should_throttle(1'000'000, 1));
}

TEST(ThroughputThrottler, ThrottlesWhenTheAverageRateIsAboveTheTarget) {
  throughput_throttler t(100, 0, [](std::chrono::nanoseconds) {});
  EXPECT_FALSE(t.should_throttle(1000, 0));  // no time has passed yet
  EXPECT_FALSE(t.should_throttle(100, 1000));
  EXPECT_TRUE(t.should_throttle(101, 1000));
}

TEST(ThroughputThrottler, SleepsOffItsDeficitInSleepsOfAtLeastTwoMilliseconds) {
  std::vector<std::chrono::nanoseconds> sleeps;
  throughput_throttler t(1000, 0, [&sleeps](std::chrono::nanoseconds d) { sleeps.push_back(d); });
  t.throttle();  // 1 ms owed: below the 2 ms minimum
  EXPECT_TRUE(sleeps.empty());
  t.throttle();
  ASSERT_EQ(sleeps.size(), 1U);
  EXPECT_EQ(sleeps[0], std::chrono::milliseconds(2));
  t.throttle();
  EXPECT_EQ(sleeps.size(), 1U);  // the deficit started again from zero
}

TEST(ThroughputThrottler, ZeroTargetBlocksForGoodAsKafkas) {
  std::vector<std::chrono::nanoseconds> sleeps;
  throughput_throttler t(0, 0, [&sleeps](std::chrono::nanoseconds d) { sleeps.push_back(d); });
  EXPECT_TRUE(t.should_throttle(1, 1));
  t.throttle();
  EXPECT_EQ(sleeps, std::vector<std::chrono::nanoseconds>{std::chrono::nanoseconds::max()});
}

TEST(ThroughputThrottler, KeepsAProducerNearItsTarget) {
  // 10,000 sends of 10 us each at 5,000/s: about 2 s on a simulated clock.
  int64_t now_ns = 0;
  throughput_throttler t(5000, 0, [&now_ns](std::chrono::nanoseconds d) { now_ns += d.count(); });
  for (int64_t i = 0; i < 10'000; ++i) {
    const int64_t send_ms = now_ns / 1'000'000;
    now_ns += 10'000;
    if (t.should_throttle(i, send_ms)) t.throttle();
  }
  EXPECT_GT(now_ns, 1'900'000'000);
  EXPECT_LT(now_ns, 2'100'000'000);
}

// ---------------------------------------------------------------- command lines

TEST(ProducerArgs, TakesKafkasFlags) {
  const auto o = parse_producer_args({"--topic", "t", "--num-records", "1000", "--record-size",
                                      "100", "--throughput", "-1", "--producer-props",
                                      "bootstrap.servers=h:9092", "acks=1", "--print-metrics"});
  ASSERT_TRUE(o.has_value()) << o.error().err;
  EXPECT_EQ(o->topic, "t");
  EXPECT_EQ(o->num_records, 1000);
  EXPECT_EQ(o->record_size, 100);
  EXPECT_EQ(o->throughput, -1);
  EXPECT_EQ(o->producer_props, (std::vector<std::string>{"bootstrap.servers=h:9092", "acks=1"}));
  EXPECT_TRUE(o->print_metrics);
  EXPECT_EQ(o->payload_delimiter, "\n");
  EXPECT_FALSE(o->transaction_duration_ms.has_value());
}

TEST(ProducerArgs, TakesUnambiguousPrefixesAndInlineValues) {
  // argparse4j accepts both: "--num 10" and "--topic=t".
  const auto o =
      parse_producer_args({"--topic=t", "--num", "10", "--payload-mono", "--through", "1e3",
                           "--producer.config", "p.properties", "--payload-delimiter", "\\n"});
  ASSERT_TRUE(o.has_value()) << o.error().err;
  EXPECT_EQ(o->topic, "t");
  EXPECT_EQ(o->num_records, 10);
  EXPECT_TRUE(o->payload_monotonic);
  EXPECT_EQ(o->throughput, 1000);
  EXPECT_EQ(o->producer_config, "p.properties");
  EXPECT_EQ(o->payload_delimiter, "\n");
}

TEST(ProducerArgs, NoArgumentsPrintsHelpAndSucceeds) {
  const auto o = parse_producer_args({});
  ASSERT_FALSE(o.has_value());
  EXPECT_EQ(o.error().code, 0);
  EXPECT_NE(o.error().out.find("usage: silt-perf producer"), std::string::npos);
}

TEST(ProducerArgs, BadFlagsExitOneWithAUsageNamingTheFlag) {
  auto error_of = [](const std::vector<std::string>& args) {
    const auto o = parse_producer_args(args);
    EXPECT_FALSE(o.has_value());
    EXPECT_EQ(o.error().code, 1);
    EXPECT_NE(o.error().err.find("usage: silt-perf producer"), std::string::npos);
    const std::string& err = o.error().err;
    return err.substr(err.rfind("silt-perf producer: error: ") + 27);
  };
  const std::vector<std::string> ok = {"--topic",          "t",  "--num-records", "5",
                                       "--record-size",    "1",  "--throughput",  "-1",
                                       "--producer-props", "a=b"};
  auto with = [&ok](std::vector<std::string> extra) {
    std::vector<std::string> args = ok;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  EXPECT_EQ(error_of(with({"--bogus", "1"})), "unrecognized arguments: '--bogus'\n");
  EXPECT_EQ(error_of({"--topic", "--num-records", "5"}),
            "argument --topic: expected one argument\n");
  EXPECT_EQ(error_of({"--topic", "t", "--num-records", "abc", "--record-size", "1", "--throughput",
                      "-1", "--producer-props", "a=b"}),
            "argument --num-records: could not convert 'abc' to Long\n");
  EXPECT_EQ(error_of(with({"--payload-file", "f"})),
            "argument --payload-file: not allowed with argument --record-size\n");
  EXPECT_EQ(error_of({"--num-records", "5", "--record-size", "1", "--throughput", "-1"}),
            "argument --topic is required\n");
  EXPECT_EQ(error_of({"--topic", "t", "--num-records", "5", "--throughput", "-1",
                      "--producer-props", "a=b"}),
            "one of the arguments --record-size --payload-file --payload-monotonic is required\n");
  EXPECT_EQ(error_of({"--topic", "t", "--num-records", "0", "--record-size", "1", "--throughput",
                      "-1", "--producer-props", "a=b"}),
            "--num-records should be greater than zero\n");
  EXPECT_EQ(
      error_of({"--topic", "t", "--num-records", "5", "--record-size", "1", "--throughput", "-1"}),
      "Either --producer-props or --producer.config must be specified.\n");
  EXPECT_EQ(error_of(with({"--transaction-duration-ms", "0"})),
            "--transaction-duration-ms should be greater than zero\n");
  EXPECT_EQ(error_of(with({"--p", "x"})).substr(0, 23), "ambiguous option: --p c");
  EXPECT_EQ(error_of({"--topic", "t", "--producer-props"}),
            "argument --producer-props: expected at least one argument\n");
}

TEST(ConsumerArgs, TakesKafkasFlagsAndDefaults) {
  const auto o = parse_consumer_args({"--bootstrap-server", "h:9092", "--topic", "t", "--messages",
                                      "100", "--timeout", "--show-detailed-stats"});
  ASSERT_TRUE(o.has_value()) << o.error().err;
  EXPECT_EQ(o->bootstrap_server, "h:9092");
  EXPECT_EQ(o->topic, "t");
  EXPECT_EQ(o->messages, 100);
  EXPECT_EQ(o->timeout_ms, 10'000);  // --timeout's value is optional
  EXPECT_EQ(o->fetch_size, 1024 * 1024);
  EXPECT_EQ(o->socket_buffer_size, 2 * 1024 * 1024);
  EXPECT_EQ(o->reporting_interval_ms, 5000);
  EXPECT_EQ(o->date_format, "yyyy-MM-dd HH:mm:ss:SSS");
  EXPECT_TRUE(o->show_detailed_stats);
  EXPECT_FALSE(o->from_latest);
  EXPECT_TRUE(std::regex_match(o->group, std::regex("perf-consumer-[0-9]{1,5}"))) << o->group;
}

TEST(ConsumerArgs, TakesEveryOtherFlag) {
  const auto o = parse_consumer_args({"--bootstrap-server=h:1",
                                      "--include",
                                      "t.*",
                                      "--messages",
                                      "5",
                                      "--timeout",
                                      "300",
                                      "--group",
                                      "g",
                                      "--fetch-size",
                                      "500",
                                      "--socket-buffer-size",
                                      "600",
                                      "--from-latest",
                                      "--consumer.config",
                                      "c.properties",
                                      "--print-metrics",
                                      "--reporting-interval",
                                      "700",
                                      "--date-format",
                                      "HH:mm",
                                      "--hide-header"});
  ASSERT_TRUE(o.has_value()) << o.error().err;
  EXPECT_EQ(o->include, "t.*");
  EXPECT_FALSE(o->topic.has_value());
  EXPECT_EQ(o->timeout_ms, 300);
  EXPECT_EQ(o->group, "g");
  EXPECT_EQ(o->fetch_size, 500);
  EXPECT_EQ(o->socket_buffer_size, 600);
  EXPECT_TRUE(o->from_latest);
  EXPECT_EQ(o->consumer_config, "c.properties");
  EXPECT_TRUE(o->print_metrics);
  EXPECT_EQ(o->reporting_interval_ms, 700);
  EXPECT_EQ(o->date_format, "HH:mm");
  EXPECT_TRUE(o->hide_header);
}

TEST(ConsumerArgs, BadFlagsExitOneWithJoptSimplesMessages) {
  auto error_of = [](const std::vector<std::string>& args) {
    const auto o = parse_consumer_args(args);
    EXPECT_FALSE(o.has_value());
    EXPECT_EQ(o.error().code, 1);
    EXPECT_NE(o.error().err.find("--bootstrap-server <String"), std::string::npos);
    return o.error().err.substr(0, o.error().err.find('\n'));
  };
  EXPECT_EQ(error_of({"--bootstrap-server", "h", "--topic", "t", "--messages", "1", "--bogus"}),
            "bogus is not a recognized option");
  EXPECT_EQ(error_of({"--topic", "t", "--messages", "1", "--bootstrap-server"}),
            "Option bootstrap-server requires an argument");
  EXPECT_EQ(error_of({"--bootstrap-server", "h", "--topic", "t"}),
            "Missing required argument \"[messages]\"");
  EXPECT_EQ(error_of({"--bootstrap-server", "h", "--messages", "1"}),
            "Exactly one of the following arguments is required: [topic], [include]");
  EXPECT_EQ(error_of({"--topic", "t", "--messages", "1"}),
            "Missing required argument \"[bootstrap-server]\"");
  EXPECT_EQ(error_of({"--bootstrap-server", "h", "--topic", "t", "--messages", "abc"}),
            "Cannot parse argument 'abc' of option messages");
  EXPECT_EQ(
      error_of({"--bootstrap-server", "h", "--topic", "t", "--messages", "1", "--fetch-size", "x"}),
      "Cannot parse argument 'x' of option fetch-size");
  EXPECT_EQ(error_of({"--bootstrap-server", "h", "--topic", "t", "--messages", "1",
                      "--reporting-interval", "0"}),
            "Reporting interval must be greater than 0.");
  EXPECT_EQ(error_of({"--bootstrap-server", "h", "--topic", "t", "--messages", "1", "--date-format",
                      "yyyy-qq"}),
            "Illegal pattern character 'q'");
  EXPECT_EQ(parse_consumer_args({}).error().code, 1);  // as Kafka's: usage, exit 1
  EXPECT_EQ(parse_consumer_args({"--help"}).error().code, 0);
}

TEST(PayloadFile, IsCutAsJavasScannerCutsIt) {
  // Scanner("...").useDelimiter("\n") tokens, from OpenJDK 17.
  using v = std::vector<std::string>;
  EXPECT_EQ(*split_payloads("a\n\nb\n", "\n"), (v{"a", "", "b"}));
  EXPECT_EQ(*split_payloads("\n\na\nb", "\n"), (v{"", "a", "b"}));
  EXPECT_EQ(*split_payloads("a\nb\n\n", "\n"), (v{"a", "b", ""}));
  EXPECT_EQ(*split_payloads("x", "\n"), (v{"x"}));
  EXPECT_EQ(*split_payloads("a, b,c", ",\\s*"), (v{"a", "b", "c"}));
  EXPECT_EQ(*split_payloads("a|b", "\\|"), (v{"a", "b"}));
  EXPECT_FALSE(split_payloads("a", "(").has_value());
}

// ---------------------------------------------------------------- client properties

// The syntax is base::parse_java_properties's (its tests cover every case); this one checks
// what silt-perf keeps of it: the pairs, in file order, a repeated name kept twice (the later
// one wins when mapped).
TEST(JavaProperties, KeepsThePairsInFileOrder) {
  const properties p = parse_java_properties("acks=all\n# c\nlinger.ms 10\nacks : 1\n");
  const properties want = {{"acks", "all"}, {"linger.ms", "10"}, {"acks", "1"}};
  EXPECT_EQ(p, want);
}

std::optional<std::string> setting(const librdkafka_settings& s, std::string_view name) {
  std::optional<std::string> v;
  for (const auto& e : s.settings) {
    if (e.name == name) v = e.value;
  }
  return v;
}

TEST(PropertyMapping, AppliesTheJavaProducersDefaultsFirst) {
  const librdkafka_settings s = map_java_properties(
      {{"bootstrap.servers", "h:1"}, {"linger.ms", "0"}}, client_kind::producer);
  EXPECT_EQ(setting(s, "batch.size"), "16384");
  EXPECT_EQ(setting(s, "acks"), "all");
  EXPECT_EQ(setting(s, "queue.buffering.max.kbytes"), "32768");
  EXPECT_EQ(setting(s, "enable.idempotence"), "true");
  EXPECT_EQ(setting(s, "linger.ms"), "0");  // the user's, set after the default
  EXPECT_EQ(setting(s, "bootstrap.servers"), "h:1");
  EXPECT_TRUE(s.notes.empty());
}

TEST(PropertyMapping, KeepsATransactionalProducersDeliveryTimeoutWithinItsTransactions) {
  EXPECT_EQ(setting(map_java_properties({}, client_kind::producer), "delivery.timeout.ms"),
            "120000");
  EXPECT_EQ(setting(map_java_properties({{"transactional.id", "x"}}, client_kind::producer),
                    "delivery.timeout.ms"),
            "60000");
  EXPECT_EQ(
      setting(map_java_properties({{"transactional.id", "x"}, {"transaction.timeout.ms", "9000"}},
                                  client_kind::producer),
              "delivery.timeout.ms"),
      "9000");
  const auto conf = make_librdkafka_conf(
      map_java_properties({{"transactional.id", "x"}}, client_kind::producer).settings);
  ASSERT_TRUE(conf.has_value());
  std::string err;
  const std::unique_ptr<RdKafka::Producer> p(RdKafka::Producer::create(conf->conf.get(), err));
  EXPECT_NE(p, nullptr) << err;
}

TEST(PropertyMapping, DropsIdempotenceQuietlyWhenASettingConflicts) {
  EXPECT_EQ(
      setting(map_java_properties({{"acks", "1"}}, client_kind::producer), "enable.idempotence"),
      "false");
  EXPECT_EQ(setting(map_java_properties({{"max.in.flight.requests.per.connection", "10"}},
                                        client_kind::producer),
                    "enable.idempotence"),
            "false");
  EXPECT_EQ(setting(map_java_properties({{"acks", "1"}, {"enable.idempotence", "true"}},
                                        client_kind::producer),
                    "enable.idempotence"),
            "true");  // said explicitly: librdkafka then refuses the conflict, as Java does
}

TEST(PropertyMapping, RenamesWhatLibrdkafkaCallsOtherwise) {
  const librdkafka_settings p = map_java_properties(
      {{"buffer.memory", "1000000"},
       {"max.request.size", "2000000"},
       {"send.buffer.bytes", "-1"},
       {"max.block.ms", "1234"},
       {"compression.type", "zstd"},
       {"compression.zstd.level", "5"},
       {"compression.gzip.level", "9"},
       {"key.serializer", "org.apache.kafka.common.serialization.StringSerializer"}},
      client_kind::producer);
  EXPECT_EQ(setting(p, "queue.buffering.max.kbytes"), "977");
  EXPECT_EQ(setting(p, "message.max.bytes"), "2000000");
  EXPECT_EQ(setting(p, "socket.send.buffer.bytes"), "0");
  EXPECT_EQ(setting(p, "compression.level"), "5");
  EXPECT_EQ(p.max_block_ms, 1234);
  EXPECT_FALSE(setting(p, "key.serializer").has_value());
  ASSERT_EQ(p.notes.size(), 1U);
  EXPECT_NE(p.notes[0].find("compression.gzip.level"), std::string::npos);

  const librdkafka_settings c =
      map_java_properties({{"fetch.max.wait.ms", "1000"},
                           {"auto.offset.reset", "none"},
                           {"partition.assignment.strategy",
                            "org.apache.kafka.clients.consumer.RangeAssignor, "
                            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"},
                           {"value.deserializer", "x"}},
                          client_kind::consumer);
  EXPECT_EQ(setting(c, "fetch.wait.max.ms"), "1000");
  EXPECT_EQ(setting(c, "auto.offset.reset"), "error");
  EXPECT_EQ(setting(c, "partition.assignment.strategy"), "range");
  EXPECT_EQ(setting(c, "allow.auto.create.topics"), "true");
  EXPECT_FALSE(setting(c, "value.deserializer").has_value());
  ASSERT_EQ(c.notes.size(), 1U);
  EXPECT_NE(c.notes[0].find("CooperativeStickyAssignor"), std::string::npos);
}

TEST(PropertyMapping, BatchSizeZeroBecomesOneRecordPerBatch) {
  const librdkafka_settings s = map_java_properties({{"batch.size", "0"}}, client_kind::producer);
  EXPECT_EQ(setting(s, "batch.num.messages"), "1");
  EXPECT_EQ(setting(s, "batch.size"), "16384");  // only the default: librdkafka refuses 0
  ASSERT_EQ(s.notes.size(), 1U);
  EXPECT_NE(s.notes[0].find("batch.size=0"), std::string::npos);
}

TEST(PropertyMapping, SaysWhatItCannotCarryOver) {
  const librdkafka_settings s = map_java_properties(
      {{"sasl.jaas.config", "x"}, {"group.protocol", "consumer"}}, client_kind::consumer);
  ASSERT_EQ(s.notes.size(), 2U);
  EXPECT_NE(s.notes[0].find("group.protocol=consumer"), std::string::npos);
  EXPECT_NE(s.notes[1].find("'sasl.jaas.config'"), std::string::npos);
  EXPECT_NE(s.notes[1].find("sasl.username"), std::string::npos);
}

TEST(LibrdkafkaConf, TakesTheDefaultsOfBothClients) {
  for (client_kind kind : {client_kind::producer, client_kind::consumer}) {
    const auto conf = make_librdkafka_conf(map_java_properties({}, kind).settings);
    ASSERT_TRUE(conf.has_value()) << conf.error();
    EXPECT_TRUE(conf->warnings.empty());
  }
}

TEST(LibrdkafkaConf, WarnsAboutUnknownNamesAndRefusesBadValuesNamingTheProperty) {
  const auto unknown = make_librdkafka_conf(
      map_java_properties({{"no.such.property", "1"}}, client_kind::producer).settings);
  ASSERT_TRUE(unknown.has_value());
  ASSERT_EQ(unknown->warnings.size(), 1U);
  EXPECT_NE(unknown->warnings[0].find("'no.such.property'"), std::string::npos);

  const auto bad = make_librdkafka_conf(
      map_java_properties({{"buffer.memory", "lots"}}, client_kind::producer).settings);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().find("'buffer.memory'"), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("queue.buffering.max.kbytes"), std::string::npos) << bad.error();
}

TEST(MetricsTable, LaysOutLibrdkafkaStatisticsAsKafkaPrintsMetrics) {
  const std::string table = librdkafka_metrics_table(R"({
    "client_id": "perf-producer-client", "type": "producer", "txmsgs": 10,
    "brokers": {"h:1/1": {"name": "h:1/1", "rtt": {"avg": 1500, "p99": 2000}}},
    "topics": {"t": {"topic": "t", "batchsize": {"avg": 100}}}})");
  EXPECT_EQ(table.substr(0, 13), "\nMetric Name ");
  EXPECT_NE(table.find("librdkafka:txmsgs:{client-id=perf-producer-client} "), std::string::npos);
  EXPECT_NE(table.find("librdkafka-broker:rtt-p99:{client-id=perf-producer-client, broker=h:1/1}"),
            std::string::npos);
  EXPECT_NE(table.find("librdkafka-topic:batchsize-avg:{client-id=perf-producer-client, topic=t}"),
            std::string::npos);
  // Every row puts " : " in the same column, as Kafka's %-Ns does.
  std::set<size_t> columns;
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" : ") != std::string::npos) columns.insert(line.find(" : "));
  }
  EXPECT_EQ(columns.size(), 1U);
  EXPECT_EQ(librdkafka_metrics_table("not json"), "");
}

}  // namespace
}  // namespace silt::perf
