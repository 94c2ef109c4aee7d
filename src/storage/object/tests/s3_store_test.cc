// What is particular to the S3 store (multipart thresholds, signatures, addressing), against a
// real S3 server; store_contract_test.cc checks the object store contract on it. Runs when
// SILT_S3_ENDPOINT, SILT_S3_ACCESS_KEY and SILT_S3_SECRET_KEY (and optionally SILT_S3_REGION) are
// set, as scripts/s3-test-server.sh prints them:
//   eval "$(scripts/s3-test-server.sh start /tmp/s3)"
// and is skipped otherwise. Each test works in a bucket of its own, emptied and deleted after.
#include "storage/object/s3_store.h"

#include <cstdlib>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "storage/object/uri.h"

namespace silt::storage {
namespace {

std::vector<uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = rng();
    for (size_t j = 0; j < 8 && i + j < n; ++j) out[i + j] = static_cast<uint8_t>(v >> (8 * j));
  }
  return out;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read before threads
  return v == nullptr ? std::string() : std::string(v);
}

class S3Store : public ::testing::Test {
 protected:
  void SetUp() override {
    if (env("SILT_S3_ENDPOINT").empty() || env("SILT_S3_ACCESS_KEY").empty() ||
        env("SILT_S3_SECRET_KEY").empty()) {
      GTEST_SKIP() << "no S3 server: set SILT_S3_ENDPOINT, SILT_S3_ACCESS_KEY and "
                      "SILT_S3_SECRET_KEY (eval \"$(scripts/s3-test-server.sh start DIR)\")";
    }
    std::random_device rd;
    bucket_ = "silt-test-" + std::to_string(rd()) + std::to_string(rd() % 1000);
    store_ = open(options());
    ASSERT_TRUE(store_);
    auto created = store_->create_bucket();
    ASSERT_TRUE(created) << store_error_name(created.error());
  }
  void TearDown() override {
    if (!store_) return;
    auto all = store_->list("");
    if (all) {
      for (const auto& o : *all) (void)store_->remove(o.key);
    }
    EXPECT_TRUE(store_->delete_bucket());
  }

  s3_options options() const {
    s3_options o;
    o.bucket = bucket_;
    o.endpoint = env("SILT_S3_ENDPOINT");
    o.region = env("SILT_S3_REGION").empty() ? "us-east-1" : env("SILT_S3_REGION");
    o.path_style = true;
    o.access_key = env("SILT_S3_ACCESS_KEY");
    o.secret_key = env("SILT_S3_SECRET_KEY");
    o.retry.max_attempts = 3;
    return o;
  }
  static std::unique_ptr<s3_store> open(const s3_options& o) {
    auto s = s3_store::open(o);
    EXPECT_TRUE(s) << s.error();
    return s ? std::move(*s) : nullptr;
  }

  std::string bucket_;
  std::unique_ptr<s3_store> store_;
};

TEST_F(S3Store, SmallPagesPaginateToo) {
  auto o = options();
  o.list_page_size = 7;
  auto small = open(o);
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(small->put("p/" + std::to_string(100 + i), bytes("v")));
  auto listed = small->list("p/");
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 30u);
  EXPECT_EQ(listed->front().key, "p/100");
  EXPECT_EQ(listed->back().key, "p/129");
}

TEST_F(S3Store, PutsAtTheThresholdStaySingle) {
  auto o = options();
  o.multipart_threshold = 6ull << 20;
  o.part_size = 5ull << 20;
  auto s = open(o);
  const auto exact = random_bytes(6ull << 20, 5);
  const auto over = random_bytes((6ull << 20) + 1, 6);
  ASSERT_TRUE(s->put("exact", exact));
  ASSERT_TRUE(s->put("over", over));
  EXPECT_TRUE(s->get("exact", 0, to_end).value() == exact);
  EXPECT_TRUE(s->get("over", 0, to_end).value() == over);
}

TEST_F(S3Store, UnsignedPayloadIsAccepted) {
  auto o = options();
  o.sign_payload = false;
  auto s = open(o);
  ASSERT_TRUE(s->put("unsigned", bytes("data")));
  EXPECT_EQ(s->get("unsigned", 0, to_end).value(), bytes("data"));
}

TEST_F(S3Store, WrongSecretKeyIsAccessDenied) {
  ASSERT_TRUE(store_->put("k", bytes("v")));
  auto o = options();
  o.secret_key = "not-the-secret";
  std::vector<std::string> log;
  o.on_failure = [&](std::string_view line) { log.emplace_back(line); };
  auto wrong = open(o);
  EXPECT_EQ(wrong->put("k2", bytes("v")).error(), store_error::access_denied);
  EXPECT_EQ(wrong->get("k", 0, to_end).error(), store_error::access_denied);
  EXPECT_EQ(wrong->head("k").error(), store_error::access_denied);
  EXPECT_EQ(wrong->list("").error(), store_error::access_denied);
  EXPECT_EQ(wrong->remove("k").error(), store_error::access_denied);
  EXPECT_TRUE(store_->head("k")) << "the refused remove removed nothing";
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.front().find("HTTP 403 SignatureDoesNotMatch"), std::string::npos) << log.front();
  EXPECT_NE(log.front().find("giving up"), std::string::npos) << "403 is not retried";
}

TEST_F(S3Store, UnknownAccessKeyIsAccessDenied) {
  auto o = options();
  o.access_key = "NOSUCHKEY";
  auto wrong = open(o);
  EXPECT_EQ(wrong->put("k", bytes("v")).error(), store_error::access_denied);
}

TEST_F(S3Store, MissingBucketIsNotFound) {
  auto o = options();
  o.bucket = bucket_ + "-absent";
  auto absent = open(o);
  EXPECT_EQ(absent->get("k", 0, 1).error(), store_error::not_found);
  EXPECT_EQ(absent->list("").error(), store_error::not_found);
  EXPECT_EQ(absent->put("k", bytes("v")).error(), store_error::not_found);
  EXPECT_EQ(absent->remove("k").error(), store_error::not_found);
}

TEST_F(S3Store, CreateBucketTwiceSucceeds) {
  EXPECT_TRUE(store_->create_bucket());
}

TEST_F(S3Store, VirtualHostedAddressing) {
  // libcurl resolves every *.localhost name to the loopback address itself, and the test
  // server is set up with rgw_dns_name = localhost, so BUCKET.localhost reaches the bucket.
  auto o = options();
  const std::string endpoint = o.endpoint;
  const size_t host = endpoint.find("127.0.0.1");
  if (host == std::string::npos) GTEST_SKIP() << "the endpoint is not 127.0.0.1";
  o.endpoint = endpoint.substr(0, host) + "localhost" + endpoint.substr(host + 9);
  o.path_style = false;
  auto vhost = open(o);
  EXPECT_EQ(vhost->url("k"), "http://" + bucket_ + ".localhost" + endpoint.substr(host + 9) + "/k");
  ASSERT_TRUE(vhost->put("v/k", bytes("virtual")));
  EXPECT_EQ(vhost->get("v/k", 1, 3).value(), bytes("irt"));
  EXPECT_EQ(store_->get("v/k", 0, to_end).value(), bytes("virtual")) << "same bucket";
  EXPECT_EQ(vhost->list("v/").value(), (std::vector<object_info>{{"v/k", 7}}));
  o.multipart_threshold = 5ull << 20;
  o.part_size = 5ull << 20;
  auto vhost_multipart = open(o);
  const auto data = random_bytes((5ull << 20) + 10, 9);
  ASSERT_TRUE(vhost_multipart->put("v/big", data));
  EXPECT_EQ(vhost->head("v/big").value(), data.size());
  ASSERT_TRUE(vhost->remove("v/k"));
  EXPECT_EQ(vhost->head("v/k").error(), store_error::not_found);
}

TEST_F(S3Store, OpensFromAUri) {
  auto s = open_object_store("s3://" + bucket_ + "?endpoint=" + env("SILT_S3_ENDPOINT") +
                             "&path_style=true&access_key=" + env("SILT_S3_ACCESS_KEY") +
                             "&secret_key=" + uri::encode(env("SILT_S3_SECRET_KEY")));
  ASSERT_TRUE(s) << s.error();
  ASSERT_TRUE((*s)->put("uri", bytes("x")));
  EXPECT_EQ(store_->get("uri", 0, to_end).value(), bytes("x"));
}

}  // namespace
}  // namespace silt::storage
