// Kills a process appending to a stream store (with real syncs, uploads, compaction and
// deletions running) at random moments, dozens of times; after each kill, reopens the store
// and checks that every acknowledged append reads back at its offset, that offsets are dense
// and that every record is one the writer wrote for that offset. Kills between an object's
// PUT and its commit leave the object behind: the sweep deletes it after the restart.
#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "metadata/stream_catalog.h"
#include "protocol/record_batch.h"
#include "storage/stream_store.h"
#include "storage/wal/tests/test_util.h"

namespace silt::storage {
namespace {

base::stream_id sid(uint64_t v) {
  return base::stream_id(v);
}

base::offset off(int64_t v) {
  return base::offset(v);
}

namespace fs = std::filesystem;

// Reads every stream of `acked_end` from 0 and checks that it reaches the acknowledged end
// with dense offsets, each record the one the writer wrote at its offset.
void check_streams(stream_store& store, const std::map<uint64_t, int64_t>& acked_end,
                   const std::string& where) {
  for (const auto& [s, end] : acked_end) {
    const auto offsets = store.offsets(sid(s));
    ASSERT_GE(offsets.end_offset, off(end)) << where << " stream " << s;
    // Read everything back: each record's value names its stream and offset.
    base::offset offset(0);
    while (offset < offsets.end_offset) {
      auto r = store.read(sid(s), offset, 64 << 10);
      ASSERT_TRUE(r) << where << " stream " << s << " offset " << offset << ": "
                     << stream_error_name(r.error());
      ASSERT_FALSE(r->chunks.empty());
      const auto bytes = r->concatenate();
      protocol::batch_reader batches(bytes);
      int64_t expected = -1;
      for (;;) {
        auto next = batches.next();
        ASSERT_TRUE(next) << protocol::batch_error_name(next.error());
        if (!next->has_value()) break;
        const auto& b = **next;
        if (expected >= 0) {
          ASSERT_EQ(b.header.base_offset, expected);
        }
        expected = b.header.last_offset() + 1;
        auto records = protocol::decode_records(b);
        ASSERT_TRUE(records);
        for (const auto& rec : records->records()) {
          const int64_t at = b.header.base_offset + rec.offset_delta;
          const std::string want = "s" + std::to_string(s) + "-" + std::to_string(at);
          ASSERT_EQ(std::string(rec.value->begin(), rec.value->end()), want);
        }
      }
      ASSERT_GT(r->next_offset, offset);
      offset = r->next_offset;
    }
  }
}

stream_store_options reopen_options(const fs::path& dir) {
  stream_store_options o;
  o.wal.path = (dir / "wal").string();
  o.wal.capacity = 2 << 20;
  o.metadata_uri = (dir / "catalog.db").string();
  o.background = false;
  return o;
}

TEST(StreamStoreCrash, AcknowledgedAppendsSurviveSigkillAtRandomMoments) {
  const fs::path dir = fs::path(SILT_TEST_SCRATCH) / ("crash-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::mt19937 rng(20261130);
  std::map<uint64_t, int64_t> acked_end;  // over all rounds
  size_t total_acks = 0;
  for (int round = 0; round < 24; ++round) {
    const auto lifetime = std::chrono::milliseconds(100 + rng() % 400);
    const auto run = wal::testing::run_and_kill(
        {SILT_STREAM_STORE_CRASH_WRITER, dir.string(), std::to_string(round)}, lifetime);
    ASSERT_TRUE(WIFSIGNALED(run.status)) << "the writer exited by itself: " << run.output;
    std::istringstream in(run.output.substr(0, run.output.rfind('\n') + 1));
    uint64_t stream;
    int64_t base;
    int count;
    while (in >> stream >> base >> count) {
      acked_end[stream] = std::max(acked_end[stream], base + count);
      ++total_acks;
    }
    const auto o = reopen_options(dir);
    auto objects = open_object_store("file://" + (dir / "objects").string());
    ASSERT_TRUE(objects);
    auto store = stream_store::open(o, **objects);
    ASSERT_TRUE(store) << "round " << round << ": " << store.error();
    check_streams(**store, acked_end, "round " + std::to_string(round));
    if (HasFatalFailure()) return;
    (*store)->close();
  }
  EXPECT_GT(total_acks, 100u);
  fs::remove_all(dir);
}

TEST(StreamStoreCrash, ObjectWrittenButNotCommittedBeforeAKillIsSweptAfterTheRestart) {
  const fs::path dir = fs::path(SILT_TEST_SCRATCH) / ("crash-put-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Killed right after its fourth object is written: three are committed (or compacted), the
  // fourth never will be.
  const auto run = wal::testing::run_and_kill(
      {SILT_STREAM_STORE_CRASH_WRITER, dir.string(), "1", "4"}, std::chrono::seconds(60));
  ASSERT_TRUE(WIFSIGNALED(run.status)) << "the writer exited by itself: " << run.output;
  std::map<uint64_t, int64_t> acked_end;
  std::string orphan;
  std::istringstream in(run.output);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("put ")) {
      orphan = line.substr(4);
      continue;
    }
    uint64_t stream;
    int64_t base;
    int count;
    if (std::istringstream(line) >> stream >> base >> count) {
      acked_end[stream] = std::max(acked_end[stream], base + count);
    }
  }
  ASSERT_FALSE(orphan.empty()) << "the writer was killed before its fourth PUT";
  ASSERT_FALSE(acked_end.empty());

  auto o = reopen_options(dir);
  o.sweep_grace = std::chrono::milliseconds(300);
  auto objects = open_object_store("file://" + (dir / "objects").string());
  ASSERT_TRUE(objects);
  auto keys = [&] {
    std::vector<std::string> out;
    auto listed = (*objects)->list("objects/");
    EXPECT_TRUE(listed);
    if (listed) {
      for (const auto& obj : *listed) out.push_back(obj.key);
    }
    return out;
  };
  auto has = [](const std::vector<std::string>& v, const std::string& k) {
    return std::find(v.begin(), v.end(), k) != v.end();
  };
  ASSERT_TRUE(has(keys(), orphan));
  {
    auto catalog = metadata::stream_catalog::open(o.metadata_uri);
    ASSERT_TRUE(catalog);
    const auto known = (*catalog)->object_keys();
    ASSERT_TRUE(known);
    ASSERT_FALSE(has(*known, orphan)) << orphan << " was committed";
  }
  auto store = stream_store::open(o, **objects);
  ASSERT_TRUE(store) << store.error();
  // The WAL still holds the orphan's data: it goes up again under a new key.
  ASSERT_TRUE((*store)->run_upload_once());
  ASSERT_TRUE((*store)->run_sweep_once());
  EXPECT_TRUE(has(keys(), orphan)) << "swept before the grace period passed";
  std::this_thread::sleep_for(o.sweep_grace + std::chrono::milliseconds(50));
  ASSERT_TRUE((*store)->run_sweep_once());
  EXPECT_FALSE(has(keys(), orphan));
  EXPECT_EQ((*store)->stats().swept_objects, 1u);
  check_streams(**store, acked_end, "after the sweep");
  // Every object left is one the catalog knows.
  {
    auto catalog = metadata::stream_catalog::open(o.metadata_uri);
    ASSERT_TRUE(catalog);
    const auto known = (*catalog)->object_keys();
    ASSERT_TRUE(known);
    for (const auto& key : keys()) EXPECT_TRUE(has(*known, key)) << key;
  }
  (*store)->close();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace silt::storage
