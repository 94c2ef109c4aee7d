// The workload model and its two front ends (AutoMQ perf-test flags, OMB YAML), the Java to
// librdkafka property mapping, the send schedule and the maximum-rate search, on synthetic
// inputs: nothing here talks to a broker (tests/integration/test_silt_perf_runs.py does).
#include "workload.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <gtest/gtest.h>

#include "automq_cli.h"
#include "client_config.h"
#include "omb.h"
#include "payloads.h"
#include "rate_control.h"
#include "run_stats.h"
#include "runner.h"

namespace silt::perf {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    const auto start = s.find_first_not_of(' ', pos);
    if (start == std::string::npos) break;
    const auto end = s.find(' ', start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    pos = end == std::string::npos ? s.size() : end;
  }
  return out;
}

// perf/examples, given by the build (__FILE__ may be relative to the build folder).
fs::path examples_dir() {
  return fs::path(SILT_PERF_EXAMPLES_DIR);
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool has_note_containing(const std::vector<std::string>& notes, const std::string& part) {
  for (const auto& n : notes) {
    if (n.find(part) != std::string::npos) return true;
  }
  return false;
}

// ------------------------------------------------------------------ AutoMQ perf-test flags

// The command of the AutoMQ Azure benchmark report, as written there (tool name aside).
const char* const seed_command =
    "--bootstrap-server HOST:9092 --producer-configs batch.size=0 --consumer-configs "
    "fetch.max.wait.ms=1000 --topics 1 --partitions-per-topic 288 --producers-per-topic 64 "
    "--groups-per-topic 1 --consumers-per-group 64 --record-size 65536 --send-rate 16640 "
    "--warmup-duration 10 --test-duration 5";

TEST(AutomqCli, SeedExampleCommandParsesAsWritten) {
  auto o = parse_automq_args(split(seed_command));
  ASSERT_TRUE(o) << o.error();
  const workload& w = o->w;
  EXPECT_EQ(w.bootstrap_servers, "HOST:9092");
  EXPECT_EQ(w.producer_configs, (property_map{{"batch.size", "0"}}));
  EXPECT_EQ(w.consumer_configs, (property_map{{"fetch.max.wait.ms", "1000"}}));
  EXPECT_TRUE(w.common_configs.empty());
  EXPECT_EQ(w.topics, 1);
  EXPECT_EQ(w.partitions_per_topic, 288);
  EXPECT_EQ(w.producers_per_topic, 64);
  EXPECT_EQ(w.groups_per_topic, 1);
  EXPECT_EQ(w.consumers_per_group, 64);
  EXPECT_EQ(w.record_size, 65536);
  EXPECT_EQ(w.send_rate, 16640);
  EXPECT_EQ(w.warmup_s, 600);  // minutes, as AutoMQ's tool takes them
  EXPECT_EQ(w.test_s, 300);
  EXPECT_EQ(w.reporting_interval_s, 1);
  EXPECT_EQ(w.backlog_s, 0);
  EXPECT_EQ(w.keys, key_distributor::no_key);
  EXPECT_TRUE(o->output.empty());
  EXPECT_TRUE(validate(w, automq_field_names())) << validate(w, automq_field_names()).error();
}

TEST(AutomqCli, DefaultsAreAutomqs) {
  auto o = parse_automq_args({});
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->w.bootstrap_servers, "localhost:9092");
  EXPECT_EQ(o->w.topics, 1);
  EXPECT_EQ(o->w.record_size, 1024);
  EXPECT_EQ(o->w.send_rate, 1000);
  EXPECT_EQ(o->w.warmup_s, 60);
  EXPECT_EQ(o->w.test_s, 300);
  EXPECT_EQ(o->w.random_ratio, 0.0);
  EXPECT_EQ(o->w.random_pool_size, 1000);
  EXPECT_TRUE(o->w.topic_prefix.empty());  // a random one per run
}

TEST(AutomqCli, ShortAliasesInlineValuesAndDecimalMinutes) {
  auto o = parse_automq_args(
      split("-B h:1 -t 2 -n 4 -p 3 -g 2 -c 5 -s 100 -R 0.5 -S 7 -r 250 -b 30 -w 0.05 -d 0.1 -i 2 "
            "-X pre --output=/tmp/x.json --reuse-topics --replication-factor 3 --delete-topics"));
  ASSERT_TRUE(o) << o.error();
  const workload& w = o->w;
  EXPECT_EQ(w.bootstrap_servers, "h:1");
  EXPECT_EQ(w.topics, 2);
  EXPECT_EQ(w.partitions_per_topic, 4);
  EXPECT_EQ(w.producers_per_topic, 3);
  EXPECT_EQ(w.groups_per_topic, 2);
  EXPECT_EQ(w.consumers_per_group, 5);
  EXPECT_EQ(w.record_size, 100);
  EXPECT_EQ(w.random_ratio, 0.5);
  EXPECT_EQ(w.random_pool_size, 7);
  EXPECT_EQ(w.send_rate, 250);
  EXPECT_EQ(w.backlog_s, 30);  // seconds, as AutoMQ's
  EXPECT_NEAR(w.warmup_s, 3, 1e-9);
  EXPECT_NEAR(w.test_s, 6, 1e-9);
  EXPECT_EQ(w.reporting_interval_s, 2);
  EXPECT_EQ(w.topic_prefix, "pre");
  EXPECT_EQ(o->output, "/tmp/x.json");
  EXPECT_TRUE(w.reuse_topics);
  EXPECT_EQ(w.replication_factor, 3);
  EXPECT_TRUE(w.delete_topics);
}

TEST(AutomqCli, ConfigListsTakeValuesUpToTheNextFlagAndRepeat) {
  auto o = parse_automq_args(
      split("--producer-configs acks=all linger.ms=5 client.id=a=b --topics 3 "
            "--producer-configs compression.type=zstd --common-configs security.protocol=PLAINTEXT "
            "--topic-configs retention.ms=60000 --consumer-configs"));
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->w.producer_configs, (property_map{{"acks", "all"},
                                                 {"linger.ms", "5"},
                                                 {"client.id", "a=b"},
                                                 {"compression.type", "zstd"}}));
  EXPECT_EQ(o->w.common_configs, (property_map{{"security.protocol", "PLAINTEXT"}}));
  EXPECT_EQ(o->w.topic_configs, (property_map{{"retention.ms", "60000"}}));
  EXPECT_TRUE(o->w.consumer_configs.empty());
  EXPECT_EQ(o->w.topics, 3);
}

TEST(AutomqCli, SendThroughputIsMibPerSecondOverTheRecordSize) {
  auto o = parse_automq_args(split("--send-throughput 100 --record-size 65536"));
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->w.send_rate, 1600);
  o = parse_automq_args(split("-f 1 -s 1000"));
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->w.send_rate, 1048);  // rounded down, as AutoMQ
}

TEST(AutomqCli, ErrorsNameTheFlagAndTheValue) {
  auto e = parse_automq_args(split("--topics two"));
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().find("--topics"), std::string::npos) << e.error();
  EXPECT_NE(e.error().find("'two'"), std::string::npos) << e.error();

  e = parse_automq_args(split("--no-such-flag 1"));
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().find("--no-such-flag"), std::string::npos) << e.error();

  e = parse_automq_args(split("--record-size"));
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().find("--record-size needs a value"), std::string::npos) << e.error();

  e = parse_automq_args(split("--producer-configs batch.size"));
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().find("batch.size"), std::string::npos) << e.error();

  e = parse_automq_args(split("--send-rate 10 --send-throughput 1"));
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().find("--send-throughput"), std::string::npos) << e.error();

  e = parse_automq_args(split("stray"));
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().find("'stray'"), std::string::npos) << e.error();
}

TEST(AutomqCli, HelpIsAFlag) {
  auto o = parse_automq_args({"--help"});
  ASSERT_TRUE(o);
  EXPECT_TRUE(o->help);
}

// ------------------------------------------------------------------ validation

TEST(Validate, NamesTheFieldAsTheFrontEndCallsItAndTheValue) {
  workload w;
  w.record_size = 0;
  auto v = validate(w, automq_field_names());
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error(), "--record-size must be at least 1, got 0");
  v = validate(w, omb_field_names());
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error(), "messageSize must be at least 1, got 0");
  v = validate(w);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error(), "record_size must be at least 1, got 0");
}

TEST(Validate, RejectsOutOfRangeValues) {
  auto error_of = [](auto change) {
    workload w;
    change(w);
    auto v = validate(w, automq_field_names());
    return v ? std::string() : v.error();
  };
  EXPECT_EQ(error_of([](workload&) {}), "");
  EXPECT_EQ(error_of([](workload& w) { w.random_ratio = 1.5; }),
            "--random-ratio must be between 0.0 and 1.0, got 1.5");
  EXPECT_EQ(error_of([](workload& w) { w.topics = 0; }), "--topics must be at least 1, got 0");
  EXPECT_EQ(error_of([](workload& w) { w.partitions_per_topic = -2; }),
            "--partitions-per-topic must be at least 1, got -2");
  EXPECT_EQ(error_of([](workload& w) { w.send_rate = -5; }),
            "--send-rate must be 0 (find the maximum) or a positive rate, got -5");
  EXPECT_EQ(error_of([](workload& w) { w.consumers_per_group = 0; }),
            "--consumers-per-group must be at least 1, got 0");
  EXPECT_EQ(error_of([](workload& w) { w.topic_prefix = "a b"; }),
            "--topic-prefix may hold only ASCII letters, digits, '.', '_' and '-', got 'a b'");
  EXPECT_EQ(error_of([](workload& w) { w.replication_factor = 0; }),
            "--replication-factor must be at least 1 (or -1: the broker's default), got 0");
  EXPECT_EQ(error_of([](workload& w) { w.reporting_interval_s = 0; }),
            "--reporting-interval must be at least 0.05 s, got 0");
  EXPECT_EQ(error_of([](workload& w) {
              w.backlog_s = 60;
              w.send_rate = 0;
            }),
            "cannot search for the maximum sustainable rate (--send-rate 0) in a backlog test");
  EXPECT_EQ(error_of([](workload& w) {
              w.backlog_s = 60;
              w.groups_per_topic = 0;
            }),
            "a backlog test needs consumers: --groups-per-topic is 0");
  // No consumers at all is a produce-only run.
  EXPECT_EQ(error_of([](workload& w) {
              w.groups_per_topic = 0;
              w.consumers_per_group = 0;
            }),
            "");
}

// ------------------------------------------------------------------ properties

TEST(Properties, JavaPropertiesTextWithCommentsBlanksAndColons) {
  auto p = parse_properties_text(
      "# a comment\n"
      "  acks = all\n"
      "\n"
      "! another comment\n"
      "client.id=automq_type=producer&automq_az=us-east-1b\n"
      "linger.ms: 3\n"
      "sasl.jaas.config=org.Plain required \\\n"
      "   username=\"u\";\n"
      "empty=\n");
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(*p, (property_map{{"acks", "all"},
                              {"client.id", "automq_type=producer&automq_az=us-east-1b"},
                              {"linger.ms", "3"},
                              {"sasl.jaas.config", "org.Plain required username=\"u\";"},
                              {"empty", ""}}));
}

TEST(Properties, ALineWithoutSeparatorIsAnErrorNamingIt) {
  auto p = parse_properties_text("acks=1\nnonsense\n");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error(), "line 2: 'nonsense' is not key=value");
}

TEST(ClientConfig, JavaNamesAreRenamedOrDroppedWithANote) {
  auto p =
      to_librdkafka({{"batch.size", "0"},
                     {"key.serializer", "org.apache.kafka.common.serialization.StringSerializer"},
                     {"buffer.memory", "33554432"},
                     {"max.request.size", "2097152"},
                     {"acks", "all"},
                     {"no.such.property", "1"}},
                    client_role::producer);
  ASSERT_TRUE(p) << p.error();
  const std::map<std::string, std::string> set(p->settings.begin(), p->settings.end());
  EXPECT_EQ(set.at("batch.num.messages"), "1");
  EXPECT_FALSE(set.contains("batch.size"));
  EXPECT_EQ(set.at("queue.buffering.max.kbytes"), "32768");
  EXPECT_EQ(set.at("message.max.bytes"), "2097152");
  EXPECT_EQ(set.at("acks"), "all");
  EXPECT_EQ(set.at("linger.ms"), "0");  // the Java producer's default
  EXPECT_FALSE(set.contains("key.serializer"));
  EXPECT_FALSE(set.contains("no.such.property"));
  EXPECT_TRUE(has_note_containing(p->notes, "batch.size=0 (Java: no batching)"));
  EXPECT_TRUE(has_note_containing(p->notes, "ignored producer property key.serializer="));
  EXPECT_TRUE(has_note_containing(p->notes, "ignored producer property no.such.property=1"));
  EXPECT_TRUE(has_note_containing(p->notes, "buffer.memory=33554432"));
}

TEST(ClientConfig, SeedConsumerPropertyGetsLibrdkafkasName) {
  auto p = to_librdkafka({{"fetch.max.wait.ms", "1000"}}, client_role::consumer);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->settings,
            (std::vector<std::pair<std::string, std::string>>{{"fetch.wait.max.ms", "1000"}}));
  EXPECT_TRUE(has_note_containing(p->notes,
                                  "fetch.max.wait.ms=1000 set as librdkafka's fetch.wait.max.ms"));
}

TEST(ClientConfig, ExplicitLingerIsKeptAndAssignorClassesAreMapped) {
  using settings = std::map<std::string, std::string>;
  auto p = to_librdkafka({{"linger.ms", "7"}, {"queue.buffering.max.kbytes", "1024"}},
                         client_role::producer);
  ASSERT_TRUE(p);
  EXPECT_EQ(settings(p->settings.begin(), p->settings.end()),
            (settings{{"linger.ms", "7"},
                      {"max.in.flight.requests.per.connection", "5"},
                      {"partitioner", "murmur2_random"},
                      {"queue.buffering.max.kbytes", "1024"}}));
  auto defaults = to_librdkafka({}, client_role::producer);
  ASSERT_TRUE(defaults);
  EXPECT_EQ(settings(defaults->settings.begin(), defaults->settings.end()),
            (settings{{"linger.ms", "0"},
                      {"max.in.flight.requests.per.connection", "5"},
                      {"partitioner", "murmur2_random"},
                      {"queue.buffering.max.kbytes", "32768"}}));
  auto c = to_librdkafka({{"partition.assignment.strategy",
                           "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"}},
                         client_role::consumer);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->settings.at(0).second, "cooperative-sticky");
  auto bad = to_librdkafka({{"partition.assignment.strategy", "com.example.MyAssignor"}},
                           client_role::consumer);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("MyAssignor"), std::string::npos);
}

TEST(ClientConfig, AValueLibrdkafkaRefusesIsAnErrorNamingIt) {
  auto p = to_librdkafka({{"acks", "sometimes"}}, client_role::producer);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().find("acks=sometimes"), std::string::npos) << p.error();
}

TEST(ClientConfig, JaasCredentialsBecomeSaslUsernameAndPassword) {
  auto p = to_librdkafka(
      {{"sasl.jaas.config",
        "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" "
        "password=\"s3cret\";"}},
      client_role::admin);
  ASSERT_TRUE(p) << p.error();
  const std::map<std::string, std::string> set(p->settings.begin(), p->settings.end());
  EXPECT_EQ(set.at("sasl.username"), "alice");
  EXPECT_EQ(set.at("sasl.password"), "s3cret");
}

// ------------------------------------------------------------------ OMB files

TEST(Omb, ExampleDriverParses) {
  const fs::path path = examples_dir() / "omb-driver-kafka.yaml";
  auto d = parse_omb_driver(read(path), path.string());
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->name, "Kafka");
  EXPECT_EQ(d->bootstrap_servers, "localhost:9092");
  EXPECT_FALSE(d->common_config.contains("bootstrap.servers"));
  EXPECT_EQ(d->replication_factor, 1);
  EXPECT_EQ(d->producer_config.at("acks"), "1");
  EXPECT_EQ(d->producer_config.at("batch.size"), "65536");
  EXPECT_EQ(d->consumer_config.at("auto.offset.reset"), "earliest");
  EXPECT_EQ(d->topic_config.at("min.insync.replicas"), "1");
  EXPECT_TRUE(d->notes.empty());
}

TEST(Omb, ExampleSeedWorkloadsParseAndValidate) {
  const fs::path driver_path = examples_dir() / "omb-driver-kafka.yaml";
  auto d = parse_omb_driver(read(driver_path), driver_path.string());
  ASSERT_TRUE(d);
  const fs::path path = examples_dir() / "omb-seed-workloads.yaml";
  std::vector<std::vector<std::string>> notes;
  auto ws = parse_omb_workloads(read(path), path.string(), *d, notes);
  ASSERT_TRUE(ws) << ws.error();
  ASSERT_EQ(ws->size(), 3U);
  const workload& low = (*ws)[0];
  EXPECT_EQ(low.name, "Lowest latency case");
  EXPECT_EQ(low.topics, 1);
  EXPECT_EQ(low.partitions_per_topic, 32);
  EXPECT_EQ(low.record_size, 65536);
  EXPECT_EQ(low.groups_per_topic, 4);
  EXPECT_EQ(low.consumers_per_group, 16);
  EXPECT_EQ(low.producers_per_topic, 16);
  EXPECT_EQ(low.send_rate, 1600);
  EXPECT_EQ(low.test_s, 900);
  EXPECT_EQ(low.warmup_s, 60);  // OMB's default
  EXPECT_EQ(low.reporting_interval_s, 10);
  EXPECT_EQ(low.random_ratio, 1.0);
  EXPECT_EQ(low.bootstrap_servers, "localhost:9092");
  EXPECT_EQ(low.producer_configs.at("acks"), "1");
  EXPECT_EQ((*ws)[1].record_size, 1024);
  EXPECT_EQ((*ws)[1].send_rate, 102400);
  const workload& azure = (*ws)[2];
  EXPECT_EQ(azure.partitions_per_topic, 288);
  EXPECT_EQ(azure.consumers_per_group, 64);
  EXPECT_EQ(azure.warmup_s, 600);
  for (size_t i = 0; i < ws->size(); ++i) {
    EXPECT_TRUE(validate((*ws)[i], omb_field_names())) << (*ws)[i].name;
    EXPECT_TRUE(notes[i].empty()) << notes[i].front();
  }
}

// The driver as the AutoMQ FSx report prints it: its `key: |` blocks lost their indentation
// on the web page, which is not YAML; it is read with a note.
TEST(Omb, DriverWithUnindentedBlocksFromTheSeedReportIsReadWithANote) {
  const std::string seed =
      "name: Kafka\n"
      "driverClass: io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver\n"
      "# Kafka client-specific configuration\n"
      "replicationFactor: 1\n"
      "topicConfig: |\n"
      "min.insync.replicas=2\n"
      "commonConfig: |\n"
      "bootstrap.servers=10.0.0.112:9092\n"
      "producerConfig: |\n"
      "acks=1\n"
      "batch.size=65536\n"
      "client.id=automq_type=producer&automq_az=us-east-1b\n"
      "consumerConfig: |\n"
      "auto.offset.reset=earliest\n"
      "enable.auto.commit=true\n"
      "client.id=automq_type=consumer&automq_az=us-east-1b\n";
  auto d = parse_omb_driver(seed, "seed.yaml");
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->bootstrap_servers, "10.0.0.112:9092");
  EXPECT_EQ(d->topic_config.at("min.insync.replicas"), "2");
  EXPECT_EQ(d->producer_config.at("client.id"), "automq_type=producer&automq_az=us-east-1b");
  EXPECT_EQ(d->consumer_config.at("enable.auto.commit"), "true");
  EXPECT_TRUE(has_note_containing(d->notes, "not indented"));
}

TEST(Omb, WorkloadDefaultsUnknownFieldsAndMissingPayloadFile) {
  omb_driver d;
  d.bootstrap_servers = "b:1";
  std::vector<std::vector<std::string>> notes;
  auto ws = parse_omb_workloads(
      "name: w\ntopics: 2\npartitionsPerTopic: 3\nmessageSize: 100\n"
      "payloadFile: \"payload/no-such-file.data\"\nsubscriptionsPerTopic: 1\n"
      "consumerPerSubscription: 2\nproducersPerTopic: 1\nproducerRate: 0\n"
      "keyDistributor: RANDOM_NANO\nconsumerBacklogSizeGB: 0\nsomeForkField: 3\n",
      "/nowhere/w.yaml", d, notes);
  ASSERT_TRUE(ws) << ws.error();
  const workload& w = ws->at(0);
  EXPECT_EQ(w.send_rate, 0);  // find the maximum, as OMB
  EXPECT_EQ(w.keys, key_distributor::random_nano);
  EXPECT_EQ(w.test_s, 0);  // until interrupted, as OMB without testDurationMinutes
  EXPECT_TRUE(w.payload_file.empty());
  EXPECT_EQ(w.random_ratio, 1.0);
  EXPECT_TRUE(has_note_containing(notes[0], "ignored workload field someForkField"));
  EXPECT_TRUE(has_note_containing(notes[0], "payload/no-such-file.data not found"));
  EXPECT_TRUE(has_note_containing(notes[0], "until interrupted"));
  EXPECT_TRUE(validate(w, omb_field_names()));
}

TEST(Omb, WorkloadErrorsNameFileFieldAndValue) {
  omb_driver d;
  d.bootstrap_servers = "b:1";
  std::vector<std::vector<std::string>> notes;
  auto e = parse_omb_workloads("topics: many\n", "w.yaml", d, notes);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error(), "w.yaml: topics: 'many' is not an integer");
  e = parse_omb_workloads("keyDistributor: ROUND\n", "w.yaml", d, notes);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().find("'ROUND'"), std::string::npos);
  auto ws = parse_omb_workloads("name: x\ntopics: 1\n", "w.yaml", d, notes);
  ASSERT_TRUE(ws);
  auto v = validate(ws->at(0), omb_field_names());
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error(), "partitionsPerTopic must be at least 1, got 0");
  ws = parse_omb_workloads(
      "topics: 1\npartitionsPerTopic: 1\nmessageSize: 10\n"
      "producersPerTopic: 1\nproducerRate: 0\nconsumerBacklogSizeGB: 1\n"
      "subscriptionsPerTopic: 1\nconsumerPerSubscription: 1\n"
      "testDurationMinutes: 1\n",
      "w.yaml", d, notes);
  ASSERT_TRUE(ws);
  v = validate(ws->at(0), omb_field_names());
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error(),
            "cannot search for the maximum sustainable rate (producerRate 0) in a backlog test");
}

TEST(Omb, ArgsAndOutputPaths) {
  auto o =
      parse_omb_args(split("--driver d.yaml --bootstrap-server h:2 -o out.json a.yaml b.yaml"));
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->driver, "d.yaml");
  EXPECT_EQ(o->bootstrap_server, "h:2");
  EXPECT_EQ(o->output, "out.json");
  EXPECT_EQ(o->workloads, (std::vector<std::string>{"a.yaml", "b.yaml"}));
  EXPECT_FALSE(parse_omb_args(split("w.yaml")));           // no driver
  EXPECT_FALSE(parse_omb_args(split("--driver d.yaml")));  // no workload
  EXPECT_EQ(omb_output_path("r/out.json", 0, 1, "x"), "r/out.json");
  EXPECT_EQ(omb_output_path("r/out.json", 1, 3, "1 Robust case"), "r/out-2-1-robust-case.json");
  EXPECT_EQ(html_path_for("r/out.json"), "r/out.html");
  EXPECT_EQ(html_path_for("out"), "out.html");
  EXPECT_TRUE(check_output_path(""));
  EXPECT_TRUE(check_output_path("out.json"));
  EXPECT_TRUE(check_output_path("/tmp/out.json"));
  EXPECT_FALSE(check_output_path("/no/such/folder/out.json"));
}

// ------------------------------------------------------------------ the send schedule

TEST(SendSchedule, ProducersInterleaveIntoOneEvenlySpacedSequence) {
  const steady_time t0{};
  // 4 producers share 1,000 records/s: record n of the whole is due at n ms.
  std::set<int64_t> due_ms;
  for (int p = 0; p < 4; ++p) {
    const send_schedule s(t0, 1000, 4, p);
    EXPECT_EQ(s.due(0) - t0, milliseconds(p));
    EXPECT_EQ(s.due(1) - t0, milliseconds(4 + p));  // each producer: every 4 ms
    for (uint64_t k = 0; k < 250; ++k) {
      due_ms.insert(std::chrono::duration_cast<milliseconds>(s.due(k) - t0).count());
    }
  }
  ASSERT_EQ(due_ms.size(), 1000U);
  EXPECT_EQ(*due_ms.begin(), 0);
  EXPECT_EQ(*due_ms.rbegin(), 999);
}

TEST(SendSchedule, DueTimesDoNotDriftOverLongRuns) {
  const steady_time t0{};
  const send_schedule s(t0, 3, 1, 0);  // 3 records/s: 333.33... ms apart
  // Record 3,000,000 is due exactly 1,000,000 s after the start (no accumulated rounding).
  EXPECT_EQ(s.due(3000000) - t0, std::chrono::seconds(1000000));
}

TEST(SendSchedule, CountsTheRecordsDueByAnInstant) {
  const steady_time t0 = steady_time{} + std::chrono::seconds(5);
  const send_schedule s(t0, 1000, 8, 3);
  EXPECT_EQ(s.due_by(t0 - milliseconds(1)), 0U);
  EXPECT_EQ(s.due_by(t0), 1U);  // record 0 is due at the start
  EXPECT_EQ(s.due_by(t0 + milliseconds(999)), 1000U);
  EXPECT_EQ(s.due_by(t0 + std::chrono::seconds(60)), 60001U);
  EXPECT_EQ(send_schedule{}.due_by(t0), 0U);
  EXPECT_TRUE(send_schedule{}.paused());
}

// ------------------------------------------------------------------ the rate search

// A trial on a broker that sustains `capacity` records/s: below it everything keeps up; above
// it the producers fall behind and latency grows with the queue.
rate_trial synthetic_trial(double rate, double capacity) {
  rate_trial t;
  t.rate = rate;
  t.duration_s = 4;
  t.scheduled = static_cast<uint64_t>(rate * 4);
  t.early_p50_ms = 3;
  if (rate <= capacity) {
    t.sent = t.acked = t.scheduled;
    t.late_p50_ms = 3.5;
    t.max_group_backlog = 10;
  } else {
    t.sent = static_cast<uint64_t>(capacity * 4);
    t.acked = t.sent;
    t.late_p50_ms = 3 + 1000 * 2 * (rate - capacity) / rate;
    t.max_group_backlog = 10;
  }
  return t;
}

TEST(RateSearch, FindsTheCapacityWithinFivePercentFromBelow) {
  for (const double capacity : {37000.0, 2300.0, 10000.0, 155000.0}) {
    max_rate_search s(10000);
    while (!s.done()) s.record(synthetic_trial(s.next_rate(), capacity));
    EXPECT_TRUE(s.converged()) << capacity;
    EXPECT_LE(s.found(), capacity) << capacity;
    EXPECT_GE(s.found(), 0.95 * capacity) << capacity;
    EXPECT_LE(s.trials(), 16);
  }
}

TEST(RateSearch, DoublesWhileTrialsPassThenBisects) {
  max_rate_search s(1000);
  EXPECT_EQ(s.next_rate(), 1000);
  s.record(synthetic_trial(1000, 5000));
  EXPECT_EQ(s.next_rate(), 2000);
  s.record(synthetic_trial(2000, 5000));
  EXPECT_EQ(s.next_rate(), 4000);
  s.record(synthetic_trial(4000, 5000));
  EXPECT_EQ(s.next_rate(), 8000);
  s.record(synthetic_trial(8000, 5000));  // fails
  EXPECT_EQ(s.lowest_failed(), 8000);
  EXPECT_EQ(s.next_rate(), 6000);
}

TEST(RateSearch, HalvesFromAFailedStartAndGivesUpBelowOneRecordPerSecond) {
  max_rate_search s(10000);
  s.record(synthetic_trial(10000, 3000));
  EXPECT_EQ(s.next_rate(), 5000);
  s.record(synthetic_trial(5000, 3000));
  EXPECT_EQ(s.next_rate(), 2500);

  max_rate_search none(8);
  while (!none.done()) {
    rate_trial t = synthetic_trial(none.next_rate(), 100);
    t.errors = 1;  // every trial fails
    none.record(t);
  }
  EXPECT_EQ(none.found(), 0);
  EXPECT_LE(none.lowest_failed(), 1);
}

TEST(RateSearch, ARateThatMultipliesTheLatencyIsPastTheKnee) {
  max_rate_search s(10000);
  rate_trial t;
  t.rate = 10000;
  t.scheduled = t.sent = t.acked = 40000;
  t.early_p50_ms = t.late_p50_ms = 3;
  EXPECT_TRUE(s.record(t).sustainable);
  // Twice the rate: steady within the trial, but at 20 ms against 3 ms (more than 4 * 3 + 5).
  t.rate = s.next_rate();
  t.early_p50_ms = 17;
  t.late_p50_ms = 20;
  const auto v = s.record(t);
  EXPECT_FALSE(v.sustainable);
  EXPECT_NE(v.reason.find("over four times the lowest seen (3.0 ms)"), std::string::npos)
      << v.reason;
  EXPECT_EQ(s.found(), 10000);
  EXPECT_EQ(s.lowest_failed(), 20000);
}

TEST(RateSearch, JudgesEachSymptomOfAnOverloadedBroker) {
  rate_trial ok;
  ok.rate = 1000;
  ok.scheduled = ok.sent = ok.acked = 4000;
  ok.early_p50_ms = 2;
  ok.late_p50_ms = 4;
  EXPECT_TRUE(judge_trial(ok).sustainable) << judge_trial(ok).reason;

  rate_trial t = ok;
  t.errors = 3;
  EXPECT_EQ(judge_trial(t).reason, "3 produce errors");
  t = ok;
  t.sent = 3900;
  EXPECT_EQ(judge_trial(t).reason, "the producers sent 3900 of the 4000 records due");
  t = ok;
  t.late_p50_ms = 9.5;  // more than 2 * 2 + 5
  EXPECT_FALSE(judge_trial(t).sustainable);
  EXPECT_NE(judge_trial(t).reason.find("grew from 2.0 ms to 9.5 ms"), std::string::npos);
  t = ok;
  t.max_group_backlog = 1001;  // more than max(1000, 1 s of 1,000/s)
  EXPECT_FALSE(judge_trial(t).sustainable);
  t = ok;
  t.drained = false;
  EXPECT_FALSE(judge_trial(t).sustainable);
}

// ------------------------------------------------------------------ records and statistics

TEST(RecordHeader, RoundTripsAndRejectsOtherSizes) {
  const auto h = encode_record_header(0x0123456789abcdefULL, 1700000000123456);
  auto d = decode_record_header(h.data(), h.size());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->run_id, 0x0123456789abcdefULL);
  EXPECT_EQ(d->due_us, 1700000000123456);
  EXPECT_FALSE(decode_record_header(h.data(), 15));
  EXPECT_FALSE(decode_record_header(nullptr, 16));
}

TEST(PayloadPool, RandomPartFirstThenTheFill) {
  workload w;
  w.record_size = 1000;
  w.random_ratio = 0.25;
  w.random_pool_size = 5;
  w.fill = payload_fill::zeros;
  w.keys = key_distributor::key_round_robin;
  std::vector<std::string> notes;
  auto p = payload_pool::build(w, notes);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->value_count(), 5U);
  std::set<std::string> distinct;
  for (size_t i = 0; i < 5; ++i) {
    const std::string& v = p->value(i);
    ASSERT_EQ(v.size(), 1000U);
    EXPECT_EQ(v.substr(250), std::string(750, '\0'));
    distinct.insert(v.substr(0, 250));
  }
  EXPECT_EQ(distinct.size(), 5U);
  EXPECT_EQ(p->key_count(), 10000U);
  EXPECT_EQ(p->key(0).size(), 10U);

  w.random_ratio = 0;
  w.fill = payload_fill::repeated_block;  // AutoMQ: one random block, sent again and again
  p = payload_pool::build(w, notes);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->value_count(), 1U);
  EXPECT_NE(p->value(0), std::string(1000, '\0'));
}

TEST(PayloadPool, UnreadablePayloadFileIsAnError) {
  workload w;
  w.payload_file = "/nonexistent/payload.data";
  std::vector<std::string> notes;
  auto p = payload_pool::build(w, notes);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().find("/nonexistent/payload.data"), std::string::npos);
}

TEST(RunStats, IntervalsHaveRatesBacklogAndLatencies) {
  run_stats s(2, 2);  // 2 topics, 2 groups each
  const auto a = s.take();
  for (int i = 0; i < 100; ++i) {
    s.sent();
    s.acked(i % 2, 1024, 5000);  // 5 ms
  }
  for (int i = 0; i < 50; ++i) s.consumed(0, 1024, 7000);  // group 0 reads topic 0
  const auto b = s.take();
  const interval_stats i = make_interval(a, b, "test", 1.0, 2.0, 2);
  EXPECT_EQ(i.phase, "test");
  EXPECT_EQ(i.sent, 100U);
  EXPECT_EQ(i.acked, 100U);
  EXPECT_EQ(i.consumed, 50U);
  EXPECT_DOUBLE_EQ(i.produce_msgs_per_s, 50);
  EXPECT_DOUBLE_EQ(i.consume_mib_per_s, 50.0 * 1024 / 1048576 / 2);
  // Topic 0 and 1 got 50 each; group 0 read all of topic 0, groups 1, 2 and 3 nothing.
  EXPECT_EQ(i.backlog, 150);
  EXPECT_EQ(b.max_group_backlog(2), 50);
  EXPECT_EQ(i.produce_latency.count, 100U);
  EXPECT_NEAR(i.produce_latency.p50_ms, 5.0, 0.05);
  EXPECT_NEAR(i.e2e_latency.p99_ms, 7.0, 0.07);
}

}  // namespace
}  // namespace silt::perf
