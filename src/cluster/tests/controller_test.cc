// The controller: the placement plan on its own, and two brokers' controllers on SQLite and on
// PostgreSQL: one holds the lease and places, the other takes over when it stops, and a
// placement under a lease that moved on is refused.
#include "cluster/controller.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

#include "cluster/tests/cluster_test_util.h"
#include "metadata/testing/test_database.h"

namespace silt::cluster {
namespace {

using testing::eventually;

using std::chrono::milliseconds;
using streams_t = std::vector<std::pair<base::stream_id, metadata::stream_state>>;

metadata::stream_state owned(int32_t owner, int32_t target = -1) {
  metadata::stream_state s;
  s.owner = base::node_id(owner);
  s.target = base::node_id(target);
  return s;
}

std::vector<base::node_id> ids(std::initializer_list<int32_t> l) {
  std::vector<base::node_id> out;
  for (int32_t n : l) out.emplace_back(n);
  return out;
}

// Where each stream ends up once the plan is carried out.
std::map<int32_t, size_t> counts_after(const streams_t& streams,
                                       const std::vector<metadata::stream_target>& plan) {
  std::map<uint64_t, int32_t> where;
  for (const auto& [id, s] : streams) {
    where[id.value()] = (s.target.value() != -1 ? s.target : s.owner).value();
  }
  for (const auto& t : plan) {
    if (t.target.value() != -1) where[t.stream_id.value()] = t.target.value();
  }
  std::map<int32_t, size_t> out;
  for (const auto& [id, n] : where) ++out[n];
  return out;
}

TEST(PlanPlacement, SpreadsNewStreamsAndBalancesByCount) {
  streams_t streams;
  for (uint64_t i = 0; i < 9; ++i) streams.emplace_back(base::stream_id(i), owned(1));
  auto plan = plan_placement(ids({1, 2, 3}), streams, 100);
  EXPECT_EQ(plan.size(), 6u);
  EXPECT_EQ(counts_after(streams, plan), (std::map<int32_t, size_t>{{1, 3}, {2, 3}, {3, 3}}));
  // Never taken: spread at once.
  streams_t fresh;
  for (uint64_t i = 0; i < 4; ++i) fresh.emplace_back(base::stream_id(i), owned(-1));
  plan = plan_placement(ids({1, 2}), fresh, 0);
  EXPECT_EQ(plan.size(), 4u);
  EXPECT_EQ(counts_after(fresh, plan), (std::map<int32_t, size_t>{{1, 2}, {2, 2}}));
  // Balanced within one: nothing to do; the same input gives the same plan.
  streams.clear();
  for (uint64_t i = 0; i < 5; ++i) streams.emplace_back(base::stream_id(i), owned(1 + (i % 2)));
  EXPECT_TRUE(plan_placement(ids({1, 2}), streams, 100).empty());
  streams.emplace_back(base::stream_id(7), owned(1));
  streams.emplace_back(base::stream_id(8), owned(1));
  EXPECT_EQ(plan_placement(ids({1, 2}), streams, 100), plan_placement(ids({1, 2}), streams, 100));
}

TEST(PlanPlacement, LeavesADeadOwnersStreamsAndRetargetsFromADeadTarget) {
  streams_t streams{{base::stream_id(1), owned(2)},      // owner 2 is not live: stays
                    {base::stream_id(2), owned(1, 3)},   // target 3 is not live: placed again
                    {base::stream_id(3), owned(1, 1)}};  // target reached: cleared
  auto plan = plan_placement(ids({1, 4}), streams, 100);
  std::map<uint64_t, int32_t> got;
  for (const auto& t : plan) got[t.stream_id.value()] = t.target.value();
  EXPECT_FALSE(got.contains(1));
  ASSERT_TRUE(got.contains(2));
  EXPECT_EQ(got[2], 4);  // the broker with fewer streams
  ASSERT_TRUE(got.contains(3));
  EXPECT_EQ(got[3], -1);
  // At most max_moves moves of balancing per round.
  streams.clear();
  for (uint64_t i = 0; i < 20; ++i) streams.emplace_back(base::stream_id(i), owned(1));
  EXPECT_EQ(plan_placement(ids({1, 2}), streams, 3).size(), 3u);
  EXPECT_TRUE(plan_placement({}, streams, 3).empty());
}

// The load each broker has once the plan is carried out.
std::map<int32_t, uint64_t> loads_after(const streams_t& streams,
                                        const std::vector<metadata::stream_target>& plan,
                                        const load_map& loads) {
  std::map<uint64_t, int32_t> where;
  for (const auto& [id, s] : streams) where[id.value()] = s.owner.value();
  for (const auto& t : plan) {
    if (t.target.value() != -1) where[t.stream_id.value()] = t.target.value();
  }
  std::map<int32_t, uint64_t> out;
  for (const auto& [id, n] : where) {
    const auto it = loads.find(base::stream_id(id));
    out[n] += it == loads.end() ? 0 : it->second;
  }
  return out;
}

// Counts even, loads not: one step swaps a hot stream for a cold one (counts stay even), the
// pair that brings the two brokers closest; close loads, small gaps and steps that gain little
// move nothing; uneven counts are evened first, whatever the loads.
TEST(PlanPlacement, BalancesByLoadOnceCountsAreEven) {
  constexpr uint64_t mib = 1 << 20;
  streams_t streams;
  for (uint64_t i = 0; i < 4; ++i) streams.emplace_back(base::stream_id(i), owned(i < 2 ? 1 : 2));
  // Node 1: 8 and 4 MiB/s; node 2: 1 MiB/s and an idle stream.
  const load_map loads{
      {base::stream_id(0), 8 * mib}, {base::stream_id(1), 4 * mib}, {base::stream_id(2), 1 * mib}};
  auto plan = plan_placement(ids({1, 2}), streams, 100, loads, mib);
  EXPECT_EQ(counts_after(streams, plan), (std::map<int32_t, size_t>{{1, 2}, {2, 2}}));
  // 12 against 1: swapping the 8 for the 1 MiB/s stream gives 5 against 8, a gap of 3 (the 4
  // for the idle one too; the 8 for the idle one leaves 5, the 4 for the 1 leaves 5).
  const auto after = loads_after(streams, plan, loads);
  EXPECT_EQ(after.at(1) > after.at(2) ? after.at(1) - after.at(2) : after.at(2) - after.at(1),
            3 * mib);
  EXPECT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan, plan_placement(ids({1, 2}), streams, 100, loads, mib));

  // Balanced already, or a gap under the minimum or under a tenth of the busiest: nothing.
  const load_map even{{base::stream_id(0), 5 * mib}, {base::stream_id(2), 5 * mib}};
  EXPECT_TRUE(plan_placement(ids({1, 2}), streams, 100, even, mib).empty());
  const load_map small{{base::stream_id(0), 1500 * 1024}, {base::stream_id(2), 1000 * 1024}};
  EXPECT_TRUE(plan_placement(ids({1, 2}), streams, 100, small, mib).empty());
  const load_map tenth{{base::stream_id(0), 100 * mib}, {base::stream_id(2), 95 * mib}};
  EXPECT_TRUE(plan_placement(ids({1, 2}), streams, 100, tenth, mib).empty());
  // One hot stream alone: any move only swaps which broker is busy; nothing.
  const load_map one{{base::stream_id(0), 8 * mib}};
  EXPECT_TRUE(plan_placement(ids({1, 2}), streams, 100, one, mib).empty());

  // Counts first: node 1 has three streams, node 2 one; the count move is the whole plan.
  streams_t uneven;
  for (uint64_t i = 0; i < 4; ++i) uneven.emplace_back(base::stream_id(i), owned(i < 3 ? 1 : 2));
  plan = plan_placement(ids({1, 2}), uneven, 100, loads, mib);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(counts_after(uneven, plan), (std::map<int32_t, size_t>{{1, 2}, {2, 2}}));
  // Node 1 with one stream more may give one away without a swap.
  streams_t odd;
  for (uint64_t i = 0; i < 3; ++i) odd.emplace_back(base::stream_id(i), owned(i < 2 ? 1 : 2));
  const load_map two_hot{{base::stream_id(0), 6 * mib}, {base::stream_id(1), 6 * mib}};
  plan = plan_placement(ids({1, 2}), odd, 100, two_hot, mib);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(loads_after(odd, plan, two_hot),
            (std::map<int32_t, uint64_t>{{1, 6 * mib}, {2, 6 * mib}}));
}

TEST(ReportedLoads, TakesLiveBrokersAndTheHighestReportOfAStream) {
  std::vector<metadata::broker_record> brokers(3);
  brokers[0].lease_left_ms = 1000;
  brokers[0].loads = {{base::stream_id(1), 10}, {base::stream_id(2), 5}};
  brokers[1].lease_left_ms = 1000;
  brokers[1].loads = {{base::stream_id(2), 7}};
  brokers[2].lease_left_ms = 0;  // lapsed
  brokers[2].loads = {{base::stream_id(3), 99}};
  EXPECT_EQ(reported_loads(brokers), (load_map{{base::stream_id(1), 10}, {base::stream_id(2), 7}}));
}

// Where each shard is placed once the plan is carried out, counted by broker.
std::map<int32_t, size_t> shards_after(int32_t count,
                                       const std::vector<metadata::shard_state>& rows,
                                       const std::vector<metadata::shard_target>& plan) {
  std::map<int32_t, int32_t> where;
  for (int32_t s = 0; s < count; ++s) where[s] = -1;
  for (const auto& r : rows) where[r.shard] = r.target.value();
  for (const auto& t : plan) where[t.shard] = t.target.value();
  std::map<int32_t, size_t> out;
  for (const auto& [s, n] : where) ++out[n];
  return out;
}

metadata::shard_state shard_on(int32_t shard, int32_t target) {
  return {shard, base::node_id(target), base::leader_epoch(0), base::node_id(target)};
}

TEST(PlanShards, SpreadsShardsNeverPlacedOverTheLiveBrokers) {
  const auto plan = plan_shards(ids({1, 2, 3}), {}, 50);
  EXPECT_EQ(plan.size(), 50u);
  EXPECT_EQ(shards_after(50, {}, plan), (std::map<int32_t, size_t>{{1, 17}, {2, 17}, {3, 16}}));
  // Carried out, the plan is settled: nothing more to place.
  std::vector<metadata::shard_state> rows;
  rows.reserve(plan.size());
  for (const auto& t : plan) rows.push_back(shard_on(t.shard, t.target.value()));
  EXPECT_TRUE(plan_shards(ids({1, 2, 3}), rows, 50).empty());
}

TEST(PlanShards, MovesTheShardsOfABrokerGoneAndGivesAJoiningOneItsShare) {
  std::vector<metadata::shard_state> rows;
  rows.reserve(12);
  for (int32_t s = 0; s < 12; ++s) rows.push_back(shard_on(s, 1 + s % 3));
  // Broker 3 is gone: its four shards go to 1 and 2, nothing else moves.
  auto plan = plan_shards(ids({1, 2}), rows, 12);
  EXPECT_EQ(plan.size(), 4u);
  for (const auto& t : plan) EXPECT_EQ((t.shard % 3), 2) << t.shard;
  EXPECT_EQ(shards_after(12, rows, plan), (std::map<int32_t, size_t>{{1, 6}, {2, 6}}));
  // Broker 4 joins: it gets its share (three), from the others.
  plan = plan_shards(ids({1, 2, 3, 4}), rows, 12);
  EXPECT_EQ(plan.size(), 3u);
  EXPECT_EQ(shards_after(12, rows, plan),
            (std::map<int32_t, size_t>{{1, 3}, {2, 3}, {3, 3}, {4, 3}}));
  // No live broker: nothing is placed.
  EXPECT_TRUE(plan_shards({}, rows, 12).empty());
}

class Controller : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("silt-controller-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    auto db = metadata::sql::open_database(metadata::testing::fresh_uri(GetParam(), dir_));
    ASSERT_TRUE(db) << db.error();
    db_ = *db;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<controller> start(membership& m, int32_t id) {
    controller_options o;
    o.self = base::node_id(id);
    o.interval = milliseconds(50);
    o.lease = milliseconds(500);
    auto c = controller::start(db_, m, o);
    EXPECT_TRUE(c) << c.error();
    return c ? std::move(*c) : nullptr;
  }

  std::filesystem::path dir_;
  std::shared_ptr<metadata::sql::database> db_;
};

TEST_P(Controller, OneControllerPlacesAndAnotherTakesOverWhenItStops) {
  auto catalog = metadata::stream_catalog::open(db_);
  ASSERT_TRUE(catalog);
  std::vector<metadata::stream_take> takes;
  for (uint64_t i = 0; i < 6; ++i) takes.push_back({base::stream_id(i), base::offset(0)});
  ASSERT_TRUE((*catalog)->take(base::node_id(1), takes));

  auto m1 = membership::start(db_, testing::member_options(1));
  ASSERT_TRUE(m1) << m1.error();
  auto m2 = membership::start(db_, testing::member_options(2));
  ASSERT_TRUE(m2) << m2.error();
  ASSERT_TRUE(eventually([&] { return (*m1)->brokers()->size() == 2; }));
  auto c1 = start(**m1, 1);
  ASSERT_TRUE(eventually([&] { return c1->active(); }));
  auto c2 = start(**m2, 2);
  // Half of node 1's streams get node 2 as their target; only one controller is active.
  auto targets_of = [&](int32_t node) {
    size_t n = 0;
    auto states = (*catalog)->stream_states();
    if (!states) return n;
    for (const auto& [id, s] : *states) n += s.target == base::node_id(node) ? 1 : 0;
    return n;
  };
  ASSERT_TRUE(eventually([&] { return targets_of(2) == 3; }));
  EXPECT_TRUE(c1->active());
  EXPECT_FALSE(c2->active());

  // A placement under a lease that is not held is refused, with nothing changed.
  auto r = (*catalog)->assign({{base::stream_id(0), base::node_id(7)}},
                              metadata::controller_lease{base::node_id(2), 999});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), metadata::catalog_error::fenced);
  EXPECT_EQ(targets_of(7), 0u);

  // The first controller stops (its lease given up): the second takes over.
  c1->stop();
  ASSERT_TRUE(eventually([&] { return c2->active(); }));
  EXPECT_FALSE(c1->active());
}

// Two brokers' controllers place the coordinator shards half and half; each broker's thread
// hands every broker the shards as stored; a placement under a lease not held is refused.
TEST_P(Controller, PlacesCoordinatorShardsAndEveryBrokerFollowsThem) {
  auto m1 = membership::start(db_, testing::member_options(1));
  ASSERT_TRUE(m1) << m1.error();
  auto m2 = membership::start(db_, testing::member_options(2));
  ASSERT_TRUE(m2) << m2.error();
  ASSERT_TRUE(eventually([&] { return (*m1)->brokers()->size() == 2; }));
  std::mutex mu;
  std::map<int32_t, std::vector<metadata::shard_state>> seen;  // by broker
  auto start_with_shards = [&](membership& m, int32_t id) {
    controller_options o;
    o.self = base::node_id(id);
    o.interval = milliseconds(50);
    o.lease = milliseconds(500);
    o.shards = 10;
    o.on_shards = [&, id](const std::vector<metadata::shard_state>& rows) {
      std::lock_guard lock(mu);
      seen[id] = rows;
    };
    auto c = controller::start(db_, m, o);
    EXPECT_TRUE(c) << c.error();
    return c ? std::move(*c) : nullptr;
  };
  auto c1 = start_with_shards(**m1, 1);
  auto c2 = start_with_shards(**m2, 2);
  auto placed_on = [&](int32_t broker, int32_t node) {
    std::lock_guard lock(mu);
    size_t n = 0;
    for (const auto& r : seen[broker]) n += r.target == base::node_id(node) ? 1 : 0;
    return n;
  };
  ASSERT_TRUE(eventually(
      [&] { return placed_on(1, 1) == 5 && placed_on(1, 2) == 5 && placed_on(2, 2) == 5; }));
  EXPECT_EQ(c1->active() ? 1 : 0, c2->active() ? 0 : 1);

  auto store = metadata::group_store::open(db_, base::node_id(9));
  ASSERT_TRUE(store);
  const std::vector<metadata::shard_target> elsewhere{{0, base::node_id(9)}};
  auto r = (*store)->place(elsewhere, base::node_id(9), 12345);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), metadata::group_store_error::fenced);
  auto rows = (*store)->shard_states();
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 10u);
  EXPECT_NE(rows->front().target, base::node_id(9));
  // Nobody took them here (no coordinator): owned by nobody, at epoch -1.
  EXPECT_EQ(rows->front().owner, base::node_id(-1));

  // Broker 2 stops: its shards go to broker 1.
  c2->stop();
  (*m2)->stop();
  ASSERT_TRUE(eventually([&] { return placed_on(1, 1) == 10; }, std::chrono::seconds(10)));
}

INSTANTIATE_TEST_SUITE_P(Backends, Controller, ::testing::ValuesIn(metadata::testing::backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace silt::cluster
