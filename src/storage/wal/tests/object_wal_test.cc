// The WAL in object storage, over a real local object store (and faulty_store for failures).
#include "storage/wal/object_wal.h"

#include <atomic>
#include <future>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "storage/object/faulty_store.h"
#include "storage/object/local_store.h"
#include "storage/wal/tests/test_util.h"

namespace silt::storage::wal {
namespace {

using testing::off;

std::vector<uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

struct record {
  uint64_t stream;
  int64_t offset;
  std::string payload;
  bool operator==(const record&) const = default;
};

class ObjectWal : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = local_store::open(dir_.path("objects"));
    ASSERT_TRUE(s) << s.error();
    store_ = std::move(*s);
  }
  object_wal_options options() {
    object_wal_options o;
    o.store = store_.get();
    o.prefix = "wal/node-1/";
    o.flush_interval = std::chrono::milliseconds(5);
    o.flush_bytes = 1 << 20;
    o.retry_delay = std::chrono::milliseconds(5);
    return o;
  }
  std::unique_ptr<object_wal> open(const object_wal_options& o, std::vector<record>* replayed) {
    auto w = object_wal::open(o, [&](const replayed_record& r) {
      if (replayed) {
        replayed->push_back({r.stream_id.value(), r.offset.value(),
                             std::string(r.payload.begin(), r.payload.end())});
      }
    });
    EXPECT_TRUE(w) << (w ? "" : wal_error_name(w.error()));
    return w ? std::move(*w) : nullptr;
  }
  // Appends and waits for the callback.
  static tl::expected<wal_position, wal_error> append_sync(wal& w, uint64_t stream, int64_t offset,
                                                           std::string_view payload) {
    std::promise<tl::expected<wal_position, wal_error>> p;
    w.append(base::stream_id(stream), off(offset), bytes(payload),
             [&](tl::expected<wal_position, wal_error> r) { p.set_value(r); });
    return p.get_future().get();
  }
  size_t wal_objects() {
    size_t n = 0;
    const auto listed = store_->list("wal/node-1/").value();
    for (const auto& o : listed) n += o.key.ends_with(".wal");
    return n;
  }

  testing::test_dir dir_;
  std::shared_ptr<object_store> store_;
};

TEST_F(ObjectWal, AppendsAreDurableInOrderAndReplayedOnOpen) {
  std::vector<record> written;
  {
    auto w = open(options(), nullptr);
    std::vector<std::promise<tl::expected<wal_position, wal_error>>> done(200);
    std::vector<wal_position> order;
    std::mutex order_mu;
    for (int i = 0; i < 200; ++i) {
      const std::string payload = "record " + std::to_string(i);
      written.push_back({static_cast<uint64_t>(i % 3), i, payload});
      w->append(base::stream_id(i % 3), off(i), bytes(payload),
                [&, i](tl::expected<wal_position, wal_error> r) {
                  std::lock_guard lock(order_mu);
                  order.push_back(r.value());
                  done[i].set_value(r);
                });
      if (i % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (auto& d : done) ASSERT_TRUE(d.get_future().get());
    EXPECT_TRUE(std::is_sorted(order.begin(), order.end())) << "callbacks in position order";
    EXPECT_EQ(w->durable_end(), order.back());
    EXPECT_GE(w->stats().writes, 2u) << "the pauses split the appends into several objects";
    EXPECT_EQ(w->stats().appends, 200u);
  }
  std::vector<record> replayed;
  auto again = open(options(), &replayed);
  EXPECT_EQ(replayed, written);
  // Appends continue after what was replayed.
  ASSERT_TRUE(append_sync(*again, 7, 0, "after"));
  replayed.clear();
  again->close();
  (void)open(options(), &replayed);
  ASSERT_EQ(replayed.size(), written.size() + 1);
  EXPECT_EQ(replayed.back(), (record{7, 0, "after"}));
}

TEST_F(ObjectWal, FlushBytesCutsObjects) {
  auto o = options();
  o.flush_interval = std::chrono::seconds(60);  // only the size flushes, and close()
  o.flush_bytes = 1000;
  auto w = open(o, nullptr);
  std::vector<std::future<tl::expected<wal_position, wal_error>>> futures;
  std::vector<std::promise<tl::expected<wal_position, wal_error>>> done(10);
  for (int i = 0; i < 10; ++i) {
    w->append(base::stream_id(1), off(i), std::vector<uint8_t>(476, 'x'),  // 500-byte frames
              [&, i](tl::expected<wal_position, wal_error> r) { done[i].set_value(r); });
  }
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(done[i].get_future().get()) << i;
  w->close();
  EXPECT_EQ(wal_objects(), 5u) << "two 500-byte records per 1000-byte flush";
}

TEST_F(ObjectWal, TrimDeletesWhatItPassedAndReplayStartsThere) {
  auto o = options();
  o.flush_bytes = 1;  // one object per append
  std::vector<wal_position> ends;
  {
    auto w = open(o, nullptr);
    for (int i = 0; i < 6; ++i)
      ends.push_back(append_sync(*w, 1, i, "r" + std::to_string(i)).value());
    EXPECT_EQ(wal_objects(), 6u);
    w->trim(ends[3]);
    for (int i = 0; i < 200 && w->trim_point() != ends[3]; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(w->trim_point(), ends[3]);
  }
  EXPECT_EQ(wal_objects(), 2u) << "the four objects before the trim point are deleted";
  std::vector<record> replayed;
  auto w = open(o, &replayed);
  EXPECT_EQ(replayed, (std::vector<record>{{1, 4, "r4"}, {1, 5, "r5"}}));
  EXPECT_EQ(w->trim_point(), ends[3]);
}

TEST_F(ObjectWal, FailedWritesAreRetriedUntilTheyLand) {
  faulty_store_options none;
  auto faulty = std::make_unique<faulty_store>(*store_, none);
  faulty->script(store_operation::put, {fault::io, fault::lost_reply, fault::timeout});
  auto o = options();
  o.store = faulty.get();
  auto w = open(o, nullptr);
  ASSERT_TRUE(append_sync(*w, 1, 0, "survives three failures"));
  EXPECT_EQ(w->stats().failed_writes, 3u);
  w->close();
  std::vector<record> replayed;
  (void)open(options(), &replayed);
  EXPECT_EQ(replayed, (std::vector<record>{{1, 0, "survives three failures"}}));
}

TEST_F(ObjectWal, ASecondWriterOnThePrefixIsFenced) {
  auto first = open(options(), nullptr);
  auto second = open(options(), nullptr);  // both start at position 0
  ASSERT_TRUE(append_sync(*first, 1, 0, "first's"));
  auto refused = append_sync(*second, 1, 0, "second's");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), wal_error::io);
  EXPECT_TRUE(second->fenced());
  EXPECT_EQ(second->try_append(base::stream_id(1), off(1), bytes("x"), [](auto) {}).error(),
            wal_error::io);
  first->close();
  second->close();
  std::vector<record> replayed;
  (void)open(options(), &replayed);
  EXPECT_EQ(replayed, (std::vector<record>{{1, 0, "first's"}}));
}

TEST_F(ObjectWal, ObjectsPastAGapAreDroppedAtOpen) {
  {
    auto w = open(options(), nullptr);
    ASSERT_TRUE(append_sync(*w, 1, 0, "kept"));
  }
  // An object far ahead, as a crashed writer with several writes in flight leaves one.
  const auto payload = bytes("stray");
  std::vector<replayed_record> stray = {{0, 0, base::stream_id(1), off(5), payload}};
  ASSERT_TRUE(
      store_->put(object_wal_key("wal/node-1/", 1 << 20), encode_wal_object(1 << 20, stray)));
  std::vector<record> replayed;
  auto w = open(options(), &replayed);
  EXPECT_EQ(replayed, (std::vector<record>{{1, 0, "kept"}}));
  EXPECT_EQ(store_->head(object_wal_key("wal/node-1/", 1 << 20)).error(), store_error::not_found);
  ASSERT_TRUE(append_sync(*w, 1, 1, "next"));
}

TEST_F(ObjectWal, CorruptObjectsAreRefused) {
  {
    auto w = open(options(), nullptr);
    ASSERT_TRUE(append_sync(*w, 1, 0, "hello"));
  }
  const std::string key = object_wal_key("wal/node-1/", 0);
  const auto good = store_->get(key, 0, to_end).value();
  ASSERT_TRUE(decode_wal_object(good));
  for (size_t at = 0; at < good.size(); ++at) {
    auto bad = good;
    bad[at] ^= 0x40;
    EXPECT_FALSE(decode_wal_object(bad)) << "a flipped byte at " << at;
  }
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(decode_wal_object(std::span(good).first(n))) << "cut to " << n << " bytes";
  }
  auto longer = good;
  longer.push_back(0);
  EXPECT_FALSE(decode_wal_object(longer));
  auto bad = good;
  bad.back() ^= 1;
  ASSERT_TRUE(store_->put(key, bad));
  EXPECT_EQ(object_wal::open(options(), {}).error(), wal_error::bad_format);
}

TEST_F(ObjectWal, FullUntilTrimmed) {
  auto o = options();
  o.capacity = 100;
  auto w = open(o, nullptr);
  std::atomic<int> rooms{0};
  w->set_room_callback([&] { ++rooms; });
  const auto end = append_sync(*w, 1, 0, std::string(60, 'a')).value();  // an 84-byte frame
  EXPECT_EQ(w->try_append(base::stream_id(1), off(1), bytes("0123456789"), [](auto) {}).error(),
            wal_error::full);
  EXPECT_EQ(
      w->try_append(base::stream_id(1), off(1), std::vector<uint8_t>(200), [](auto) {}).error(),
      wal_error::too_large);
  w->trim(end);
  for (int i = 0; i < 200 && rooms.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(rooms.load(), 1);
  EXPECT_TRUE(append_sync(*w, 1, 1, "0123456789"));
}

TEST_F(ObjectWal, CloseFailsNothingThatWasQueued) {
  auto o = options();
  o.flush_interval = std::chrono::seconds(60);
  auto w = open(o, nullptr);
  std::promise<tl::expected<wal_position, wal_error>> p;
  w->append(base::stream_id(1), off(0), bytes("queued"), [&](auto r) { p.set_value(r); });
  w->close();
  EXPECT_TRUE(p.get_future().get()) << "close flushes what is queued";
  EXPECT_EQ(w->try_append(base::stream_id(1), off(1), bytes("x"), [](auto) {}).error(),
            wal_error::closed);
}

}  // namespace
}  // namespace silt::storage::wal
