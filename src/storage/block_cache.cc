#include "storage/block_cache.h"

#include <cassert>
#include <iterator>
#include <utility>

namespace silt::storage {

block_cache::block_cache(size_t capacity_bytes) : capacity_(capacity_bytes) {}

block_cache::block_ptr block_cache::get(std::string_view object_key, uint64_t position) {
  base::lock_guard lock(mu_);
  if (const auto object = objects_.find(object_key); object != objects_.end()) {
    if (const auto found = object->second.find(position); found != object->second.end()) {
      lru_.splice(lru_.begin(), lru_, found->second);
      ++stats_.hits;
      return found->second->block;
    }
  }
  ++stats_.misses;
  return nullptr;
}

void block_cache::put(std::string_view object_key, uint64_t position, block_ptr block) {
  assert(block != nullptr);
  const size_t block_charge = charge(*block);
  // Declared before the lock so that replaced and evicted blocks are freed after it is released,
  // and the new node is allocated before it is taken.
  lru_list dropped;
  lru_list added;
  if (block_charge <= capacity_) {
    added.push_back({.object = nullptr,
                     .position = position,
                     .block = std::move(block),
                     .charge = block_charge});
  }
  base::lock_guard lock(mu_);
  if (const auto object = objects_.find(object_key); object != objects_.end()) {
    if (const auto found = object->second.find(position); found != object->second.end()) {
      unlink(found->second, dropped);
    }
  }
  if (added.empty()) return;
  while (size_ + block_charge > capacity_) {
    assert(!lru_.empty());
    unlink(std::prev(lru_.end()), dropped);
    ++stats_.evictions;
  }
  auto object = objects_.find(object_key);
  if (object == objects_.end()) object = objects_.try_emplace(std::string(object_key)).first;
  added.front().object = &*object;
  lru_.splice(lru_.begin(), added);
  object->second.emplace(position, lru_.begin());
  size_ += block_charge;
}

void block_cache::erase_object(std::string_view object_key) {
  lru_list dropped;  // freed after the lock is released
  base::lock_guard lock(mu_);
  const auto object = objects_.find(object_key);
  if (object == objects_.end()) return;
  for (const auto& [position, node] : object->second) {
    size_ -= node->charge;
    dropped.splice(dropped.end(), lru_, node);
  }
  objects_.erase(object);
}

size_t block_cache::size_bytes() const {
  base::lock_guard lock(mu_);
  return size_;
}

size_t block_cache::block_count() const {
  base::lock_guard lock(mu_);
  return lru_.size();
}

block_cache_stats block_cache::stats() const {
  base::lock_guard lock(mu_);
  return stats_;
}

void block_cache::unlink(lru_list::iterator node, lru_list& dropped) {
  object_map::value_type* object = node->object;
  object->second.erase(node->position);
  if (object->second.empty()) objects_.erase(objects_.find(object->first));
  size_ -= node->charge;
  dropped.splice(dropped.end(), lru_, node);
}

}  // namespace silt::storage
