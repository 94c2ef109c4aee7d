// The WAL's append path: round trips, callback order, group commit, syncs, limits, close and
// write failures. All on real files.
#include "storage/wal/wal.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "storage/wal/tests/test_util.h"
#include "storage/wal/wal_format.h"

namespace silt::storage::wal {
namespace {

using testing::append_and_wait;
using testing::callback_counter;
using testing::off;
using testing::open_wal;
using testing::payload_for;
using testing::test_dir;

// Each test runs with both I/O engines; the options below take the one under test.
io_engine engine_under_test = io_engine::threads;

class Wal : public ::testing::TestWithParam<io_engine> {
 protected:
  void SetUp() override { engine_under_test = GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Engines, Wal, ::testing::Values(io_engine::threads, io_engine::uring),
                         [](const auto& info) {
                           return info.param == io_engine::threads ? "threads" : "uring";
                         });

wal_options small_options(const std::string& path) {
  wal_options o;
  o.path = path;
  o.engine = engine_under_test;
  o.capacity = 4u << 20;
  o.iodepth = 8;
  o.max_write_bytes = 64u << 10;
  return o;
}

// small_options with a commit delay, and writes large enough for a batch of 256 KiB (the size
// that ends a wait).
wal_options commit_delay_options(const std::string& path, std::chrono::microseconds delay) {
  wal_options o = small_options(path);
  o.max_write_bytes = 1u << 20;
  o.commit_delay = delay;
  return o;
}

// Appends `bytes` to stream 4 at offset `i`; its callback must succeed, and counts in `counter`.
void append_counted(wal& w, int i, size_t bytes, callback_counter& counter) {
  w.append(base::stream_id(4), off(i), payload_for(4, i, bytes), [&counter](auto r) {
    EXPECT_TRUE(r);
    counter.add();
  });
}

// The open flags of the descriptor this process holds on `path` (from /proc/self/fdinfo).
int open_flags_of(const std::string& path) {
  const auto target = std::filesystem::canonical(path);
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(entry.path(), ec) != target) continue;
    std::ifstream info("/proc/self/fdinfo/" + entry.path().filename().string());
    std::string key;
    while (info >> key) {
      if (key == "flags:") {
        std::string octal;
        info >> octal;
        return static_cast<int>(std::stol(octal, nullptr, 8));
      }
    }
  }
  return -1;
}

TEST_P(Wal, CreatesAPreZeroedRingOfHeaderPlusCapacity) {
  test_dir dir;
  auto options = small_options(dir.path("wal"));
  options.capacity = 100000;  // rounded down to 24 blocks
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  EXPECT_EQ((*o.log)->capacity(), 24u * 4096);
  EXPECT_EQ(std::filesystem::file_size(options.path), 8192u + 24 * 4096);
  const auto ring = testing::read_bytes(options.path, 8192, 24 * 4096);
  EXPECT_EQ(std::count(ring.begin(), ring.end(), 0), static_cast<long>(ring.size()));
  EXPECT_FALSE(std::filesystem::exists(options.path + ".creating"));
  EXPECT_TRUE(o.records.empty());
  EXPECT_EQ((*o.log)->durable_end(), 0u);
  EXPECT_EQ((*o.log)->trim_point(), 0u);
}

TEST_P(Wal, AppendedRecordsAreReplayedInOrderAfterReopen) {
  test_dir dir;
  const auto options = small_options(dir.path("wal"));
  // Empty, tiny, a frame of exactly one block, one byte more, several blocks, and larger than
  // max_write_bytes (written alone).
  const std::vector<size_t> sizes = {0, 1, 100, 4056, 4057, 10000, 200000, 7, 65536};
  std::vector<wal_position> ends;
  {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto end = append_and_wait(**o.log, i % 3, static_cast<int64_t>(i),
                                 payload_for(i % 3, static_cast<int64_t>(i), sizes[i]));
      ASSERT_TRUE(end) << wal_error_name(end.error());
      ends.push_back(*end);
    }
    EXPECT_EQ((*o.log)->durable_end(), ends.back());
    (*o.log)->close();
  }
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  ASSERT_EQ(o.records.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto& r = o.records[i];
    EXPECT_EQ(r.stream_id.value(), i % 3);
    EXPECT_EQ(r.offset, off(static_cast<int64_t>(i)));
    EXPECT_EQ(r.end, ends[i]);
    EXPECT_EQ(r.end - r.position, format::frame_header_size + sizes[i]);
    EXPECT_EQ(r.payload, payload_for(i % 3, static_cast<int64_t>(i), sizes[i]));
  }
}

void expect_callbacks_in_append_order(uint32_t iodepth) {
  test_dir dir;
  auto options = small_options(dir.path("wal"));
  options.iodepth = iodepth;
  options.max_write_bytes = 16u << 10;  // many writes in flight at once
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  constexpr int n = 3000;
  std::vector<int> order;
  std::vector<wal_position> ends;
  bool durable_covers_each = true;
  callback_counter counter;
  std::mt19937 rng(iodepth);
  for (int i = 0; i < n; ++i) {
    const size_t size = rng() % 3000;
    w.append(base::stream_id(1), off(i), payload_for(1, i, size),
             [&, i](tl::expected<wal_position, wal_error> r) {
               // Callbacks run one at a time on the I/O thread.
               order.push_back(i);
               ends.push_back(r.value_or(0));
               durable_covers_each = durable_covers_each && r && w.durable_end() >= *r;
               if (r) w.trim(*r);  // the ring is smaller than all the records
               counter.add();
             });
  }
  ASSERT_TRUE(counter.wait_for(n));
  w.close();
  ASSERT_EQ(order.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) EXPECT_EQ(order[i], i);
  for (int i = 1; i < n; ++i) EXPECT_LT(ends[i - 1], ends[i]);
  EXPECT_TRUE(durable_covers_each);
}

TEST_P(Wal, CallbacksFireInAppendOrderAtIodepth1) {
  expect_callbacks_in_append_order(1);
}

TEST_P(Wal, CallbacksFireInAppendOrderAtIodepth32) {
  expect_callbacks_in_append_order(32);
}

TEST_P(Wal, CallbacksOfManyAppendingThreadsFireInPositionOrder) {
  test_dir dir;
  auto options = small_options(dir.path("wal"));
  options.iodepth = 32;
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  constexpr int threads = 4;
  constexpr int per_thread = 1000;
  std::vector<wal_position> ends;
  std::vector<std::vector<int64_t>> seen(threads);
  callback_counter counter;
  std::vector<std::thread> appenders;
  appenders.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    appenders.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        w.append(base::stream_id(t), off(i), payload_for(t, i, 500),
                 [&, t, i](tl::expected<wal_position, wal_error> r) {
                   ends.push_back(r.value_or(0));
                   seen[t].push_back(i);
                   if (r) w.trim(*r);
                   counter.add();
                 });
      }
    });
  }
  for (auto& a : appenders) a.join();
  ASSERT_TRUE(counter.wait_for(threads * per_thread));
  w.close();
  for (size_t i = 1; i < ends.size(); ++i) EXPECT_LT(ends[i - 1], ends[i]);
  for (int t = 0; t < threads; ++t) {
    ASSERT_EQ(seen[t].size(), static_cast<size_t>(per_thread));
    for (int i = 0; i < per_thread; ++i) EXPECT_EQ(seen[t][i], i);
  }
}

TEST_P(Wal, WriteBuffersLeftUnusedBetweenTwoReleasesAreFreed) {
  test_dir dir;
  auto options = small_options(dir.path("wal"));
  options.iodepth = 8;
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  // A burst of appends from several threads: several writes in flight, each with a buffer.
  callback_counter counter;
  std::vector<std::thread> appenders;
  appenders.reserve(4);
  for (int t = 0; t < 4; ++t) {
    appenders.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        w.append(base::stream_id(t), off(i), payload_for(t, i, 20000),
                 [&](tl::expected<wal_position, wal_error> r) {
                   if (r) w.trim(*r);
                   counter.add();
                 });
      }
    });
  }
  for (auto& a : appenders) a.join();
  ASSERT_TRUE(counter.wait_for(1200));
  // The buffers were in use since the last call (there was none): kept.
  (void)w.release_idle_buffers();
  // Untouched since: freed, whole buffers of max_write_bytes.
  const size_t freed = w.release_idle_buffers();
  EXPECT_GT(freed, 0u);
  EXPECT_EQ(freed % options.max_write_bytes, 0u);
  EXPECT_EQ(w.release_idle_buffers(), 0u) << "nothing left to free";
  // Appends go on, with new buffers.
  auto r = append_and_wait(w, 9, 0, payload_for(9, 0, 100));
  EXPECT_TRUE(r.has_value());
  w.close();
}

TEST_P(Wal, AppendsQueuedDuringAWriteAreCoalescedIntoOneWrite) {
  test_dir dir;
  auto options = small_options(dir.path("wal"));
  options.iodepth = 1;
  options.max_write_bytes = 16u << 10;
  options.sync = sync_mode::fdatasync;  // a slower write: more appends queue behind it
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  constexpr int n = 2000;
  callback_counter counter;
  for (int i = 0; i < n; ++i) {
    w.append(base::stream_id(7), off(i), payload_for(7, i, 100), [&](auto r) {
      EXPECT_TRUE(r);
      counter.add();
    });
  }
  ASSERT_TRUE(counter.wait_for(n));
  const auto s = w.stats();
  EXPECT_EQ(s.appends, static_cast<uint64_t>(n));
  // One write per record would be 2000 writes; 140-byte frames coalesce about a hundred to a
  // 16 KiB write whenever a write is in flight.
  EXPECT_LT(s.writes, static_cast<uint64_t>(n / 4));
  EXPECT_LE(s.write_bytes, s.writes * options.max_write_bytes);
  EXPECT_EQ(s.write_bytes % 4096, 0u);
}

TEST_P(Wal, CommitDelayHoldsASmallAppendForMoreAndA256KiBBatchEndsTheWait) {
  test_dir dir;
  auto o = open_wal(commit_delay_options(dir.path("wal"), std::chrono::seconds(10)));
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  callback_counter counter;
  const auto start = std::chrono::steady_clock::now();
  append_counted(w, 0, 200, counter);
  // Without the delay this append is durable in well under a second.
  EXPECT_FALSE(counter.wait_for(1, 300));
  // A second one that takes the batch to 256 KiB: both are written at once.
  append_counted(w, 1, 256u << 10, counter);
  ASSERT_TRUE(counter.wait_for(2));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  const auto s = w.stats();
  EXPECT_EQ(s.writes, 1u);
  EXPECT_EQ(s.held, 1u);
  EXPECT_EQ(s.held_gathered, 1u);
}

TEST_P(Wal, CommitDelayWritesAHeldBatchAtOnceWhenAnAppendThatDoesNotFitSealsIt) {
  test_dir dir;
  auto options = commit_delay_options(dir.path("wal"), std::chrono::seconds(10));
  options.iodepth = 1;                  // one writer: the one holding the batch
  options.max_write_bytes = 16u << 10;  // batches of 16 KiB
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  callback_counter counter;
  const auto start = std::chrono::steady_clock::now();
  append_counted(w, 0, 200, counter);
  EXPECT_FALSE(counter.wait_for(1, 300));  // held for the commit delay
  // Too big for the held batch: it is sealed, and the append opens a batch of its own, big
  // enough to be written at once. The held batch is written first, without waiting out the
  // delay.
  append_counted(w, 1, 20u << 10, counter);
  ASSERT_TRUE(counter.wait_for(2));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(w.stats().writes, 2u);
}

TEST_P(Wal, CommitDelayHoldsBigAppendsOnlyForTheBigAppendDelay) {
  test_dir dir;
  auto o = open_wal(commit_delay_options(dir.path("wal"), std::chrono::seconds(10)));
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  const auto start = std::chrono::steady_clock::now();
  // One request at a time: each waits in vain for a next one, but not for the commit delay.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(append_and_wait(w, 4, i, payload_for(4, i, 64u << 10)));
  }
  // A small one after them: the average is still large.
  ASSERT_TRUE(append_and_wait(w, 4, 4, payload_for(4, 4, 100)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  const auto s = w.stats();
  EXPECT_EQ(s.writes, 5u);
  EXPECT_GT(s.held, 0u);
  EXPECT_EQ(s.held_gathered, 0u);
}

TEST_P(Wal, CommitDelayWritesBigAppendsOfTwoRequestsTogetherWhenTheSecondArrives) {
  test_dir dir;
  wal_options options = commit_delay_options(dir.path("wal"), std::chrono::seconds(10));
  options.big_append_delay = std::chrono::seconds(10);
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  callback_counter counter;
  const auto start = std::chrono::steady_clock::now();
  for (int request = 0; request < 2; ++request) {
    w.append(base::stream_id(4), off(request), payload_for(4, request, 64u << 10), [&](auto r) {
      EXPECT_TRUE(r);
      counter.add();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // The second request's append ends the wait: neither waits out the delay.
  ASSERT_TRUE(counter.wait_for(2));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  const auto s = w.stats();
  EXPECT_EQ(s.appends, 2u);
  EXPECT_EQ(s.writes, 1u);
  EXPECT_EQ(s.held, 1u);
  EXPECT_EQ(s.held_gathered, 1u);
}

TEST_P(Wal, CommitDelayWritesAHeldBatchWhenTheDelayEndsWithWhatArrivedMeanwhile) {
  test_dir dir;
  auto o = open_wal(commit_delay_options(dir.path("wal"), std::chrono::milliseconds(300)));
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  callback_counter counter;
  // A first append, then three requests a few milliseconds apart, one of two appends.
  int offset = 0;
  for (int request = 0; request < 4; ++request) {
    const int appends = request == 2 ? 2 : 1;
    for (int i = 0; i < appends; ++i, ++offset) {
      w.append(base::stream_id(4), off(offset), payload_for(4, offset, 200), [&](auto r) {
        EXPECT_TRUE(r);
        counter.add();
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(counter.wait_for(offset));
  const auto s = w.stats();
  EXPECT_EQ(s.appends, 5u);
  EXPECT_EQ(s.writes, 1u);
  EXPECT_EQ(s.held, 1u);
  EXPECT_EQ(s.held_gathered, 1u);
}

TEST_P(Wal, CommitDelayIsSuspendedWhileItsWaitsGatherNothing) {
  test_dir dir;
  auto o = open_wal(commit_delay_options(dir.path("wal"), std::chrono::milliseconds(20)));
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  // One append at a time, each waited for: nothing can join a held batch.
  constexpr int n = 80;
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(append_and_wait(w, 5, i, payload_for(5, i, 100)));
  }
  const auto s = w.stats();
  EXPECT_EQ(s.writes, static_cast<uint64_t>(n));
  EXPECT_EQ(s.held_gathered, 0u);
  // Eight waits, then 64 writes without, then one wait, which suspends waits for 128 writes.
  EXPECT_EQ(s.held, 9u);
}

TEST_P(Wal, NoCommitDelayByDefault) {
  test_dir dir;
  auto o = open_wal(small_options(dir.path("wal")));
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(append_and_wait(w, 5, i, payload_for(5, i, 100)));
  EXPECT_EQ(w.stats().held, 0u);
}

TEST_P(Wal, FdatasyncModeSyncsAfterEveryWrite) {
  test_dir dir;
  auto options = small_options(dir.path("wal"));
  options.sync = sync_mode::fdatasync;
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(append_and_wait(w, 1, i, payload_for(1, i, 3000)));
  const auto s = w.stats();
  EXPECT_EQ(s.writes, 50u);
  EXPECT_EQ(s.syncs, s.writes);
  const int flags = open_flags_of(options.path);
  ASSERT_NE(flags, -1);
  EXPECT_EQ(flags & O_DSYNC, 0);
  EXPECT_NE(flags & O_DIRECT, 0);
}

TEST_P(Wal, DsyncModeOpensTheFileWithODsyncAndODirect) {
  test_dir dir;
  auto options = small_options(dir.path("wal"));
  options.sync = sync_mode::dsync;
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  const int flags = open_flags_of(options.path);
  ASSERT_NE(flags, -1);
  EXPECT_EQ(flags & O_DSYNC, O_DSYNC);
  EXPECT_NE(flags & O_DIRECT, 0);
  ASSERT_TRUE(append_and_wait(**o.log, 1, 0, payload_for(1, 0, 10)));
  EXPECT_EQ((*o.log)->stats().syncs, 0u);  // durable when the write completes
}

TEST_P(Wal, RecordTooLargeForTheRingFailsWithTooLarge) {
  test_dir dir;
  auto options = small_options(dir.path("wal"));
  options.capacity = 64u << 10;
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  const size_t largest = (64u << 10) - format::ring_slack - format::frame_header_size;
  auto r = append_and_wait(w, 1, 0, payload_for(1, 0, largest + 1));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), wal_error::too_large);
  auto ok = append_and_wait(w, 1, 0, payload_for(1, 0, largest));
  ASSERT_TRUE(ok) << wal_error_name(ok.error());
  w.trim(*ok);
  EXPECT_TRUE(append_and_wait(w, 1, 1, payload_for(1, 1, largest)));
}

TEST_P(Wal, AppendAfterCloseFailsWithClosed) {
  test_dir dir;
  auto o = open_wal(small_options(dir.path("wal")));
  ASSERT_TRUE(o.log);
  (*o.log)->close();
  auto r = append_and_wait(**o.log, 1, 0, payload_for(1, 0, 10));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), wal_error::closed);
}

TEST_P(Wal, CloseWaitsForQueuedAppends) {
  test_dir dir;
  const auto options = small_options(dir.path("wal"));
  constexpr int n = 500;
  std::atomic<int> ok{0};
  {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    for (int i = 0; i < n; ++i) {
      (*o.log)->append(base::stream_id(2), off(i), payload_for(2, i, 700), [&](auto r) {
        if (r) ok.fetch_add(1);
      });
    }
    (*o.log)->close();
    EXPECT_EQ(ok.load(), n);
  }
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  EXPECT_EQ(o.records.size(), static_cast<size_t>(n));
}

TEST_P(Wal, CloseIsIdempotentAndTheDestructorCloses) {
  test_dir dir;
  const auto options = small_options(dir.path("wal"));
  std::atomic<int> ok{0};
  {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    for (int i = 0; i < 100; ++i) {
      (*o.log)->append(base::stream_id(2), off(i), payload_for(2, i, 50), [&](auto r) {
        if (r) ok.fetch_add(1);
      });
    }
  }  // destroyed without close()
  EXPECT_EQ(ok.load(), 100);
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  (*o.log)->close();
  (*o.log)->close();
  EXPECT_EQ(o.records.size(), 100u);
}

// Sets or clears the immutable attribute: writes through descriptors already open then fail
// with EPERM, which stands in for a failing disk.
bool set_immutable(const std::string& path, bool on) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  int attr = 0;
  bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &attr) == 0;
  attr = on ? (attr | FS_IMMUTABLE_FL) : (attr & ~FS_IMMUTABLE_FL);
  ok = ok && ::ioctl(fd, FS_IOC_SETFLAGS, &attr) == 0;
  ::close(fd);
  return ok;
}

TEST_P(Wal, FailedWriteFailsItsCallbacksAndTheWalRecoversWhenTheDiskDoes) {
  test_dir dir;
  const auto options = small_options(dir.path("wal"));
  std::vector<uint8_t> kept;
  {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    wal& w = **o.log;
    auto first = append_and_wait(w, 1, 0, payload_for(1, 0, 100));
    ASSERT_TRUE(first);
    if (!set_immutable(options.path, true)) GTEST_SKIP() << "needs FS_IMMUTABLE_FL (root, ext4)";
    struct restore {
      std::string path;
      ~restore() { set_immutable(path, false); }
    } restore_on_exit{options.path};
    auto failed = append_and_wait(w, 1, 1, payload_for(1, 1, 100));
    ASSERT_FALSE(failed);
    EXPECT_EQ(failed.error(), wal_error::io);
    // While the disk fails, so does the new epoch's header (written at once, then every
    // second): appends are refused.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto refused = append_and_wait(w, 1, 2, payload_for(1, 2, 100));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error(), wal_error::io);
    EXPECT_EQ(w.durable_end(), *first);
    set_immutable(options.path, false);
    // The header is tried again every second; then appends go on where the failure was.
    tl::expected<wal_position, wal_error> again = tl::unexpected(wal_error::io);
    for (int i = 0; i < 100 && !again; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      again = append_and_wait(w, 1, 1, payload_for(1, 1, 100));
    }
    ASSERT_TRUE(again);
    EXPECT_GE(w.stats().recoveries, 1u);
    EXPECT_GE(w.stats().failed_writes, 2u);
    w.close();
  }
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  ASSERT_EQ(o.records.size(), 2u);
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_EQ(o.records[i].offset, off(i));
    EXPECT_EQ(o.records[i].payload, payload_for(1, i, 100));
  }
}

// Writes that fail after landing in part, among many appends from several threads: every
// append whose callback succeeded is replayed after reopen, in position order, and nothing
// else is, though the failed writes left frames of their own on the device.
TEST_P(Wal, InjectedWriteFailuresLoseNoDurableRecordAndReplayNoFailedOne) {
  test_dir dir;
  auto options = small_options(dir.path("wal"));
  options.capacity = 64u << 20;
  write_faults::options fo;
  fo.seed = 7;
  fo.fail_probability = 0.15;
  fo.delay_probability = 0.05;
  fo.delay = std::chrono::milliseconds(5);
  options.faults = std::make_shared<write_faults>(fo);
  struct outcome {
    uint64_t stream;
    int64_t offset;
    size_t size;
    wal_position end;
  };
  std::mutex mu;
  std::vector<outcome> durable;
  std::atomic<int> failures{0};
  {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    wal& w = **o.log;
    std::vector<std::thread> threads;
    for (uint64_t t = 1; t <= 3; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(static_cast<uint32_t>(t));
        for (int64_t i = 0; i < 400; ++i) {
          const size_t size = rng() % 9000;
          // As a client does: a failed append is tried again until it is durable.
          for (int attempt = 0; attempt < 1000; ++attempt) {
            auto r = append_and_wait(w, t, i, payload_for(t, i, size));
            if (r) {
              std::lock_guard lock(mu);
              durable.push_back({t, i, size, *r});
              break;
            }
            EXPECT_EQ(r.error(), wal_error::io);
            failures.fetch_add(1);
            // Refused while the WAL recovers: give it a moment.
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_GE(options.faults->failed(), 10u);
    EXPECT_GE(failures.load(), 10);
    EXPECT_EQ(durable.size(), 3u * 400);  // each once, after however many failures
    EXPECT_GE(w.stats().recoveries, 1u);
    w.close();
  }
  std::sort(durable.begin(), durable.end(),
            [](const outcome& a, const outcome& b) { return a.end < b.end; });
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  ASSERT_EQ(o.records.size(), durable.size());
  for (size_t i = 0; i < durable.size(); ++i) {
    EXPECT_EQ(o.records[i].stream_id.value(), durable[i].stream);
    EXPECT_EQ(o.records[i].offset, off(durable[i].offset));
    EXPECT_EQ(o.records[i].end, durable[i].end);
    EXPECT_EQ(o.records[i].payload,
              payload_for(durable[i].stream, durable[i].offset, durable[i].size));
  }
}

TEST_P(Wal, IopsCapPacesWrites) {
  test_dir dir;
  auto options = small_options(dir.path("wal"));
  options.iops = 200;
  options.iodepth = 8;
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  wal& w = **o.log;
  std::atomic<int> outstanding{0};
  callback_counter counter;
  const auto start = std::chrono::steady_clock::now();
  const auto stop = start + std::chrono::milliseconds(600);
  int appended = 0;
  while (std::chrono::steady_clock::now() < stop) {
    if (outstanding.load() >= 8) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    outstanding.fetch_add(1);
    w.append(base::stream_id(3), off(appended), payload_for(3, appended, 200), [&](auto r) {
      EXPECT_TRUE(r);
      outstanding.fetch_sub(1);
      counter.add();
    });
    ++appended;
  }
  ASSERT_TRUE(counter.wait_for(appended));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto s = w.stats();
  // Loose: unpaced, this loop does thousands of writes a second here.
  EXPECT_LE(static_cast<double>(s.writes), 200 * seconds * 1.5 + 5);
  EXPECT_GT(s.paced, 0u);
  EXPECT_GT(s.writes, 0u);
}

TEST_P(Wal, BadOptionsAreRejected) {
  test_dir dir;
  auto expect_bad = [](const wal_options& o) {
    auto w = wal::open(o, [](const replayed_record&) {});
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error(), wal_error::bad_options);
  };
  auto o = small_options(dir.path("wal"));
  o.path = "";
  expect_bad(o);
  o = small_options(dir.path("wal"));
  o.capacity = 12288;
  expect_bad(o);
  o = small_options(dir.path("wal"));
  o.iodepth = 0;
  expect_bad(o);
  o = small_options(dir.path("wal"));
  o.max_write_bytes = 1000;
  expect_bad(o);
  o = small_options(dir.path(""));  // a directory
  expect_bad(o);
  EXPECT_FALSE(std::filesystem::exists(dir.path("wal")));
}

TEST_P(Wal, ExistingWalKeepsTheCapacityItWasCreatedWith) {
  test_dir dir;
  auto options = small_options(dir.path("wal"));
  options.capacity = 64u << 10;
  {
    auto o = open_wal(options);
    ASSERT_TRUE(o.log);
    ASSERT_TRUE(append_and_wait(**o.log, 1, 0, payload_for(1, 0, 100)));
  }
  options.capacity = 1u << 20;
  auto o = open_wal(options);
  ASSERT_TRUE(o.log);
  EXPECT_EQ((*o.log)->capacity(), 64u << 10);
  EXPECT_EQ(o.records.size(), 1u);
}

}  // namespace
}  // namespace silt::storage::wal
