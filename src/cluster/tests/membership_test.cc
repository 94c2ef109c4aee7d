// Membership on SQLite and on PostgreSQL: brokers sharing one database see each other and
// see a stopped one go; a broker whose heartbeats cannot reach the database stops
// acknowledging before its lease lapses there, and registers again at a new epoch after.
#include "cluster/membership.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

#include "cluster/tests/cluster_test_util.h"
#include "metadata/broker_registry.h"
#include "metadata/testing/test_database.h"

namespace silt::cluster {
namespace {

using testing::eventually;

using std::chrono::milliseconds;

std::vector<int32_t> nodes(const membership& m) {
  std::vector<int32_t> out;
  for (const auto& b : *m.brokers()) out.push_back(b.info.node.value());
  return out;
}

class Membership : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("silt-membership-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    auto db = metadata::sql::open_database(metadata::testing::fresh_uri(GetParam(), dir_));
    ASSERT_TRUE(db) << db.error();
    db_ = *db;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::shared_ptr<metadata::sql::database> db_;
};

TEST_P(Membership, BrokersSeeEachOtherAndAStoppedOneGoes) {
  auto a = membership::start(db_, testing::member_options(1));
  ASSERT_TRUE(a) << a.error();
  auto b = membership::start(db_, testing::member_options(2));
  ASSERT_TRUE(b) << b.error();
  EXPECT_TRUE((*a)->can_acknowledge());
  EXPECT_TRUE(eventually([&] { return nodes(**a) == std::vector<int32_t>{1, 2}; }));
  EXPECT_EQ(nodes(**b), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ((*b)->brokers()->front().info, testing::member_options(1).self);
  (*b)->stop();
  EXPECT_FALSE((*b)->can_acknowledge());
  EXPECT_TRUE(eventually([&] { return nodes(**a) == std::vector<int32_t>{1}; }));
  // Stopped cleanly, its node id is free at once.
  auto again = membership::start(db_, testing::member_options(2));
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ((*again)->registrations(), 1u);
}

// What each broker took in of the topic changes: -1 until it reports, and a read that began
// after a caller arrived answers for it (callers waiting together share reads).
TEST_P(Membership, TopicsAppliedAreReportedAndReadsAreShared) {
  auto a = membership::start(db_, testing::member_options(1));
  ASSERT_TRUE(a) << a.error();
  auto b = membership::start(db_, testing::member_options(2));
  ASSERT_TRUE(b) << b.error();
  using applied = std::vector<metadata::topics_applied_by>;
  const auto node = [](int32_t v) { return base::node_id(v); };
  const auto asked = std::chrono::steady_clock::now();
  EXPECT_EQ(*(*b)->topics_applied(asked), (applied{{node(1), -1}, {node(2), -1}}));
  (*a)->report_topics_applied(5);
  // A caller that arrived before the last read began takes it: nothing read again.
  EXPECT_EQ(*(*b)->topics_applied(asked), (applied{{node(1), -1}, {node(2), -1}}));
  EXPECT_EQ(*(*b)->topics_applied(std::chrono::steady_clock::now()),
            (applied{{node(1), 5}, {node(2), -1}}));
  (*b)->report_topics_applied(5);
  (*b)->stop();
  EXPECT_EQ(*(*a)->topics_applied(std::chrono::steady_clock::now()), (applied{{node(1), 5}}));
}

// A broker that stopped renewing its lease (killed) stays live until the lease lapses, but is
// no longer heard from lately after two heartbeat intervals.
TEST_P(Membership, ABrokerThatStoppedRenewingIsNoLongerHeardFromBeforeItsLeaseLapses) {
  auto options = testing::member_options(1);
  options.session_timeout = milliseconds(3000);
  auto a = membership::start(db_, options);
  ASSERT_TRUE(a) << a.error();
  auto registry = metadata::broker_registry::open(db_);
  ASSERT_TRUE(registry) << registry.error();
  auto silent = testing::member_options(2);
  ASSERT_TRUE((*registry)->register_broker(silent.self, milliseconds(3000), false));
  const auto heard = [&] {
    std::vector<int32_t> out;
    if (auto list = (*a)->recently_heard()) {
      for (const auto& b : *list) out.push_back(b.info.node.value());
    }
    return out;
  };
  EXPECT_TRUE(eventually([&] { return nodes(**a) == std::vector<int32_t>{1, 2}; }));
  EXPECT_TRUE(eventually([&] { return heard() == std::vector<int32_t>{1}; }, milliseconds(2000)));
  EXPECT_EQ(nodes(**a), (std::vector<int32_t>{1, 2}));  // its lease holds for 3 s
}

// The same node id twice: the second waits a session timeout for the first's lease and gives
// up, since the first keeps renewing it.
TEST_P(Membership, ALiveNodeIdCannotJoinTwice) {
  auto a = membership::start(db_, testing::member_options(1));
  ASSERT_TRUE(a) << a.error();
  auto other = testing::member_options(1);
  other.self.wal_location = "/elsewhere";
  auto b = membership::start(db_, other);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().find("live"), std::string::npos) << b.error();
  EXPECT_TRUE((*a)->can_acknowledge());
}

// The database's brokers table held by another transaction: heartbeats wait or fail, the
// broker stops acknowledging within its session timeout, and once the table is free it finds
// its lease lapsed and registers again at a new epoch.
TEST_P(Membership, ALeaseThatCannotBeRenewedStopsAcknowledgementsUntilRegisteredAgain) {
  auto a = membership::start(db_, testing::member_options(1));
  ASSERT_TRUE(a) << a.error();
  const int64_t first = (*a)->broker_epoch();
  EXPECT_TRUE(eventually([&] { return (*a)->heartbeats() >= 2; }));
  auto c = db_->connect();
  ASSERT_TRUE(c) << c.error();
  {
    metadata::sql::transaction hold(**c);
    ASSERT_TRUE(hold.ok());
    if ((*c)->kind() == metadata::sql::dialect::postgresql) {
      ASSERT_TRUE((*c)->query("LOCK TABLE brokers IN ACCESS EXCLUSIVE MODE"));
    }
    EXPECT_TRUE(eventually([&] { return !(*a)->can_acknowledge(); }, milliseconds(2000)));
    std::this_thread::sleep_for(milliseconds(200));
    EXPECT_FALSE((*a)->can_acknowledge());
  }
  EXPECT_TRUE(eventually([&] { return (*a)->can_acknowledge(); }));
  EXPECT_GT((*a)->broker_epoch(), first);
  EXPECT_EQ((*a)->registrations(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Backends, Membership, ::testing::ValuesIn(metadata::testing::backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace silt::cluster
