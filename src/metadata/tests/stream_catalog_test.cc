#include "metadata/stream_catalog.h"

#include <atomic>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

#include "metadata/sql.h"
#include "metadata/testing/test_database.h"

namespace silt::metadata {
namespace {

base::stream_id sid(uint64_t v) {
  return base::stream_id(v);
}

base::node_id node(int32_t v) {
  return base::node_id(v);
}

base::leader_epoch epoch(int32_t v) {
  return base::leader_epoch(v);
}

base::offset off(int64_t v) {
  return base::offset(v);
}

// Every test runs against SQLite and PostgreSQL.
class StreamCatalog : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("silt-catalog-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    uri_ = testing::fresh_uri(GetParam(), dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<stream_catalog> memory_catalog() {
    auto c = stream_catalog::open(uri_);
    EXPECT_TRUE(c.has_value()) << c.error();
    return std::move(*c);
  }

  std::filesystem::path dir_;
  std::string uri_;
};

object_record object(stream_catalog& c, object_kind kind = object_kind::stream_set) {
  object_record o;
  o.object_id = *c.next_object_id();
  o.key = "objects/" + std::to_string(o.object_id);
  o.size = 100;
  o.kind = kind;
  return o;
}

TEST_P(StreamCatalog, CommitsRangesThatContinueTheirStreams) {
  auto c = memory_catalog();
  auto o1 = object(*c);
  ASSERT_TRUE(
      c->commit_object(o1, {{sid(1), off(0), off(10), 5, 50}, {sid(2), off(0), off(3), 5, 20}}));
  auto o2 = object(*c);
  ASSERT_TRUE(c->commit_object(o2, {{sid(1), off(10), off(25), 7, 60}}));
  EXPECT_EQ(c->stream(sid(1))->value().end_offset, off(25));
  EXPECT_EQ(c->stream(sid(2))->value().end_offset, off(3));
  auto found = c->find(sid(1), off(12));
  ASSERT_TRUE(found);
  ASSERT_EQ(found->size(), 1u);
  EXPECT_EQ((*found)[0].key, o2.key);
  EXPECT_EQ((*found)[0].range.start_offset, off(10));
  EXPECT_EQ(c->find(sid(1), off(0))->size(), 2u);
  EXPECT_TRUE(c->find(sid(1), off(25))->empty());
}

TEST_P(StreamCatalog, RangeNotStartingAtTheStreamEndIsRejectedWhole) {
  auto c = memory_catalog();
  ASSERT_TRUE(c->commit_object(object(*c), {{sid(1), off(0), off(10), 0, 1}}));
  auto bad = object(*c);
  // Stream 2 is fine but stream 1 leaves a gap: nothing of the object may be committed.
  auto r =
      c->commit_object(bad, {{sid(2), off(0), off(5), 0, 1}, {sid(1), off(11), off(20), 0, 1}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), catalog_error::discontinuous);
  EXPECT_FALSE(c->stream(sid(2))->has_value());
  EXPECT_EQ(c->stream(sid(1))->value().end_offset, off(10));
  // An overlap is refused too, and so is a first range above 0.
  EXPECT_FALSE(c->commit_object(object(*c), {{sid(1), off(5), off(15), 0, 1}}));
  EXPECT_FALSE(c->commit_object(object(*c), {{sid(3), off(7), off(9), 0, 1}}));
}

TEST_P(StreamCatalog, CompactionReplacesExactlyTheRangesItCovers) {
  auto c = memory_catalog();
  auto a = object(*c);
  auto b = object(*c);
  ASSERT_TRUE(
      c->commit_object(a, {{sid(1), off(0), off(10), 0, 10}, {sid(2), off(0), off(4), 0, 4}}));
  ASSERT_TRUE(
      c->commit_object(b, {{sid(1), off(10), off(20), 0, 10}, {sid(2), off(4), off(8), 0, 4}}));
  auto merged = object(*c, object_kind::stream);
  // Covering only part of what the replaced objects hold for stream 1 is refused.
  EXPECT_FALSE(c->replace(merged, {{sid(1), off(0), off(15), 0, 15}},
                          {{sid(1), off(0), off(10)}, {sid(1), off(10), off(20)}}));
  // Ranges that do not exist (any more) are refused too.
  EXPECT_FALSE(c->replace(merged, {{sid(1), off(0), off(20), 0, 20}},
                          {{sid(1), off(0), off(12)}, {sid(1), off(12), off(20)}}));
  ASSERT_TRUE(c->replace(merged, {{sid(1), off(0), off(20), 0, 20}},
                         {{sid(1), off(0), off(10)}, {sid(1), off(10), off(20)}}));
  auto r1 = c->ranges(sid(1));
  ASSERT_EQ(r1->size(), 1u);
  EXPECT_EQ((*r1)[0].key, merged.key);
  // Stream 2 still reads from the old objects, which therefore are not deletable.
  EXPECT_EQ(c->ranges(sid(2))->size(), 2u);
  EXPECT_TRUE(c->deletable(INT64_MAX)->empty());
  auto merged2 = object(*c, object_kind::stream);
  ASSERT_TRUE(c->replace(merged2, {{sid(2), off(0), off(8), 0, 8}},
                         {{sid(2), off(0), off(4)}, {sid(2), off(4), off(8)}}));
  auto gone = c->deletable(INT64_MAX);
  ASSERT_EQ(gone->size(), 2u);
  ASSERT_TRUE(c->forget(a.object_id));
  ASSERT_TRUE(c->forget(b.object_id));
  EXPECT_EQ(c->forget(a.object_id).error(), catalog_error::unknown_object);
  EXPECT_EQ(c->objects(object_kind::stream)->size(), 2u);
}

TEST_P(StreamCatalog, TrimDropsWholeRangesAndFreesEmptyObjects) {
  auto c = memory_catalog();
  auto a = object(*c);
  auto b = object(*c);
  ASSERT_TRUE(c->commit_object(a, {{sid(1), off(0), off(10), 0, 10}}));
  ASSERT_TRUE(c->commit_object(b, {{sid(1), off(10), off(20), 0, 10}}));
  ASSERT_TRUE(c->trim(sid(1), off(15)));  // inside b: b stays, a goes
  EXPECT_EQ(c->stream(sid(1))->value().start_offset, off(15));
  EXPECT_EQ(c->ranges(sid(1))->size(), 1u);
  auto gone = c->deletable(INT64_MAX);
  ASSERT_EQ(gone->size(), 1u);
  EXPECT_EQ((*gone)[0].object_id, a.object_id);
  ASSERT_TRUE(c->trim(sid(1), off(5)));  // never backwards
  EXPECT_EQ(c->stream(sid(1))->value().start_offset, off(15));
}

TEST_P(StreamCatalog, KnowsTheKeysOfItsObjectsUntilTheyAreForgotten) {
  auto c = memory_catalog();
  EXPECT_EQ(*c->last_object_id(), 0u);
  auto o1 = object(*c);
  auto o2 = object(*c);
  auto uncommitted = object(*c);
  EXPECT_EQ(*c->last_object_id(), uncommitted.object_id);
  ASSERT_TRUE(c->commit_object(o1, {{sid(1), off(0), off(10), 5, 50}}));
  ASSERT_TRUE(c->commit_object(o2, {{sid(1), off(10), off(20), 5, 50}}));
  EXPECT_EQ(*c->object_keys(), (std::vector<std::string>{o1.key, o2.key}));
  // Marked for deletion: still known until forgotten.
  ASSERT_TRUE(c->trim(sid(1), off(10)));
  EXPECT_EQ(*c->object_keys(), (std::vector<std::string>{o1.key, o2.key}));
  ASSERT_TRUE(c->forget(o1.object_id));
  EXPECT_EQ(*c->object_keys(), std::vector<std::string>{o2.key});
  EXPECT_EQ(*c->last_object_id(), uncommitted.object_id);
}

TEST_P(StreamCatalog, SurvivesReopening) {
  {
    auto c = memory_catalog();
    object_record o{*c->next_object_id(), "k", 1, object_kind::stream_set, 0};
    ASSERT_TRUE(c->commit_object(o, {{sid(9), off(0), off(42), 0, 1}}));
  }
  auto c = memory_catalog();
  EXPECT_EQ(c->stream(sid(9))->value().end_offset, off(42));
  EXPECT_EQ(*c->next_object_id(), 2u);
}

// Two brokers on one database: the one that took a stream last owns it. The other's commit,
// trim and producer-state write are refused in their transaction, and nothing of the new
// owner's is lost.
// Taking many streams at once (as a broker does at start) goes in chunks of several streams
// per statement: every stream gets its epoch, in the order asked, and its epoch history.
TEST_P(StreamCatalog, TakesManyStreamsInOneCallAcrossChunks) {
  auto c = memory_catalog();
  constexpr uint64_t n = 600;  // 256 + 256 + 64 + 16 + 8 per statement
  std::vector<stream_take> takes;
  for (uint64_t i = 0; i < n; ++i) takes.push_back({sid(1000 + i), off(static_cast<int64_t>(i))});
  takes.push_back({sid(1000), off(99)});  // listed twice: taken once
  auto first = c->take(node(1), takes);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->size(), n + 1);
  for (const auto e : *first) EXPECT_EQ(e, epoch(0));
  const uint64_t before = sql::committed_transactions();
  for (auto& t : takes) t.start_offset += 1000;
  auto second = c->take(node(2), takes);
  ASSERT_TRUE(second);
  EXPECT_EQ(sql::committed_transactions() - before, 1u);
  for (const auto e : *second) EXPECT_EQ(e, epoch(1));
  for (uint64_t i = 0; i < n; i += 97) {
    auto st = c->stream(sid(1000 + i));
    ASSERT_TRUE(st && *st);
    EXPECT_EQ((*st)->owner, node(2));
    EXPECT_EQ((*st)->epoch, epoch(1));
    auto epochs = c->epochs(sid(1000 + i));
    ASSERT_TRUE(epochs);
    ASSERT_EQ(epochs->size(), 2u);
    EXPECT_EQ((*epochs)[0].start_offset, off(static_cast<int64_t>(i)));
    EXPECT_EQ((*epochs)[1].start_offset, off(static_cast<int64_t>(i) + 1000));
  }
}

// An object with a range of each of many streams is committed in chunks of several ranges per
// statement; one bad range in a late chunk still refuses the whole object.
TEST_P(StreamCatalog, CommitsManyStreamsRangesAndRefusesTheWholeObjectForOneBadRange) {
  auto c = memory_catalog();
  constexpr uint64_t n = 300;  // 128 + 128 + 32 + 8 + 4 per statement
  std::vector<stream_take> takes;
  for (uint64_t i = 0; i < n; ++i) takes.push_back({sid(1 + i), off(0)});
  ASSERT_TRUE(c->take(node(1), takes));
  auto ranges_at = [&](int64_t from, int64_t to) {
    std::vector<stream_range> out;
    for (uint64_t i = 0; i < n; ++i)
      out.push_back({sid(1 + i), off(from), off(to), 5, 10, node(1), epoch(0)});
    return out;
  };
  ASSERT_TRUE(c->commit_object(object(*c), ranges_at(0, 10)));
  for (uint64_t i = 0; i < n; i += 37)
    EXPECT_EQ(c->stream(sid(1 + i))->value().end_offset, off(10));
  auto gap = ranges_at(10, 20);
  gap[290].start_offset = off(11);
  EXPECT_EQ(c->commit_object(object(*c), gap).error(), catalog_error::discontinuous);
  auto stale = ranges_at(10, 20);
  stale[299].epoch = epoch(1);
  EXPECT_EQ(c->commit_object(object(*c), stale).error(), catalog_error::fenced);
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(c->stream(sid(1 + i))->value().end_offset, off(10)) << "stream " << 1 + i;
    ASSERT_EQ(c->ranges(sid(1 + i))->size(), 1u);
  }
  ASSERT_TRUE(c->commit_object(object(*c), ranges_at(10, 20)));
  EXPECT_EQ(c->stream(sid(n))->value().end_offset, off(20));
  EXPECT_EQ(c->find(sid(n), off(15))->size(), 1u);
}

TEST_P(StreamCatalog, AStaleOwnerIsFencedAndTheNewOwnersDataStays) {
  auto a = memory_catalog();
  auto b = memory_catalog();
  auto taken = a->take(node(1), {{sid(7), off(0)}, {sid(8), off(0)}});
  ASSERT_TRUE(taken);
  EXPECT_EQ(*taken, (std::vector<base::leader_epoch>{epoch(0), epoch(0)}));
  auto oa = object(*a);
  ASSERT_TRUE(a->commit_object(oa, {{sid(7), off(0), off(10), 5, 50, node(1), epoch(0)},
                                    {sid(8), off(0), off(4), 5, 20, node(1), epoch(0)}}));
  ASSERT_TRUE(a->put_producer_state(sid(7), node(1), epoch(0), {1, 2, 3}));

  // Node 2 takes stream 7 at the committed end: epoch 1.
  taken = b->take(node(2), {{sid(7), off(10)}});
  ASSERT_TRUE(taken);
  EXPECT_EQ(*taken, std::vector<base::leader_epoch>{epoch(1)});
  auto ob = object(*b);
  ASSERT_TRUE(b->commit_object(ob, {{sid(7), off(10), off(30), 5, 80, node(2), epoch(1)}}));

  // Node 1 still thinks it owns stream 7: its object (with a range of stream 8 it does own)
  // is refused whole.
  auto stale = object(*a);
  auto r = a->commit_object(stale, {{sid(8), off(4), off(6), 5, 10, node(1), epoch(0)},
                                    {sid(7), off(10), off(12), 5, 10, node(1), epoch(0)}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), catalog_error::fenced);
  EXPECT_EQ(a->stream(sid(8))->value().end_offset, off(4));
  EXPECT_EQ(a->trim(sid(7), off(5), node(1), epoch(0)).error(), catalog_error::fenced);
  EXPECT_EQ(a->put_producer_state(sid(7), node(1), epoch(0), {9}).error(), catalog_error::fenced);
  // An owner at a newer epoch than the stream's is fenced too (it never took it).
  EXPECT_EQ(a->trim(sid(7), off(5), node(2), epoch(2)).error(), catalog_error::fenced);

  // The new owner's data and state are intact; its own writes go on.
  auto st = b->stream(sid(7));
  ASSERT_TRUE(st && *st);
  EXPECT_EQ((*st)->owner, node(2));
  EXPECT_EQ((*st)->epoch, epoch(1));
  EXPECT_EQ((*st)->start_offset, off(0));
  EXPECT_EQ((*st)->end_offset, off(30));
  auto ranges = b->ranges(sid(7));
  ASSERT_TRUE(ranges);
  ASSERT_EQ(ranges->size(), 2u);
  EXPECT_EQ((*ranges)[1].key, ob.key);
  EXPECT_EQ(*b->producer_state(sid(7)), (std::vector<uint8_t>{1, 2, 3}));
  ASSERT_TRUE(b->put_producer_state(sid(7), node(2), epoch(1), {4}));
  ASSERT_TRUE(b->trim(sid(7), off(10), node(2), epoch(1)));
  EXPECT_EQ(b->stream(sid(7))->value().start_offset, off(10));
  // Stream 8 is still node 1's.
  ASSERT_TRUE(a->commit_object(object(*a), {{sid(8), off(4), off(6), 5, 10, node(1), epoch(0)}}));

  // Each epoch and where it began.
  auto epochs = b->epochs(sid(7));
  ASSERT_TRUE(epochs);
  ASSERT_EQ(epochs->size(), 2u);
  EXPECT_EQ((*epochs)[0].epoch, epoch(0));
  EXPECT_EQ((*epochs)[0].start_offset, off(0));
  EXPECT_EQ((*epochs)[1].epoch, epoch(1));
  EXPECT_EQ((*epochs)[1].start_offset, off(10));
}

// A stream nobody took (owner -1, epoch 0) takes commits that say so, and no others.
TEST_P(StreamCatalog, AStreamNeverTakenIsOwnedByNobody) {
  auto c = memory_catalog();
  EXPECT_EQ(
      c->commit_object(object(*c), {{sid(3), off(0), off(5), 0, 1, node(1), epoch(0)}}).error(),
      catalog_error::fenced);
  ASSERT_TRUE(c->commit_object(object(*c), {{sid(3), off(0), off(5), 0, 1}}));
  auto taken = c->take(node(4), {{sid(3), off(5)}});
  ASSERT_TRUE(taken);
  EXPECT_EQ(*taken, std::vector<base::leader_epoch>{epoch(1)});
  EXPECT_EQ(c->commit_object(object(*c), {{sid(3), off(5), off(6), 0, 1}}).error(),
            catalog_error::fenced);
  ASSERT_TRUE(c->commit_object(object(*c), {{sid(3), off(5), off(6), 0, 1, node(4), epoch(1)}}));
}

// Catalogs of many writers at once on one database: every stream ends exactly where its
// owner's commits put it (transactions do not lose or interleave updates).
TEST_P(StreamCatalog, ConcurrentWritersKeepEveryStreamContinuous) {
  constexpr int writers = 4;
  constexpr int commits = 40;
  std::vector<std::unique_ptr<stream_catalog>> cs;
  for (int w = 0; w < writers; ++w) {
    cs.push_back(memory_catalog());
    ASSERT_TRUE(cs.back()->take(node(w), {{sid(100 + static_cast<uint64_t>(w)), off(0)}}));
  }
  std::vector<std::thread> threads;
  threads.reserve(writers);
  std::atomic<int> failures{0};
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      auto& c = *cs[static_cast<size_t>(w)];
      for (int i = 0; i < commits; ++i) {
        object_record o{*c.next_object_id(), "", 1, object_kind::stream_set, 0};
        o.key = "objects/" + std::to_string(o.object_id);
        const stream_range r{sid(100 + static_cast<uint64_t>(w)),
                             off(i * 10),
                             off(i * 10 + 10),
                             0,
                             1,
                             node(w),
                             epoch(0)};
        if (!c.commit_object(o, {r})) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (int w = 0; w < writers; ++w) {
    EXPECT_EQ(cs[0]->stream(sid(100 + static_cast<uint64_t>(w)))->value().end_offset,
              off(commits * 10));
    EXPECT_EQ(cs[0]->ranges(sid(100 + static_cast<uint64_t>(w)))->size(),
              static_cast<size_t>(commits));
  }
}

// A database written by the first releases (no schema version) is migrated in place.
TEST_P(StreamCatalog, AnUnversionedSchemaIsMigrated) {
  auto db = sql::open_database(uri_);
  ASSERT_TRUE(db) << db.error();
  auto conn = (*db)->connect();
  ASSERT_TRUE(conn);
  auto& c = **conn;
  // Back to what the first releases wrote: version 1's tables without the version table.
  for (const char* q :
       {"DROP TABLE schema_version", "DROP TABLE stream_epochs", "DROP TABLE producer_states",
        "ALTER TABLE streams DROP COLUMN owner", "ALTER TABLE streams DROP COLUMN epoch",
        "DROP TABLE coordinator_shards", "DROP TABLE group_offsets", "DROP TABLE consumer_groups",
        "DROP TABLE brokers", "DELETE FROM registry_counters WHERE name = 'broker_epoch'",
        "DROP INDEX streams_by_owner_version", "ALTER TABLE streams DROP COLUMN target",
        "ALTER TABLE streams DROP COLUMN owner_version", "DROP TABLE controller",
        "DROP TABLE wal_takeovers", "ALTER TABLE streams DROP COLUMN taken_from",
        "DROP TABLE scram_credentials", "DROP TABLE acls", "DROP TABLE client_quotas"}) {
    ASSERT_TRUE(c.script(q)) << q;
  }
  ASSERT_TRUE(c.query("INSERT INTO streams(stream_id, start_offset, end_offset) VALUES(5, 0, 9)"));
  const std::vector<uint8_t> state{7, 7};
  ASSERT_TRUE(c.query("INSERT INTO registry_blobs(key, value) VALUES('producers/5', ?)",
                      sql::bytes_view{state}));
  conn->reset();
  db->reset();

  auto migrated = memory_catalog();
  auto st = migrated->stream(sid(5));
  ASSERT_TRUE(st && *st);
  EXPECT_EQ((*st)->end_offset, off(9));
  EXPECT_EQ((*st)->owner, node(-1));
  EXPECT_EQ(*migrated->producer_state(sid(5)), state);
  auto again = sql::open_database(uri_);
  ASSERT_TRUE(again);
  auto c2 = (*again)->connect();
  ASSERT_TRUE(c2);
  EXPECT_EQ(*sql::stored_schema_version(**c2), sql::schema_version);
}

// Each committed transaction counts once: a transaction, or a write statement on its own; a
// refused commit (rolled back) does not.
TEST_P(StreamCatalog, CountsCommittedTransactions) {
  auto c = memory_catalog();
  const uint64_t before = sql::committed_transactions();
  auto o = object(*c);  // the id counter's UPDATE, on its own
  ASSERT_TRUE(c->commit_object(o, {{sid(1), off(0), off(10), 0, 1}}));
  EXPECT_EQ(sql::committed_transactions() - before, 2u);
  EXPECT_FALSE(c->commit_object(object(*c), {{sid(1), off(11), off(20), 0, 1}}));
  EXPECT_EQ(sql::committed_transactions() - before, 3u);  // the second id only
  ASSERT_TRUE(c->find(sid(1), off(0)));                   // a read
  EXPECT_EQ(sql::committed_transactions() - before, 3u);
}

// A database written by a newer broker is refused, not half understood.
TEST_P(StreamCatalog, ANewerSchemaIsRefused) {
  {
    auto db = sql::open_database(uri_);
    ASSERT_TRUE(db);
    auto c = (*db)->connect();
    ASSERT_TRUE(c);
    ASSERT_TRUE((*c)->query("UPDATE schema_version SET version = ?", sql::schema_version + 1));
  }
  auto db = sql::open_database(uri_);
  ASSERT_FALSE(db);
  EXPECT_NE(db.error().find("newer than this broker"), std::string::npos) << db.error();
}

INSTANTIATE_TEST_SUITE_P(Backends, StreamCatalog, ::testing::ValuesIn(testing::backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace silt::metadata
