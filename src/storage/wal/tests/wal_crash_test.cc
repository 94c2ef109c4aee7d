// Kills a process that is appending with real syncs at random moments, dozens of times, and
// checks after each kill that the WAL gives back every acknowledged record, intact, and only
// records that were written, in per-stream order.
//
// SIGKILL ends the process, not the machine: writes already submitted still complete. Torn
// and lost writes are the business of the corruption tests (wal_recovery_test.cc).
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "storage/wal/tests/test_util.h"
#include "storage/wal/wal.h"

extern char** environ;

namespace silt::storage::wal {
namespace {

using testing::crash_record_size;
using testing::open_wal;
using testing::payload_for;
using testing::run_and_kill;
using testing::test_dir;

constexpr int rounds = 30;
constexpr int writer_threads = 3;
constexpr uint64_t crash_capacity = 2u << 20;

struct ack {
  uint64_t stream;
  int64_t offset;
  wal_position end;
};

std::vector<ack> parse_acks(const std::string& output) {
  std::vector<ack> acks;
  // A line cut by the kill has no newline and is dropped.
  const auto complete = output.substr(0, output.rfind('\n') + 1);
  std::istringstream in(complete);
  ack a{};
  while (in >> a.stream >> a.offset >> a.end) acks.push_back(a);
  return acks;
}

TEST(WalCrash, AcknowledgedRecordsSurviveSigkillAtRandomMoments) {
  test_dir dir;
  const std::string path = dir.path("wal");
  const auto seed =
      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<ack> acked;  // over all rounds
  uint64_t replayed_total = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const uint64_t first_stream = static_cast<uint64_t>(round) * 10 + 1;
    const std::vector<std::string> args = {SILT_WAL_CRASH_WRITER,
                                           path,
                                           round % 2 == 0 ? "dsync" : "fdatasync",
                                           round % 3 == 0 ? "1" : "32",
                                           std::to_string(writer_threads),
                                           std::to_string(first_stream),
                                           std::to_string(crash_capacity)};
    const auto lifetime = std::chrono::milliseconds(20 + rng() % 281);
    const auto run = run_and_kill(args, lifetime);
    ASSERT_TRUE(WIFSIGNALED(run.status) && WTERMSIG(run.status) == SIGKILL)
        << "the writer stopped by itself: status " << run.status;
    const auto acks = parse_acks(run.output);
    acked.insert(acked.end(), acks.begin(), acks.end());

    auto o = open_wal(wal_options{.path = path, .capacity = crash_capacity});
    ASSERT_TRUE(o.log) << wal_error_name(o.log.error());
    const wal_position trim = (*o.log)->trim_point();
    std::map<std::pair<uint64_t, int64_t>, wal_position> found;
    std::map<uint64_t, int64_t> next_offset;
    wal_position previous_end = trim;
    for (const auto& r : o.records) {
      ASSERT_GE(r.position, previous_end);
      previous_end = r.end;
      ASSERT_GE(r.stream_id.value(), 1u);
      ASSERT_LT(r.stream_id.value(), first_stream + writer_threads) << "a stream never written";
      // Keyed by plain numbers, as the writer's acknowledgements print them.
      const int64_t offset = r.offset.value();
      ASSERT_EQ(r.payload, payload_for(r.stream_id.value(), offset,
                                       crash_record_size(r.stream_id.value(), offset)))
          << "corrupt payload of stream " << r.stream_id.value() << " offset " << offset;
      // Per stream, what is replayed is a run of consecutive offsets: no gaps, no reordering.
      auto it = next_offset.find(r.stream_id.value());
      if (it != next_offset.end()) {
        ASSERT_EQ(offset, it->second) << "stream " << r.stream_id.value();
      }
      next_offset[r.stream_id.value()] = offset + 1;
      found[{r.stream_id.value(), offset}] = r.end;
    }
    for (const auto& a : acked) {
      if (a.end <= trim) continue;  // trimmed: committed elsewhere, as far as the WAL knows
      auto it = found.find({a.stream, a.offset});
      ASSERT_NE(it, found.end()) << "acknowledged record lost: stream " << a.stream << " offset "
                                 << a.offset << " end " << a.end << " (trim point " << trim << ")";
      ASSERT_EQ(it->second, a.end);
    }
    replayed_total += o.records.size();
  }
  // The test is only worth something if the writers got going.
  EXPECT_GT(acked.size(), 1000u);
  EXPECT_GT(replayed_total, 1000u);
}

}  // namespace
}  // namespace silt::storage::wal
