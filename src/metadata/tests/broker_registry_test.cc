// The broker registry on SQLite and on PostgreSQL: registration with a lease, heartbeats,
// refusal of a node id whose lease is live, fencing of a lapsed epoch, and the lapsed lease
// refusing the catalog's and the group store's writes until the broker registered anew.
#include "metadata/broker_registry.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

#include "metadata/group_store.h"
#include "metadata/stream_catalog.h"
#include "metadata/testing/test_database.h"

namespace silt::metadata {
namespace {

using std::chrono::milliseconds;

base::node_id node(int32_t v) {
  return base::node_id(v);
}

broker_info info_of(int32_t id, const std::string& wal = "/wal") {
  broker_info b;
  b.node = node(id);
  b.host = "host" + std::to_string(id);
  b.port = 9000 + id;
  b.rack = id % 2 == 0 ? "rack-b" : "rack-a";
  b.wal_location = wal;
  b.machine = same_machine_id();
  b.listeners = {{"PLAINTEXT", b.host, b.port}, {"SASL_SSL", "::1", 19000 + id}};
  return b;
}

class BrokerRegistry : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("silt-brokers-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    auto db = sql::open_database(testing::fresh_uri(GetParam(), dir_));
    ASSERT_TRUE(db) << db.error();
    db_ = *db;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<broker_registry> registry() {
    auto r = broker_registry::open(db_);
    EXPECT_TRUE(r) << r.error();
    return std::move(*r);
  }

  std::filesystem::path dir_;
  std::shared_ptr<sql::database> db_;
};

TEST_P(BrokerRegistry, RegistersBrokersWithLeasesAndListsThem) {
  auto r = registry();
  auto e1 = r->register_broker(info_of(1), milliseconds(60000), false);
  auto e2 = r->register_broker(info_of(2), milliseconds(60000), false);
  ASSERT_TRUE(e1);
  ASSERT_TRUE(e2);
  EXPECT_LT(*e1, *e2);
  ASSERT_TRUE(r->heartbeat(node(1), *e1, milliseconds(60000)));
  auto all = r->brokers();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].info, info_of(1));
  EXPECT_EQ((*all)[1].info, info_of(2));
  EXPECT_EQ((*all)[0].broker_epoch, *e1);
  EXPECT_TRUE((*all)[0].live());
  EXPECT_GT((*all)[0].lease_left_ms, 50000);
  EXPECT_LE((*all)[0].lease_left_ms, 60000);
}

// A broker's loads replace its last ones, are listed with it, and are refused to a stale
// epoch or another node.
TEST_P(BrokerRegistry, LoadsAreReportedPerEpochAndListed) {
  auto r = registry();
  auto e1 = r->register_broker(info_of(1), milliseconds(60000), false);
  ASSERT_TRUE(e1);
  const std::vector<stream_load> loads{{base::stream_id(7), 1048576}, {base::stream_id(3), 12}};
  ASSERT_TRUE(r->report_loads(node(1), *e1, loads));
  EXPECT_EQ((*r->brokers())[0].loads, loads);
  ASSERT_TRUE(r->report_loads(node(1), *e1, {{base::stream_id(9), 5}}));
  EXPECT_EQ((*r->brokers())[0].loads, (std::vector<stream_load>{{base::stream_id(9), 5}}));
  EXPECT_EQ(r->report_loads(node(1), *e1 + 1, loads).error(), membership_error::fenced);
  EXPECT_EQ(r->report_loads(node(2), *e1, loads).error(), membership_error::fenced);
}

// What each live broker has taken in of the topic changes: -1 from each registration until it
// reports, refused to a stale epoch, and a broker whose lease lapsed is not listed.
TEST_P(BrokerRegistry, TopicsAppliedAreReportedPerEpochAndListedForLiveBrokers) {
  auto r = registry();
  auto e1 = r->register_broker(info_of(1), milliseconds(60000), false);
  auto e2 = r->register_broker(info_of(2), milliseconds(300), false);
  ASSERT_TRUE(e1);
  ASSERT_TRUE(e2);
  EXPECT_EQ(*r->topics_applied(), (std::vector<topics_applied_by>{{node(1), -1}, {node(2), -1}}));
  ASSERT_TRUE(r->report_topics_applied(node(1), *e1, 7));
  ASSERT_TRUE(r->report_topics_applied(node(2), *e2, 5));
  EXPECT_EQ(*r->topics_applied(), (std::vector<topics_applied_by>{{node(1), 7}, {node(2), 5}}));
  EXPECT_EQ(r->report_topics_applied(node(1), *e1 + 5, 9).error(), membership_error::fenced);
  // A new registration has taken nothing in yet.
  auto again = r->register_broker(info_of(1), milliseconds(60000), true);
  ASSERT_TRUE(again);
  EXPECT_EQ((*r->topics_applied())[0], (topics_applied_by{node(1), -1}));
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(*r->topics_applied(), (std::vector<topics_applied_by>{{node(1), -1}}));
}

TEST(StreamLoads, FormatAndParseRoundTripAndSkipWhatIsNotALoad) {
  const std::vector<stream_load> loads{{base::stream_id(1), 0}, {base::stream_id(42), 99999}};
  EXPECT_EQ(format_loads(loads), "1:0,42:99999");
  EXPECT_EQ(parse_loads(format_loads(loads)), loads);
  EXPECT_TRUE(parse_loads("").empty());
  EXPECT_EQ(parse_loads("x,5:1,:2,3:,4:-1,6:7z,,8:9"),
            (std::vector<stream_load>{{base::stream_id(5), 1}, {base::stream_id(8), 9}}));
}

// Every advertised listener is stored with the broker; a client is told of a broker on the
// listener it came through, or on the broker's first one when it has none of that name.
TEST(Listeners, FormatAndParseRoundTripAndSkipWhatIsNotAnEndpoint) {
  const std::vector<listener_endpoint> ls{
      {"PLAINTEXT", "b1.example", 9092}, {"SASL_SSL", "::1", 9094}, {"SSL", "", 9093}};
  EXPECT_EQ(format_listeners(ls), "PLAINTEXT://b1.example:9092,SASL_SSL://[::1]:9094,SSL://:9093");
  EXPECT_EQ(parse_listeners(format_listeners(ls)), ls);
  EXPECT_TRUE(parse_listeners("").empty());
  EXPECT_EQ(parse_listeners("x,://h:1,A://h,B://h:0,C://h:70000,D://h:9z,,E://h:7"),
            (std::vector<listener_endpoint>{{"E", "h", 7}}));
  broker_info b;
  b.host = "first";
  b.port = 1;
  b.listeners = ls;
  EXPECT_EQ(b.endpoint_for("SASL_SSL"), std::make_pair(std::string_view("::1"), 9094));
  EXPECT_EQ(b.endpoint_for("OTHER"), std::make_pair(std::string_view("first"), 1));
}

TEST_P(BrokerRegistry, ALiveNodeIdIsRefusedUntilItsLeaseLapses) {
  auto r = registry();
  auto first = r->register_broker(info_of(1), milliseconds(300), false);
  ASSERT_TRUE(first);
  auto again = r->register_broker(info_of(1), milliseconds(300), false);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error(), membership_error::duplicate);
  std::this_thread::sleep_for(milliseconds(400));
  // The lapsed epoch can no longer be renewed, and the node id is free.
  auto hb = r->heartbeat(node(1), *first, milliseconds(300));
  ASSERT_FALSE(hb);
  EXPECT_EQ(hb.error(), membership_error::fenced);
  EXPECT_FALSE(r->brokers()->front().live());
  auto second = r->register_broker(info_of(1), milliseconds(60000), false);
  ASSERT_TRUE(second);
  EXPECT_GT(*second, *first);
  EXPECT_EQ(r->heartbeat(node(1), *first, milliseconds(60000)).error(), membership_error::fenced);
  EXPECT_TRUE(r->heartbeat(node(1), *second, milliseconds(60000)));
}

// A broker restarted on the same machine and WAL (whose lock it holds) replaces its own
// registration at once; from another WAL location it must wait like anyone else.
TEST_P(BrokerRegistry, ReplacesItsOwnRegistrationOnlyFromTheSameMachineAndWal) {
  auto r = registry();
  auto first = r->register_broker(info_of(1, "/a/wal"), milliseconds(60000), false);
  ASSERT_TRUE(first);
  auto other = r->register_broker(info_of(1, "/b/wal"), milliseconds(60000), true);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error(), membership_error::duplicate);
  auto elsewhere = info_of(1, "/a/wal");
  elsewhere.machine = "another-host/boot";
  EXPECT_EQ(r->register_broker(elsewhere, milliseconds(60000), true).error(),
            membership_error::duplicate);
  auto own = r->register_broker(info_of(1, "/a/wal"), milliseconds(60000), true);
  ASSERT_TRUE(own);
  EXPECT_EQ(r->heartbeat(node(1), *first, milliseconds(60000)).error(), membership_error::fenced);
}

TEST_P(BrokerRegistry, UnregisteringFreesTheNodeIdAtOnce) {
  auto r = registry();
  auto first = r->register_broker(info_of(3), milliseconds(60000), false);
  ASSERT_TRUE(first);
  ASSERT_TRUE(r->unregister(node(3), *first));
  EXPECT_EQ(r->heartbeat(node(3), *first, milliseconds(60000)).error(), membership_error::fenced);
  EXPECT_FALSE(r->brokers()->front().live());
  EXPECT_TRUE(r->register_broker(info_of(3), milliseconds(60000), false));
}

// Two registries (two brokers' connections) racing for one node id: exactly one wins.
TEST_P(BrokerRegistry, ConcurrentRegistrationsOfOneNodeIdHaveOneWinner) {
  constexpr int rounds = 10;
  for (int round = 0; round < rounds; ++round) {
    auto a = registry();
    auto b = registry();
    const int32_t id = 100 + round;
    std::atomic<int> wins{0};
    std::atomic<int> duplicates{0};
    auto run = [&](broker_registry& reg) {
      auto e = reg.register_broker(info_of(id), milliseconds(60000), false);
      if (e) {
        wins.fetch_add(1);
      } else if (e.error() == membership_error::duplicate) {
        duplicates.fetch_add(1);
      }
    };
    std::thread ta([&] { run(*a); });
    std::thread tb([&] { run(*b); });
    ta.join();
    tb.join();
    EXPECT_EQ(wins.load(), 1) << "round " << round;
    EXPECT_EQ(duplicates.load(), 1) << "round " << round;
  }
}

// Once its lease lapsed, a broker commits, compacts, trims and writes producer state and group
// offsets no more; registered anew, and still the streams' owner, it goes on where it stopped.
// A handover goes only to a live broker that is not stopping; one refused leaves the stream
// where it was, at its epoch.
TEST_P(BrokerRegistry, AHandoverGoesOnlyToALiveBrokerThatIsNotStopping) {
  auto r = registry();
  auto catalog = stream_catalog::open(db_);
  ASSERT_TRUE(catalog) << catalog.error();
  auto& c = **catalog;
  ASSERT_TRUE(r->register_broker(info_of(1), milliseconds(60000), false));
  auto e2 = r->register_broker(info_of(2), milliseconds(60000), false);
  auto e3 = r->register_broker(info_of(3), milliseconds(300), false);
  ASSERT_TRUE(e2 && e3);
  auto taken = c.take(node(1), {{base::stream_id(7), base::offset(0)}});
  ASSERT_TRUE(taken);
  const base::leader_epoch ep = taken->front();
  ASSERT_TRUE(r->drain(node(2), *e2));
  EXPECT_EQ(c.handover(base::stream_id(7), node(1), ep, node(2), base::offset(0)).error(),
            catalog_error::unavailable);
  std::this_thread::sleep_for(milliseconds(400));  // node 3's lease lapses
  EXPECT_EQ(c.handover(base::stream_id(7), node(1), ep, node(3), base::offset(0)).error(),
            catalog_error::unavailable);
  EXPECT_EQ(c.stream(base::stream_id(7))->value().owner, node(1));
  EXPECT_EQ(c.stream(base::stream_id(7))->value().epoch, ep);
  // Registered again (no longer draining), node 2 takes it.
  ASSERT_TRUE(r->register_broker(info_of(2), milliseconds(60000), true));
  auto next = c.handover(base::stream_id(7), node(1), ep, node(2), base::offset(0));
  ASSERT_TRUE(next);
  EXPECT_EQ(c.stream(base::stream_id(7))->value().owner, node(2));
}

TEST_P(BrokerRegistry, ALapsedLeaseRefusesCommitsUntilTheBrokerRegistersAgain) {
  auto r = registry();
  auto catalog = stream_catalog::open(db_);
  ASSERT_TRUE(catalog) << catalog.error();
  auto groups = group_store::open(db_, node(1));
  ASSERT_TRUE(groups) << groups.error();
  auto& c = **catalog;
  ASSERT_TRUE(r->register_broker(info_of(1), milliseconds(300), false));
  auto taken = c.take(node(1), {{base::stream_id(7), base::offset(0)}});
  ASSERT_TRUE(taken);
  const base::leader_epoch ep = taken->front();
  const std::vector<int32_t> shards{0};
  auto shard_epochs = (*groups)->take(shards);
  ASSERT_TRUE(shard_epochs);
  auto commit = [&](int64_t start, int64_t end) {
    object_record o;
    o.object_id = *c.next_object_id();
    o.key = "objects/" + std::to_string(o.object_id);
    o.size = 10;
    stream_range range{base::stream_id(7), base::offset(start), base::offset(end), 1, 10};
    range.owner = node(1);
    range.epoch = ep;
    return c.commit_object(o, {range});
  };
  std::vector<shard_write> writes(1);
  writes[0].shard = 0;
  writes[0].epoch = shard_epochs->front();
  committed_offset o;
  o.key = {"g", "t", 0};
  o.offset = 5;
  writes[0].offsets = {o};
  ASSERT_TRUE(commit(0, 10));
  ASSERT_TRUE((*groups)->apply(writes));

  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(commit(10, 20).error(), catalog_error::lapsed);
  EXPECT_EQ(c.trim(base::stream_id(7), base::offset(5), node(1), ep).error(),
            catalog_error::lapsed);
  EXPECT_EQ(c.put_producer_state(base::stream_id(7), node(1), ep, {1, 2}).error(),
            catalog_error::lapsed);
  EXPECT_EQ((*groups)->apply(writes).error(), group_store_error::lapsed);
  // Compaction by the lapsed node: refused too.
  const stream_range first{base::stream_id(7), base::offset(0), base::offset(10), 1, 10};
  auto merged = [&] {
    object_record o;
    o.object_id = *c.next_object_id();
    o.key = "objects/" + std::to_string(o.object_id);
    o.size = 10;
    return o;
  };
  EXPECT_EQ(c.replace(merged(), {first}, {first}, node(1)).error(), catalog_error::lapsed);
  EXPECT_EQ(c.stream(base::stream_id(7))->value().end_offset, base::offset(10));
  EXPECT_EQ(c.stream(base::stream_id(7))->value().start_offset, base::offset(0));

  ASSERT_TRUE(r->register_broker(info_of(1), milliseconds(60000), false));
  EXPECT_TRUE(commit(10, 20));
  EXPECT_TRUE(c.trim(base::stream_id(7), base::offset(5), node(1), ep));
  EXPECT_TRUE(c.put_producer_state(base::stream_id(7), node(1), ep, {1, 2}));
  EXPECT_TRUE((*groups)->apply(writes));
  EXPECT_TRUE(c.replace(merged(), {first}, {first}, node(1)));
  EXPECT_EQ(c.stream(base::stream_id(7))->value().end_offset, base::offset(20));
}

INSTANTIATE_TEST_SUITE_P(Backends, BrokerRegistry, ::testing::ValuesIn(testing::backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace silt::metadata
