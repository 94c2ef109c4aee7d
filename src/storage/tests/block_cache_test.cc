#include "storage/block_cache.h"

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace silt::storage {
namespace {

block_cache::block_ptr make_block(size_t n, uint8_t fill) {
  auto bytes = std::make_shared<const std::vector<uint8_t>>(n, fill);
  return std::make_shared<const block_cache::block>(block_cache::block{bytes, *bytes});
}

// What a block of n bytes counts against the capacity.
size_t charge_of(size_t n) {
  return block_cache::charge(*make_block(n, 0));
}

TEST(BlockCache, MissesUntilPutThenHits) {
  block_cache cache(1 << 20);
  EXPECT_EQ(cache.get("a", 0), nullptr);
  const auto block = make_block(100, 7);
  cache.put("a", 0, block);
  EXPECT_EQ(cache.get("a", 0), block);
  EXPECT_EQ(cache.size_bytes(), charge_of(100));
  EXPECT_EQ(cache.block_count(), 1u);
}

TEST(BlockCache, KeysAreObjectAndPosition) {
  block_cache cache(1 << 20);
  cache.put("a", 0, make_block(10, 1));
  cache.put("a", 10, make_block(10, 2));
  cache.put("b", 0, make_block(10, 3));
  EXPECT_EQ(cache.get("a", 0)->bytes.front(), 1);
  EXPECT_EQ(cache.get("a", 10)->bytes.front(), 2);
  EXPECT_EQ(cache.get("b", 0)->bytes.front(), 3);
  EXPECT_EQ(cache.get("b", 10), nullptr);
  EXPECT_EQ(cache.get("ab", 0), nullptr);
}

TEST(BlockCache, EvictsTheLeastRecentlyUsedBlockFirst) {
  block_cache cache(3 * charge_of(1000));
  cache.put("o", 1, make_block(1000, 1));
  cache.put("o", 2, make_block(1000, 2));
  cache.put("o", 3, make_block(1000, 3));
  ASSERT_NE(cache.get("o", 1), nullptr);  // 2 is now the least recently used
  cache.put("o", 4, make_block(1000, 4));
  EXPECT_EQ(cache.get("o", 2), nullptr);
  cache.put("o", 5, make_block(1000, 5));  // then 3
  EXPECT_EQ(cache.get("o", 3), nullptr);
  EXPECT_NE(cache.get("o", 1), nullptr);
  EXPECT_NE(cache.get("o", 4), nullptr);
  EXPECT_NE(cache.get("o", 5), nullptr);
  EXPECT_EQ(cache.stats().evictions, 2u);
}

TEST(BlockCache, EvictsAsManyBlocksAsTheNewOneNeeds) {
  block_cache cache(4 * charge_of(1000));
  for (uint64_t i = 0; i < 4; ++i) cache.put("o", i, make_block(1000, 0));
  // One byte more than the room of two small blocks: three must go.
  cache.put("big", 0, make_block(2 * charge_of(1000) + 1 - block_cache::entry_overhead, 0));
  EXPECT_EQ(cache.block_count(), 2u);
  EXPECT_NE(cache.get("o", 3), nullptr);
  EXPECT_NE(cache.get("big", 0), nullptr);
  EXPECT_EQ(cache.stats().evictions, 3u);
}

TEST(BlockCache, NeverHoldsMoreBytesThanItsCapacity) {
  std::mt19937_64 rng(5);
  const size_t capacity = 100'000;
  block_cache cache(capacity);
  for (int i = 0; i < 5000; ++i) {
    const size_t n = rng() % 20 == 0 ? rng() % 150'000 : rng() % 10'000;
    cache.put(std::to_string(rng() % 30), rng() % 50, make_block(n, 0));
    ASSERT_LE(cache.size_bytes(), capacity);
  }
  EXPECT_GT(cache.size_bytes(), capacity / 2) << "the cache should be in use";
}

TEST(BlockCache, BlockLargerThanTheCapacityIsNotCached) {
  block_cache cache(10 * charge_of(1000));
  cache.put("o", 0, make_block(1000, 1));
  cache.put("o", 1, make_block(1000, 1));
  cache.put("huge", 0, make_block(10 * charge_of(1000), 2));
  EXPECT_EQ(cache.get("huge", 0), nullptr);
  EXPECT_EQ(cache.block_count(), 2u) << "nothing was evicted for it";
  EXPECT_EQ(cache.stats().evictions, 0u);
  // One that fits exactly is cached.
  block_cache exact(charge_of(1000));
  exact.put("o", 0, make_block(1000, 1));
  EXPECT_NE(exact.get("o", 0), nullptr);
  EXPECT_EQ(exact.size_bytes(), exact.capacity_bytes());
}

TEST(BlockCache, TooLargeBlockDropsWhatWasAtItsKey) {
  block_cache cache(charge_of(1000));
  cache.put("o", 0, make_block(1000, 1));
  cache.put("o", 0, make_block(5000, 2));
  EXPECT_EQ(cache.get("o", 0), nullptr);
  EXPECT_EQ(cache.size_bytes(), 0u);
}

TEST(BlockCache, ZeroCapacityCachesNothing) {
  block_cache cache(0);
  cache.put("o", 0, make_block(1, 1));
  EXPECT_EQ(cache.get("o", 0), nullptr);
  EXPECT_EQ(cache.size_bytes(), 0u);
}

TEST(BlockCache, PutReplacesTheBlockAtItsKey) {
  block_cache cache(1 << 20);
  cache.put("o", 0, make_block(100, 1));
  cache.put("o", 0, make_block(300, 2));
  EXPECT_EQ(cache.get("o", 0)->bytes.size(), 300u);
  EXPECT_EQ(cache.block_count(), 1u);
  EXPECT_EQ(cache.size_bytes(), charge_of(300));
  EXPECT_EQ(cache.stats().evictions, 0u);
}

TEST(BlockCache, CountsHitsMissesAndEvictions) {
  block_cache cache(2 * charge_of(10));
  EXPECT_EQ(cache.stats(), (block_cache_stats{}));
  (void)cache.get("o", 0);
  cache.put("o", 0, make_block(10, 0));
  (void)cache.get("o", 0);
  (void)cache.get("o", 0);
  cache.put("o", 1, make_block(10, 0));
  cache.put("o", 2, make_block(10, 0));  // evicts 0
  (void)cache.get("o", 0);
  cache.erase_object("o");  // not an eviction
  EXPECT_EQ(cache.stats(), (block_cache_stats{.hits = 2, .misses = 2, .evictions = 1}));
}

TEST(BlockCache, EraseObjectDropsOnlyThatObjectsBlocks) {
  block_cache cache(1 << 20);
  for (uint64_t i = 0; i < 5; ++i) {
    cache.put("gone", i * 100, make_block(100, 1));
    cache.put("kept", i * 100, make_block(200, 2));
  }
  cache.erase_object("gone");
  cache.erase_object("never-cached");
  EXPECT_EQ(cache.block_count(), 5u);
  EXPECT_EQ(cache.size_bytes(), 5 * charge_of(200));
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(cache.get("gone", i * 100), nullptr);
    EXPECT_NE(cache.get("kept", i * 100), nullptr);
  }
  // The object's blocks can be cached again, and LRU order still works after the erase.
  cache.put("gone", 0, make_block(100, 3));
  EXPECT_EQ(cache.get("gone", 0)->bytes.front(), 3);
}

TEST(BlockCache, ReaderKeepsABlockTheCacheEvicted) {
  block_cache cache(charge_of(1000));
  cache.put("o", 0, make_block(1000, 0x5a));
  const auto held = cache.get("o", 0);
  cache.put("o", 1, make_block(1000, 0));  // evicts block 0
  cache.erase_object("o");
  ASSERT_EQ(cache.get("o", 0), nullptr);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held.use_count(), 1) << "the reader holds the only reference";
  EXPECT_EQ(std::vector<uint8_t>(held->bytes.begin(), held->bytes.end()),
            std::vector<uint8_t>(1000, 0x5a));
}

// Content is a function of the key, so a reader can tell a block served under the wrong key.
uint8_t fill_of(uint64_t object, uint64_t position) {
  return static_cast<uint8_t>(object * 31 + position * 7 + 1);
}

TEST(BlockCache, ConcurrentReadersAndWritersKeepItConsistent) {
  const size_t capacity = 64 * charge_of(512);
  block_cache cache(capacity);
  constexpr int threads = 4;
  constexpr int iterations = 20'000;
  std::atomic<uint64_t> gets{0};
  std::atomic<uint64_t> wrong{0};
  std::vector<std::thread> workers;
  workers.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int i = 0; i < iterations; ++i) {
        const uint64_t object = rng() % 8;
        const uint64_t position = rng() % 32;
        const std::string key = "object-" + std::to_string(object);
        const uint64_t op = rng() % 100;
        if (op < 60) {
          ++gets;
          if (const auto block = cache.get(key, position)) {
            if (block->bytes.empty() || block->bytes.front() != fill_of(object, position) ||
                block->bytes.back() != fill_of(object, position)) {
              ++wrong;
            }
          }
        } else if (op < 98) {
          cache.put(key, position, make_block(64 + rng() % 1024, fill_of(object, position)));
        } else if (op < 99) {
          cache.erase_object(key);
        } else {
          EXPECT_LE(cache.size_bytes(), capacity);
          (void)cache.stats();
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(wrong.load(), 0u);
  const block_cache_stats s = cache.stats();
  EXPECT_EQ(s.hits + s.misses, gets.load());
  EXPECT_GT(s.hits, 0u);
  EXPECT_GT(s.evictions, 0u);
  EXPECT_LE(cache.size_bytes(), capacity);
  // The accounting adds up: dropping everything leaves nothing counted.
  for (uint64_t object = 0; object < 8; ++object) {
    cache.erase_object("object-" + std::to_string(object));
  }
  EXPECT_EQ(cache.size_bytes(), 0u);
  EXPECT_EQ(cache.block_count(), 0u);
}

}  // namespace
}  // namespace silt::storage
