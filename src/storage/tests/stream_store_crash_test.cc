// Kills a process appending to a stream store (with real syncs, uploads, compaction and
// deletions running) at random moments, dozens of times; after each kill, reopens the store
// and checks that every acknowledged append reads back at its offset, that offsets are dense
// and that every record is one the writer wrote for that offset.
#include <filesystem>
#include <map>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "protocol/record_batch.h"
#include "storage/stream_store.h"
#include "storage/wal/tests/test_util.h"

namespace silt::storage {
namespace {

namespace fs = std::filesystem;

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
    stream_store_options o;
    o.wal.path = (dir / "wal").string();
    o.wal.capacity = 2 << 20;
    o.catalog_path = (dir / "catalog.db").string();
    o.background = false;
    auto objects = open_object_store("file://" + (dir / "objects").string());
    ASSERT_TRUE(objects);
    auto store = stream_store::open(o, **objects);
    ASSERT_TRUE(store) << "round " << round << ": " << store.error();
    for (const auto& [s, end] : acked_end) {
      const auto offsets = (*store)->offsets(s);
      ASSERT_GE(offsets.end_offset, end) << "round " << round << " stream " << s;
      // Read everything back: each record's value names its stream and offset.
      int64_t offset = 0;
      while (offset < offsets.end_offset) {
        auto r = (*store)->read(s, offset, 64 << 10);
        ASSERT_TRUE(r) << "round " << round << " stream " << s << " offset " << offset << ": "
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
    (*store)->close();
  }
  EXPECT_GT(total_acks, 100u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace silt::storage
