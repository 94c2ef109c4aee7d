#include "config/config.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "base/redact.h"
#include "config/internal.h"
#include "config/topic_config.h"

namespace silt::config {
namespace {

namespace fs = std::filesystem;

// A properties file in a fresh temporary directory, removed at the end of the test.
class temp_file {
 public:
  explicit temp_file(const std::string& text) {
    dir_ =
        fs::temp_directory_path() /
        ("silt_config_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    path_ = (dir_ / "server.properties").string();
    std::ofstream(path_) << text;
  }
  ~temp_file() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  fs::path dir_;
  std::string path_;
};

// load() of `text` as a properties file; what it writes to stderr (the notices) is dropped.
tl::expected<broker_config, std::string> load_file(const std::string& text,
                                                   std::vector<std::string> overrides = {}) {
  temp_file f(text);
  command_line cmd;
  cmd.properties_file = f.path();
  cmd.overrides = std::move(overrides);
  ::testing::internal::CaptureStderr();
  auto c = load(cmd);
  ::testing::internal::GetCapturedStderr();
  return c;
}

broker_config props(const std::vector<std::pair<std::string, std::string>>& p) {
  auto c = from_properties(p);
  EXPECT_TRUE(c.has_value()) << c.error();
  return c.value_or(broker_config{});
}

std::string error_of(const std::vector<std::pair<std::string, std::string>>& p) {
  auto c = from_properties(p);
  EXPECT_FALSE(c.has_value());
  return c ? "" : c.error();
}

// Fake credentials in every form the two store URIs take.
constexpr const char* kS3Uri =
    "s3://bucket?endpoint=http://127.0.0.1:7480&access_key=AK&secret_key=S3SECRET"
    "&session_token=S3TOKEN";
constexpr const char* kPgUri = "postgresql://silt:PGSECRET@db:5432/silt?sslpassword=PGSSL";
constexpr const char* kSecrets[] = {"S3SECRET", "S3TOKEN", "PGSECRET", "PGSSL"};

TEST(BrokerConfig, DefaultsNeedNoConfiguration) {
  const auto c = props({});
  ASSERT_EQ(c.listeners.size(), 1u);
  EXPECT_EQ(c.listeners[0].listener_name, "PLAINTEXT");
  EXPECT_EQ(c.listeners[0].host, "localhost");
  EXPECT_EQ(c.listeners[0].port, 9092);
  EXPECT_EQ(to_string(c.advertised_listeners.at(0)), "PLAINTEXT://localhost:9092");
  EXPECT_EQ(c.node_id, 1);
  EXPECT_EQ(c.cluster_id, "");
  EXPECT_EQ(c.data_dir, "./data");
  EXPECT_EQ(c.wal_sync, "dsync");
  EXPECT_EQ(c.log_retention_ms, 604800000);
  EXPECT_EQ(c.message_max_bytes, 1048588);
  EXPECT_EQ(c.log_message_timestamp_type, timestamp_type::create_time);
  EXPECT_TRUE(c.given.empty());
  EXPECT_TRUE(c.notices.empty());
  EXPECT_EQ(c.values.at("num.partitions"), "1");
  EXPECT_EQ(c.values.at("listeners"), "PLAINTEXT://localhost:9092");
  EXPECT_EQ(c.values.at("log.message.timestamp.type"), "CreateTime");
  EXPECT_EQ(c.values.at("auto.create.topics.enable"), "true");
  EXPECT_EQ(c.values.at("cluster.id"), "");
  EXPECT_FALSE(c.values.contains("log.retention.hours"));
}

TEST(BrokerConfig, DerivedPathsFollowDataDir) {
  const auto c = props({{"data.dir", "/var/lib/silt"}});
  EXPECT_EQ(c.wal_path, "/var/lib/silt/wal");
  EXPECT_EQ(c.metadata_path, "/var/lib/silt/metadata.db");
  EXPECT_EQ(c.object_store_uri, "file:///var/lib/silt/objects");
  EXPECT_EQ(c.values.at("wal.path"), "/var/lib/silt/wal");
  EXPECT_EQ(c.values.at("object.store.uri"), "file:///var/lib/silt/objects");
}

TEST(BrokerConfig, DefaultObjectStoreIsAnAbsolutePath) {
  const auto c = props({{"data.dir", "rel/dir"}});
  const auto expected = (fs::absolute("rel/dir").lexically_normal() / "objects").string();
  EXPECT_EQ(c.object_store_uri, "file://" + expected);
  EXPECT_EQ(c.wal_path, "rel/dir/wal");
}

TEST(BrokerConfig, GivenPathsAreKept) {
  const auto c = props({{"wal.path", "/dev/nvme0n1"},
                        {"object.store.uri", "s3://bucket?endpoint=http://127.0.0.1:7480"},
                        {"metadata.path", "/m.db"}});
  EXPECT_EQ(c.wal_path, "/dev/nvme0n1");
  EXPECT_EQ(c.object_store_uri, "s3://bucket?endpoint=http://127.0.0.1:7480");
  EXPECT_EQ(c.metadata_path, "/m.db");
  EXPECT_NE(error_of({{"object.store.uri", "http://x"}})
                .find("expected a file://, s3:// or azblob:// URI"),
            std::string::npos);
}

TEST(BrokerConfig, MetricsListenerIsAnHttpEndpoint) {
  EXPECT_EQ(props({}).metrics_listener, "");
  EXPECT_EQ(props({{"metrics.listener", "http://127.0.0.1:9644/metrics"}}).metrics_listener,
            "http://127.0.0.1:9644/metrics");
  const auto e = parse_http_endpoint("http://127.0.0.1:9644/metrics");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, 9644);
  EXPECT_EQ(e->path, "/metrics");
  EXPECT_EQ(parse_http_endpoint("http://:0")->path, "/metrics");
  EXPECT_EQ(parse_http_endpoint("http://[::1]:9644/m")->host, "::1");
  EXPECT_TRUE(parse_http_endpoint("https://127.0.0.1:9644/metrics")->tls);
  EXPECT_FALSE(parse_http_endpoint("http://127.0.0.1:9644/metrics")->tls);
  EXPECT_EQ(error_of({{"metrics.listener", "https://127.0.0.1:9644/metrics"}}),
            "metrics.listener is https: set ssl.keystore.location (or "
            "ssl.keystore.certificate.chain and ssl.keystore.key) for its certificate");
  for (const char* bad : {"ftp://h:1/m", "http://h/m", "http://h:70000/m", "http://h:x",
                          "http://h:1/a b", "127.0.0.1:9644"}) {
    EXPECT_FALSE(parse_http_endpoint(bad)) << bad;
  }
  EXPECT_NE(error_of({{"metrics.listener", "9644"}}).find("expected empty or http[s]://host:port"),
            std::string::npos);
}

TEST(BrokerConfig, ConnectionsPerIpAndTheirOverridesAsKafkaReadsThem) {
  EXPECT_EQ(props({}).max_connections_per_ip, INT32_MAX);
  const auto c = props({{"max.connections.per.ip", "5"},
                        {"max.connections.per.ip.overrides", "127.0.0.1:100, [::1]:0,gw:7"}});
  EXPECT_EQ(c.max_connections_per_ip, 5);
  const auto o = parse_ip_overrides(c.max_connections_per_ip_overrides);
  ASSERT_TRUE(o);
  const std::vector<std::pair<std::string, int32_t>> want{
      {"127.0.0.1", 100}, {"::1", 0}, {"gw", 7}};
  EXPECT_EQ(*o, want);
  EXPECT_EQ(parse_ip_overrides("")->size(), 0u);
  for (const char* bad : {"127.0.0.1", "127.0.0.1:-1", ":5", "h:x", "h:99999999999"}) {
    EXPECT_FALSE(parse_ip_overrides(bad)) << bad;
  }
  EXPECT_NE(error_of({{"max.connections.per.ip.overrides", "h"}}).find("host:count"),
            std::string::npos);
  EXPECT_NE(error_of({{"max.connections.per.ip", "-1"}}).find("max.connections.per.ip"),
            std::string::npos);
}

TEST(BrokerConfig, ReadsAPropertiesFile) {
  const auto c = load_file(
      "# a comment\n"
      "! another comment\n"
      "\n"
      "node.id=7\n"
      "  num.partitions : 3  \n"
      "log.dirs /tmp/kafka-logs\n"
      "listeners = PLAINTEXT://0.0.0.0:19092, \\\n"
      "    \n"
      "wal.sync=fdatasync\r\n"
      "num.io.threads=\\\n"
      "   4\n"
      "log.message.timestamp.type=LogAppendTime\n");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->node_id, 7);
  EXPECT_EQ(c->num_partitions, 3);
  EXPECT_EQ(c->data_dir, "/tmp/kafka-logs");
  EXPECT_EQ(c->wal_path, "/tmp/kafka-logs/wal");
  EXPECT_EQ(c->wal_sync, "fdatasync");
  EXPECT_EQ(c->num_io_threads, 4u);
  EXPECT_EQ(c->log_message_timestamp_type, timestamp_type::log_append_time);
  ASSERT_EQ(c->listeners.size(), 1u);
  EXPECT_EQ(c->listeners[0].host, "0.0.0.0");
  EXPECT_EQ(c->listeners[0].port, 19092);
  EXPECT_EQ(to_string(c->advertised_listeners.at(0)), "PLAINTEXT://localhost:19092");
  EXPECT_TRUE(c->given.contains("node.id"));
  EXPECT_EQ(c->values.at("log.dirs"), "/tmp/kafka-logs");
}

TEST(BrokerConfig, DataDirWinsOverLogDirsWhichWinsOverLogDir) {
  auto c = props({{"log.dirs", "/a"}, {"data.dir", "/b"}});
  EXPECT_EQ(c.data_dir, "/b");
  EXPECT_EQ(c.notices, std::vector<std::string>{"ignoring log.dirs (data.dir is given)"});
  c = props({{"log.dir", "/c"}, {"log.dirs", "/a"}});
  EXPECT_EQ(c.data_dir, "/a");
  EXPECT_TRUE(c.notices.empty());
  c = props({{"log.dir", "/c"}});
  EXPECT_EQ(c.data_dir, "/c");
  EXPECT_EQ(c.wal_path, "/c/wal");
  EXPECT_EQ(c.values.at("log.dir"), "/c");
}

TEST(BrokerConfig, LogDirsWithSeveralDirectoriesUsesTheFirst) {
  const auto c = props({{"log.dirs", " /a , /b,/c"}});
  EXPECT_EQ(c.data_dir, "/a");
  EXPECT_EQ(c.notices, std::vector<std::string>{"using only the first directory of log.dirs, '/a' "
                                                "(Silt keeps its files in one directory)"});
  EXPECT_NE(error_of({{"log.dirs", ","}}).find("log.dirs"), std::string::npos);
}

TEST(BrokerConfig, BrokerIdStandsInForNodeId) {
  EXPECT_EQ(props({{"broker.id", "5"}}).node_id, 5);
  EXPECT_EQ(props({{"broker.id", "5"}, {"node.id", "5"}}).node_id, 5);
  EXPECT_EQ(error_of({{"broker.id", "5"}, {"node.id", "6"}}),
            "broker.id (5) and node.id (6) differ; they name the same thing");
  EXPECT_EQ(error_of({{"broker.id", "-1"}}),
            "invalid value '-1' for broker.id: expected an integer of at least 0");
}

TEST(BrokerConfig, OverridesWinOverTheFileAndLaterOnesWin) {
  const auto c =
      load_file("node.id=7\nnum.partitions=3\nnum.partitions=4\n", {"node.id=8", "node.id = 9"});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->node_id, 9);
  EXPECT_EQ(c->num_partitions, 4);
  EXPECT_EQ(c->values.at("node.id"), "9");
}

TEST(BrokerConfig, UnknownKeyIsNamedWithFileAndLine) {
  temp_file f("node.id=1\n\nfoo.bar=2\n");
  command_line cmd;
  cmd.properties_file = f.path();
  const auto c = load(cmd);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), f.path() + ":3: unknown setting 'foo.bar'");
  EXPECT_EQ(error_of({{"foo.bar", "1"}}), "unknown setting 'foo.bar'");
  command_line o;
  o.overrides = {"foo.bar=1"};
  EXPECT_EQ(load(o).error(), "--override: unknown setting 'foo.bar'");
}

TEST(BrokerConfig, InvalidValuesAreNamedWithWhatIsExpected) {
  EXPECT_EQ(error_of({{"wal.iodepth", "abc"}}),
            "invalid value 'abc' for wal.iodepth: expected an integer between 1 and 4096");
  EXPECT_EQ(error_of({{"wal.iodepth", "0"}}),
            "invalid value '0' for wal.iodepth: expected an integer between 1 and 4096");
  EXPECT_EQ(error_of({{"node.id", "-1"}}),
            "invalid value '-1' for node.id: expected an integer of at least 0");
  EXPECT_EQ(error_of({{"num.partitions", "0"}}),
            "invalid value '0' for num.partitions: expected an integer of at least 1");
  EXPECT_EQ(error_of({{"wal.sync", "sync"}}),
            "invalid value 'sync' for wal.sync: expected dsync or fdatasync");
  EXPECT_EQ(error_of({{"auto.create.topics.enable", "yes"}}),
            "invalid value 'yes' for auto.create.topics.enable: expected true or false");
  EXPECT_EQ(error_of({{"log.message.timestamp.type", "Now"}}),
            "invalid value 'Now' for log.message.timestamp.type: expected CreateTime or "
            "LogAppendTime");
  EXPECT_NE(error_of({{"wal.capacity.bytes", "5000000"}}).find("multiple of 4096"),
            std::string::npos);
  EXPECT_NE(error_of({{"wal.capacity.bytes", "4096"}}).find("at least 4194304"), std::string::npos);
  EXPECT_NE(error_of({{"socket.request.max.bytes", "1000"}}).find("socket.request.max.bytes"),
            std::string::npos);
  EXPECT_NE(error_of({{"message.max.bytes", "99999999999"}}).find("message.max.bytes"),
            std::string::npos);
  EXPECT_NE(error_of({{"upload.threshold.bytes", "2147483648"}}).find("wal.capacity.bytes"),
            std::string::npos);
  EXPECT_TRUE(
      from_properties({{"wal.capacity.bytes", "4194304"}, {"upload.threshold.bytes", "1048576"}}));
  EXPECT_EQ(error_of({{"replica.selector.class", "com.example.Nearest"}}),
            "invalid value 'com.example.Nearest' for replica.selector.class: expected empty or "
            "org.apache.kafka.common.replica.RackAwareReplicaSelector");
  EXPECT_TRUE(from_properties({{"replica.selector.class", std::string(rack_aware_selector)}}));
}

TEST(BrokerConfig, ParsesListeners) {
  auto c = props({{"listeners", "PLAINTEXT://:9093"}});
  ASSERT_EQ(c.listeners.size(), 1u);
  EXPECT_EQ(c.listeners[0].host, "");
  EXPECT_EQ(c.listeners[0].port, 9093);
  EXPECT_EQ(to_string(c.advertised_listeners.at(0)), "PLAINTEXT://localhost:9093");
  c = props({{"listeners", "PLAINTEXT://[::1]:0"}});
  EXPECT_EQ(c.listeners.at(0).host, "::1");
  EXPECT_EQ(c.listeners.at(0).port, 0);
  EXPECT_EQ(c.values.at("listeners"), "PLAINTEXT://[::1]:0");
  c = props({{"listeners", "PLAINTEXT://0.0.0.0:9092"},
             {"advertised.listeners", "PLAINTEXT://broker1.example.com:19092"}});
  EXPECT_EQ(c.advertised_listeners.at(0).host, "broker1.example.com");
  EXPECT_EQ(c.advertised_listeners.at(0).port, 19092);
  EXPECT_EQ(c.values.at("advertised.listeners"), "PLAINTEXT://broker1.example.com:19092");

  c = props({{"listeners", "plaintext://:9092"}});
  EXPECT_EQ(c.listeners.at(0).listener_name, "PLAINTEXT");
  EXPECT_NE(error_of({{"listeners", "PLAINTEXT://:65536"}}).find("port between 0 and 65535"),
            std::string::npos);
  EXPECT_NE(error_of({{"listeners", "PLAINTEXT://:-1"}}).find("port"), std::string::npos);
  EXPECT_NE(error_of({{"listeners", "localhost:9092"}}).find("NAME://host:port"),
            std::string::npos);
  EXPECT_NE(error_of({{"listeners", "PLAIN TEXT://:1"}}).find("listener name"), std::string::npos);
  EXPECT_NE(error_of({{"listeners", ""}}).find("at least one listener"), std::string::npos);
  EXPECT_NE(error_of({{"listeners", "PLAINTEXT://:1,PLAINTEXT://:2"}}).find("twice"),
            std::string::npos);
  EXPECT_NE(
      error_of({{"advertised.listeners", "PLAINTEXT://0.0.0.0:9092"}}).find("cannot be advertised"),
      std::string::npos);
}

TEST(BrokerConfig, RetentionMsWinsOverMinutesOverHours) {
  EXPECT_EQ(props({{"log.retention.hours", "24"}}).log_retention_ms, 86400000);
  EXPECT_EQ(
      props({{"log.retention.hours", "24"}, {"log.retention.minutes", "10"}}).log_retention_ms,
      600000);
  EXPECT_EQ(props({{"log.retention.hours", "24"},
                   {"log.retention.minutes", "10"},
                   {"log.retention.ms", "1234"}})
                .log_retention_ms,
            1234);
  EXPECT_EQ(props({{"log.retention.hours", "-1"}}).log_retention_ms, -1);
  const auto c = props({{"log.retention.hours", "1"}});
  EXPECT_EQ(c.values.at("log.retention.ms"), "3600000");
  EXPECT_EQ(c.values.at("log.retention.hours"), "1");
  EXPECT_NE(error_of({{"log.retention.hours", "x"}}).find("log.retention.hours"),
            std::string::npos);
}

TEST(BrokerConfig, SaslListenersNeedAMechanismSiltServes) {
  // Kafka's default mechanism is GSSAPI: refused by name.
  EXPECT_NE(error_of({{"listeners", "PLAINTEXT://:9092,SASL_PLAINTEXT://:9094"}})
                .find("listener 'SASL_PLAINTEXT://:9094': sasl.enabled.mechanisms enables GSSAPI "
                      "(Kerberos, Kafka's default), which Silt does not serve"),
            std::string::npos);
  EXPECT_NE(error_of({{"listeners", "BROKER://:9092"},
                      {"listener.security.protocol.map", "BROKER:SASL_PLAINTEXT"},
                      {"listener.name.broker.sasl.enabled.mechanisms", "PLAIN,DIGEST-MD5"}})
                .find("listener.name.broker.sasl.enabled.mechanisms names 'DIGEST-MD5', an "
                      "unknown SASL mechanism"),
            std::string::npos);
  EXPECT_NE(error_of({{"listeners", "SASL_PLAINTEXT://:9094"},
                      {"sasl.enabled.mechanisms", "OAUTHBEARER"}})
                .find("OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url"),
            std::string::npos);
}

TEST(BrokerConfig, SaslListenerTakesBrokerWideAndPerListenerSettings) {
  const auto c = props({{"listeners", "PLAINTEXT://:9092,SASL_PLAINTEXT://:9094,EXT://:9095"},
                        {"listener.security.protocol.map",
                         "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,EXT:SASL_SSL"},
                        {"ssl.keystore.location", "/etc/silt/broker.p12"},
                        {"sasl.enabled.mechanisms", "plain,SCRAM-SHA-512"},
                        {"sasl.jaas.config", "J1"},
                        {"connections.max.reauth.ms", "60000"},
                        {"listener.name.ext.sasl.enabled.mechanisms", "PLAIN"},
                        {"listener.name.ext.plain.sasl.jaas.config", "J2"},
                        {"listener.name.ext.plain.connections.max.reauth.ms", "1000"}});
  ASSERT_EQ(c.listener_sasl.size(), 2U);
  const auto& a = c.listener_sasl.at("SASL_PLAINTEXT");
  EXPECT_EQ(a.enabled_mechanisms, (std::vector<std::string>{"PLAIN", "SCRAM-SHA-512"}));
  EXPECT_EQ(a.jaas_for("PLAIN"), "J1");
  EXPECT_EQ(a.reauth_ms_for("PLAIN"), 60000);
  const auto& e = c.listener_sasl.at("EXT");
  EXPECT_EQ(e.enabled_mechanisms, std::vector<std::string>{"PLAIN"});
  EXPECT_EQ(e.jaas_for("PLAIN"), "J2");
  EXPECT_EQ(e.reauth_ms_for("PLAIN"), 1000);
  // SASL_SSL runs over TLS: it has the ssl.* settings too.
  EXPECT_TRUE(c.listener_ssl.contains("EXT"));
  EXPECT_FALSE(c.listener_ssl.contains("SASL_PLAINTEXT"));
  // The JAAS value is a secret: described without its value.
  EXPECT_EQ(c.values.at("sasl.jaas.config"), "J1");
}

TEST(BrokerConfig, SaslSettingsOfUnknownListenersAndJavaCallbacksAreRefused) {
  EXPECT_NE(error_of({{"listeners", "SASL_PLAINTEXT://:9094"},
                      {"sasl.enabled.mechanisms", "PLAIN"},
                      {"listener.name.other.plain.sasl.jaas.config", "x"}})
                .find("listener.name.other.plain.sasl.jaas.config: OTHER is not a listener"),
            std::string::npos);
  EXPECT_NE(error_of({{"listeners", "SASL_PLAINTEXT://:9094"},
                      {"sasl.enabled.mechanisms", "PLAIN"},
                      {"listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class",
                       "com.example.MyHandler"}})
                .find("'com.example.MyHandler' is not supported"),
            std::string::npos);
  // Kafka's JWT validator is understood for OAUTHBEARER.
  const auto c =
      props({{"listeners", "SASL_PLAINTEXT://:9094"},
             {"sasl.enabled.mechanisms", "OAUTHBEARER"},
             {"sasl.oauthbearer.jwks.endpoint.url", "file:///etc/silt/jwks.json"},
             {"sasl.oauthbearer.expected.audience", "kafka,silt"},
             {"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class",
              "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"}});
  EXPECT_EQ(c.oauthbearer.expected_audience, (std::vector<std::string>{"kafka", "silt"}));
  EXPECT_EQ(c.oauthbearer.sub_claim_name, "sub");
  // Kafka 4.1's per-listener form of the token checks wins over the broker-wide one.
  const auto o = props(
      {{"listeners", "SASL_PLAINTEXT://:9094"},
       {"sasl.enabled.mechanisms", "OAUTHBEARER"},
       {"sasl.oauthbearer.expected.issuer", "https://a"},
       {"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url",
        "file:///etc/silt/jwks.json"},
       {"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.clock.skew.seconds", "5"}});
  const auto& l = o.listener_sasl.at("SASL_PLAINTEXT").oauthbearer;
  EXPECT_EQ(l.jwks_endpoint_url, "file:///etc/silt/jwks.json");
  EXPECT_EQ(l.expected_issuer, "https://a");
  EXPECT_EQ(l.clock_skew_seconds, 5);
  EXPECT_TRUE(o.oauthbearer.jwks_endpoint_url.empty());
  // A setting of a listener that does not speak SASL is ignored with a notice.
  const auto d = props({{"listeners", "PLAINTEXT://:9092"},
                        {"listener.name.plaintext.plain.sasl.jaas.config", "x"}});
  EXPECT_TRUE(d.listener_sasl.empty());
}

TEST(BrokerConfig, SslListenerTakesTheBrokerWideSslSettings) {
  const auto c = props({{"listeners", "PLAINTEXT://:9092,SSL://:9093"},
                        {"ssl.keystore.location", "/etc/silt/broker.p12"},
                        {"ssl.keystore.password", "ks-secret"},
                        {"ssl.truststore.type", "pem"},
                        {"ssl.truststore.location", "/etc/silt/ca.pem"},
                        {"ssl.client.auth", "required"},
                        {"ssl.enabled.protocols", "TLSv1.3"}});
  ASSERT_EQ(c.listener_ssl.size(), 1u);
  const auto& s = c.listener_ssl.at("SSL");
  EXPECT_EQ(s.keystore_type, "PKCS12");
  EXPECT_EQ(s.keystore_location, "/etc/silt/broker.p12");
  EXPECT_EQ(s.keystore_password, "ks-secret");
  EXPECT_EQ(s.truststore_type, "PEM");
  EXPECT_EQ(s.client_auth, "required");
  EXPECT_EQ(s.enabled_protocols, std::vector<std::string>{"TLSv1.3"});
  EXPECT_EQ(s.principal_mapping_rules, "DEFAULT");
  EXPECT_EQ(s.key("ssl.keystore.location"), "ssl.keystore.location");
  EXPECT_EQ(security_protocol(c, "SSL"), "SSL");
  EXPECT_EQ(security_protocol(c, "PLAINTEXT"), "PLAINTEXT");
  // The advertised listeners default to both.
  ASSERT_EQ(c.advertised_listeners.size(), 2u);
  EXPECT_EQ(to_string(c.advertised_listeners[1]), "SSL://localhost:9093");
}

TEST(BrokerConfig, ListenerSslSettingsOverrideTheBrokerWideOnes) {
  const auto c = props({{"listeners", "INTERNAL://:9093,EXTERNAL://:9094"},
                        {"listener.security.protocol.map", "INTERNAL:SSL,EXTERNAL:SSL"},
                        {"ssl.keystore.type", "PEM"},
                        {"ssl.keystore.location", "/etc/silt/broker.pem"},
                        {"listener.name.external.ssl.keystore.location", "/etc/silt/public.pem"},
                        {"listener.name.external.ssl.client.auth", "none"},
                        {"ssl.truststore.type", "PEM"},
                        {"ssl.truststore.location", "/etc/silt/ca.pem"},
                        {"ssl.client.auth", "required"}});
  ASSERT_EQ(c.listener_ssl.size(), 2u);
  EXPECT_EQ(c.listener_ssl.at("INTERNAL").keystore_location, "/etc/silt/broker.pem");
  EXPECT_EQ(c.listener_ssl.at("INTERNAL").client_auth, "required");
  const auto& ext = c.listener_ssl.at("EXTERNAL");
  EXPECT_EQ(ext.keystore_location, "/etc/silt/public.pem");
  EXPECT_EQ(ext.keystore_type, "PEM");
  EXPECT_EQ(ext.client_auth, "none");
  EXPECT_EQ(ext.key("ssl.keystore.location"), "listener.name.external.ssl.keystore.location");
  EXPECT_EQ(ext.key("ssl.keystore.type"), "ssl.keystore.type");
}

TEST(BrokerConfig, SslListenerErrorsNameTheSetting) {
  EXPECT_EQ(error_of({{"listeners", "SSL://:9093"}}),
            "listener 'SSL://:9093': an SSL listener needs a key store: set "
            "ssl.keystore.location (or, with ssl.keystore.type=PEM, "
            "ssl.keystore.certificate.chain and ssl.keystore.key)");
  EXPECT_EQ(error_of({{"listeners", "SSL://:9093"},
                      {"ssl.keystore.location", "/k.p12"},
                      {"ssl.client.auth", "required"}}),
            "listener 'SSL://:9093': ssl.client.auth=required needs a trust store: set "
            "ssl.truststore.location or ssl.truststore.certificates");
  EXPECT_EQ(error_of({{"listeners", "SSL://:9093"},
                      {"listener.name.ssl.ssl.keystore.key", "-----BEGIN PRIVATE KEY-----"}}),
            "listener 'SSL://:9093': ssl.keystore.certificate.chain and "
            "listener.name.ssl.ssl.keystore.key need ssl.keystore.type=PEM");
  EXPECT_EQ(error_of({{"ssl.keystore.type", "JKS"}}).substr(0, 63),
            "invalid value 'JKS' for ssl.keystore.type: expected PEM or PKCS");
  EXPECT_EQ(error_of({{"ssl.client.auth", "always"}}),
            "invalid value 'always' for ssl.client.auth: expected none, requested or required");
  EXPECT_EQ(error_of({{"ssl.enabled.protocols", "TLSv1.2,TLSv1.1"}}),
            "invalid value 'TLSv1.2,TLSv1.1' for ssl.enabled.protocols: unsupported TLS version "
            "'TLSv1.1' (TLSv1.2 or TLSv1.3)");
  EXPECT_EQ(error_of({{"listeners", "SSL://:9093"},
                      {"ssl.keystore.location", "/k.p12"},
                      {"listener.name.other.ssl.client.auth", "none"}}),
            "listener.name.other.ssl.client.auth: OTHER is not a listener in listeners");
  // A password never appears in an error, even in the per-listener form.
  const auto e = error_of({{"listeners", "SSL://:9093"},
                           {"ssl.keystore.location", "/k.p12"},
                           {"listener.name.ssl.ssl.client.auth", "SECRETVALUE"}});
  EXPECT_NE(e.find("listener.name.ssl.ssl.client.auth"), std::string::npos);
  EXPECT_EQ(error_of({{"listener.name.plaintext.ssl.unknown", "x"}}),
            "unknown setting 'listener.name.plaintext.ssl.unknown'");
}

TEST(BrokerConfig, ListenerNamesMapToProtocols) {
  auto c = props({{"listeners", "BROKER://127.0.0.1:9092"},
                  {"listener.security.protocol.map", "broker:plaintext, CONTROLLER:SSL"}});
  ASSERT_EQ(c.listeners.size(), 1u);
  EXPECT_EQ(to_string(c.listeners[0]), "BROKER://127.0.0.1:9092");
  EXPECT_EQ(to_string(c.advertised_listeners.at(0)), "BROKER://127.0.0.1:9092");
  EXPECT_EQ(c.values.at("listener.security.protocol.map"), "BROKER:PLAINTEXT,CONTROLLER:SSL");
  EXPECT_EQ(error_of({{"listeners", "BROKER://:9092"}}),
            "invalid value 'BROKER://:9092' for listeners: listener 'BROKER://:9092' has no "
            "security protocol: BROKER is not in listener.security.protocol.map");
  EXPECT_EQ(error_of({{"listener.security.protocol.map", "PLAINTEXT"}}),
            "invalid value 'PLAINTEXT' for listener.security.protocol.map: expected "
            "NAME:PROTOCOL, got 'PLAINTEXT'");
  EXPECT_EQ(error_of({{"listener.security.protocol.map", "PLAINTEXT:TLS"}}),
            "invalid value 'PLAINTEXT:TLS' for listener.security.protocol.map: unknown security "
            "protocol 'TLS' (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)");
  EXPECT_NE(error_of({{"listener.security.protocol.map", "A:SSL,a:SSL"}}).find("twice"),
            std::string::npos);
}

TEST(BrokerConfig, ControllerListenersAreDroppedWithANotice) {
  auto c = props({{"listeners", "PLAINTEXT://:9092,CONTROLLER://:9093"},
                  {"advertised.listeners", "PLAINTEXT://h:9092,CONTROLLER://0.0.0.0:9093"}});
  ASSERT_EQ(c.listeners.size(), 1u);
  EXPECT_EQ(c.listeners[0].port, 9092);
  ASSERT_EQ(c.advertised_listeners.size(), 1u);
  EXPECT_EQ(to_string(c.advertised_listeners[0]), "PLAINTEXT://h:9092");
  EXPECT_EQ(c.values.at("listeners"), "PLAINTEXT://:9092");
  EXPECT_EQ(c.notices, (std::vector<std::string>{
                           "ignoring Kafka listener 'CONTROLLER://:9093' in listeners (Silt has "
                           "no KRaft controller)",
                           "ignoring Kafka listener 'CONTROLLER://0.0.0.0:9093' in "
                           "advertised.listeners (Silt has no KRaft controller)"}));
  // Any controller name, whatever its protocol: it is not served.
  c = props({{"listeners", "CTRL://:9093,PLAINTEXT://:9092"},
             {"controller.listener.names", "ctrl"},
             {"listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CTRL:SASL_SSL"}});
  ASSERT_EQ(c.listeners.size(), 1u);
  EXPECT_EQ(c.listeners[0].listener_name, "PLAINTEXT");
  EXPECT_EQ(c.values.at("controller.listener.names"), "CTRL");
  // Nothing left to serve is an error.
  EXPECT_EQ(error_of({{"listeners", "CONTROLLER://:9093"}}),
            "listeners has no broker listener (only Kafka controller listeners)");
}

// The settings of Apache Kafka 4.1's config/server.properties (a single KRaft node, broker and
// controller), in the file's order, without its comments; tests/data holds the same.
constexpr const char* kKafkaServerProperties = R"(
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093

listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1

offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1

#log.flush.interval.messages=10000
#log.flush.interval.ms=1000

log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
)";

TEST(KafkaServerProperties, TheStockFileLoads) {
  const auto c = load_file(kKafkaServerProperties);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->node_id, 1);
  EXPECT_EQ(c->data_dir, "/tmp/kraft-combined-logs");
  EXPECT_EQ(c->wal_path, "/tmp/kraft-combined-logs/wal");
  ASSERT_EQ(c->listeners.size(), 1u);
  EXPECT_EQ(to_string(c->listeners[0]), "PLAINTEXT://:9092");
  ASSERT_EQ(c->advertised_listeners.size(), 1u);
  EXPECT_EQ(to_string(c->advertised_listeners[0]), "PLAINTEXT://localhost:9092");
  EXPECT_EQ(c->num_network_threads, 3u);
  EXPECT_EQ(c->num_io_threads, 8u);
  EXPECT_EQ(c->socket_request_max_bytes, 104857600);
  EXPECT_EQ(c->log_retention_ms, 168LL * 3600 * 1000);
  EXPECT_EQ(c->retention_check_interval_ms, 300000);
  const std::string controller = "Silt has no KRaft controller";
  const std::string replication = "no replication: durability comes from the WAL, not replicas";
  const std::string sockets = "Silt leaves socket buffers and the listen backlog to the system";
  const std::string segments = "Silt stores objects, not segment files";
  const std::string internal_topics = "Silt keeps no internal topics";
  auto ignoring = [](const std::string& key, const std::string& reason) {
    return "ignoring Kafka setting '" + key + "' (" + reason + ")";
  };
  EXPECT_EQ(c->notices,
            (std::vector<std::string>{
                ignoring("process.roles", controller),
                ignoring("controller.quorum.bootstrap.servers", controller),
                ignoring("inter.broker.listener.name", replication),
                ignoring("socket.send.buffer.bytes", sockets),
                ignoring("socket.receive.buffer.bytes", sockets),
                ignoring("num.recovery.threads.per.data.dir", segments),
                ignoring("offsets.topic.replication.factor", internal_topics),
                ignoring("share.coordinator.state.topic.replication.factor", internal_topics),
                ignoring("share.coordinator.state.topic.min.isr", internal_topics),
                ignoring("transaction.state.log.replication.factor", internal_topics),
                ignoring("transaction.state.log.min.isr", internal_topics),
                ignoring("log.segment.bytes", segments),
                "ignoring Kafka listener 'CONTROLLER://:9093' in listeners (" + controller + ")",
                "ignoring Kafka listener 'CONTROLLER://localhost:9093' in "
                "advertised.listeners (" +
                    controller + ")",
            }));
  // Ignored settings are not described as if they had an effect.
  EXPECT_FALSE(c->values.contains("log.segment.bytes"));
  EXPECT_EQ(c->values.at("log.dirs"), "/tmp/kraft-combined-logs");
}

TEST(KafkaServerProperties, LoadsWithTheOverridesOfATestBroker) {
  const auto c = load_file(kKafkaServerProperties,
                           {"listeners=PLAINTEXT://127.0.0.1:19092", "data.dir=/tmp/silt-test"});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->data_dir, "/tmp/silt-test");
  ASSERT_EQ(c->listeners.size(), 1u);
  EXPECT_EQ(to_string(c->listeners[0]), "PLAINTEXT://127.0.0.1:19092");
  // advertised.listeners still comes from the file, as in Kafka.
  EXPECT_EQ(to_string(c->advertised_listeners.at(0)), "PLAINTEXT://localhost:9092");
  EXPECT_NE(
      std::find(c->notices.begin(), c->notices.end(), "ignoring log.dirs (data.dir is given)"),
      c->notices.end());
}

TEST(KafkaServerProperties, LoadWritesEachNoticeOnceToStderr) {
  temp_file f("log.segment.bytes=1073741824\nlog.segment.bytes=536870912\n");
  command_line cmd;
  cmd.properties_file = f.path();
  cmd.overrides = {"log.segment.bytes=1048576", "socket.send.buffer.bytes=-1"};
  ::testing::internal::CaptureStderr();
  const auto c = load(cmd);
  // Log lines, without their time (base/log.h).
  const std::string err =
      std::regex_replace(::testing::internal::GetCapturedStderr(), std::regex("[0-9T:.-]+Z "), "");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(
      err,
      "INFO silt: ignoring Kafka setting 'log.segment.bytes' (Silt stores objects, not segment "
      "files)\n"
      "INFO silt: ignoring Kafka setting 'socket.send.buffer.bytes' (Silt leaves socket buffers "
      "and the listen backlog to the system)\n");
}

TEST(KafkaServerProperties, ATypoStillStopsStartUp) {
  const std::string text = kKafkaServerProperties;
  const auto typo_line = std::count(text.begin(), text.end(), '\n') + 1;
  temp_file f(text + "log.segment.byte=1073741824\n");
  command_line cmd;
  cmd.properties_file = f.path();
  ::testing::internal::CaptureStderr();
  const auto c = load(cmd);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(),
            f.path() + ":" + std::to_string(typo_line) + ": unknown setting 'log.segment.byte'");
  EXPECT_EQ(err, "") << "nothing is logged when loading fails";
  EXPECT_EQ(error_of({{"controller.quorum.voter", "1@localhost:9093"}}),
            "unknown setting 'controller.quorum.voter'");
}

TEST(KafkaServerProperties, IgnoredSettingsMustHaveAValueOfTheirKafkaType) {
  EXPECT_EQ(error_of({{"log.segment.bytes", "1GB"}}),
            "invalid value '1GB' for log.segment.bytes: expected a 32-bit integer");
  EXPECT_EQ(error_of({{"log.segment.bytes", "4294967296"}}),
            "invalid value '4294967296' for log.segment.bytes: expected a 32-bit integer");
  EXPECT_EQ(error_of({{"offsets.topic.replication.factor", "70000"}}),
            "invalid value '70000' for offsets.topic.replication.factor: expected a 16-bit "
            "integer");
  EXPECT_EQ(error_of({{"log.preallocate", "yes"}}),
            "invalid value 'yes' for log.preallocate: expected true or false");
  EXPECT_EQ(error_of({{"log.cleaner.min.cleanable.ratio", "half"}}),
            "invalid value 'half' for log.cleaner.min.cleanable.ratio: expected a number from 0 "
            "to 1");
  EXPECT_EQ(error_of({{"process.roles", "controller"}}),
            "invalid value 'controller' for process.roles: expected a list of broker and "
            "controller that includes broker");
  EXPECT_TRUE(from_properties({{"process.roles", "broker"},
                               {"log.preallocate", "TRUE"},
                               {"log.flush.interval.messages", "9223372036854775807"},
                               {"log.cleaner.io.buffer.load.factor", "0.9"},
                               {"controller.quorum.voters", "1@localhost:9093,2@[::1]:9093"}}));
}

TEST(KafkaServerProperties, IgnoredAndKnownSettingsAreApart) {
  std::set<std::string> known;
  for (const auto& e : describe_broker_configs(props({}))) known.insert(e.name);
  EXPECT_TRUE(known.contains("log.dirs"));
  std::set<std::string> names;
  for (const auto& s : detail::ignored_settings()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name << " twice";
    EXPECT_FALSE(s.reason.empty()) << s.name;
    EXPECT_FALSE(known.contains(s.name)) << s.name << " is a Silt setting too";
    bool loads = false;
    for (const auto* value : {"1", "true", "broker", "x"}) {
      loads = loads || from_properties({{s.name, value}}).has_value();
    }
    EXPECT_TRUE(loads) << s.name;
  }
  EXPECT_GT(names.size(), 50u);
}

// load() without a properties file, with `overrides`; what it writes to stderr is dropped.
tl::expected<broker_config, std::string> load_without_file(std::vector<std::string> overrides) {
  command_line cmd;
  cmd.overrides = std::move(overrides);
  ::testing::internal::CaptureStderr();
  auto c = load(cmd);
  ::testing::internal::GetCapturedStderr();
  return c;
}

// A start without a properties file is a first try: a new group's first rebalance does not
// wait 3 s for more members. It is still a default (DescribeConfigs says so), and an override
// wins over it.
TEST(ZeroConfig, ANewGroupIsNotDelayed) {
  auto c = load_without_file({});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->group_initial_rebalance_delay_ms, 0);
  EXPECT_EQ(c->values.at("group.initial.rebalance.delay.ms"), "0");
  const auto entries = describe_broker_configs(*c);
  const auto it = std::find_if(entries.begin(), entries.end(), [](const config_entry& e) {
    return e.name == "group.initial.rebalance.delay.ms";
  });
  ASSERT_NE(it, entries.end());
  EXPECT_EQ(it->value, "0");
  EXPECT_EQ(it->source, config_source::default_config);
  // Overrides alone are still a start without a properties file.
  c = load_without_file({"listeners=PLAINTEXT://127.0.0.1:19092", "data.dir=/tmp/silt-test"});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->group_initial_rebalance_delay_ms, 0);
  c = load_without_file({"group.initial.rebalance.delay.ms=3000"});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->group_initial_rebalance_delay_ms, 3000);
  EXPECT_EQ(c->values.at("group.initial.rebalance.delay.ms"), "3000");
}

// A properties file, even an empty one or Kafka 4.1's own (which does not set it), keeps
// Kafka's default of 3000 ms; the file or an override may still set it.
TEST(ZeroConfig, APropertiesFileKeepsKafkasDefault) {
  for (const char* text : {"", "num.partitions=3\n", kKafkaServerProperties}) {
    const auto c = load_file(text);
    ASSERT_TRUE(c) << c.error();
    EXPECT_EQ(c->group_initial_rebalance_delay_ms, 3000) << text;
    EXPECT_EQ(c->values.at("group.initial.rebalance.delay.ms"), "3000") << text;
  }
  auto c = load_file("group.initial.rebalance.delay.ms=0\n");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->group_initial_rebalance_delay_ms, 0);
  c = load_file("", {"group.initial.rebalance.delay.ms=100"});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->group_initial_rebalance_delay_ms, 100);
  EXPECT_EQ(props({}).group_initial_rebalance_delay_ms, 3000);
}

TEST(CommandLine, ParsesFileOverridesAndFlags) {
  const char* argv[] = {
      "silt",   "server.properties",  "--override", "node.id=2", "--override=num.partitions=3",
      "--help", "--print-config-docs"};
  const auto cmd = parse_command_line(7, argv);
  ASSERT_TRUE(cmd) << cmd.error();
  EXPECT_EQ(cmd->properties_file, "server.properties");
  EXPECT_EQ(cmd->overrides, (std::vector<std::string>{"node.id=2", "num.partitions=3"}));
  EXPECT_TRUE(cmd->help);
  EXPECT_TRUE(cmd->print_config_docs);
}

TEST(CommandLine, RejectsUnknownFlagsAndBadOverrides) {
  const char* unknown[] = {"silt", "--verbose"};
  EXPECT_EQ(parse_command_line(2, unknown).error(), "unknown option '--verbose' (see --help)");
  const char* missing[] = {"silt", "--override"};
  EXPECT_FALSE(parse_command_line(2, missing));
  const char* no_equals[] = {"silt", "--override", "node.id"};
  EXPECT_FALSE(parse_command_line(3, no_equals));
  const char* two_files[] = {"silt", "a.properties", "b.properties"};
  EXPECT_FALSE(parse_command_line(3, two_files));
  const char* none[] = {"silt"};
  const auto cmd = parse_command_line(1, none);
  ASSERT_TRUE(cmd);
  EXPECT_FALSE(cmd->properties_file);
  EXPECT_TRUE(load(*cmd));
}

TEST(CommandLine, MissingFileIsAnError) {
  command_line cmd;
  cmd.properties_file = "/nonexistent/server.properties";
  const auto c = load(cmd);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().find("/nonexistent/server.properties"), std::string::npos);
}

// `silt object.store.uri=...` (without --override) takes the setting for a properties file.
TEST(CommandLine, ASettingGivenAsAFileIsQuotedMasked) {
  command_line cmd;
  cmd.properties_file = kPgUri;
  const auto c = load(cmd);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().find("PGSECRET"), std::string::npos) << c.error();
  EXPECT_NE(c.error().find("postgresql://silt:***@db:5432/silt"), std::string::npos);
  const char* two[] = {"silt", "a.properties", kS3Uri};
  const auto two_files = parse_command_line(3, two);
  ASSERT_FALSE(two_files);
  EXPECT_EQ(two_files.error().find("S3SECRET"), std::string::npos) << two_files.error();
  const char* bad_override[] = {"silt", "--override", "=postgresql://silt:PGSECRET@db/x"};
  const auto bad = parse_command_line(3, bad_override);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "--override expects key=value, got '=postgresql://silt:***@db/x'");
}

TEST(TopicConfig, AcceptsKnownNamesAndValidValues) {
  EXPECT_TRUE(validate_topic_configs({{"retention.ms", "-1"},
                                      {"retention.bytes", "1000"},
                                      {"segment.bytes", "1048576"},
                                      {"cleanup.policy", "delete"},
                                      {"preallocate", "TRUE"},
                                      {"compression.type", "zstd"},
                                      {"min.cleanable.dirty.ratio", "0.3"},
                                      {"leader.replication.throttled.replicas", "0:1, 1:2"},
                                      {"message.timestamp.type", "LogAppendTime"}}));
}

TEST(TopicConfig, UnknownNameIsInvalidConfig) {
  const auto r = validate_topic_configs({{"foo", "1"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().error_code, 40);
  EXPECT_EQ(r.error().message, "Unknown topic config name: foo");
}

TEST(TopicConfig, BadValuesAreInvalidConfigInKafkasWords) {
  auto message = [](const std::string& name, const std::string& value) {
    const auto r = validate_topic_configs({{name, value}});
    EXPECT_FALSE(r) << name << "=" << value;
    if (r) return std::string();
    EXPECT_EQ(r.error().error_code, 40);
    return r.error().message;
  };
  EXPECT_EQ(message("retention.ms", "abc"),
            "Invalid value abc for configuration retention.ms: Not a number of type LONG");
  EXPECT_EQ(message("retention.ms", "-5"),
            "Invalid value -5 for configuration retention.ms: Value must be at least -1");
  EXPECT_EQ(message("min.insync.replicas", "0"),
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1");
  EXPECT_EQ(message("max.message.bytes", "99999999999"),
            "Invalid value 99999999999 for configuration max.message.bytes: Not a number of type "
            "INT");
  EXPECT_EQ(message("message.timestamp.type", "Foo"),
            "Invalid value Foo for configuration message.timestamp.type: String must be one of: "
            "CreateTime, LogAppendTime");
  EXPECT_EQ(message("preallocate", "yes"),
            "Invalid value yes for configuration preallocate: Expected value to be either true or "
            "false");
  EXPECT_EQ(message("min.cleanable.dirty.ratio", "2"),
            "Invalid value 2 for configuration min.cleanable.dirty.ratio: Value must be no more "
            "than 1");
  EXPECT_NE(message("segment.bytes", "1000").find("at least 1048576"), std::string::npos);
  EXPECT_NE(message("compression.gzip.level", "0").find("between 1 and 9 or equal to -1"),
            std::string::npos);
  EXPECT_NE(message("cleanup.policy", "foo").find("String must be one of: compact, delete"),
            std::string::npos);
  EXPECT_NE(message("leader.replication.throttled.replicas", "x").find("literal '*'"),
            std::string::npos);
  const auto lag =
      validate_topic_configs({{"min.compaction.lag.ms", "10"}, {"max.compaction.lag.ms", "5"}});
  ASSERT_FALSE(lag);
  EXPECT_EQ(lag.error().message,
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)");
}

TEST(TopicConfig, CompactIsAcceptedAndTurnsTheCleanerOn) {
  const auto broker = props(
      {{"log.cleaner.delete.retention.ms", "5000"}, {"log.cleaner.min.cleanable.ratio", "0.25"}});
  for (const auto* policy : {"compact", "compact,delete", "delete, compact"}) {
    EXPECT_TRUE(validate_topic_configs({{"cleanup.policy", policy}})) << policy;
    const auto t = effective_topic_config(broker, {{"cleanup.policy", policy}});
    EXPECT_TRUE(t.compact) << policy;
    EXPECT_EQ(t.retention_ms < 0, std::string_view(policy) == "compact") << policy;
    EXPECT_EQ(t.delete_retention_ms, 5000);
    EXPECT_EQ(t.min_cleanable_dirty_ratio, 0.25);
  }
  EXPECT_FALSE(effective_topic_config(broker, {{"cleanup.policy", "delete"}}).compact);
  const auto t = effective_topic_config(broker, {{"cleanup.policy", "compact"},
                                                 {"min.cleanable.dirty.ratio", "0.75"},
                                                 {"min.compaction.lag.ms", "100"},
                                                 {"max.compaction.lag.ms", "2000"},
                                                 {"delete.retention.ms", "7"}});
  EXPECT_EQ(t.min_cleanable_dirty_ratio, 0.75);
  EXPECT_EQ(t.min_compaction_lag_ms, 100);
  EXPECT_EQ(t.max_compaction_lag_ms, 2000);
  EXPECT_EQ(t.delete_retention_ms, 7);
  EXPECT_FALSE(validate_topic_configs({{"cleanup.policy", "compress"}}));
  EXPECT_FALSE(validate_topic_configs({{"remote.storage.enable", "true"}}));
  EXPECT_TRUE(validate_topic_configs({{"remote.storage.enable", "false"}}));
}

TEST(TopicConfig, EffectiveConfigTakesBrokerDefaultsAndOverrides) {
  const auto broker = props({{"log.retention.hours", "48"},
                             {"message.max.bytes", "2000000"},
                             {"log.message.timestamp.type", "LogAppendTime"}});
  auto t = effective_topic_config(broker, {});
  EXPECT_EQ(t.retention_ms, 48 * 3600000LL);
  EXPECT_EQ(t.max_message_bytes, 2000000);
  EXPECT_EQ(t.message_timestamp_type, timestamp_type::log_append_time);
  t = effective_topic_config(broker, {{"retention.ms", "1000"},
                                      {"max.message.bytes", "10"},
                                      {"message.timestamp.type", "CreateTime"},
                                      {"min.insync.replicas", "2"},
                                      {"retention.bytes", "-7"},
                                      {"message.timestamp.after.max.ms", "5"},
                                      {"message.timestamp.before.max.ms", "6"}});
  EXPECT_EQ(t.retention_ms, 1000);
  EXPECT_EQ(t.retention_bytes, -1);
  EXPECT_EQ(t.max_message_bytes, 10);
  EXPECT_EQ(t.message_timestamp_type, timestamp_type::create_time);
  EXPECT_EQ(t.min_insync_replicas, 2);
  EXPECT_EQ(t.message_timestamp_after_max_ms, 5);
  EXPECT_EQ(t.message_timestamp_before_max_ms, 6);
  t = effective_topic_config(broker, {{"cleanup.policy", ""}, {"retention.ms", "1000"}});
  EXPECT_EQ(t.retention_ms, -1);
}

const config_entry& entry(const std::vector<config_entry>& entries, const std::string& name) {
  for (const auto& e : entries) {
    if (e.name == name) return e;
  }
  ADD_FAILURE() << name << " not described";
  static const config_entry none;
  return none;
}

TEST(TopicConfig, DescribeGivesValueAndSource) {
  const auto defaults = props({});
  auto entries = describe_topic_configs(defaults, {});
  EXPECT_EQ(entries.size(), 33u);
  EXPECT_TRUE(
      std::is_sorted(entries.begin(), entries.end(),
                     [](const config_entry& a, const config_entry& b) { return a.name < b.name; }));
  auto e = entry(entries, "retention.ms");
  EXPECT_EQ(e.value, "604800000");
  EXPECT_EQ(e.source, config_source::default_config);
  EXPECT_TRUE(e.is_default);
  EXPECT_EQ(e.type, config_type::long_);
  ASSERT_EQ(e.synonyms.size(), 1u);
  EXPECT_EQ(e.synonyms[0].name, "log.retention.ms");
  EXPECT_EQ(entry(entries, "segment.bytes").value, "1073741824");
  EXPECT_EQ(entry(entries, "cleanup.policy").value, "delete");

  const auto broker = props({{"log.retention.hours", "1"}});
  entries = describe_topic_configs(broker, {});
  e = entry(entries, "retention.ms");
  EXPECT_EQ(e.value, "3600000");
  EXPECT_EQ(e.source, config_source::static_broker_config);
  EXPECT_FALSE(e.is_default);
  ASSERT_EQ(e.synonyms.size(), 2u);
  EXPECT_EQ(e.synonyms[0].name, "log.retention.hours");
  EXPECT_EQ(e.synonyms[0].value, "1");

  entries = describe_topic_configs(broker, {{"retention.ms", "1000"}});
  e = entry(entries, "retention.ms");
  EXPECT_EQ(e.value, "1000");
  EXPECT_EQ(e.source, config_source::dynamic_topic_config);
  ASSERT_EQ(e.synonyms.size(), 3u);
  EXPECT_EQ(e.synonyms[0].source, config_source::dynamic_topic_config);
  EXPECT_EQ(e.synonyms[1].source, config_source::static_broker_config);
  EXPECT_EQ(e.synonyms[2].source, config_source::default_config);
}

TEST(BrokerConfig, DescribeListsEverySettingReadOnly) {
  const auto c = props({{"num.partitions", "3"}});
  const auto entries = describe_broker_configs(c);
  const auto& np = entry(entries, "num.partitions");
  EXPECT_EQ(np.value, "3");
  EXPECT_EQ(np.source, config_source::static_broker_config);
  EXPECT_TRUE(np.read_only);
  EXPECT_EQ(np.type, config_type::int_);
  const auto& rm = entry(entries, "log.retention.ms");
  EXPECT_EQ(rm.value, "604800000");
  EXPECT_EQ(rm.source, config_source::default_config);
  EXPECT_FALSE(entry(entries, "log.retention.hours").value);
  for (const auto& [name, value] : c.values) {
    const auto& e = entry(entries, name);
    EXPECT_EQ(e.value, e.sensitive ? std::nullopt : std::optional(value)) << name;
  }
}

TEST(BrokerConfig, StoreUrisAreDescribedSensitiveWithoutValue) {
  for (const auto* uri :
       {kS3Uri, "azblob://c?account=a&key=QVpLRVk=", "azblob://c?account=a&sas=sv%3D1%26sig%3DX",
        "file:///var/lib/silt/objects"}) {
    const auto c = props({{"object.store.uri", uri}, {"metadata.store.uri", kPgUri}});
    for (const auto& e : describe_broker_configs(c)) {
      if (e.name != "object.store.uri" && e.name != "metadata.store.uri") continue;
      // As Kafka answers a PASSWORD setting, whatever the value (even one without a secret).
      EXPECT_TRUE(e.sensitive) << e.name;
      EXPECT_EQ(e.value, std::nullopt) << e.name;
      EXPECT_EQ(e.type, config_type::password) << e.name;
      EXPECT_EQ(e.source, config_source::static_broker_config) << e.name;
      ASSERT_EQ(e.synonyms.size(), 1u) << e.name;
      EXPECT_EQ(e.synonyms[0].value, std::nullopt) << e.name;
    }
  }
  // Defaulted, too.
  const auto defaults = describe_broker_configs(props({}));
  EXPECT_TRUE(entry(defaults, "object.store.uri").sensitive);
  EXPECT_EQ(entry(defaults, "metadata.store.uri").value, std::nullopt);
  EXPECT_FALSE(entry(defaults, "data.dir").sensitive);
}

TEST(BrokerConfig, NoDescribedValueHoldsASecret) {
  const auto c = props({{"object.store.uri", kS3Uri}, {"metadata.store.uri", kPgUri}});
  for (const auto& e : describe_broker_configs(c)) {
    for (const auto* secret : kSecrets) {
      EXPECT_EQ(e.value.value_or("").find(secret), std::string::npos) << e.name;
      for (const auto& s : e.synonyms) {
        EXPECT_EQ(s.value.value_or("").find(secret), std::string::npos) << e.name;
      }
    }
  }
}

// A setting added later with a secret's name (ssl.key.password, sasl.jaas.config,
// ssl.keystore.key...) must declare itself sensitive in the table.
TEST(BrokerConfig, EverySettingNamedLikeASecretIsSensitive) {
  for (const auto& e : describe_broker_configs(props({}))) {
    if (base::is_secret_name(e.name)) {
      EXPECT_TRUE(e.sensitive) << e.name;
    }
    if (e.sensitive) {
      EXPECT_EQ(e.type, config_type::password) << e.name;
    }
  }
}

TEST(BrokerConfig, SslPasswordsAndKeysAreSensitive) {
  const auto c = props({{"listeners", "SSL://:9093"},
                        {"ssl.keystore.location", "/k.p12"},
                        {"ssl.keystore.password", "KSSECRET"},
                        {"ssl.key.password", "KEYSECRET"},
                        {"ssl.truststore.password", "TSSECRET"}});
  const auto described = describe_broker_configs(c);
  for (const auto* name :
       {"ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "ssl.keystore.key",
        "ssl.keystore.certificate.chain", "ssl.truststore.certificates"}) {
    const auto& e = entry(described, name);
    EXPECT_TRUE(e.sensitive) << name;
    EXPECT_EQ(e.value, std::nullopt) << name;
  }
  EXPECT_FALSE(entry(described, "ssl.keystore.location").sensitive);
}

TEST(BrokerConfig, ErrorsQuoteSensitiveValuesMasked) {
  EXPECT_EQ(error_of({{"object.store.uri", "ftp://u:FTPSECRET@h/x?secret_key=S3SECRET"}}),
            "invalid value 'ftp://u:***@h/x?secret_key=***' for object.store.uri: expected a "
            "file://, s3:// or azblob:// URI");
  EXPECT_EQ(error_of({{"metadata.store.uri", "mysql://u:PGSECRET@h/x"}}),
            "invalid value 'mysql://u:***@h/x' for metadata.store.uri: expected a sqlite:// or "
            "postgresql:// URI");
  EXPECT_EQ(error_of({{"metadata.store.uri", kPgUri}, {"metadata.path", "/x.db"}}),
            "metadata.path ('/x.db') and metadata.store.uri "
            "('postgresql://silt:***@db:5432/silt?sslpassword=***') differ; give one of them");
}

// docs/configuration.md is generated from the table. To regenerate it:
//   SILT_UPDATE_DOCS=1 build/src/config/config_tests --gtest_filter='Docs.*'
TEST(Docs, ConfigurationMdMatchesTheTable) {
  const std::string path = std::string(SILT_SOURCE_DIR) + "/docs/configuration.md";
  const std::string generated = config_docs_markdown();
  // NOLINTNEXTLINE(concurrency-mt-unsafe): the test starts no threads
  if (std::getenv("SILT_UPDATE_DOCS") != nullptr) std::ofstream(path) << generated;
  std::ifstream in(path);
  std::stringstream committed;
  committed << in.rdbuf();
  EXPECT_EQ(committed.str(), generated)
      << "docs/configuration.md is out of date; regenerate it with SILT_UPDATE_DOCS=1";
  for (const auto* name :
       {"`listeners`", "`wal.capacity.bytes`", "`retention.ms`", "`cleanup.policy`",
        "`log.retention.hours`", "`log.segment.bytes`", "Silt has no KRaft controller",
        "## Defaults without a properties file", "`3000` (`0` without a properties file)",
        "`controller.quorum.bootstrap.servers`"}) {
    EXPECT_NE(generated.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace silt::config
