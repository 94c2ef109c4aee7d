// The block cache: object blocks read back from the object store, kept for catch-up consumers
// whose data is no longer in the log cache, so that neighbouring fetches of one stream do not
// read the same block twice.
//
// Owner: the stream store creates one per broker and shares it by reference with the reader
// threads; it must outlive them. Every method may be called from any thread: one mutex guards
// all state, held only for map and list updates (a block is never copied or freed under it).
//
// Blocks are keyed by (object key, block position) and held as shared immutable views of the
// buffer they were read into (one ranged read may bring several blocks), so a reader keeps
// using a block after the cache evicts it. The cache bounds the blocks' bytes it holds, not
// what evicted blocks still held by readers use, nor the rest of a shared buffer: the blocks
// of one read that were cached already, or that were evicted while a neighbour stays (blocks
// of one read are cached together and a catch-up reads them in order, so they age together;
// at most a read's worth, the wanted blocks and their read-ahead, per cached block).
// Eviction is least recently used first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"

namespace silt::storage {

struct block_cache_stats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;  // blocks dropped to make room (not erase_object nor replacement)
  bool operator==(const block_cache_stats&) const = default;
};

class block_cache {
 public:
  // A block's bytes, and what keeps them alive.
  struct block {
    std::shared_ptr<const void> owner;
    std::span<const uint8_t> bytes;
  };
  using block_ptr = std::shared_ptr<const block>;

  // Bookkeeping counted per cached block on top of its bytes (list and hash nodes), so that
  // many small blocks cannot hold much more memory than the capacity.
  static constexpr size_t entry_overhead = 128;

  // A cache that holds at most capacity_bytes (as counted by charge()).
  explicit block_cache(size_t capacity_bytes);
  block_cache(const block_cache&) = delete;
  block_cache& operator=(const block_cache&) = delete;

  // The block at (object_key, position), now the most recently used; null when not cached.
  [[nodiscard]] block_ptr get(std::string_view object_key, uint64_t position);
  // Caches `block` at (object_key, position) as the most recently used, replacing what was
  // there and evicting the least recently used blocks to make room. A block whose charge alone
  // exceeds the capacity is not cached (and what was at its key is dropped).
  void put(std::string_view object_key, uint64_t position, block_ptr block);
  // Drops every block of the object (it was deleted).
  void erase_object(std::string_view object_key);

  // What the cached blocks count against the capacity.
  [[nodiscard]] size_t size_bytes() const;
  [[nodiscard]] size_t capacity_bytes() const { return capacity_; }
  [[nodiscard]] size_t block_count() const;
  [[nodiscard]] block_cache_stats stats() const;
  // What a block counts against the capacity.
  [[nodiscard]] static size_t charge(const block& b) { return b.bytes.size() + entry_overhead; }

 private:
  struct string_hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct lru_node;
  using lru_list = std::list<lru_node>;
  using object_blocks = std::unordered_map<uint64_t, lru_list::iterator>;
  using object_map = std::unordered_map<std::string, object_blocks, string_hash, std::equal_to<>>;
  struct lru_node {
    object_map::value_type* object;  // stable: unordered_map nodes do not move
    uint64_t position;
    block_ptr block;
    size_t charge;
  };

  // Unlinks the node from the maps and moves it to `dropped` (freed by the caller after it
  // unlocks).
  void unlink(lru_list::iterator node, lru_list& dropped) REQUIRES(mu_);

  const size_t capacity_;
  mutable base::mutex mu_;
  lru_list lru_ GUARDED_BY(mu_);  // most recently used first
  object_map objects_ GUARDED_BY(mu_);
  size_t size_ GUARDED_BY(mu_) = 0;
  block_cache_stats stats_ GUARDED_BY(mu_);
};

}  // namespace silt::storage
