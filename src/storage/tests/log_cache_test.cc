// The log cache's decision after a write the catalog refused as fenced, and when an upload is
// due.
#include "storage/log_cache.h"

#include <gtest/gtest.h>

namespace silt::storage {
namespace {

base::stream_id sid(uint64_t v) {
  return base::stream_id(v);
}

base::offset off(int64_t v) {
  return base::offset(v);
}

TEST(LogCache, AWriteMadeStaleByTheStoresOwnTakeIsNotAFence) {
  log_cache cache(1 << 20);
  cache.load(sid(7), {off(0), off(10), base::node_id(1), base::leader_epoch(3)},
             true);  // this node (1) holds stream 7 at epoch 3
  // The catalog says the same owner and epoch: the refused write carried an older epoch.
  EXPECT_FALSE(cache.fenced_by(
      sid(7), metadata::stream_state{off(0), off(10), base::node_id(1), base::leader_epoch(3)}));
  EXPECT_FALSE(cache.offsets(sid(7)).fenced);
  // Another node took it.
  EXPECT_TRUE(cache.fenced_by(
      sid(7), metadata::stream_state{off(0), off(10), base::node_id(2), base::leader_epoch(4)}));
  EXPECT_TRUE(cache.offsets(sid(7)).fenced);
  EXPECT_EQ(cache.offsets(sid(7)).owner, base::node_id(2));  // who serves it now
  EXPECT_EQ(cache.offsets(sid(7)).epoch, base::leader_epoch(4));
  EXPECT_EQ(cache.read(sid(7), off(0), 100)->error(), stream_error::fenced);
  // A stream never taken, whose row the catalog has lost, is fenced too.
  cache.load(sid(8), {off(0), off(0), base::node_id(1), base::leader_epoch(0)}, true);
  EXPECT_TRUE(cache.fenced_by(sid(8), std::nullopt));
}

// An entry holding `data`, appended to stream `id` (offsets are not checked here).
std::shared_ptr<entry> append(log_cache& cache, base::stream_id id,
                              const std::vector<uint8_t>& data) {
  auto e = std::make_shared<entry>();
  e->stream_id = id;
  e->data = data;
  auto held = cache.stream(id);
  auto& st = *held;
  base::lock_guard lock(st.mu);
  cache.push_locked(st, e);
  return e;
}

TEST(LogCache, AnUploadIsDueAtTheThresholdNotWhenTheCacheIsFull) {
  // A 1 MiB cache, 4 MiB upload threshold: the background thread waits for the threshold
  // only, so a full cache alone must not wake it (it would find nothing to do).
  log_cache cache(1 << 20);
  cache.load(sid(1), {off(0), off(0), base::node_id(1), base::leader_epoch(0)}, true);
  const std::vector<uint8_t> data(512 << 10, 7);
  const uint64_t threshold = 4 << 20;
  wal::wal_position end = 0;
  for (int i = 0; i < 7; ++i) {
    auto e = append(cache, sid(1), data);
    end += data.size();
    EXPECT_FALSE(cache.durable(e, end, threshold)) << "entry " << i;
  }
  EXPECT_GT(cache.bytes(), size_t{1} << 20);  // over its capacity
  auto e = append(cache, sid(1), data);
  end += data.size();
  EXPECT_TRUE(cache.durable(e, end, threshold));  // 4 MiB wait
  EXPECT_EQ(cache.pending_bytes(), threshold);
}

}  // namespace
}  // namespace silt::storage
