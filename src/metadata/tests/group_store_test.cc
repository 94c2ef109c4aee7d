// The group store on SQLite and on PostgreSQL: offsets and group records survive reopening,
// writes are fenced per shard by owner and epoch, and a large commit is one transaction.
#include "metadata/group_store.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

#include "metadata/testing/test_database.h"

namespace silt::metadata {
namespace {

namespace fs = std::filesystem;

base::node_id node(int32_t v) {
  return base::node_id(v);
}

base::leader_epoch epoch(int32_t v) {
  return base::leader_epoch(v);
}

committed_offset offset_of(const std::string& group, const std::string& topic, int32_t partition,
                           int64_t offset) {
  committed_offset o;
  o.key = {group, topic, partition};
  o.offset = offset;
  o.leader_epoch = 3;
  o.metadata = "m" + std::to_string(offset);
  o.commit_ms = 1000 + offset;
  o.expire_ms = -1;
  return o;
}

group_record group_of(const std::string& group, std::vector<uint8_t> data) {
  return {group, std::move(data)};
}

bool same(const committed_offset& a, const committed_offset& b) {
  return a.key == b.key && a.offset == b.offset && a.leader_epoch == b.leader_epoch &&
         a.metadata == b.metadata && a.commit_ms == b.commit_ms && a.expire_ms == b.expire_ms;
}

// Loaded offsets by key (the store returns them in no particular order).
std::vector<committed_offset> sorted(std::vector<committed_offset> v) {
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  return v;
}

std::vector<group_record> sorted(std::vector<group_record> v) {
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.group < b.group; });
  return v;
}

std::vector<std::string> group_names(const group_store::loaded& l) {
  std::vector<std::string> out;
  for (const auto& g : l.groups) out.push_back(g.group);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<offset_key> offset_keys(const group_store::loaded& l) {
  std::vector<offset_key> out;
  for (const auto& o : l.offsets) out.push_back(o.key);
  std::sort(out.begin(), out.end());
  return out;
}

class GroupStore : public ::testing::TestWithParam<std::string> {
 protected:
  GroupStore()
      : path_(fs::temp_directory_path() /
              ("group-store-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
    uri_ = testing::fresh_uri(GetParam(), path_);
  }
  ~GroupStore() override { fs::remove_all(path_); }

  // A store of `n` on the test's database (each with its own connection).
  std::unique_ptr<group_store> open(int32_t n = 1) {
    auto db = sql::open_database(uri_);
    EXPECT_TRUE(db) << db.error();
    if (!db) return nullptr;
    auto s = group_store::open(std::move(*db), node(n));
    EXPECT_TRUE(s) << s.error();
    return s ? std::move(*s) : nullptr;
  }

  group_store::loaded load(group_store& s, std::vector<int32_t> shards) {
    auto l = s.load(shards);
    EXPECT_TRUE(l);
    return l ? std::move(*l) : group_store::loaded{};
  }

  static inline int counter_ = 0;
  fs::path path_;
  std::string uri_;
};

TEST_P(GroupStore, OffsetsAndGroupsSurviveReopening) {
  const std::vector<committed_offset> offsets{offset_of("g1", "orders", 0, 42),
                                              offset_of("g1", "orders", 1, 7),
                                              offset_of("g2", "audit", 0, 0)};
  {
    auto s = open();
    ASSERT_TRUE(s);
    const std::vector<int32_t> shards{4, 9};
    ASSERT_EQ(*s->take(shards), (std::vector<base::leader_epoch>{epoch(0), epoch(0)}));
    committed_offset explicit_expiry = offset_of("g3", "orders", 2, 5);
    explicit_expiry.expire_ms = 99999;
    explicit_expiry.leader_epoch = -1;
    explicit_expiry.metadata = "";
    std::vector<shard_write> writes(2);
    writes[0].shard = 4;
    writes[0].offsets = {offsets[0], offsets[1]};
    writes[0].groups = {group_of("g1", {1, 2, 0, 255})};
    writes[1].shard = 9;
    writes[1].offsets = {offsets[2], explicit_expiry};
    writes[1].groups = {group_of("g2", {}), group_of("g3", {9})};
    auto fenced = s->apply(writes);
    ASSERT_TRUE(fenced);
    EXPECT_TRUE(fenced->empty());
  }
  auto s = open();
  auto l = load(*s, {4});
  auto got = sorted(l.offsets);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(same(got[0], offsets[0]));
  EXPECT_TRUE(same(got[1], offsets[1]));
  ASSERT_EQ(l.groups.size(), 1u);
  EXPECT_EQ(l.groups[0].group, "g1");
  EXPECT_EQ(l.groups[0].data, (std::vector<uint8_t>{1, 2, 0, 255}));

  l = load(*s, {9});
  got = sorted(l.offsets);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(same(got[0], offsets[2]));
  EXPECT_EQ(got[1].key, (offset_key{"g3", "orders", 2}));
  EXPECT_EQ(got[1].expire_ms, 99999);
  EXPECT_EQ(got[1].leader_epoch, -1);
  EXPECT_EQ(got[1].metadata, "");
  const auto groups = sorted(l.groups);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_TRUE(groups[0].data.empty());
  EXPECT_EQ(groups[1].data, std::vector<uint8_t>{9});
}

TEST_P(GroupStore, AnUpsertReplacesTheStoredOffsetAndGroup) {
  auto s = open();
  const std::vector<int32_t> shards{1};
  ASSERT_TRUE(s->take(shards));
  std::vector<shard_write> w(1);
  w[0].shard = 1;
  w[0].offsets = {offset_of("g", "t", 0, 10), offset_of("g", "t", 1, 11)};
  w[0].groups = {group_of("g", {1})};
  ASSERT_TRUE(s->apply(w));
  w[0].offsets = {offset_of("g", "t", 0, 20)};
  w[0].groups = {group_of("g", {2, 2})};
  ASSERT_TRUE(s->apply(w));
  auto l = load(*s, {1});
  const auto got = sorted(l.offsets);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(same(got[0], offset_of("g", "t", 0, 20)));
  EXPECT_TRUE(same(got[1], offset_of("g", "t", 1, 11)));
  ASSERT_EQ(l.groups.size(), 1u);
  EXPECT_EQ(l.groups[0].data, (std::vector<uint8_t>{2, 2}));
}

// In use once any node stored a group or an offset, seen by every node's store.
TEST_P(GroupStore, InUseOnceAnyNodeStoredAGroupOrAnOffset) {
  auto a = open(1);
  auto b = open(2);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->in_use(), false);
  const std::vector<int32_t> shards{3};
  ASSERT_TRUE(a->take(shards));
  EXPECT_EQ(b->in_use(), false);
  std::vector<shard_write> w(1);
  w[0].shard = 3;
  w[0].groups = {group_of("g", {})};
  ASSERT_TRUE(a->apply(w));
  EXPECT_EQ(b->in_use(), true);
  w[0].groups.clear();
  w[0].offsets = {offset_of("g", "t", 0, 1)};
  ASSERT_TRUE(a->apply(w));
  EXPECT_EQ(b->in_use(), true);
}

// A group's offset commit of 100 partitions is one transaction of a few statements (round
// trips on PostgreSQL), whatever the partition count.
TEST_P(GroupStore, AnOffsetCommitIsAFewRoundTrips) {
  auto s = open();
  const std::vector<int32_t> shards{1};
  ASSERT_TRUE(s->take(shards));
  std::vector<shard_write> w(1);
  w[0].shard = 1;
  for (int32_t p = 0; p < 100; ++p) w[0].offsets.push_back(offset_of("g", "t", p, 10 + p));
  const uint64_t before = sql::statements_sent();
  ASSERT_TRUE(s->apply(w));
  const uint64_t used = sql::statements_sent() - before;
  std::printf("an offset commit of 100 partitions: %llu statements\n",
              static_cast<unsigned long long>(used));
  EXPECT_LE(used, 8u);
}

// Two entries of one key in a write: the last counts (PostgreSQL would refuse a statement that
// upserts one row twice).
TEST_P(GroupStore, OfTwoEntriesOfOneKeyInAWriteTheLastCounts) {
  auto s = open();
  const std::vector<int32_t> shards{1};
  ASSERT_TRUE(s->take(shards));
  std::vector<shard_write> w(1);
  w[0].shard = 1;
  w[0].offsets = {offset_of("g", "t", 0, 1), offset_of("g", "t", 1, 5), offset_of("g", "t", 0, 2)};
  w[0].groups = {group_of("g", {1}), group_of("g", {2})};
  ASSERT_TRUE(s->apply(w));
  auto l = load(*s, {1});
  const auto got = sorted(l.offsets);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].offset, 2);
  EXPECT_EQ(got[1].offset, 5);
  ASSERT_EQ(l.groups.size(), 1u);
  EXPECT_EQ(l.groups[0].data, std::vector<uint8_t>{2});
}

TEST_P(GroupStore, DeletedOffsetsAndGroupsAreGone) {
  auto s = open();
  const std::vector<int32_t> shards{2};
  ASSERT_TRUE(s->take(shards));
  std::vector<shard_write> w(1);
  w[0].shard = 2;
  w[0].offsets = {offset_of("a", "t", 0, 1), offset_of("a", "t", 1, 1), offset_of("a", "u", 0, 1),
                  offset_of("b", "t", 0, 1), offset_of("b", "t", 1, 1)};
  w[0].groups = {group_of("a", {1}), group_of("b", {2})};
  ASSERT_TRUE(s->apply(w));

  w[0] = {};
  w[0].shard = 2;
  // Absent keys and groups are ignored.
  w[0].deleted_offsets = {{"a", "t", 1}, {"a", "missing", 0}, {"zz", "t", 0}};
  w[0].deleted_groups = {"b", "never-there"};
  auto fenced = s->apply(w);
  ASSERT_TRUE(fenced);
  EXPECT_TRUE(fenced->empty());
  auto l = load(*s, {2});
  EXPECT_EQ(offset_keys(l), (std::vector<offset_key>{{"a", "t", 0}, {"a", "u", 0}}));
  EXPECT_EQ(group_names(l), std::vector<std::string>{"a"});

  // Deletions come before insertions: a group deleted and committed to again in one write
  // keeps what was written.
  w[0] = {};
  w[0].shard = 2;
  w[0].deleted_groups = {"a"};
  w[0].offsets = {offset_of("a", "v", 3, 8)};
  w[0].groups = {group_of("a", {3})};
  ASSERT_TRUE(s->apply(w));
  l = load(*s, {2});
  EXPECT_EQ(offset_keys(l), (std::vector<offset_key>{{"a", "v", 3}}));
  ASSERT_EQ(l.groups.size(), 1u);
  EXPECT_EQ(l.groups[0].data, std::vector<uint8_t>{3});
}

// Writes naming one shard are applied in the order given: a commit then a deletion of the
// same offset leaves it deleted, a deletion then a commit leaves it committed.
TEST_P(GroupStore, WritesOfOneShardAreAppliedInOrder) {
  auto s = open();
  const std::vector<int32_t> shards{6};
  ASSERT_TRUE(s->take(shards));
  std::vector<shard_write> w(4);
  for (auto& sw : w) sw.shard = 6;
  w[0].offsets = {offset_of("g", "t", 0, 1), offset_of("g", "t", 1, 1)};
  w[0].groups = {group_of("g", {1})};
  w[1].deleted_offsets = {{"g", "t", 0}};
  w[2].deleted_groups = {"g"};
  w[3].offsets = {offset_of("g", "t", 2, 3)};
  auto fenced = s->apply(w);
  ASSERT_TRUE(fenced);
  EXPECT_TRUE(fenced->empty());
  auto l = load(*s, {6});
  EXPECT_EQ(offset_keys(l), (std::vector<offset_key>{{"g", "t", 2}}));
  EXPECT_TRUE(l.groups.empty());
  // A stale epoch in either write of a shard: the shard is named once, nothing applied.
  w.resize(2);
  w[1].epoch = epoch(5);
  EXPECT_EQ(*s->apply(w), std::vector<int32_t>{6});
  EXPECT_EQ(offset_keys(load(*s, {6})), (std::vector<offset_key>{{"g", "t", 2}}));
}

TEST_P(GroupStore, TakeBumpsTheEpochOfEachShard) {
  auto s = open();
  const std::vector<int32_t> first{3, 1};
  EXPECT_EQ(*s->take(first), (std::vector<base::leader_epoch>{epoch(0), epoch(0)}));
  // Listed twice: taken once, both places get its epoch; a new shard starts at 0.
  const std::vector<int32_t> second{1, 5, 1};
  EXPECT_EQ(*s->take(second), (std::vector<base::leader_epoch>{epoch(1), epoch(0), epoch(1)}));
  const std::vector<int32_t> third{1, 3};
  EXPECT_EQ(*s->take(third), (std::vector<base::leader_epoch>{epoch(2), epoch(1)}));
  EXPECT_TRUE(s->take(std::vector<int32_t>{})->empty());

  // Many shards in one call (several statements).
  std::vector<int32_t> many(700);
  std::iota(many.begin(), many.end(), 0);
  auto taken = s->take(many);
  ASSERT_TRUE(taken);
  ASSERT_EQ(taken->size(), many.size());
  EXPECT_EQ((*taken)[1], epoch(3));
  EXPECT_EQ((*taken)[3], epoch(2));
  EXPECT_EQ((*taken)[5], epoch(1));
  EXPECT_EQ((*taken)[699], epoch(0));

  // The epochs are in the database, not in the store: a new store continues from them.
  auto again = open();
  EXPECT_EQ(*again->take(third), (std::vector<base::leader_epoch>{epoch(4), epoch(3)}));
}

// Node 2 takes one of node 1's shards: node 1's next apply still writes its other shard, and
// nothing of the lost one.
TEST_P(GroupStore, AShardTakenByAnotherNodeFencesOnlyThatShard) {
  auto a = open(1);
  auto b = open(2);
  const std::vector<int32_t> both{10, 11};
  ASSERT_EQ(*a->take(both), (std::vector<base::leader_epoch>{epoch(0), epoch(0)}));
  const std::vector<int32_t> ten{10};
  ASSERT_EQ(*b->take(ten), std::vector<base::leader_epoch>{epoch(1)});

  std::vector<shard_write> w(2);
  w[0].shard = 10;
  w[0].epoch = epoch(0);
  w[0].offsets = {offset_of("lost", "t", 0, 1)};
  w[0].groups = {group_of("lost", {1})};
  w[1].shard = 11;
  w[1].epoch = epoch(0);
  w[1].offsets = {offset_of("kept", "t", 0, 1)};
  w[1].groups = {group_of("kept", {1})};
  auto fenced = a->apply(w);
  ASSERT_TRUE(fenced);
  EXPECT_EQ(*fenced, std::vector<int32_t>{10});
  auto l = load(*b, {10});
  EXPECT_TRUE(l.offsets.empty());
  EXPECT_TRUE(l.groups.empty());
  l = load(*a, {11});
  EXPECT_EQ(offset_keys(l), (std::vector<offset_key>{{"kept", "t", 0}}));
  EXPECT_EQ(group_names(l), std::vector<std::string>{"kept"});

  // Node 1 at the new epoch is still not the owner; node 2 at the old epoch is stale; a
  // shard never taken belongs to nobody.
  w.resize(1);
  w[0].epoch = epoch(1);
  EXPECT_EQ(*a->apply(w), std::vector<int32_t>{10});
  w[0].epoch = epoch(0);
  EXPECT_EQ(*b->apply(w), std::vector<int32_t>{10});
  w[0].shard = 12;
  EXPECT_EQ(*a->apply(w), std::vector<int32_t>{12});
  EXPECT_TRUE(load(*a, {12}).offsets.empty());

  // The new owner writes at its epoch; deletions of a fenced writer change nothing.
  w[0].shard = 10;
  w[0].epoch = epoch(1);
  ASSERT_TRUE(b->apply(w)->empty());
  w[0] = {};
  w[0].shard = 10;
  w[0].deleted_groups = {"lost"};
  EXPECT_EQ(*a->apply(w), std::vector<int32_t>{10});
  EXPECT_EQ(group_names(load(*b, {10})), std::vector<std::string>{"lost"});
}

// An apply that starts while a take of its shard is in flight (uncommitted) waits for it and
// is fenced: the check and the writes cannot straddle a change of owner. On PostgreSQL this
// needs the check's row lock; on SQLite the write lock serialises them.
TEST_P(GroupStore, AnApplyRacingATakeWaitsForItAndIsFenced) {
  auto a = open(1);
  const std::vector<int32_t> shard{20};
  ASSERT_TRUE(a->take(shard));
  auto db = sql::open_database(uri_);
  ASSERT_TRUE(db);
  auto raw = (*db)->connect();
  ASSERT_TRUE(raw);
  auto& c = **raw;
  {
    sql::transaction tx(c);
    ASSERT_TRUE(tx.ok());
    // What node 2's take() writes, not yet committed.
    ASSERT_TRUE(
        c.query("UPDATE coordinator_shards SET owner = 2, epoch = epoch + 1 WHERE shard = 20"));
    tl::expected<std::vector<int32_t>, group_store_error> fenced;
    std::thread writer([&] {
      std::vector<shard_write> w(1);
      w[0].shard = 20;
      w[0].offsets = {offset_of("g", "t", 0, 1)};
      fenced = a->apply(w);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(tx.commit());
    writer.join();
    ASSERT_TRUE(fenced);
    EXPECT_EQ(*fenced, std::vector<int32_t>{20});
  }
  EXPECT_TRUE(load(*a, {20}).offsets.empty());
}

TEST_P(GroupStore, ForgetTopicRemovesItsOffsetsFromEveryGroup) {
  auto s = open();
  const std::vector<int32_t> shards{1, 2};
  ASSERT_TRUE(s->take(shards));
  std::vector<shard_write> w(2);
  w[0].shard = 1;
  w[0].offsets = {offset_of("a", "gone", 0, 1), offset_of("a", "gone", 1, 1),
                  offset_of("a", "stays", 0, 1)};
  w[1].shard = 2;
  w[1].offsets = {offset_of("b", "gone", 0, 1), offset_of("b", "stays", 3, 1)};
  w[1].groups = {group_of("b", {1})};
  ASSERT_TRUE(s->apply(w));
  ASSERT_TRUE(s->forget_topic("gone"));
  ASSERT_TRUE(s->forget_topic("never-existed"));
  auto l = load(*s, {1, 2});
  EXPECT_EQ(offset_keys(l), (std::vector<offset_key>{{"a", "stays", 0}, {"b", "stays", 3}}));
  EXPECT_EQ(group_names(l), std::vector<std::string>{"b"});
}

TEST_P(GroupStore, LoadReturnsOnlyTheRequestedShards) {
  auto s = open();
  std::vector<int32_t> shards(5);
  std::iota(shards.begin(), shards.end(), 0);
  ASSERT_TRUE(s->take(shards));
  std::vector<shard_write> w;
  for (int32_t i = 0; i < 5; ++i) {
    shard_write sw;
    sw.shard = i;
    const std::string g = "group-" + std::to_string(i);
    sw.offsets = {offset_of(g, "t", 0, i), offset_of(g, "t", 1, i)};
    sw.groups = {group_of(g, {static_cast<uint8_t>(i)})};
    w.push_back(std::move(sw));
  }
  ASSERT_TRUE(s->apply(w)->empty());
  auto l = load(*s, {3, 1, 3});
  EXPECT_EQ(group_names(l), (std::vector<std::string>{"group-1", "group-3"}));
  EXPECT_EQ(
      offset_keys(l),
      (std::vector<offset_key>{
          {"group-1", "t", 0}, {"group-1", "t", 1}, {"group-3", "t", 0}, {"group-3", "t", 1}}));
  l = load(*s, {7});
  EXPECT_TRUE(l.offsets.empty());
  EXPECT_TRUE(l.groups.empty());
  EXPECT_TRUE(load(*s, {}).offsets.empty());
}

// An OffsetCommit of 2,000 partitions is one apply() (and one transaction). Its duration is
// printed, not asserted.
TEST_P(GroupStore, AppliesTwoThousandOffsetsInOneCall) {
  auto s = open();
  const std::vector<int32_t> shards{0, 1};
  ASSERT_TRUE(s->take(shards));
  std::vector<shard_write> w(2);
  w[0].shard = 0;
  w[1].shard = 1;
  for (int32_t p = 0; p < 1500; ++p) w[0].offsets.push_back(offset_of("big", "t", p, p));
  for (int32_t p = 0; p < 500; ++p) w[1].offsets.push_back(offset_of("small", "u", p, p));
  w[0].groups = {group_of("big", {1})};
  const uint64_t before = sql::committed_transactions();
  auto start = std::chrono::steady_clock::now();
  auto fenced = s->apply(w);
  const auto first = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(fenced);
  EXPECT_TRUE(fenced->empty());
  EXPECT_EQ(sql::committed_transactions() - before, 1u);
  // Again, every offset replaced.
  for (auto& o : w[0].offsets) o.offset += 1000;
  for (auto& o : w[1].offsets) o.offset += 1000;
  start = std::chrono::steady_clock::now();
  ASSERT_TRUE(s->apply(w));
  const auto second = std::chrono::steady_clock::now() - start;
  auto ms = [](auto d) {
    return std::chrono::duration_cast<std::chrono::microseconds>(d).count() / 1000.0;
  };
  std::printf("[ timing ] %s: apply of 2000 offsets: %.1f ms inserted, %.1f ms replaced\n",
              GetParam().c_str(), ms(first), ms(second));
  auto l = load(*s, {0, 1});
  ASSERT_EQ(l.offsets.size(), 2000u);
  for (const auto& o : l.offsets) EXPECT_EQ(o.offset, o.key.partition + 1000);
}

// A version 2 database (before the group tables) is migrated to the current version in place.
TEST_P(GroupStore, AVersionTwoDatabaseIsMigrated) {
  {
    auto db = sql::open_database(uri_);
    ASSERT_TRUE(db) << db.error();
    auto conn = (*db)->connect();
    ASSERT_TRUE(conn);
    auto& c = **conn;
    for (const char* q :
         {"DROP TABLE coordinator_shards", "DROP TABLE group_offsets", "DROP TABLE consumer_groups",
          "DROP TABLE brokers", "DELETE FROM registry_counters WHERE name = 'broker_epoch'",
          "DROP INDEX streams_by_owner_version", "ALTER TABLE streams DROP COLUMN target",
          "ALTER TABLE streams DROP COLUMN owner_version", "DROP TABLE controller",
          "DROP TABLE wal_takeovers", "ALTER TABLE streams DROP COLUMN taken_from",
          "DROP TABLE scram_credentials", "DROP TABLE acls", "DROP TABLE client_quotas",
          "UPDATE schema_version SET version = 2"}) {
      ASSERT_TRUE(c.script(q)) << q;
    }
    ASSERT_TRUE(
        c.query("INSERT INTO streams(stream_id, start_offset, end_offset) VALUES(5, 0, 9)"));
  }
  auto s = open();
  ASSERT_TRUE(s);
  const std::vector<int32_t> shards{0};
  ASSERT_TRUE(s->take(shards));
  std::vector<shard_write> w(1);
  w[0].offsets = {offset_of("g", "t", 0, 1)};
  ASSERT_TRUE(s->apply(w)->empty());
  EXPECT_EQ(load(*s, {0}).offsets.size(), 1u);

  auto db = sql::open_database(uri_);
  ASSERT_TRUE(db);
  auto c = (*db)->connect();
  ASSERT_TRUE(c);
  EXPECT_EQ(*sql::stored_schema_version(**c), sql::schema_version);
  auto r = (*c)->query("SELECT end_offset FROM streams WHERE stream_id = 5");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->rows.size(), 1u);
  EXPECT_EQ(r->rows[0].integer(0), 9);
}

INSTANTIATE_TEST_SUITE_P(Backends, GroupStore, ::testing::ValuesIn(testing::backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace silt::metadata
