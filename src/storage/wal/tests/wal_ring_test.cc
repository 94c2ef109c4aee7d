// The ring: wrapping over several laps, trims persisted and honoured, backpressure, and bytes
// of earlier laps never taken for records.
#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "storage/wal/tests/test_util.h"
#include "storage/wal/wal.h"
#include "storage/wal/wal_format.h"

namespace silt::storage::wal {
namespace {

using testing::append_and_wait;
using testing::off;
using testing::open_wal;
using testing::payload_for;
using testing::test_dir;

constexpr uint64_t ring_64k = 64u << 10;

// Each test runs with both I/O engines; the options below take the one under test.
io_engine engine_under_test = io_engine::threads;

class WalRing : public ::testing::TestWithParam<io_engine> {
 protected:
  void SetUp() override { engine_under_test = GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Engines, WalRing, ::testing::Values(io_engine::threads, io_engine::uring),
                         [](const auto& info) {
                           return info.param == io_engine::threads ? "threads" : "uring";
                         });

wal_options ring_options(const std::string& path, uint64_t capacity = ring_64k) {
  wal_options o;
  o.path = path;
  o.engine = engine_under_test;
  o.capacity = capacity;
  o.iodepth = 4;
  o.max_write_bytes = 16u << 10;
  return o;
}

struct appended {
  uint64_t stream;
  int64_t offset;
  size_t size;
  wal_position end;
};

TEST_P(WalRing, WrapsAroundSeveralLapsWithTrimsAndReplaysWhatIsLeft) {
  test_dir dir;
  const auto options = ring_options(dir.path("wal"));
  std::mt19937 rng(42);
  std::vector<appended> log;  // every record ever acknowledged
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  for (int round = 0; round < 8; ++round) {
    wal& w = **o.log;
    for (int i = 0; i < 150; ++i) {
      const uint64_t stream = rng() % 4;
      const auto offset = static_cast<int64_t>(log.size());
      const size_t size = rng() % 3000;
      auto end = append_and_wait(w, stream, offset, payload_for(stream, offset, size));
      ASSERT_TRUE(end) << wal_error_name(end.error());
      log.push_back({stream, offset, size, *end});
      // Keep about a third of the ring in use: trim to a record ~20 KiB back.
      for (auto it = log.rbegin(); it != log.rend(); ++it) {
        if (*end - it->end >= 20000) {
          w.trim(it->end);
          break;
        }
      }
    }
    w.close();
    const wal_position durable = w.durable_end();
    o = open_wal(options);
    ASSERT_TRUE(o.log);
    // Exactly the records after the persisted trim point come back, in order.
    const wal_position trim = (*o.log)->trim_point();
    std::vector<appended> expected;
    for (const auto& a : log) {
      if (a.end > trim) expected.push_back(a);
    }
    ASSERT_EQ(o.records.size(), expected.size()) << "round " << round;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(o.records[i].offset, off(expected[i].offset));
      EXPECT_EQ(o.records[i].end, expected[i].end);
      EXPECT_EQ(o.records[i].payload,
                payload_for(expected[i].stream, expected[i].offset, expected[i].size));
    }
    // Resumes after the last record (and the padding of its write, if any).
    EXPECT_GE((*o.log)->durable_end(), durable);
    EXPECT_EQ((*o.log)->durable_end(), format::padded_end(durable));
  }
  EXPECT_GT(log.back().end, 5 * ring_64k);  // several laps
}

TEST_P(WalRing, AppendBlocksUntilTrimFreesSpace) {
  test_dir dir;
  const auto options = ring_options(dir.path("wal"));
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  const auto payload = payload_for(1, 0, 1000);
  const uint64_t frame = format::frame_header_size + payload.size();
  // Each record is its own write here, so each takes one block; fill until the next would not
  // fit before the trim point (0).
  int64_t offset = 0;
  wal_position end = 0;
  while (format::padded_end(format::padded_end(end) + frame) <= ring_64k) {
    auto r = append_and_wait(w, 1, offset++, payload);
    ASSERT_TRUE(r);
    end = *r;
  }
  auto blocked =
      std::async(std::launch::async, [&] { return append_and_wait(w, 1, offset, payload); });
  EXPECT_EQ(blocked.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  w.trim(end);
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto r = blocked.get();
  ASSERT_TRUE(r);
  EXPECT_GT(*r, ring_64k);  // written over the start of the ring
  EXPECT_EQ(w.trim_point(), end);
}

TEST_P(WalRing, TryAppendRefusesWhenFullAndTheRoomCallbackFollowsTheTrim) {
  test_dir dir;
  const auto options = ring_options(dir.path("wal"));
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  std::atomic<int> room_calls{0};
  w.set_room_callback([&] { room_calls.fetch_add(1); });
  const auto payload = payload_for(1, 0, 40000);  // two do not fit in 64 KiB
  auto first = append_and_wait(w, 1, 0, payload);
  ASSERT_TRUE(first);
  bool called = false;
  auto refused = w.try_append(base::stream_id(1), off(1), payload, [&](auto) { called = true; });
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), wal_error::full);
  EXPECT_EQ(room_calls.load(), 0);
  w.trim(*first);
  for (int i = 0; i < 1000 && room_calls.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(room_calls.load(), 1);
  std::promise<tl::expected<wal_position, wal_error>> written;
  ASSERT_TRUE(
      w.try_append(base::stream_id(1), off(1), payload, [&](auto r) { written.set_value(r); }));
  auto r = written.get_future().get();
  EXPECT_TRUE(r);
  EXPECT_FALSE(called);  // a refused append's callback never runs
  w.close();
}

TEST_P(WalRing, CloseReleasesAnAppendWaitingForRoom) {
  test_dir dir;
  const auto options = ring_options(dir.path("wal"));
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  const auto payload = payload_for(1, 0, 40000);  // two do not fit in 64 KiB
  ASSERT_TRUE(append_and_wait(w, 1, 0, payload));
  auto blocked = std::async(std::launch::async, [&] { return append_and_wait(w, 1, 1, payload); });
  EXPECT_EQ(blocked.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  w.close();
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto r = blocked.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), wal_error::closed);
}

TEST_P(WalRing, TrimPointIsPersistedAcrossReopen) {
  test_dir dir;
  const auto options = ring_options(dir.path("wal"));
  std::vector<wal_position> ends;
  {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    for (int i = 0; i < 10; ++i) {
      auto r = append_and_wait(**o.log, 5, i, payload_for(5, i, 300));
      ASSERT_TRUE(r);
      ends.push_back(*r);
    }
    (*o.log)->trim(ends[4]);
    (*o.log)->close();
    EXPECT_EQ((*o.log)->trim_point(), ends[4]);
    EXPECT_GE((*o.log)->stats().header_writes, 1u);
  }
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  EXPECT_EQ((*o.log)->trim_point(), ends[4]);
  ASSERT_EQ(o.records.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(o.records[i].offset, off(5 + i));
}

TEST_P(WalRing, StaleRecordsFromAPreviousLapAreNotReplayed) {
  test_dir dir;
  const auto options = ring_options(dir.path("wal"));
  {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    wal& w = **o.log;
    // Lap 1: stream 1 fills most of the ring, then everything is trimmed.
    wal_position end = 0;
    for (int i = 0; i < 12; ++i) {
      auto r = append_and_wait(w, 1, i, payload_for(1, i, 4000));
      ASSERT_TRUE(r);
      end = *r;
    }
    w.trim(end);
    // Lap 2 starts near the end of the ring and wraps; its records sit just before bytes of
    // lap 1 that look like records in every way but their position.
    for (int i = 0; i < 6; ++i) ASSERT_TRUE(append_and_wait(w, 2, i, payload_for(2, i, 4000)));
    w.close();
  }
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  ASSERT_EQ(o.records.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(o.records[i].stream_id.value(), 2u);
    EXPECT_EQ(o.records[i].offset, off(i));
  }
}

TEST_P(WalRing, RecordSpanningTheRingEndIsReplayed) {
  test_dir dir;
  const auto options = ring_options(dir.path("wal"));
  wal_position spanning = 0;
  {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    wal& w = **o.log;
    auto first = append_and_wait(w, 1, 0, payload_for(1, 0, 40000));
    ASSERT_TRUE(first);
    w.trim(*first);
    auto second = append_and_wait(w, 1, 1, payload_for(1, 1, 40000));
    ASSERT_TRUE(second);
    spanning = *second;
    w.close();
  }
  ASSERT_GT(spanning, ring_64k);
  ASSERT_LT(spanning - 40040, ring_64k);  // starts in lap 1, ends in lap 2
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  ASSERT_EQ(o.records.size(), 1u);
  EXPECT_EQ(o.records[0].end, spanning);
  EXPECT_EQ(o.records[0].payload, payload_for(1, 1, 40000));
}

}  // namespace
}  // namespace silt::storage::wal
