// The cluster marker: its bytes, what is refused as corrupt, and claims of a store by one
// cluster, by another, by a cluster whose store fails, and by clusters racing for one store.
// The claims run on the local directory store and, when their servers' variables are set (as
// run-ctest.sh does with scripts/s3-test-server.sh and scripts/azurite-test-server.sh), on S3
// (Ceph radosgw) and Azure Blob (Azurite), which refuse the conditional create themselves.
#include "storage/cluster_marker.h"

#include <atomic>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "storage/object/azure_store.h"
#include "storage/object/faulty_store.h"
#include "storage/object/local_store.h"
#include "storage/object/s3_store.h"
#include "storage/object/tests/scratch_dir.h"

namespace silt::storage {
namespace {

std::vector<uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

std::string text(const std::vector<uint8_t>& b) {
  return {b.begin(), b.end()};
}

std::string env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read before threads
  return v == nullptr ? std::string() : std::string(v);
}

std::string decode_error(std::string_view marker) {
  auto r = decode_cluster_marker(bytes(marker));
  EXPECT_FALSE(r.has_value()) << "accepted: " << marker;
  return r ? std::string() : r.error();
}

TEST(ClusterMarkerFormat, IsOneLineOfJsonWithTheVersionAndTheClusterId) {
  EXPECT_EQ(text(encode_cluster_marker("MkU3OEVBNTcwNTJENDM2Qg")),
            "{\"cluster_id\":\"MkU3OEVBNTcwNTJENDM2Qg\",\"version\":1}\n");
  EXPECT_EQ(decode_cluster_marker(encode_cluster_marker("a-b_c")).value(), "a-b_c");
}

TEST(ClusterMarkerFormat, ReaderTakesAnyLayoutAndIgnoresUnknownMembers) {
  EXPECT_EQ(decode_cluster_marker(bytes("  {\n \"version\" : 1 ,\n \"cluster_id\": \"x\",\n"
                                        " \"note\": {\"written\": [1, 2]} }"))
                .value(),
            "x");
}

TEST(ClusterMarkerFormat, WhatIsNotAMarkerIsRefusedWithTheReason) {
  EXPECT_EQ(decode_error(""), "it is empty");
  EXPECT_EQ(decode_error("garbage"), "it is not JSON");
  EXPECT_EQ(decode_error(std::string("\x00\xff\x13{", 4)), "it is not JSON");
  EXPECT_EQ(decode_error("{\"version\":1,\"cluster_id\":\"x\"} trailing"), "it is not JSON");
  EXPECT_EQ(decode_error("{\"version\":1,\"cluster_id\":\"x\""), "it is not JSON");
  EXPECT_EQ(decode_error("[1, \"x\"]"), "it is not a JSON object");
  EXPECT_EQ(decode_error("\"x\""), "it is not a JSON object");
  EXPECT_EQ(decode_error("{\"cluster_id\":\"x\"}"), "it has no integer \"version\"");
  EXPECT_EQ(decode_error("{\"version\":\"1\",\"cluster_id\":\"x\"}"),
            "it has no integer \"version\"");
  EXPECT_EQ(decode_error("{\"version\":1.5,\"cluster_id\":\"x\"}"),
            "it has no integer \"version\"");
  EXPECT_EQ(decode_error("{\"version\":2,\"cluster_id\":\"x\"}"),
            "its version is 2, this broker reads version 1");
  EXPECT_EQ(decode_error("{\"version\":1}"), "it has no non-empty string \"cluster_id\"");
  EXPECT_EQ(decode_error("{\"version\":1,\"cluster_id\":\"\"}"),
            "it has no non-empty string \"cluster_id\"");
  EXPECT_EQ(decode_error("{\"version\":1,\"cluster_id\":7}"),
            "it has no non-empty string \"cluster_id\"");
  const std::string big = "{\"version\":1,\"cluster_id\":\"x\",\"pad\":\"" +
                          std::string(cluster_marker_max_bytes, 'p') + "\"}";
  EXPECT_EQ(decode_error(big), "it holds more than 4096 bytes");
}

// One store under test, as in the object store contract tests, and how to clean it away.
class ClusterMarker : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::random_device rd;
    const std::string name = "silt-marker-" + std::to_string(rd()) + std::to_string(rd() % 1000);
    const std::string& kind = GetParam();
    if (kind == "local") {
      auto s = local_store::open(dir_.path() / "objects");
      ASSERT_TRUE(s) << s.error();
      store_ = std::move(*s);
    } else if (kind == "s3") {
      if (env("SILT_S3_ENDPOINT").empty()) {
        GTEST_SKIP() << "no S3 server (eval \"$(scripts/s3-test-server.sh start DIR)\")";
      }
      s3_options o;
      o.bucket = name;
      o.endpoint = env("SILT_S3_ENDPOINT");
      o.region = env("SILT_S3_REGION").empty() ? "us-east-1" : env("SILT_S3_REGION");
      o.path_style = true;
      o.access_key = env("SILT_S3_ACCESS_KEY");
      o.secret_key = env("SILT_S3_SECRET_KEY");
      o.retry.max_attempts = 3;
      auto s = s3_store::open(o);
      ASSERT_TRUE(s) << s.error();
      ASSERT_TRUE((*s)->create_bucket());
      auto* raw = s->get();
      drop_ = [raw] { EXPECT_TRUE(raw->delete_bucket()); };
      store_ = std::move(*s);
    } else if (kind == "azblob") {
      if (env("SILT_AZURE_ENDPOINT").empty()) {
        GTEST_SKIP() << "no Azure server (eval \"$(scripts/azurite-test-server.sh start DIR)\")";
      }
      azure_options o;
      o.container = name;
      o.endpoint = env("SILT_AZURE_ENDPOINT");
      o.account = env("SILT_AZURE_ACCOUNT");
      o.key = env("SILT_AZURE_KEY");
      o.retry.max_attempts = 3;
      auto s = azure_store::open(o);
      ASSERT_TRUE(s) << s.error();
      ASSERT_TRUE((*s)->create_container());
      auto* raw = s->get();
      drop_ = [raw] { EXPECT_TRUE(raw->delete_container()); };
      store_ = std::move(*s);
    }
  }
  void TearDown() override {
    if (!store_) return;
    if (auto all = store_->list(""); all) {
      for (const auto& o : *all) (void)store_->remove(o.key);
    }
    if (drop_) drop_();
  }

  // Every key and its bytes.
  std::vector<std::pair<std::string, std::string>> contents() {
    std::vector<std::pair<std::string, std::string>> out;
    const auto listed = store_->list("").value();
    out.reserve(listed.size());
    for (const auto& o : listed) {
      out.emplace_back(o.key, text(store_->get(o.key, 0, to_end).value()));
    }
    return out;
  }
  std::string marker() { return text(store_->get(cluster_marker_key, 0, to_end).value()); }
  // Some objects of a cluster, which no failed claim may touch.
  void put_objects() {
    ASSERT_TRUE(store_->put("objects/0000000000000001.set", bytes("one")));
    ASSERT_TRUE(store_->put("wal/node-1/00000000000000000000.wal", bytes("wal")));
  }

  testing::scratch_dir dir_;
  std::unique_ptr<object_store> store_;
  std::function<void()> drop_;
};

INSTANTIATE_TEST_SUITE_P(Stores, ClusterMarker, ::testing::Values("local", "s3", "azblob"),
                         [](const auto& info) { return info.param; });

TEST_P(ClusterMarker, FirstClaimCreatesTheMarkerAndLaterClaimsFindIt) {
  EXPECT_EQ(claim_cluster_marker(*store_, "cluster-a").value(), cluster_marker_claim::created);
  EXPECT_EQ(marker(), text(encode_cluster_marker("cluster-a")));
  EXPECT_EQ(claim_cluster_marker(*store_, "cluster-a").value(), cluster_marker_claim::found);
  EXPECT_EQ(store_->list("").value().size(), 1u) << "the marker only";
}

TEST_P(ClusterMarker, ClaimOfAStoreWithDataButNoMarkerWritesOnlyTheMarker) {
  put_objects();
  const auto before = contents();
  EXPECT_EQ(claim_cluster_marker(*store_, "cluster-a").value(), cluster_marker_claim::created);
  auto after = contents();
  ASSERT_EQ(after.size(), before.size() + 1);
  EXPECT_EQ(after.front().first, cluster_marker_key);
  after.erase(after.begin());
  EXPECT_EQ(after, before);
}

TEST_P(ClusterMarker, AnotherClusterIsRefusedAndTouchesNothing) {
  ASSERT_TRUE(claim_cluster_marker(*store_, "cluster-a"));
  put_objects();
  const auto before = contents();
  auto r = claim_cluster_marker(*store_, "cluster-b");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().error, cluster_marker_error::foreign);
  EXPECT_EQ(r.error().found, "cluster-a");
  EXPECT_EQ(contents(), before);
  const std::string message = cluster_marker_message(r.error(), store_->describe(), "cluster-b");
  EXPECT_NE(message.find("cluster-a"), std::string::npos) << message;
  EXPECT_NE(message.find("cluster-b"), std::string::npos) << message;
  EXPECT_NE(message.find(store_->describe()), std::string::npos) << message;
  EXPECT_NE(message.find("cluster.json"), std::string::npos) << message;
  EXPECT_NE(message.find("refusing to start"), std::string::npos) << message;
}

TEST_P(ClusterMarker, CorruptOrEmptyMarkerIsRefusedAndNothingIsWrittenOrDeleted) {
  put_objects();
  for (const std::string& bad :
       {std::string(), std::string("garbage\n"), std::string("{\"version\":1,\"cluster_id\":\"\"}"),
        std::string(5000, '{')}) {
    ASSERT_TRUE(store_->put(cluster_marker_key, bytes(bad)));
    const auto before = contents();
    auto r = claim_cluster_marker(*store_, "cluster-a");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().error, cluster_marker_error::corrupt) << bad;
    EXPECT_EQ(contents(), before) << "the store changed, marker " << bad;
    const std::string message = cluster_marker_message(r.error(), store_->describe(), "cluster-a");
    EXPECT_NE(message.find(r.error().found), std::string::npos) << message;
    EXPECT_NE(message.find("cluster-a"), std::string::npos) << message;
    EXPECT_NE(message.find("refusing to start"), std::string::npos) << message;
  }
}

TEST_P(ClusterMarker, OfClustersRacingForAStoreOneWinsAndEveryOtherIsRefused) {
  constexpr int clusters = 3;
  constexpr int brokers_each = 3;  // brokers of one cluster race too: all of them go on
  for (int round = 0; round < 4; ++round) {
    ASSERT_TRUE(store_->remove(cluster_marker_key));
    std::vector<std::string> outcome(clusters * brokers_each);
    std::vector<std::thread> threads;
    threads.reserve(outcome.size());
    for (size_t i = 0; i < outcome.size(); ++i) {
      threads.emplace_back([&, i] {
        const std::string id = "cluster-" + std::to_string(i % clusters);
        auto r = claim_cluster_marker(*store_, id);
        if (r) {
          outcome[i] = "won " + id;
        } else if (r.error().error == cluster_marker_error::foreign) {
          outcome[i] = "refused";
        } else {
          outcome[i] = "failed " + cluster_marker_message(r.error(), store_->describe(), id);
        }
      });
    }
    for (auto& t : threads) t.join();
    auto winner = decode_cluster_marker(bytes(marker()));
    ASSERT_TRUE(winner) << winner.error();
    for (size_t i = 0; i < outcome.size(); ++i) {
      const std::string id = "cluster-" + std::to_string(i % clusters);
      EXPECT_EQ(outcome[i], id == *winner ? "won " + id : "refused") << "round " << round;
    }
  }
}

TEST_P(ClusterMarker, StoreFailuresLeaveTheClaimUndecided) {
  faulty_store flaky(*store_, faulty_store_options{});
  flaky.script(store_operation::get, {fault::timeout});
  auto r = claim_cluster_marker(flaky, "cluster-a");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().error, cluster_marker_error::unreadable);
  EXPECT_EQ(r.error().cause, store_error::timeout);
  EXPECT_EQ(cluster_marker_message(r.error(), store_->describe(), "cluster-a"),
            "cannot read the cluster marker cluster.json in the object store " +
                store_->describe() + ": timeout");
  EXPECT_TRUE(store_->list("").value().empty());
  // The create is refused by an unreachable store, then lands but its reply is lost: the next
  // claim finds the marker.
  flaky.script(store_operation::put, {fault::throttled, fault::lost_reply});
  EXPECT_EQ(claim_cluster_marker(flaky, "cluster-a").error().cause, store_error::throttled);
  EXPECT_TRUE(store_->list("").value().empty());
  EXPECT_EQ(claim_cluster_marker(flaky, "cluster-a").error().cause, store_error::io);
  EXPECT_EQ(claim_cluster_marker(flaky, "cluster-a").value(), cluster_marker_claim::found);
}

TEST_P(ClusterMarker, MarkerDeletedBetweenItsCreateAndTheReadBackLeavesTheClaimUndecided) {
  faulty_store_options o;
  o.after_inner_call = [this](store_operation op, std::string_view key) {
    if (op == store_operation::put && key == cluster_marker_key) {
      EXPECT_TRUE(store_->remove(cluster_marker_key));
    }
  };
  faulty_store vanishing(*store_, o);
  auto r = claim_cluster_marker(vanishing, "cluster-a");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().error, cluster_marker_error::unreadable);
  EXPECT_EQ(r.error().cause, store_error::not_found);
}

}  // namespace
}  // namespace silt::storage
