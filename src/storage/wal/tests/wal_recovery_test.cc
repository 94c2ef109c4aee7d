// Recovery: corrupt, torn and stale bytes in the ring and in the header slots. Each test
// writes a WAL, damages the closed file the way a crash or a bad disk would, and reopens it.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "storage/wal/tests/test_util.h"
#include "storage/wal/wal.h"
#include "storage/wal/wal_format.h"

namespace silt::storage::wal {
namespace {

using testing::append_and_wait;
using testing::file_offset;
using testing::flip_byte;
using testing::off;
using testing::open_wal;
using testing::payload_for;
using testing::read_bytes;
using testing::test_dir;
using testing::write_bytes;

constexpr uint64_t capacity = 1u << 20;

wal_options recovery_options(const std::string& path) {
  wal_options o;
  o.path = path;
  o.capacity = capacity;
  o.iodepth = 4;
  return o;
}

struct written {
  wal_position position;
  wal_position end;
};

// Appends `n` records of stream 9, one write each; returns where each record lies.
std::vector<written> write_records(const wal_options& options, int n, size_t size = 1500) {
  std::vector<written> out;
  auto o = open_wal(options);
  EXPECT_TRUE(o.log);
  if (!o.log) return out;
  for (int i = 0; i < n; ++i) {
    auto end = append_and_wait(**o.log, 9, i, payload_for(9, i, size));
    EXPECT_TRUE(end);
    out.push_back({*end - format::frame_header_size - size, *end});
  }
  (*o.log)->close();
  return out;
}

void expect_offsets(const std::vector<testing::replayed>& records, int64_t first, int64_t count,
                    size_t size = 1500) {
  ASSERT_EQ(records.size(), static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    EXPECT_EQ(records[i].offset, off(first + i));
    EXPECT_EQ(records[i].payload, payload_for(9, first + i, size));
  }
}

TEST(WalRecovery, BadCrcInTheMiddleStopsReplayThere) {
  test_dir dir;
  const auto options = recovery_options(dir.path("wal"));
  const auto recs = write_records(options, 10);
  flip_byte(options.path, file_offset(recs[5].position + 700, capacity));  // in the payload
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  expect_offsets(o.records, 0, 5);
  EXPECT_EQ((*o.log)->durable_end(), recs[5].position);
}

TEST(WalRecovery, BadFrameHeaderStopsReplayThere) {
  test_dir dir;
  const auto options = recovery_options(dir.path("wal"));
  const auto recs = write_records(options, 10);
  // The length field: a frame that claims most of the ring must not be read as one.
  write_bytes(options.path, file_offset(recs[3].position + 4, capacity), {0x00, 0x0f, 0xff, 0x00});
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  expect_offsets(o.records, 0, 3);
}

TEST(WalRecovery, TruncatedTailIsCutAtLastGoodRecord) {
  test_dir dir;
  const auto options = recovery_options(dir.path("wal"));
  // A record of several blocks whose last blocks never reached the disk: zeros there.
  auto recs = write_records(options, 4);
  {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    auto end = append_and_wait(**o.log, 9, 4, payload_for(9, 4, 20000));
    ASSERT_TRUE(end);
    recs.push_back({*end - 20040, *end});
  }
  const wal_position torn_from = format::align_up(recs[4].position + 8000);
  write_bytes(options.path, file_offset(torn_from, capacity),
              std::vector<uint8_t>(format::align_up(recs[4].end) - torn_from, 0));
  for (int reopen = 0; reopen < 2; ++reopen) {  // and the cut is stable
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    expect_offsets(o.records, 0, 4);
    EXPECT_EQ((*o.log)->durable_end(), recs[4].position);
  }
}

TEST(WalRecovery, AppendsAfterACutContinueRightAfterTheLastGoodRecord) {
  test_dir dir;
  const auto options = recovery_options(dir.path("wal"));
  const auto recs = write_records(options, 3, 1000);
  // The padding frame after the second record never landed: replay ends mid-block.
  flip_byte(options.path, file_offset(recs[1].end + 10, capacity));
  const wal_position cut = recs[1].end;
  ASSERT_NE(cut % format::block_size, 0u);
  {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    expect_offsets(o.records, 0, 2, 1000);
    EXPECT_EQ((*o.log)->durable_end(), cut);
    // The first write rewrites the block holding the cut, so the new record follows the
    // last good one with no gap.
    auto end = append_and_wait(**o.log, 9, 2, payload_for(9, 2, 1000));
    ASSERT_TRUE(end);
    EXPECT_EQ(*end, cut + 1040);
    ASSERT_TRUE(append_and_wait(**o.log, 9, 3, payload_for(9, 3, 1000)));
  }
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  expect_offsets(o.records, 0, 4, 1000);
  EXPECT_EQ(o.records[2].position, cut);
}

TEST(WalRecovery, FirstRecordAfterAMidBlockCutMayExceedMaxWriteBytes) {
  test_dir dir;
  auto options = recovery_options(dir.path("wal"));
  const auto recs = write_records(options, 2, 1000);
  flip_byte(options.path, file_offset(recs[1].end + 10, capacity));  // padding lost
  options.max_write_bytes = 8192;
  {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    ASSERT_EQ((*o.log)->durable_end(), recs[1].end);
    // Larger than a write: it goes out alone, with the rewritten block in front of it.
    auto end = append_and_wait(**o.log, 9, 2, payload_for(9, 2, 20000));
    ASSERT_TRUE(end);
    EXPECT_EQ(*end, recs[1].end + 20040);
  }
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  ASSERT_EQ(o.records.size(), 3u);
  EXPECT_EQ(o.records[2].position, recs[1].end);
  EXPECT_EQ(o.records[2].payload, payload_for(9, 2, 20000));
}

TEST(WalRecovery, RecordsCutByAnEarlierRecoveryAreNotResurrected) {
  test_dir dir;
  const auto options = recovery_options(dir.path("wal"));
  // One block per record, so a record written later at records[3]'s place ends exactly where
  // records[4] begins: only the epoch tells records[4..9] apart from live records.
  const auto recs = write_records(options, 10);
  flip_byte(options.path, file_offset(recs[3].position + 100, capacity));
  {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    expect_offsets(o.records, 0, 3);
    auto end = append_and_wait(**o.log, 9, 3, payload_for(9, 3, 1500));
    ASSERT_TRUE(end);
    ASSERT_EQ(format::padded_end(*end), recs[4].position);
  }
  for (int reopen = 0; reopen < 2; ++reopen) {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    expect_offsets(o.records, 0, 4);
  }
}

// Both slots, decoded.
std::vector<tl::expected<format::header_slot, format::slot_state>> read_slots(
    const std::string& path) {
  const auto bytes = read_bytes(path, 0, format::header_bytes);
  std::vector<tl::expected<format::header_slot, format::slot_state>> slots;
  slots.reserve(2);
  for (int i = 0; i < 2; ++i) {
    slots.push_back(format::decode_header_slot(
        std::span<const uint8_t>(bytes).subspan(i * format::block_size, format::block_size)));
  }
  return slots;
}

TEST(WalRecovery, TornHeaderSlotFallsBackToTheOtherSlot) {
  test_dir dir;
  const auto options = recovery_options(dir.path("wal"));
  std::vector<wal_position> ends;
  {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    wal& w = **o.log;
    for (int i = 0; i < 10; ++i) ends.push_back(*append_and_wait(w, 9, i, payload_for(9, i, 1500)));
    // Two trims, each persisted before the next, so they land in different slots.
    for (int k : {3, 6}) {
      w.trim(ends[k]);
      for (int spin = 0; spin < 10000 && w.trim_point() != ends[k]; ++spin) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      ASSERT_EQ(w.trim_point(), ends[k]);
    }
  }
  auto slots = read_slots(options.path);
  ASSERT_TRUE(slots[0] && slots[1]);
  const int newer = slots[0]->sequence > slots[1]->sequence ? 0 : 1;
  EXPECT_EQ(slots[newer]->trim_point, ends[6]);
  EXPECT_EQ(slots[newer ^ 1]->trim_point, ends[3]);
  // A write of the newer slot that tore: its checksum fails.
  flip_byte(options.path, newer * format::block_size + 35);
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  EXPECT_EQ((*o.log)->trim_point(), ends[3]);
  expect_offsets(o.records, 4, 6);
  (*o.log)->close();
  // open() rewrote both slots with the new epoch.
  slots = read_slots(options.path);
  EXPECT_TRUE(slots[0] && slots[1]);
}

TEST(WalRecovery, BothHeaderSlotsCorruptIsBadFormat) {
  test_dir dir;
  const auto options = recovery_options(dir.path("wal"));
  write_records(options, 3);
  flip_byte(options.path, 20);
  flip_byte(options.path, format::block_size + 20);
  auto o = open_wal(options);
  ASSERT_FALSE(o.log);
  EXPECT_EQ(o.log.error(), wal_error::bad_format);
  EXPECT_TRUE(o.records.empty());
}

TEST(WalRecovery, FileThatIsNotAWalIsBadFormatAndLeftAlone) {
  test_dir dir;
  const auto options = recovery_options(dir.path("wal"));
  write_bytes(options.path, 0, std::vector<uint8_t>(1u << 20, 0));  // e.g. a zeroed file
  auto o = open_wal(options);
  ASSERT_FALSE(o.log);
  EXPECT_EQ(o.log.error(), wal_error::bad_format);
  const auto bytes = read_bytes(options.path, 0, format::header_bytes);
  EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0), static_cast<long>(bytes.size()));
}

TEST(WalRecovery, FileShorterThanItsCapacityIsBadFormat) {
  test_dir dir;
  const auto options = recovery_options(dir.path("wal"));
  write_records(options, 3);
  std::filesystem::resize_file(options.path, format::header_bytes + capacity / 2);
  auto o = open_wal(options);
  ASSERT_FALSE(o.log);
  EXPECT_EQ(o.log.error(), wal_error::bad_format);
}

TEST(WalRecovery, EmptyRingReplaysNothingAfterManyReopens) {
  test_dir dir;
  const auto options = recovery_options(dir.path("wal"));
  for (int i = 0; i < 5; ++i) {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    EXPECT_TRUE(o.records.empty());
    EXPECT_EQ((*o.log)->durable_end(), 0u);
  }
}

}  // namespace
}  // namespace silt::storage::wal
