#include "storage/cluster_claim.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "storage/object/faulty_store.h"
#include "storage/object/local_store.h"
#include "storage/object/tests/scratch_dir.h"

namespace silt::storage {
namespace {

using namespace std::chrono_literals;

std::vector<uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

// A local store behind a fault injector (for outages), behind the gate the claim opens.
class ClusterClaim : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = local_store::open(dir_.path());
    ASSERT_TRUE(s) << s.error();
    local_ = s->get();
    auto faulty = std::make_unique<faulty_store>(**s, faulty_store_options{});
    faulty_ = faulty.get();
    inner_ = std::move(*s);
    gate_ = std::make_unique<gated_store>(std::move(faulty));
  }
  // Every call fails while `down`.
  void set_down(bool down) {
    faulty_store_options o;
    o.error_probability = down ? 1 : 0;
    faulty_->set_options(o);
  }
  // Waits up to 10 s for the claim to leave `pending`.
  static cluster_claim::status settled(cluster_claim& c) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (c.current().state == cluster_claim::state::pending &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
    return c.current();
  }

  testing::scratch_dir dir_;
  std::unique_ptr<object_store> inner_;
  local_store* local_ = nullptr;
  faulty_store* faulty_ = nullptr;
  std::unique_ptr<gated_store> gate_;
};

TEST_F(ClusterClaim, ClaimedStoreOpensTheGateBeforeStartReturns) {
  cluster_claim claim(*faulty_, *gate_, "cluster-a", 10ms);
  EXPECT_FALSE(gate_->is_open());
  const auto s = claim.start(10s);
  EXPECT_EQ(s.state, cluster_claim::state::claimed);
  EXPECT_TRUE(s.message.empty());
  EXPECT_TRUE(gate_->is_open());
  EXPECT_TRUE(local_->head(cluster_marker_key));
}

TEST_F(ClusterClaim, AnotherClustersStoreIsRefusedAtStartAndTheGateStaysClosed) {
  ASSERT_TRUE(local_->put(cluster_marker_key, encode_cluster_marker("cluster-a")));
  cluster_claim claim(*faulty_, *gate_, "cluster-b", 10ms);
  std::atomic<int> callbacks{0};
  const auto s = claim.start(10s);
  claim.on_refused([&](const std::string&) { ++callbacks; });
  EXPECT_EQ(s.state, cluster_claim::state::refused);
  EXPECT_NE(s.message.find("names cluster cluster-a"), std::string::npos) << s.message;
  EXPECT_FALSE(gate_->is_open());
  EXPECT_EQ(gate_->list("").error(), store_error::io);
  claim.stop();
  EXPECT_EQ(callbacks.load(), 0) << "start() reported the refusal";
}

TEST_F(ClusterClaim, UnreadableStoreKeepsTheGateClosedUntilAClaimHolds) {
  set_down(true);
  cluster_claim claim(*faulty_, *gate_, "cluster-a", 20ms);
  const auto s = claim.start(10s);
  EXPECT_EQ(s.state, cluster_claim::state::pending);
  EXPECT_NE(s.message.find("cannot read the cluster marker"), std::string::npos) << s.message;
  std::this_thread::sleep_for(100ms);  // several attempts
  EXPECT_FALSE(gate_->is_open());
  EXPECT_FALSE(local_->head(cluster_marker_key)) << "nothing written while unreadable";
  set_down(false);
  EXPECT_EQ(settled(claim).state, cluster_claim::state::claimed);
  EXPECT_TRUE(gate_->is_open());
}

TEST_F(ClusterClaim, RefusalFoundAfterStartGoesToTheCallbackOnce) {
  ASSERT_TRUE(local_->put(cluster_marker_key, encode_cluster_marker("cluster-a")));
  set_down(true);
  cluster_claim claim(*faulty_, *gate_, "cluster-b", 20ms);
  ASSERT_EQ(claim.start(10s).state, cluster_claim::state::pending);
  std::atomic<int> callbacks{0};
  std::string message;
  claim.on_refused([&](const std::string& m) {
    message = m;
    ++callbacks;
  });
  set_down(false);
  EXPECT_EQ(settled(claim).state, cluster_claim::state::refused);
  claim.stop();
  EXPECT_EQ(callbacks.load(), 1);
  EXPECT_NE(message.find("cluster-a"), std::string::npos) << message;
  EXPECT_NE(message.find("cluster-b"), std::string::npos) << message;
  EXPECT_FALSE(gate_->is_open());
  EXPECT_EQ(local_->get(cluster_marker_key, 0, to_end).value(), encode_cluster_marker("cluster-a"));
}

TEST_F(ClusterClaim, CallbackSetAfterTheRefusalIsCalledAtOnce) {
  ASSERT_TRUE(local_->put(cluster_marker_key, bytes("not a marker")));
  set_down(true);
  cluster_claim claim(*faulty_, *gate_, "cluster-a", 10ms);
  ASSERT_EQ(claim.start(10s).state, cluster_claim::state::pending);
  set_down(false);
  ASSERT_EQ(settled(claim).state, cluster_claim::state::refused);
  int callbacks = 0;
  claim.on_refused([&](const std::string& m) {
    EXPECT_NE(m.find("it is not JSON"), std::string::npos) << m;
    ++callbacks;
  });
  EXPECT_EQ(callbacks, 1);
  EXPECT_EQ(local_->get(cluster_marker_key, 0, to_end).value(), bytes("not a marker"));
}

TEST_F(ClusterClaim, StartWaitsNoLongerThanItsBound) {
  faulty_store_options o;
  o.timeout_probability = 1;
  o.timeout_delay = 2s;  // one slow attempt
  faulty_->set_options(o);
  cluster_claim claim(*faulty_, *gate_, "cluster-a", 10ms);
  const auto begin = std::chrono::steady_clock::now();
  const auto s = claim.start(100ms);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 1500ms);
  EXPECT_EQ(s.state, cluster_claim::state::pending);
  EXPECT_NE(s.message.find("has not answered the read of its cluster marker cluster.json"),
            std::string::npos)
      << s.message;
  EXPECT_NE(s.message.find(faulty_->describe()), std::string::npos) << s.message;
  EXPECT_FALSE(gate_->is_open());
  set_down(false);
  claim.stop();  // after the attempt in progress
  EXPECT_FALSE(gate_->is_open());
}

TEST_F(ClusterClaim, StopEndsTheRetriesOfAnUnreadableStore) {
  set_down(true);
  cluster_claim claim(*faulty_, *gate_, "cluster-a", 1h);
  ASSERT_EQ(claim.start(10s).state, cluster_claim::state::pending);
  const auto begin = std::chrono::steady_clock::now();
  claim.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 1s);
  EXPECT_EQ(claim.current().state, cluster_claim::state::pending);
}

}  // namespace
}  // namespace silt::storage
