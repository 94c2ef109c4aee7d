// Readers against every background task at once: appends continue while one thread runs
// upload, compaction, retention (by time and by size) and deletions in a loop and the log
// cache, kept small, evicts after every upload. Readers read every offset between a freshly
// sampled start and end of a stream. A read may be refused as out of range only when its
// offset is below the start the stream has once the read returned (retention may move the
// start at any time); any other refusal is an offset that exists being refused.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "protocol/record_batch.h"
#include "storage/stream_store.h"

namespace silt::storage {
namespace {

base::stream_id sid(uint64_t v) {
  return base::stream_id(v);
}

base::offset off(int64_t v) {
  return base::offset(v);
}

namespace fs = std::filesystem;
using namespace std::chrono_literals;

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// `count` records stamped `timestamp`, each with a value of about 100 bytes.
std::vector<uint8_t> batch(int count, int64_t timestamp) {
  protocol::record_batch_builder b;
  const std::string value(100, 'v');
  for (int i = 0; i < count; ++i) {
    b.add(timestamp, std::nullopt,
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
  }
  return b.build();
}

// The base offset and end of the first batch of a read.
std::pair<base::offset, base::offset> first_batch(const read_result& r) {
  const auto bytes = r.concatenate();
  protocol::batch_reader batches(bytes);
  auto b = batches.next();
  if (!b || !b->has_value()) return {off(-1), off(-1)};
  return {off((*b)->header.base_offset), off((*b)->header.last_offset() + 1)};
}

struct refusal {
  base::stream_id stream;
  base::offset offset, start_before, start_after, end;
  std::string error;
};

class StreamStoreStress : public ::testing::Test {
 protected:
  StreamStoreStress() {
    static std::atomic<int> counter{0};
    dir_ = fs::path(SILT_TEST_SCRATCH) /
           ("stream-store-stress-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~StreamStoreStress() override { fs::remove_all(dir_); }

  fs::path dir_;
};

TEST_F(StreamStoreStress, ReadersNeverSeeAnInRangeOffsetRefusedAcrossBackgroundTasks) {
  auto objects = open_object_store("file://" + (dir_ / "objects").string());
  ASSERT_TRUE(objects.has_value());
  stream_store_options o;
  o.wal.path = (dir_ / "wal").string();
  o.wal.capacity = 16 << 20;
  o.wal.iodepth = 8;
  o.metadata_uri = (dir_ / "catalog.db").string();
  o.object_block_size = 4096;
  o.log_cache_bytes = 64 << 10;  // evicts after nearly every upload
  o.block_cache_bytes = 1 << 20;
  o.stream_object_bytes = 64 << 10;
  o.compaction_max_object_bytes = 256 << 10;
  o.delete_delay = 0ms;
  o.background = false;
  auto opened = stream_store::open(o, **objects);
  ASSERT_TRUE(opened.has_value()) << (opened ? "" : opened.error());
  stream_store& s = **opened;

  // Stream 1: by time (its records expire 300 ms after they are written); 2: by size;
  // 3: kept; 4: old timestamps and a one-hour retention, so whatever is uploaded goes at the
  // next retention round (as records a producer stamped in the past). Streams 1 and 4 have
  // no active segment, which time retention would otherwise leave alone.
  constexpr uint64_t streams = 4;
  s.set_retention(sid(1), 300, -1);
  s.set_retention(sid(2), -1, 48 << 10);
  s.set_retention(sid(3), -1, -1);
  s.set_retention(sid(4), 3600 * 1000, -1);
  s.set_active_segment(sid(1), 0, 0);
  s.set_active_segment(sid(4), 0, 0);

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> appends{0};
  std::atomic<uint64_t> rounds{0};
  std::atomic<uint64_t> reads{0};
  std::atomic<uint64_t> legit_refusals{0};
  std::mutex mu;
  std::vector<refusal> refused;  // guarded by mu
  std::string task_error;        // guarded by mu

  std::thread writer([&] {
    std::mt19937 rng(1);
    while (!stop) {
      const base::stream_id stream(1 + rng() % streams);
      const int64_t ts = stream == base::stream_id(4) ? wall_ms() - 2 * 3600 * 1000 : wall_ms();
      std::promise<void> durable;
      s.append(stream, batch(1 + static_cast<int>(rng() % 40), ts),
               [&](const tl::expected<base::offset, stream_error>& r) {
                 EXPECT_TRUE(r.has_value());
                 durable.set_value();
               });
      durable.get_future().wait();
      ++appends;
    }
  });
  std::thread driver([&] {
    while (!stop) {
      for (auto r : {s.run_upload_once(), s.run_compaction_once(), s.run_retention_once(),
                     s.run_deletions_once()}) {
        if (!r) {
          std::lock_guard lock(mu);
          if (task_error.empty()) task_error = r.error();
        }
      }
      ++rounds;
    }
  });
  std::vector<std::thread> readers;
  for (uint64_t id = 0; id < 3; ++id) {
    readers.emplace_back([&, id] {
      std::mt19937 rng(static_cast<uint32_t>(100 + id));
      while (!stop) {
        const base::stream_id stream(1 + rng() % streams);
        const auto range = s.offsets(stream);
        for (base::offset offset = range.start_offset; offset < range.end_offset && !stop;
             offset += 1) {
          auto r = s.read(stream, offset, 1 + rng() % 8192);
          ++reads;
          const base::offset start_after = s.offsets(stream).start_offset;
          if (!r) {
            if (r.error() == stream_error::offset_out_of_range && offset < start_after) {
              ++legit_refusals;
              break;  // the start moved past us: sample again
            }
            std::lock_guard lock(mu);
            refused.push_back({stream, offset, range.start_offset, start_after, range.end_offset,
                               std::string(stream_error_name(r.error()))});
            continue;
          }
          const auto [first, end] = first_batch(*r);
          if (first > offset || end <= offset) {
            std::lock_guard lock(mu);
            refused.push_back({stream, offset, range.start_offset, start_after, range.end_offset,
                               "read returned batch [" + std::to_string(first.value()) + ", " +
                                   std::to_string(end.value()) + ")"});
          }
        }
      }
    });
  }

  std::this_thread::sleep_for(8s);
  stop = true;
  writer.join();
  driver.join();
  for (auto& t : readers) t.join();

  std::lock_guard lock(mu);
  EXPECT_EQ(task_error, "");
  for (size_t i = 0; i < refused.size() && i < 10; ++i) {
    const auto& f = refused[i];
    ADD_FAILURE() << "stream " << f.stream << " offset " << f.offset << ": " << f.error
                  << " (start " << f.start_before << " before the read, " << f.start_after
                  << " after; end " << f.end << ") final start "
                  << s.offsets(f.stream).start_offset;
  }
  EXPECT_EQ(refused.size(), 0u);
  // The run exercised what it is about.
  const auto st = s.stats();
  EXPECT_GT(st.uploads, 10u);
  EXPECT_GT(st.compactions, 0u);
  EXPECT_GT(st.deleted_objects, 0u);
  EXPECT_GT(st.cold_reads, 100u);
  EXPECT_GT(s.offsets(sid(1)).start_offset, off(0));
  EXPECT_GT(s.offsets(sid(2)).start_offset, off(0));
  EXPECT_GT(s.offsets(sid(4)).start_offset, off(0));
  std::printf(
      "appends %llu, task rounds %llu, reads %llu (%llu cold), refused below the start %llu\n",
      static_cast<unsigned long long>(appends.load()),
      static_cast<unsigned long long>(rounds.load()), static_cast<unsigned long long>(reads.load()),
      static_cast<unsigned long long>(st.cold_reads),
      static_cast<unsigned long long>(legit_refusals.load()));
}

}  // namespace
}  // namespace silt::storage
