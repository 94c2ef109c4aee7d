// The stream store end to end on real files: a WAL file, a local object store directory and
// a SQLite catalog.
#include "storage/stream_store.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "metadata/broker_registry.h"
#include "metadata/stream_catalog.h"
#include "metadata/testing/test_database.h"
#include "protocol/record_batch.h"
#include "storage/cluster_marker.h"
#include "storage/object/faulty_store.h"
#include "storage/object/s3_store.h"
#include "storage/offset_map.h"

namespace silt::storage {
namespace {

base::stream_id sid(uint64_t v) {
  return base::stream_id(v);
}

base::offset off(int64_t v) {
  return base::offset(v);
}

namespace fs = std::filesystem;

// A scratch directory on a file system that takes O_DIRECT (the build tree's).
class scratch_dir {
 public:
  scratch_dir() {
    path_ = fs::path(SILT_TEST_SCRATCH) /
            ("stream-store-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~scratch_dir() { fs::remove_all(path_); }
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// A batch of `count` records whose values name the stream and their index.
std::vector<uint8_t> batch(uint64_t stream, int first, int count, int64_t timestamp = 0) {
  protocol::record_batch_builder b;
  for (int i = 0; i < count; ++i) {
    const std::string value = "s" + std::to_string(stream) + "-" + std::to_string(first + i);
    b.add(timestamp != 0 ? timestamp : 1700000000000 + first + i, std::nullopt,
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
  }
  return b.build();
}

// Every record value of a read, in order, checking offsets are dense from `from`.
std::vector<std::string> values(const read_result& r, base::offset from) {
  std::vector<std::string> out;
  const auto bytes = r.concatenate();
  protocol::batch_reader batches(bytes);
  int64_t expected = -1;
  for (;;) {
    auto next = batches.next();
    EXPECT_TRUE(next.has_value());
    if (!next || !next->has_value()) break;
    const auto& b = **next;
    if (expected >= 0) {
      EXPECT_EQ(b.header.base_offset, expected) << "offsets not dense";
    }
    expected = b.header.last_offset() + 1;
    auto records = protocol::decode_records(b);
    EXPECT_TRUE(records.has_value());
    if (!records) break;
    for (const auto& rec : records->records()) {
      const base::offset offset(b.header.base_offset + rec.offset_delta);
      if (offset < from) continue;
      out.emplace_back(rec.value->begin(), rec.value->end());
    }
  }
  return out;
}

class StreamStore : public ::testing::Test {
 protected:
  stream_store_options options() {
    stream_store_options o;
    o.wal.path = (dir_.path() / "wal").string();
    o.wal.capacity = 8 << 20;
    o.wal.iodepth = 8;
    o.metadata_uri = (dir_.path() / "catalog.db").string();
    o.object_block_size = 4096;
    o.background = false;
    o.delete_delay = std::chrono::milliseconds(0);
    return o;
  }
  object_store& objects() {
    if (!store_) {
      auto s = open_object_store("file://" + (dir_.path() / "objects").string());
      EXPECT_TRUE(s.has_value());
      store_ = std::move(*s);
    }
    return *store_;
  }
  std::unique_ptr<stream_store> open(const stream_store_options& o) {
    auto s = stream_store::open(o, objects());
    EXPECT_TRUE(s.has_value()) << (s ? "" : s.error());
    return s ? std::move(*s) : nullptr;
  }
  // Appends and waits for durability; returns the base offset.
  static base::offset append(stream_store& s, base::stream_id stream, std::vector<uint8_t> data) {
    std::promise<tl::expected<base::offset, stream_error>> p;
    s.append(stream, std::move(data), [&](auto r) { p.set_value(r); });
    auto r = p.get_future().get();
    EXPECT_TRUE(r.has_value());
    return r ? *r : off(-1);
  }
  // Reads a whole stream from `from` with reads of at most max_bytes.
  static std::vector<std::string> read_all(stream_store& s, base::stream_id stream,
                                           base::offset from, size_t max_bytes = 1 << 20) {
    std::vector<std::string> out;
    for (base::offset offset = from;;) {
      auto r = s.read(stream, offset, max_bytes);
      EXPECT_TRUE(r.has_value()) << (r ? "" : stream_error_name(r.error()));
      if (!r || r->chunks.empty()) break;
      for (auto& v : values(*r, offset)) out.push_back(std::move(v));
      EXPECT_GT(r->next_offset, offset);
      offset = r->next_offset;
    }
    return out;
  }
  static std::vector<std::string> expected(uint64_t stream, int from, int to) {
    std::vector<std::string> out;
    for (int i = from; i < to; ++i)
      out.push_back("s" + std::to_string(stream) + "-" + std::to_string(i));
    return out;
  }

  // A store over `via` without a log cache and with one read-ahead thread of 4-block
  // windows, holding stream 1's offsets 0-1999 in one uploaded object.
  std::unique_ptr<stream_store> open_one_cold_stream(object_store& via) {
    auto o = options();
    o.log_cache_bytes = 0;
    o.read_ahead_blocks = 4;
    o.read_ahead_threads = 1;
    auto s = stream_store::open(o, via);
    EXPECT_TRUE(s.has_value()) << (s ? "" : s.error());
    if (!s) return nullptr;
    for (int i = 0; i < 200; ++i) append(**s, sid(1), batch(1, i * 10, 10));
    EXPECT_TRUE((*s)->run_upload_once());
    return std::move(*s);
  }

  scratch_dir dir_;
  std::unique_ptr<object_store> store_;
};

TEST_F(StreamStore, AppendsGetDenseOffsetsAndReadBackFromTheCache) {
  auto s = open(options());
  EXPECT_EQ(append(*s, sid(1), batch(1, 0, 5)), off(0));
  EXPECT_EQ(append(*s, sid(2), batch(2, 0, 3)), off(0));
  EXPECT_EQ(append(*s, sid(1), batch(1, 5, 7)), off(5));
  EXPECT_EQ(s->offsets(sid(1)).end_offset, off(12));
  EXPECT_EQ(s->offsets(sid(2)).end_offset, off(3));
  EXPECT_EQ(read_all(*s, sid(1), off(0)), expected(1, 0, 12));
  EXPECT_EQ(read_all(*s, sid(1), off(7)), expected(1, 7, 12));  // from inside a batch
  EXPECT_EQ(read_all(*s, sid(2), off(0)), expected(2, 0, 3));
  EXPECT_EQ(s->read(sid(1), off(13), 100).error(), stream_error::offset_out_of_range);
  EXPECT_TRUE(s->read(sid(1), off(12), 100)->chunks.empty());
}

TEST_F(StreamStore, InvalidBatchesAreRefused) {
  auto s = open(options());
  std::promise<tl::expected<base::offset, stream_error>> p;
  s->append(sid(1), std::vector<uint8_t>(100, 7), [&](auto r) { p.set_value(r); });
  EXPECT_EQ(p.get_future().get().error(), stream_error::invalid_batch);
  EXPECT_EQ(s->offsets(sid(1)).end_offset, off(0));
}

TEST_F(StreamStore, UploadCommitsObjectsTrimsTheWalAndColdReadsReturnTheSameData) {
  auto o = options();
  o.log_cache_bytes = 0;  // evict everything uploaded
  auto s = open(o);
  for (int i = 0; i < 20; ++i) {
    append(*s, sid(1), batch(1, i * 10, 10));
    append(*s, sid(2), batch(2, i * 10, 10));
  }
  const auto trim_before = s->wal_trim_point();
  ASSERT_TRUE(s->run_upload_once());
  // The WAL persists a trim in its header asynchronously.
  for (int i = 0; i < 500 && s->wal_trim_point() <= trim_before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(s->wal_trim_point(), trim_before);
  EXPECT_EQ(s->stats().stream_set_objects, 1u);
  EXPECT_EQ(s->stats().log_cache_bytes, 0u);
  auto listed = objects().list("objects/");
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->size(), 1u);
  EXPECT_EQ(read_all(*s, sid(1), off(0), 3000), expected(1, 0, 200));
  EXPECT_EQ(read_all(*s, sid(2), off(55), 3000), expected(2, 55, 200));
  EXPECT_GT(s->stats().cold_reads, 0u);
}

TEST_F(StreamStore, StreamWithEnoughDataGetsAStreamObject) {
  auto o = options();
  o.stream_object_bytes = 8000;
  auto s = open(o);
  for (int i = 0; i < 100; ++i) append(*s, sid(1), batch(1, i * 10, 10));  // large
  append(*s, sid(2), batch(2, 0, 1));                                      // small
  ASSERT_TRUE(s->run_upload_once());
  EXPECT_EQ(s->stats().stream_objects, 1u);
  EXPECT_EQ(s->stats().stream_set_objects, 1u);
}

TEST_F(StreamStore, ReadAheadRunsAheadOfColdReadsAcrossObjects) {
  auto o = options();
  o.log_cache_bytes = 0;
  o.read_ahead_blocks = 8;
  o.read_ahead_threads = 2;
  auto s = open(o);
  // Two objects, of about 15 blocks each.
  for (int i = 0; i < 200; ++i) append(*s, sid(1), batch(1, i * 10, 10));
  ASSERT_TRUE(s->run_upload_once());
  for (int i = 200; i < 400; ++i) append(*s, sid(1), batch(1, i * 10, 10));
  ASSERT_TRUE(s->run_upload_once());
  // Reads of about one block, each given time for the read-ahead it starts: only the first
  // reads from the object store itself, every later one finds its blocks read ahead.
  std::vector<std::string> got;
  int reads = 0;
  for (base::offset offset = off(0);; ++reads) {
    auto r = s->read(sid(1), offset, 3000);
    ASSERT_TRUE(r.has_value()) << stream_error_name(r.error());
    if (r->chunks.empty()) break;
    for (auto& v : values(*r, offset)) got.push_back(std::move(v));
    offset = r->next_offset;
    ASSERT_TRUE(s->wait_read_ahead_idle());
  }
  EXPECT_EQ(got, expected(1, 0, 4000));
  const auto st = s->stats();
  EXPECT_GT(reads, 20);
  EXPECT_GT(st.read_ahead_gets, 2u);
  EXPECT_EQ(st.object_gets - st.read_ahead_gets, 1u)
      << "gets " << st.object_gets << " of which read-ahead " << st.read_ahead_gets;
}

TEST_F(StreamStore, AReadWaitsForTheBlockBeingReadAhead) {
  faulty_store slow(objects(), faulty_store_options{});
  auto opened = open_one_cold_stream(slow);
  ASSERT_TRUE(opened);
  auto& s = *opened;
  std::vector<std::string> got;
  auto read_next = [&](base::offset offset) {
    auto r = s.read(sid(1), offset, 3000);
    EXPECT_TRUE(r.has_value());
    if (!r || r->chunks.empty()) return offset;
    for (auto& v : values(*r, offset)) got.push_back(std::move(v));
    return r->next_offset;
  };
  base::offset offset = read_next(off(0));
  ASSERT_TRUE(s.wait_read_ahead_idle());
  // From now on a GET takes half a second: the next window's read-ahead is under way when the
  // reads reach it, and the read that wants its first block waits for it.
  faulty_store_options slow_gets;
  slow_gets.slow_probability = 1;
  slow_gets.slow_delay = std::chrono::milliseconds(500);
  slow_gets.operations = 1u << static_cast<unsigned>(store_operation::get);
  slow.set_options(slow_gets);
  for (int i = 0; i < 40 && s.stats().read_ahead_waits == 0; ++i) {
    offset = read_next(offset);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Up to the read that waited, only the first read read an object itself.
  const auto st = s.stats();
  EXPECT_GE(st.read_ahead_waits, 1u);
  EXPECT_EQ(st.object_gets - st.read_ahead_gets, 1u)
      << "gets " << st.object_gets << " of which read-ahead " << st.read_ahead_gets;
  slow.set_options(faulty_store_options{});
  for (base::offset next = read_next(offset); next != offset; next = read_next(offset)) {
    offset = next;
  }
  EXPECT_EQ(got, expected(1, 0, 2000));
}

TEST_F(StreamStore, AFailedReadAheadLeavesTheReadToTheReader) {
  faulty_store flaky(objects(), faulty_store_options{});
  auto opened = open_one_cold_stream(flaky);
  ASSERT_TRUE(opened);
  auto& s = *opened;
  // The first read's GETs (footer, index, its block) pass; the read-ahead's fails.
  flaky.script(store_operation::get, {fault::none, fault::none, fault::none, fault::io});
  auto first = s.read(sid(1), off(0), 3000);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(s.wait_read_ahead_idle());
  EXPECT_EQ(flaky.injected(fault::io), 1u);
  // The blocks it did not bring are read by the reads (or by a later read-ahead).
  EXPECT_EQ(read_all(s, sid(1), off(0), 3000), expected(1, 0, 2000));
}

TEST_F(StreamStore, RecoveryReplaysTheWalAboveWhatObjectsHold) {
  auto o = options();
  {
    auto s = open(o);
    for (int i = 0; i < 10; ++i) append(*s, sid(1), batch(1, i * 10, 10));
    ASSERT_TRUE(s->run_upload_once());
    for (int i = 10; i < 15; ++i) append(*s, sid(1), batch(1, i * 10, 10));
    append(*s, sid(3), batch(3, 0, 4));
    s->close();
  }
  auto s = open(o);
  EXPECT_EQ(s->offsets(sid(1)).end_offset, off(150));
  EXPECT_EQ(s->offsets(sid(3)).end_offset, off(4));
  EXPECT_EQ(read_all(*s, sid(1), off(0)), expected(1, 0, 150));
  EXPECT_EQ(read_all(*s, sid(3), off(0)), expected(3, 0, 4));
  EXPECT_EQ(append(*s, sid(1), batch(1, 150, 1)), off(150));
  // Uploading again after recovery continues the streams in the catalog.
  ASSERT_TRUE(s->run_upload_once());
  EXPECT_EQ(read_all(*s, sid(1), off(140)), expected(1, 140, 151));
}

// A batch of records with keys `k<key>` from offset `first` on: one per entry of `keys`, value
// `v<round>-<key>`, or null (a tombstone) for a negative key.
std::vector<uint8_t> keyed_batch(
    int round, const std::vector<int>& keys,
    protocol::compression_codec codec = protocol::compression_codec::none) {
  protocol::record_batch_builder b;
  b.codec(codec);
  for (const int k : keys) {
    const std::string key = "k" + std::to_string(std::abs(k));
    const std::string value = "v" + std::to_string(round) + "-" + std::to_string(k);
    const auto as_bytes = [](const std::string& str) {
      return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(str.data()), str.size());
    };
    b.add(1700000000000 + round, as_bytes(key),
          k < 0 ? std::nullopt : std::optional<std::span<const uint8_t>>(as_bytes(value)));
  }
  return b.build();
}

// Every record of a stream from offset 0 as "offset:key=value" ("offset:key" for a tombstone),
// checking that each read starts at or before the offset asked and moves forward.
std::vector<std::string> keyed_records(stream_store& s, base::stream_id stream) {
  std::vector<std::string> out;
  for (base::offset offset = off(0);;) {
    auto r = s.read(stream, offset, 1 << 20);
    EXPECT_TRUE(r.has_value());
    if (!r || r->chunks.empty()) break;
    const auto bytes = r->concatenate();
    protocol::batch_reader batches(bytes);
    for (;;) {
      auto next = batches.next();
      EXPECT_TRUE(next.has_value());
      if (!next || !next->has_value()) break;
      const auto& b = **next;
      auto records = protocol::decode_records(b);
      EXPECT_TRUE(records.has_value());
      if (!records) break;
      for (const auto& rec : records->records()) {
        const int64_t o = b.header.base_offset + rec.offset_delta;
        if (o < offset.value()) continue;
        std::string line = std::to_string(o) + ":" + std::string(rec.key->begin(), rec.key->end());
        if (rec.value) line += "=" + std::string(rec.value->begin(), rec.value->end());
        out.push_back(line);
      }
    }
    EXPECT_GT(r->next_offset, offset);
    offset = r->next_offset;
  }
  return out;
}

// The log cleaner keeps the latest record of each key at its offset; a tombstone stays until
// its delete horizon (set by the pass that first kept it) has passed; a compressed batch stays
// compressed; reads from any offset, gaps included, go on to the end.
TEST_F(StreamStore, LogCleanerKeepsTheLatestRecordOfEachKey) {
  auto o = options();
  o.segment_ms = 0;  // no active segment: all the data in objects may be cleaned; the log
  // cache keeps what was appended, which the cleaner lets go
  auto s = open(o);
  ASSERT_TRUE(s->take({sid(1), sid(2)}));  // the cleaner cleans the streams its node owns
  s->set_compaction(sid(1), {true, /*delete_retention_ms=*/3'600'000, 0, INT64_MAX, 0.5});
  for (int round = 0; round < 4; ++round) {
    append(*s, sid(1), keyed_batch(round, {0, 1, 2, 3, 4}, protocol::compression_codec::lz4));
    ASSERT_TRUE(s->run_upload_once());
  }
  append(*s, sid(1), keyed_batch(4, {1, -3}));  // offsets 20, 21
  ASSERT_TRUE(s->run_upload_once());
  ASSERT_TRUE(s->run_cleaner_once());
  EXPECT_EQ(s->cleaner_stats().passes, 1u);
  EXPECT_EQ(s->cleaner_stats().records_removed, 17u);
  const std::vector<std::string> after_first = {"15:k0=v3-0", "17:k2=v3-2", "19:k4=v3-4",
                                                "20:k1=v4-1", "21:k3"};
  EXPECT_EQ(keyed_records(*s, sid(1)), after_first);
  // Nothing dirty, and the tombstone's horizon an hour away: no pass.
  ASSERT_TRUE(s->run_cleaner_once());
  EXPECT_EQ(s->cleaner_stats().passes, 1u);
  // Reads from inside a gap find the next record.
  auto r = s->read(sid(1), off(3), 1 << 20);
  ASSERT_TRUE(r);
  ASSERT_FALSE(r->chunks.empty());
  EXPECT_GT(r->next_offset, off(3));
  // With delete.retention.ms 0 a tombstone's horizon is the pass that kept it: the next pass
  // removes it, nothing else dirty; the offsets of the rest stay.
  s->set_compaction(sid(2), {true, 0, 0, INT64_MAX, 0.5});
  append(*s, sid(2), keyed_batch(0, {1, 2}));
  append(*s, sid(2), keyed_batch(1, {1, -2}));
  ASSERT_TRUE(s->run_upload_once());
  ASSERT_TRUE(s->run_cleaner_once());
  EXPECT_EQ(s->cleaner_stats().passes, 2u);
  EXPECT_EQ(keyed_records(*s, sid(2)), (std::vector<std::string>{"2:k1=v1-1", "3:k2"}));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(s->run_cleaner_once());
  EXPECT_EQ(s->cleaner_stats().passes, 3u);
  EXPECT_EQ(keyed_records(*s, sid(2)), (std::vector<std::string>{"2:k1=v1-1"}));
  EXPECT_EQ(s->offsets(sid(2)).end_offset, off(4));
  // The replaced objects go after the deletion delay; what remains reads the same.
  ASSERT_TRUE(s->run_deletions_once());
  EXPECT_EQ(keyed_records(*s, sid(1)), after_first);
  // Appends go on at the end.
  EXPECT_EQ(append(*s, sid(1), keyed_batch(5, {0})), off(22));
}

// Keys that do not fit the key map are cleaned over several passes; the active segment and
// data younger than min.compaction.lag.ms are never cleaned; a stream not compacted is left
// alone.
TEST_F(StreamStore, LogCleanerWorksInPassesAndLeavesTheHeadAlone) {
  auto o = options();
  o.log_cache_bytes = 0;
  o.segment_ms = 0;
  o.cleaner.dedupe_buffer_bytes = 16 * offset_map::slot_bytes;  // 14 keys a pass
  auto s = open(o);
  ASSERT_TRUE(s->take({sid(1), sid(2)}));
  s->set_compaction(sid(1), {true, 86400000, 0, INT64_MAX, 0.5});
  std::vector<int> keys(20);
  for (int i = 0; i < 20; ++i) keys[static_cast<size_t>(i)] = i;
  for (int round = 0; round < 3; ++round) {
    for (int part = 0; part < 4; ++part) {  // 5 keys a batch: the map fills at a batch's start
      append(*s, sid(1),
             keyed_batch(round,
                         std::vector<int>(keys.begin() + part * 5, keys.begin() + part * 5 + 5)));
    }
    ASSERT_TRUE(s->run_upload_once());
  }
  append(*s, sid(2), keyed_batch(0, {1, 1, 1}));
  ASSERT_TRUE(s->run_upload_once());
  for (int pass = 0; pass < 10 && s->cleaner_stats().records_removed < 40; ++pass) {
    ASSERT_TRUE(s->run_cleaner_once(true));
  }
  EXPECT_GE(s->cleaner_stats().passes, 3u);
  std::vector<std::string> latest;
  latest.reserve(20);
  for (int k = 0; k < 20; ++k) {
    latest.push_back(std::to_string(40 + k) + ":k" + std::to_string(k) + "=v2-" +
                     std::to_string(k));
  }
  EXPECT_EQ(keyed_records(*s, sid(1)), latest);
  EXPECT_EQ(keyed_records(*s, sid(2)).size(), 3u);  // not compacted
  // A min.compaction.lag.ms longer than the data's age: nothing more is cleaned.
  s->set_compaction(sid(1), {true, 86400000, 3'000'000'000'000'000, INT64_MAX, 0.5});
  append(*s, sid(1), keyed_batch(3, {0, 1}));
  ASSERT_TRUE(s->run_upload_once());
  const auto removed = s->cleaner_stats().records_removed;
  ASSERT_TRUE(s->run_cleaner_once(true));
  EXPECT_EQ(s->cleaner_stats().records_removed, removed);
}

// Small streams are merged into one stream-set object, never one object each; a stream with
// stream_object_bytes or more gets a stream object of its own.
TEST_F(StreamStore, CompactionMergesSmallStreamsAndGivesBigOnesTheirOwnObject) {
  auto o = options();
  o.log_cache_bytes = 0;
  o.stream_object_bytes = 3000;  // stream 1 reaches it over 4 uploads, the others never
  auto s = open(o);
  for (int round = 0; round < 4; ++round) {
    append(*s, sid(1), batch(1, round * 100, 100));
    for (uint64_t stream = 2; stream <= 40; ++stream) {
      append(*s, sid(stream), batch(stream, round * 2, 2));
    }
    ASSERT_TRUE(s->run_upload_once());
  }
  EXPECT_EQ(s->stats().stream_set_objects, 4u);
  ASSERT_TRUE(s->run_compaction_once());
  ASSERT_TRUE(s->run_deletions_once());
  EXPECT_EQ(s->stats().deleted_objects, 4u);
  auto listed = objects().list("objects/");
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 2u);
  int sets = 0;
  int streams = 0;
  for (const auto& obj : *listed) {
    sets += obj.key.ends_with(".set") ? 1 : 0;
    streams += obj.key.ends_with(".stream") ? 1 : 0;
  }
  EXPECT_EQ(sets, 1);
  EXPECT_EQ(streams, 1);
  EXPECT_EQ(read_all(*s, sid(1), off(0), 2000), expected(1, 0, 400));
  for (uint64_t stream = 2; stream <= 40; ++stream) {
    EXPECT_EQ(read_all(*s, sid(stream), off(0), 2000), expected(stream, 0, 8));
  }
  // A lone stream-set object is not rewritten again and again.
  ASSERT_TRUE(s->run_compaction_once());
  EXPECT_EQ(s->stats().compactions, 1u);
}

// In a cluster one broker compacts: a store told it does not maintain objects uploads and
// serves its streams but compacts nothing until told it does.
TEST_F(StreamStore, OnlyAStoreThatMaintainsObjectsCompactsThem) {
  auto o = options();
  o.log_cache_bytes = 0;
  o.background = true;
  o.upload_interval = std::chrono::milliseconds(10);
  o.compaction_interval = std::chrono::milliseconds(20);
  auto s = open(o);
  s->set_maintains_objects(false);  // (nothing to compact before the first upload)
  for (int round = 0; round < 3; ++round) {
    for (uint64_t stream = 1; stream <= 5; ++stream) {
      append(*s, sid(stream), batch(stream, round * 2, 2));
    }
    ASSERT_TRUE(s->run_upload_once());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_GE(s->stats().stream_set_objects, 3u);
  EXPECT_EQ(s->stats().compactions, 0u);
  s->set_maintains_objects(true);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (s->stats().compactions == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(s->stats().compactions, 1u);
  for (uint64_t stream = 1; stream <= 5; ++stream) {
    EXPECT_EQ(read_all(*s, sid(stream), off(0)), expected(stream, 0, 6));
  }
}

// Small stream objects next to each other in their stream are merged into one.
TEST_F(StreamStore, CompactionMergesSmallStreamObjects) {
  auto o = options();
  o.log_cache_bytes = 0;
  o.stream_object_bytes = 500;  // each upload of stream 1 makes a stream object of its own
  auto s = open(o);
  for (int round = 0; round < 5; ++round) {
    append(*s, sid(1), batch(1, round * 100, 100));
    ASSERT_TRUE(s->run_upload_once());
  }
  EXPECT_EQ(s->stats().stream_objects, 5u);
  o.stream_object_bytes = 1 << 20;  // now they are all small
  s.reset();
  s = open(o);
  ASSERT_TRUE(s->run_compaction_once());
  ASSERT_TRUE(s->run_deletions_once());
  EXPECT_EQ(s->stats().deleted_objects, 5u);
  auto listed = objects().list("objects/");
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_TRUE(listed->front().key.ends_with(".stream"));
  EXPECT_EQ(read_all(*s, sid(1), off(0), 3000), expected(1, 0, 500));
}

TEST_F(StreamStore, ConcurrentReaderSeesNoGapOrDuplicateDuringCompaction) {
  auto o = options();
  o.log_cache_bytes = 0;
  auto s = open(o);
  for (int round = 0; round < 6; ++round) {
    append(*s, sid(1), batch(1, round * 50, 50));
    append(*s, sid(2), batch(2, round * 50, 50));
    ASSERT_TRUE(s->run_upload_once());
  }
  std::atomic<bool> stop{false};
  std::atomic<int> passes{0};
  std::thread reader([&] {
    while (!stop) {
      EXPECT_EQ(read_all(*s, sid(1), off(0), 1500), expected(1, 0, 300));
      ++passes;
    }
  });
  ASSERT_TRUE(s->run_compaction_once());
  ASSERT_TRUE(s->run_deletions_once());
  while (passes < 3) std::this_thread::yield();
  stop = true;
  reader.join();
  EXPECT_EQ(s->stats().compactions, 1u);
}

TEST_F(StreamStore, RetentionBySizeAndTimeRemovesWholeRanges) {
  auto o = options();
  o.log_cache_bytes = 0;
  auto s = open(o);
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const int64_t hour = 3600 * 1000;
  for (int round = 0; round < 5; ++round) {
    append(*s, sid(1), batch(1, round * 10, 10, round < 2 ? now - 48 * hour : now));
    ASSERT_TRUE(s->run_upload_once());
  }
  const auto range_bytes = s->read(sid(1), off(40), 1 << 20)->bytes();
  // by time: the two ranges of two days ago go, the active segment being the newest three
  s->set_active_segment(sid(1), 24 * hour, static_cast<int64_t>(3 * range_bytes));
  s->set_retention(sid(1), 24 * hour, -1);
  ASSERT_TRUE(s->run_retention_once());
  EXPECT_EQ(s->offsets(sid(1)).start_offset, off(20));
  EXPECT_EQ(s->read(sid(1), off(5), 100).error(), stream_error::offset_out_of_range);
  EXPECT_EQ(read_all(*s, sid(1), off(20)), expected(1, 20, 50));
  const auto one_range = s->read(sid(1), off(20), 1 << 20)->bytes();
  s->set_retention(sid(1), -1, static_cast<int64_t>(one_range));  // by size: keep one range
  ASSERT_TRUE(s->run_retention_once());
  EXPECT_EQ(s->offsets(sid(1)).start_offset, off(40));
  ASSERT_TRUE(s->run_deletions_once());
  EXPECT_EQ(s->stats().deleted_objects, 4u);
  EXPECT_EQ(read_all(*s, sid(1), off(40)), expected(1, 40, 50));
}

TEST_F(StreamStore, TimeRetentionKeepsTheActiveSegmentWhateverItsTimestamps) {
  auto o = options();
  o.log_cache_bytes = 0;
  auto s = open(o);
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const int64_t year = 365LL * 24 * 3600 * 1000;
  // Records stamped years ago (a replay), just written: the newest segment.bytes are the
  // active segment, which time retention never removes while written within segment.ms.
  for (int round = 0; round < 4; ++round) {
    append(*s, sid(1), batch(1, round * 10, 10, now - 5 * year));
    ASSERT_TRUE(s->run_upload_once());
  }
  const auto range_bytes = s->read(sid(1), off(30), 1 << 20)->bytes();
  s->set_retention(sid(1), 3600 * 1000, -1);
  ASSERT_TRUE(s->run_retention_once());  // the defaults: 1 GiB within 7 days
  EXPECT_EQ(s->offsets(sid(1)).start_offset, off(0));
  // An active segment of two ranges: the two older ones go, the newest two stay.
  s->set_active_segment(sid(1), 3600 * 1000, static_cast<int64_t>(2 * range_bytes));
  ASSERT_TRUE(s->run_retention_once());
  EXPECT_EQ(s->offsets(sid(1)).start_offset, off(20));
  EXPECT_EQ(read_all(*s, sid(1), off(20)), expected(1, 20, 40));
  // Once segment.ms has passed since they were written, they go too (up to the end).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  s->set_active_segment(sid(1), 10, static_cast<int64_t>(2 * range_bytes));
  ASSERT_TRUE(s->run_retention_once());
  EXPECT_EQ(s->offsets(sid(1)).start_offset, off(40));
}

// A deleted topic's streams: their state and cached batches leave memory, what waits for
// upload is never uploaded, and the catalog forgets them; the objects left with nothing else
// go with the next deletions.
TEST_F(StreamStore, ADroppedStreamLeavesMemoryTheCatalogAndTheObjects) {
  auto o = options();
  o.log_cache_bytes = 0;
  auto s = open(o);
  ASSERT_TRUE(s->take({sid(1), sid(2)}));
  append(*s, sid(1), batch(1, 0, 10));
  ASSERT_TRUE(s->run_upload_once());  // one object of stream 1 alone
  append(*s, sid(1), batch(1, 10, 10));
  append(*s, sid(2), batch(2, 0, 10));
  const size_t before = s->stream_count();
  ASSERT_TRUE(s->drop({sid(1)}));
  EXPECT_EQ(s->stream_count(), before - 1);
  // Stream 1's pending batches are not uploaded; stream 2's are, alone.
  ASSERT_TRUE(s->run_upload_once());
  auto catalog = metadata::stream_catalog::open(o.metadata_uri);
  ASSERT_TRUE(catalog);
  auto gone = (*catalog)->stream(sid(1));
  ASSERT_TRUE(gone);
  EXPECT_FALSE(gone->has_value());
  auto ranges = (*catalog)->ranges(sid(1));
  ASSERT_TRUE(ranges);
  EXPECT_TRUE(ranges->empty());
  EXPECT_EQ(read_all(*s, sid(2), off(0)), expected(2, 0, 10));
  ASSERT_TRUE(s->run_deletions_once());
  EXPECT_EQ(s->stats().deleted_objects, 1u);
  EXPECT_EQ(s->stats().log_cache_bytes, 0u);
  EXPECT_EQ(s->stats().not_uploaded_bytes, 0u);
  EXPECT_EQ(s->stream_count(), before - 1);  // nothing recreated it
}

TEST_F(StreamStore, TrimMovesTheStartForward) {
  auto s = open(options());
  append(*s, sid(1), batch(1, 0, 10));
  ASSERT_TRUE(s->trim(sid(1), off(4)));
  EXPECT_EQ(s->offsets(sid(1)).start_offset, off(4));
  EXPECT_EQ(s->read(sid(1), off(3), 100).error(), stream_error::offset_out_of_range);
  EXPECT_EQ(s->trim(sid(1), off(11)).error(), stream_error::offset_out_of_range);
}

TEST_F(StreamStore, UploadsRetryThroughAFaultyObjectStoreWithoutLosingData) {
  auto o = options();
  o.log_cache_bytes = 0;
  faulty_store_options faults;
  faults.seed = 7;
  faults.error_probability = 0.2;
  faults.partial_probability = 0.1;
  faults.slow_probability = 0.1;
  faults.lost_reply_probability = 0.1;
  faulty_store flaky(objects(), faults);
  auto opened = stream_store::open(o, flaky);
  ASSERT_TRUE(opened);
  auto& s = **opened;
  int failures = 0;
  for (int round = 0; round < 10; ++round) {
    append(s, sid(1), batch(1, round * 10, 10));
    append(s, sid(2), batch(2, round * 10, 10));
    // A failed round changes nothing but leaves the data for the next one.
    for (int attempt = 0; attempt < 100 && !s.run_upload_once(); ++attempt) ++failures;
  }
  EXPECT_GT(failures, 0) << "the faulty store injected no failure";
  for (int attempt = 0; attempt < 100 && !s.run_compaction_once(); ++attempt) {
  }
  flaky.set_options(faulty_store_options{});
  EXPECT_EQ(read_all(s, sid(1), off(0), 2000), expected(1, 0, 100));
  EXPECT_EQ(read_all(s, sid(2), off(0), 2000), expected(2, 0, 100));
}

// Appends until one is durable, retrying the same batch after a failed WAL write (as a client
// retries); returns the base offset and counts the failures.
base::offset append_retrying(stream_store& s, base::stream_id stream,
                             const std::vector<uint8_t>& data, int& failures) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    std::promise<tl::expected<base::offset, stream_error>> p;
    s.append(stream, data, [&](auto r) { p.set_value(r); });
    auto r = p.get_future().get();
    if (r) return *r;
    EXPECT_EQ(r.error(), stream_error::wal_failed);
    ++failures;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the WAL recovers
  }
  ADD_FAILURE() << "never durable";
  return off(-1);
}

TEST_F(StreamStore, FailedWalWritesLeaveNoTraceAndTheirOffsetsAreReused) {
  auto o = options();
  auto faults = std::make_shared<wal::write_faults>(wal::write_faults::options{});
  o.wal.faults = faults;
  int failures = 0;
  {
    auto s = open(o);
    faults->fail_next(1);
    std::promise<tl::expected<base::offset, stream_error>> p;
    s->append(sid(1), batch(1, 0, 5), [&](auto r) { p.set_value(r); });
    auto first = p.get_future().get();
    ASSERT_FALSE(first);
    EXPECT_EQ(first.error(), stream_error::wal_failed);
    EXPECT_EQ(s->offsets(sid(1)).end_offset, off(0));
    // The retry gets the same offsets, and the store goes on appending.
    EXPECT_EQ(append_retrying(*s, sid(1), batch(1, 0, 5), failures), off(0));
    faults->set_options({.seed = 3, .fail_probability = 0.3});
    int next = 5;
    for (int i = 0; i < 60; ++i) {
      const uint64_t stream = 1 + i % 3;
      const int first_value = stream == 1 ? next : i * 10;
      auto data = batch(stream, first_value, 5);
      const base::offset first_offset = append_retrying(*s, sid(stream), data, failures);
      if (stream == 1) {
        EXPECT_EQ(first_offset, off(next));
        next += 5;
      }
    }
    EXPECT_GT(failures, 5);
    EXPECT_EQ(read_all(*s, sid(1), off(0)), expected(1, 0, next));
    EXPECT_EQ(s->offsets(sid(1)).end_offset, off(next));
    faults->set_options({});
    ASSERT_TRUE(s->run_upload_once());
    EXPECT_EQ(read_all(*s, sid(1), off(0)), expected(1, 0, next));
    s->close();
    o.wal.faults = nullptr;
    auto again = open(o);
    EXPECT_EQ(read_all(*again, sid(1), off(0)), expected(1, 0, next));
    EXPECT_EQ(again->offsets(sid(2)).end_offset, off(20 * 5));
  }
}

TEST_F(StreamStore, AppendTooLargeForTheWalFailsAloneAndAFullWalRefusesUntilUploaded) {
  auto o = options();
  o.wal.capacity = 64 << 10;
  o.upload_threshold_bytes = 1 << 30;  // uploads only when the test says
  auto s = open(o);
  std::atomic<int> room{0};
  s->set_room_listener([&] { room.fetch_add(1); });
  std::vector<uint8_t> huge = batch(1, 0, 1);
  {
    protocol::record_batch_builder b;
    const std::vector<uint8_t> value(100 << 10, 'x');
    b.add(1700000000000, std::nullopt, value);
    huge = b.build();
  }
  auto owner = std::make_shared<std::vector<uint8_t>>(huge);
  auto refused = s->append(sid(1), owner, *owner, [](auto) { ADD_FAILURE() << "called back"; });
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), stream_error::too_large);
  EXPECT_EQ(append(*s, sid(1), batch(1, 0, 3)), off(0));  // the store still takes appends
  // Fill the ring; the next append is refused at once, without waiting.
  int value = 3;
  tl::expected<base::offset, stream_error> r;
  for (int i = 0; i < 1000; ++i) {
    auto data = std::make_shared<std::vector<uint8_t>>(batch(1, value, 50));
    std::promise<void> durable;
    r = s->append(sid(1), data, *data, [&](auto) { durable.set_value(); });
    if (!r) break;
    durable.get_future().wait();
    value += 50;
  }
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), stream_error::wal_full);
  EXPECT_EQ(s->offsets(sid(1)).end_offset, off(value));  // the refused append took no offsets
  EXPECT_EQ(room.load(), 0);
  ASSERT_TRUE(s->run_upload_once());  // commits the data, then trims the WAL
  for (int i = 0; i < 500 && room.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(room.load(), 1);
  EXPECT_EQ(append(*s, sid(1), batch(1, value, 50)), off(value));
  EXPECT_EQ(read_all(*s, sid(1), off(0)), expected(1, 0, value + 50));
}

// The sweep, on the local directory store and (when SILT_S3_ENDPOINT, SILT_S3_ACCESS_KEY and
// SILT_S3_SECRET_KEY name a server, see scripts/s3-test-server.sh) on S3.
class StreamStoreSweep : public StreamStore, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() != "s3") return;
    auto env = [](const char* name) {
      const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): before any thread
      return v == nullptr ? std::string() : std::string(v);
    };
    if (env("SILT_S3_ENDPOINT").empty() || env("SILT_S3_ACCESS_KEY").empty() ||
        env("SILT_S3_SECRET_KEY").empty()) {
      GTEST_SKIP() << "no S3 server: set SILT_S3_ENDPOINT, SILT_S3_ACCESS_KEY and "
                      "SILT_S3_SECRET_KEY (eval \"$(scripts/s3-test-server.sh start DIR)\")";
    }
    s3_options o;
    o.bucket = "silt-sweep-" + std::to_string(::getpid()) + "-" + std::to_string(buckets_++);
    o.endpoint = env("SILT_S3_ENDPOINT");
    o.region = env("SILT_S3_REGION").empty() ? "us-east-1" : env("SILT_S3_REGION");
    o.path_style = true;
    o.access_key = env("SILT_S3_ACCESS_KEY");
    o.secret_key = env("SILT_S3_SECRET_KEY");
    o.retry.max_attempts = 3;
    auto s3 = s3_store::open(o);
    ASSERT_TRUE(s3) << s3.error();
    ASSERT_TRUE((*s3)->create_bucket());
    s3_ = s3->get();
    store_ = std::move(*s3);
  }
  void TearDown() override {
    if (s3_ == nullptr) return;
    if (auto all = s3_->list("")) {
      for (const auto& o : *all) (void)s3_->remove(o.key);
    }
    EXPECT_TRUE(s3_->delete_bucket());
  }
  std::vector<std::string> keys(const std::string& prefix = "") {
    std::vector<std::string> out;
    auto listed = objects().list(prefix);
    EXPECT_TRUE(listed.has_value());
    if (listed) {
      for (const auto& o : *listed) out.push_back(o.key);
    }
    return out;
  }
  static bool has(const std::vector<std::string>& keys, const std::string& key) {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  }

  static inline int buckets_ = 0;
  s3_store* s3_ = nullptr;
};

INSTANTIATE_TEST_SUITE_P(Stores, StreamStoreSweep, ::testing::Values("local", "s3"),
                         [](const auto& info) { return info.param; });

TEST_P(StreamStoreSweep, ObjectWhosePutReplyWasLostIsDeletedAfterTheGracePeriodOnly) {
  auto o = options();
  o.log_cache_bytes = 0;  // reads below come from the objects
  o.sweep_grace = std::chrono::milliseconds(400);
  faulty_store flaky(objects(), faulty_store_options{});
  auto opened = stream_store::open(o, flaky);
  ASSERT_TRUE(opened);
  auto& s = **opened;
  append(s, sid(1), batch(1, 0, 10));
  ASSERT_TRUE(s.run_upload_once());
  const auto committed_first = keys("objects/");
  ASSERT_EQ(committed_first.size(), 1u);
  // The PUT lands but its reply is lost: the upload fails and is retried under a new key.
  append(s, sid(1), batch(1, 10, 10));
  flaky.script(store_operation::put, {fault::lost_reply});
  ASSERT_FALSE(s.run_upload_once());
  const auto with_orphan = keys("objects/");
  ASSERT_EQ(with_orphan.size(), 2u);
  const std::string& orphan = with_orphan[1];
  ASSERT_TRUE(s.run_upload_once());
  ASSERT_EQ(keys("objects/").size(), 3u);
  // Not the sweep's: other prefixes (the cluster marker among them), other names, ids the
  // catalog never handed out.
  const std::vector<std::string> foreign = {std::string(cluster_marker_key),
                                            "other/objects/0000000000000002.set",
                                            "objects/notes.txt",
                                            "objects/0000000000000002.tmp",
                                            "objects/00000000000000FF.set",
                                            "objects/00000000000000ff.set"};
  for (const auto& key : foreign) {
    const std::vector<uint8_t> data = {1, 2, 3};
    ASSERT_TRUE(objects().put(key, data)) << key;
  }

  ASSERT_TRUE(s.run_sweep_once());
  EXPECT_TRUE(has(keys(), orphan)) << "deleted before the grace period passed";
  EXPECT_EQ(s.stats().swept_objects, 0u);
  std::this_thread::sleep_for(o.sweep_grace + std::chrono::milliseconds(50));
  ASSERT_TRUE(s.run_sweep_once());
  const auto after = keys();
  EXPECT_FALSE(has(after, orphan));
  EXPECT_EQ(s.stats().swept_objects, 1u);
  EXPECT_EQ(after.size(), 2 + foreign.size());
  for (const auto& key : foreign) EXPECT_TRUE(has(after, key)) << key;
  EXPECT_TRUE(has(after, committed_first[0]));
  EXPECT_EQ(read_all(s, sid(1), off(0)), expected(1, 0, 20));
  // Nothing more to do.
  ASSERT_TRUE(s.run_sweep_once());
  EXPECT_EQ(s.stats().swept_objects, 1u);
}

TEST_P(StreamStoreSweep, ObjectWhoseCommitWasRefusedAndWhoseRemoveFailedIsDeleted) {
  auto o = options();
  o.sweep_grace = std::chrono::milliseconds(0);
  faulty_store flaky(objects(), faulty_store_options{});
  auto opened = stream_store::open(o, flaky);
  ASSERT_TRUE(opened);
  auto& s = **opened;
  append(s, sid(1), batch(1, 0, 10));
  append(s, sid(2), batch(2, 0, 10));
  // Another writer of the catalog commits stream 1 first: the upload's commit is refused,
  // and the remove of its object then fails too.
  {
    auto other = metadata::stream_catalog::open(o.metadata_uri);
    ASSERT_TRUE(other);
    auto id = (*other)->next_object_id();
    ASSERT_TRUE(id);
    ASSERT_TRUE((*other)->commit_object(
        {*id, "elsewhere/" + std::to_string(*id), 1, metadata::object_kind::stream_set, 0},
        {{sid(1), off(0), off(5), -1, 1}}));
  }
  flaky.script(store_operation::remove, {fault::io});
  ASSERT_FALSE(s.run_upload_once());
  ASSERT_EQ(keys("objects/").size(), 1u);
  ASSERT_TRUE(s.run_sweep_once());
  EXPECT_TRUE(keys("objects/").empty());
  EXPECT_EQ(s.stats().swept_objects, 1u);
}

TEST_P(StreamStoreSweep, UploadBetweenItsPutAndItsCommitIsNotSwept) {
  auto o = options();
  o.sweep_grace = std::chrono::milliseconds(0);  // every uncommitted object is fair game
  stream_store* store = nullptr;
  std::thread sweeper;
  std::atomic<bool> sweep_done{false};
  std::string put_key;
  faulty_store_options hook;
  // A PUT of an upload has written its object and not yet returned.
  hook.after_inner_call = [&](store_operation op, std::string_view key) {
    if (op != store_operation::put || sweeper.joinable()) return;
    put_key = key;
    // A sweep starting now, with the object written and not committed, and given time.
    sweeper = std::thread([&] {
      EXPECT_TRUE(store->run_sweep_once());
      sweep_done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_FALSE(sweep_done) << "the sweep ran in the middle of an upload";
  };
  faulty_store hooked(objects(), hook);
  auto opened = stream_store::open(o, hooked);
  ASSERT_TRUE(opened);
  store = opened->get();
  append(*store, sid(1), batch(1, 0, 10));
  ASSERT_TRUE(store->run_upload_once());
  ASSERT_TRUE(sweeper.joinable());
  sweeper.join();
  EXPECT_TRUE(sweep_done);
  EXPECT_EQ(store->stats().swept_objects, 0u);
  EXPECT_TRUE(has(keys(), put_key));
  EXPECT_EQ(read_all(*store, sid(1), off(0)), expected(1, 0, 10));
}

}  // namespace
}  // namespace silt::storage

namespace silt::storage {
namespace {

// Two stores (two brokers) on one metadata database and one bucket, on each backend.
class StreamStoreOwnership : public StreamStore, public ::testing::WithParamInterface<std::string> {
 protected:
  stream_store_options node(int32_t id, const std::shared_ptr<metadata::sql::database>& db) {
    auto o = options();
    o.wal.path = (dir_.path() / ("wal-" + std::to_string(id))).string();
    o.metadata = db;
    o.node_id = base::node_id(id);
    return o;
  }
};

// Node 2 takes a stream node 1 was serving. Node 1 learns it when its next commit is refused:
// from then on it neither appends, reads, trims nor writes producer state for the stream, and
// the data node 2 appended after taking it is all there.
TEST_P(StreamStoreOwnership, TheStaleOwnerIsFencedAndTheNewOwnerLosesNothing) {
  auto db = metadata::sql::open_database(metadata::testing::fresh_uri(GetParam(), dir_.path()));
  ASSERT_TRUE(db) << db.error();
  auto a = open(node(1, *db));
  ASSERT_TRUE(a->take({sid(1), sid(2)}));
  EXPECT_EQ(a->offsets(sid(1)).epoch, base::leader_epoch(0));
  append(*a, sid(1), batch(1, 0, 5));
  append(*a, sid(2), batch(2, 0, 5));
  ASSERT_TRUE(a->run_upload_once());
  append(*a, sid(1), batch(1, 5, 3));  // durable in node 1's WAL, never committed

  auto b = open(node(2, *db));
  ASSERT_TRUE(b->take({sid(1)}));
  EXPECT_EQ(b->offsets(sid(1)).epoch, base::leader_epoch(1));
  EXPECT_EQ(b->offsets(sid(1)).end_offset, off(5));  // the committed end
  EXPECT_EQ(append(*b, sid(1), batch(1, 100, 4)), off(5));
  ASSERT_TRUE(b->run_upload_once());

  // Node 1's upload holds streams 1 and 2: refused whole, then retried without stream 1.
  EXPECT_FALSE(a->run_upload_once());
  EXPECT_TRUE(a->offsets(sid(1)).fenced);
  EXPECT_FALSE(a->offsets(sid(2)).fenced);
  append(*a, sid(2), batch(2, 5, 1));
  ASSERT_TRUE(a->run_upload_once());
  std::promise<tl::expected<base::offset, stream_error>> refused;
  a->append(sid(1), batch(1, 8, 1), [&](auto r) { refused.set_value(r); });
  EXPECT_EQ(refused.get_future().get().error(), stream_error::fenced);
  EXPECT_EQ(a->read(sid(1), off(0), 1000).error(), stream_error::fenced);
  EXPECT_EQ(a->trim(sid(1), off(2)).error(), stream_error::fenced);
  EXPECT_EQ(a->put_producer_state(sid(1), {1}).error(), stream_error::fenced);

  // Everything node 2 serves: node 1's committed records, then node 2's. Reopened, each
  // node serves its own streams only: the other's may wait in the other's WAL.
  auto want = expected(1, 0, 5);
  for (auto& v : expected(1, 100, 104)) want.push_back(v);
  a.reset();
  b.reset();
  auto c = open(node(2, *db));
  EXPECT_EQ(read_all(*c, sid(1), off(0)), want);
  EXPECT_TRUE(c->offsets(sid(2)).fenced);
  EXPECT_EQ(c->offsets(sid(2)).owner, base::node_id(1));
  EXPECT_EQ(c->read(sid(2), off(0), 1000).error(), stream_error::fenced);
  auto d = open(node(1, *db));
  EXPECT_TRUE(d->offsets(sid(1)).fenced);
  EXPECT_EQ(d->offsets(sid(1)).owner, base::node_id(2));
  EXPECT_EQ(read_all(*d, sid(2), off(0)), expected(2, 0, 6));
  auto epochs = c->epochs(sid(1));
  ASSERT_TRUE(epochs);
  ASSERT_EQ(epochs->size(), 2u);
  EXPECT_EQ((*epochs)[1].epoch, base::leader_epoch(1));
  EXPECT_EQ((*epochs)[1].start_offset, off(5));
}

// Streams of a topic another broker created: learned from the catalog, served by their owner
// only; one its creator has not taken yet is served by nobody and learned again later.
TEST_P(StreamStoreOwnership, LearnedStreamsAreServedOnlyByTheirOwner) {
  auto db = metadata::sql::open_database(metadata::testing::fresh_uri(GetParam(), dir_.path()));
  ASSERT_TRUE(db) << db.error();
  auto b = open(node(2, *db));
  auto a = open(node(1, *db));
  ASSERT_TRUE(a->take({sid(5), sid(6)}));
  append(*a, sid(5), batch(5, 0, 3));
  auto unsettled = b->learn({sid(5), sid(6), sid(7)});
  ASSERT_TRUE(unsettled);
  EXPECT_EQ(*unsettled, std::vector<base::stream_id>{sid(7)});
  for (const auto s : {sid(5), sid(6)}) {
    EXPECT_TRUE(b->offsets(s).fenced);
    EXPECT_EQ(b->offsets(s).owner, base::node_id(1));
  }
  EXPECT_TRUE(b->offsets(sid(7)).fenced);
  EXPECT_EQ(b->offsets(sid(7)).owner, base::node_id(-1));
  std::promise<tl::expected<base::offset, stream_error>> refused;
  b->append(sid(7), batch(7, 0, 1), [&](auto r) { refused.set_value(r); });
  EXPECT_EQ(refused.get_future().get().error(), stream_error::fenced);
  EXPECT_EQ(b->read(sid(5), off(0), 1000).error(), stream_error::fenced);
  ASSERT_TRUE(a->take({sid(7)}));
  ASSERT_TRUE(b->learn({sid(7)}));
  EXPECT_EQ(b->offsets(sid(7)).owner, base::node_id(1));
  EXPECT_EQ(read_all(*a, sid(5), off(0)), expected(5, 0, 3));

  // Later takes reach b through refresh_owners(): node 1 again (a restart: a new epoch), and
  // node 1 taking a stream b was serving (b stops serving it at once).
  ASSERT_TRUE(b->take({sid(9)}));
  ASSERT_TRUE(b->refresh_owners());
  ASSERT_TRUE(a->take({sid(5), sid(9)}));
  EXPECT_EQ(b->offsets(sid(5)).epoch, base::leader_epoch(0));
  EXPECT_FALSE(b->offsets(sid(9)).fenced);
  ASSERT_TRUE(b->refresh_owners());
  EXPECT_EQ(b->offsets(sid(5)).epoch, base::leader_epoch(1));
  EXPECT_EQ(b->offsets(sid(5)).owner, base::node_id(1));
  EXPECT_TRUE(b->offsets(sid(9)).fenced);
  EXPECT_EQ(b->offsets(sid(9)).owner, base::node_id(1));
  EXPECT_EQ(b->offsets(sid(9)).epoch, base::leader_epoch(1));
  // Its own takes are not undone by what it reads.
  ASSERT_TRUE(b->take({sid(9)}));
  ASSERT_TRUE(b->refresh_owners());
  EXPECT_FALSE(b->offsets(sid(9)).fenced);
  EXPECT_EQ(b->offsets(sid(9)).epoch, base::leader_epoch(2));
}

// A read replica (KIP-392): node 2 reads what node 1 committed of a stream node 1 owns,
// from the objects, and sees where the committed data starts and ends; nothing of node 1's
// WAL that is not committed yet, and nothing below a trimmed start.
TEST_P(StreamStoreOwnership, AnotherNodeReadsWhatTheOwnerCommitted) {
  auto db = metadata::sql::open_database(metadata::testing::fresh_uri(GetParam(), dir_.path()));
  ASSERT_TRUE(db) << db.error();
  auto a = open(node(1, *db));
  auto b = open(node(2, *db));
  ASSERT_TRUE(a->take({sid(1)}));
  append(*a, sid(1), batch(1, 0, 5));
  append(*a, sid(1), batch(1, 5, 5));
  ASSERT_TRUE(a->run_upload_once());
  append(*a, sid(1), batch(1, 10, 3));  // durable in node 1's WAL, not committed
  ASSERT_TRUE(b->learn({sid(1)}));

  auto r = b->read_committed(sid(1), off(0), 1 << 20);
  ASSERT_TRUE(r) << stream_error_name(r.error());
  EXPECT_EQ(r->start_offset, off(0));
  EXPECT_EQ(r->committed_end, off(10));
  EXPECT_EQ(values(r->data, off(0)), expected(1, 0, 10));
  r = b->read_committed(sid(1), off(7), 1 << 20);
  ASSERT_TRUE(r);
  EXPECT_EQ(values(r->data, off(7)), expected(1, 7, 10));
  r = b->read_committed(sid(1), off(10), 1 << 20);  // the committed end: nothing yet
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->data.chunks.empty());
  EXPECT_EQ(r->committed_end, off(10));

  ASSERT_TRUE(a->run_upload_once());
  ASSERT_TRUE(a->trim(sid(1), off(5)));
  r = b->read_committed(sid(1), off(10), 1 << 20);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->committed_end, off(13));
  EXPECT_EQ(values(r->data, off(10)), expected(1, 10, 13));
  r = b->read_committed(sid(1), off(2), 1 << 20);  // trimmed away
  ASSERT_TRUE(r);
  EXPECT_EQ(r->start_offset, off(5));
  EXPECT_TRUE(r->data.chunks.empty());
  // A stream no node took has nothing to read.
  EXPECT_EQ(b->read_committed(sid(3), off(0), 1000).error(), stream_error::fenced);
}

// A move: the target set in the catalog, the owner stops appending, uploads and hands the
// stream over at the next epoch; the new owner serves it from the committed end with nothing
// lost, and a move back drops nothing the first owner still cached.
TEST_P(StreamStoreOwnership, AHandoverMovesAStreamWithoutLosingData) {
  auto db = metadata::sql::open_database(metadata::testing::fresh_uri(GetParam(), dir_.path()));
  ASSERT_TRUE(db) << db.error();
  auto a = open(node(1, *db));
  auto b = open(node(2, *db));
  ASSERT_TRUE(a->take({sid(5)}));
  append(*a, sid(5), batch(5, 0, 3));
  ASSERT_TRUE(b->learn({sid(5)}));
  auto catalog = metadata::stream_catalog::open(*db);
  ASSERT_TRUE(catalog);
  ASSERT_TRUE((*catalog)->assign({{sid(5), base::node_id(2)}}));
  ASSERT_TRUE(a->refresh_owners());
  ASSERT_TRUE(b->refresh_owners());
  EXPECT_TRUE(b->moves().empty());  // b waits for a
  const auto moves = a->moves();
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].stream_id, sid(5));
  EXPECT_EQ(moves[0].target, base::node_id(2));
  auto ready = a->prepare_release({sid(5)}, std::chrono::seconds(5));
  ASSERT_TRUE(ready);
  ASSERT_EQ(*ready, std::vector<base::stream_id>{sid(5)});
  // Appends wait for the handover (NOT_LEADER for clients); nothing is waiting in the WAL.
  std::promise<tl::expected<base::offset, stream_error>> refused;
  a->append(sid(5), batch(5, 3, 1), [&](auto r) { refused.set_value(r); });
  EXPECT_EQ(refused.get_future().get().error(), stream_error::fenced);
  ASSERT_TRUE(a->handover(sid(5), base::node_id(2)));
  EXPECT_TRUE(a->offsets(sid(5)).fenced);
  EXPECT_EQ(a->offsets(sid(5)).owner, base::node_id(2));

  auto adopted = b->refresh_owners();
  ASSERT_TRUE(adopted);
  EXPECT_EQ(*adopted, std::vector<base::stream_id>{sid(5)});
  EXPECT_FALSE(b->offsets(sid(5)).fenced);
  EXPECT_EQ(b->offsets(sid(5)).epoch, base::leader_epoch(1));
  EXPECT_EQ(b->offsets(sid(5)).end_offset, off(3));
  EXPECT_EQ(read_all(*b, sid(5), off(0)), expected(5, 0, 3));
  append(*b, sid(5), batch(5, 3, 2));
  auto epochs = b->epochs(sid(5));
  ASSERT_TRUE(epochs);
  ASSERT_EQ(epochs->size(), 2u);
  EXPECT_EQ((*epochs)[1].start_offset, off(3));
  ASSERT_TRUE(a->refresh_owners());
  EXPECT_TRUE(a->moves().empty());  // the target was cleared with the handover

  // And back: a had it cached at offsets [0, 3); it serves b's later data too.
  ASSERT_TRUE((*catalog)->assign({{sid(5), base::node_id(1)}}));
  ASSERT_TRUE(b->refresh_owners());
  ready = b->prepare_release({sid(5)}, std::chrono::seconds(5));
  ASSERT_TRUE(ready);
  ASSERT_EQ(ready->size(), 1u);
  ASSERT_TRUE(b->handover(sid(5), base::node_id(1)));
  adopted = a->refresh_owners();
  ASSERT_TRUE(adopted);
  EXPECT_EQ(adopted->size(), 1u);
  EXPECT_EQ(a->offsets(sid(5)).epoch, base::leader_epoch(2));
  auto all = read_all(*a, sid(5), off(0));
  auto want = expected(5, 0, 3);
  const auto more = expected(5, 3, 5);
  want.insert(want.end(), more.begin(), more.end());
  EXPECT_EQ(all, want);
  append(*a, sid(5), batch(5, 5, 1));
  ASSERT_TRUE(a->run_upload_once());
  EXPECT_EQ(a->offsets(sid(5)).end_offset, off(6));
}

// Metadata round trips: appends make none; one upload of 1,000 streams' data is a handful of
// statements (an object id, then one commit transaction with statements of up to 128
// streams), not one per stream.
TEST_P(StreamStoreOwnership, ProducesMakeNoMetadataRoundTripAndAnUploadAFew) {
  auto db = metadata::sql::open_database(metadata::testing::fresh_uri(GetParam(), dir_.path()));
  ASSERT_TRUE(db) << db.error();
  auto a = open(node(1, *db));
  std::vector<base::stream_id> ids;
  for (uint64_t i = 1; i <= 1000; ++i) ids.push_back(sid(i));
  ASSERT_TRUE(a->take(ids));
  uint64_t before = metadata::sql::statements_sent();
  for (uint64_t i = 1; i <= 1000; ++i) append(*a, sid(i), batch(i, 0, 1));
  EXPECT_EQ(metadata::sql::statements_sent() - before, 0u);
  before = metadata::sql::statements_sent();
  ASSERT_TRUE(a->run_upload_once());
  const uint64_t used = metadata::sql::statements_sent() - before;
  std::printf("an upload of 1,000 streams: %llu statements\n",
              static_cast<unsigned long long>(used));
  EXPECT_LE(used, 40u);
}

// Failover: node 1 dies with data only in its WAL. Node 2, holding the takeover of that WAL,
// takes node 1's streams and appends what the WAL holds beyond their committed ends: nothing
// is lost and offsets go on. A first attempt that cannot read the WAL leaves the streams
// refusing appends, and a later one takes them again. Node 1, restarted on its WAL, serves none
// of them.
TEST_P(StreamStoreOwnership, ATakeoverRecoversWhatADeadBrokersWalHeld) {
  auto db = metadata::sql::open_database(metadata::testing::fresh_uri(GetParam(), dir_.path()));
  ASSERT_TRUE(db) << db.error();
  const auto a_options = node(1, *db);
  auto a = open(a_options);
  auto b = open(node(2, *db));
  ASSERT_TRUE(a->take({sid(5), sid(6)}));
  append(*a, sid(5), batch(5, 0, 3));
  ASSERT_TRUE(a->run_upload_once());
  append(*a, sid(5), batch(5, 3, 2));
  append(*a, sid(6), batch(6, 0, 2));
  ASSERT_TRUE(b->learn({sid(5), sid(6)}));
  a->close();  // dies: offsets [3, 5) of stream 5 and [0, 2) of stream 6 are in its WAL only
  a.reset();

  const std::vector<stream_store::dead_wal> from{{base::node_id(1), a_options.wal.path}};
  EXPECT_FALSE(b->take_over(from, std::chrono::seconds(5)));  // not its takeover
  // The controller's part: node 1's lease lapsed, node 2 holds the controller lease.
  auto registry = metadata::broker_registry::open(*db);
  ASSERT_TRUE(registry);
  metadata::broker_info one{base::node_id(1), "h", 1, "", a_options.wal.path, "m"};
  ASSERT_TRUE((*registry)->register_broker(one, std::chrono::milliseconds(1), false));
  metadata::broker_info two{base::node_id(2), "h", 2, "", "wal-2", "m"};
  auto two_epoch = (*registry)->register_broker(two, std::chrono::seconds(60), false);
  ASSERT_TRUE(two_epoch);
  auto controller =
      (*registry)->claim_controller(base::node_id(2), *two_epoch, std::chrono::seconds(60));
  ASSERT_TRUE(controller);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto placed = (*registry)->place_takeovers(base::node_id(2), *controller,
                                             {{base::node_id(1), base::node_id(2), ""}});
  ASSERT_TRUE(placed);
  EXPECT_EQ(*placed, 1u);

  // The WAL cannot be read: the streams are node 2's now, refusing appends until recovered.
  EXPECT_FALSE(
      b->take_over({{base::node_id(1), a_options.wal.path + ".missing"}}, std::chrono::seconds(5)));
  EXPECT_TRUE(b->offsets(sid(5)).moving);
  std::promise<tl::expected<base::offset, stream_error>> refused;
  b->append(sid(5), batch(5, 9, 1), [&](auto r) { refused.set_value(r); });
  EXPECT_EQ(refused.get_future().get().error(), stream_error::fenced);

  auto taken = b->take_over(from, std::chrono::seconds(5));
  ASSERT_TRUE(taken) << taken.error();
  EXPECT_EQ(*taken, (std::vector<base::stream_id>{sid(5), sid(6)}));
  auto left = (*registry)->takeovers();
  ASSERT_TRUE(left);
  EXPECT_TRUE(left->empty());
  EXPECT_FALSE(b->offsets(sid(5)).moving);
  EXPECT_EQ(b->offsets(sid(5)).end_offset, off(5));
  EXPECT_EQ(b->offsets(sid(5)).epoch, base::leader_epoch(2));  // 0, 1 (failed try), 2
  EXPECT_EQ(read_all(*b, sid(5), off(0)), expected(5, 0, 5));
  EXPECT_EQ(read_all(*b, sid(6), off(0)), expected(6, 0, 2));
  EXPECT_EQ(append(*b, sid(5), batch(5, 5, 1)), off(5));
  ASSERT_TRUE(b->run_upload_once());
  auto catalog = metadata::stream_catalog::open(*db);
  ASSERT_TRUE(catalog);
  auto state = (*catalog)->stream(sid(5));
  ASSERT_TRUE(state && *state);
  EXPECT_EQ((*state)->end_offset, off(6));
  EXPECT_EQ((*state)->owner, base::node_id(2));
  EXPECT_EQ((*state)->taken_from, base::node_id(-1));

  // Node 1 again, on its WAL: what it replays belongs to node 2 and is neither served nor
  // uploaded.
  a = open(a_options);
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->offsets(sid(5)).fenced);
  EXPECT_TRUE(a->offsets(sid(6)).fenced);
  ASSERT_TRUE(a->run_upload_once());
  state = (*catalog)->stream(sid(6));
  ASSERT_TRUE(state && *state);
  EXPECT_EQ((*state)->end_offset, off(2));
  EXPECT_EQ(read_all(*b, sid(5), off(0)), expected(5, 0, 6));
}

INSTANTIATE_TEST_SUITE_P(Backends, StreamStoreOwnership,
                         ::testing::ValuesIn(metadata::testing::backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace silt::storage
