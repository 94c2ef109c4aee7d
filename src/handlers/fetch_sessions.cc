#include "handlers/fetch_sessions.h"

namespace silt::handlers {

session_partition& session_partitions::upsert(const session_key& key) {
  auto [it, added] = index_.try_emplace(key);
  if (added) it->second = order_.insert(order_.end(), {key, session_partition{}});
  return it->second->second;
}

session_partition* session_partitions::find(const session_key& key) {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &it->second->second;
}

void session_partitions::erase(const session_key& key) {
  const auto it = index_.find(key);
  if (it == index_.end()) return;
  order_.erase(it->second);
  index_.erase(it);
}

void session_partitions::move_last(const session_key& key) {
  const auto it = index_.find(key);
  if (it != index_.end()) order_.splice(order_.end(), order_, it->second);
}

void fetch_sessions::set_slots(int32_t slots) {
  base::lock_guard lock(mu_);
  slots_ = slots;
}

std::shared_ptr<fetch_session> fetch_sessions::create(session_partitions partitions,
                                                      int64_t now_ms) {
  const size_t size = partitions.size();
  base::lock_guard lock(mu_);
  if (slots_ <= 0) return nullptr;
  while (static_cast<int32_t>(sessions_.size()) >= slots_) {
    if (!evict_locked(size, now_ms)) return nullptr;
  }
  int32_t id;
  do {
    id = next_id_;
    next_id_ = next_id_ == INT32_MAX ? 1 : next_id_ + 1;
  } while (sessions_.count(id) != 0);
  auto s = std::make_shared<fetch_session>(id, now_ms);
  {
    // Not shared yet, so never contended; taken so that every access is under the lock.
    base::lock_guard session_lock(s->mu);
    s->partitions = std::move(partitions);
  }
  s->size = size;
  s->last_used_ms = now_ms;
  lru_.push_back(id);
  sessions_[id] = {s, std::prev(lru_.end())};
  return s;
}

bool fetch_sessions::evict_locked(size_t size, int64_t now_ms) {
  if (lru_.empty()) return false;
  // A session nobody used for eviction_ms first.
  auto oldest = sessions_.find(lru_.front());
  if (now_ms - oldest->second.first->last_used_ms >= eviction_ms_) {
    lru_.pop_front();
    sessions_.erase(oldest);
    return true;
  }
  // Else the smallest session older than eviction_ms, if the new one has more partitions.
  decltype(sessions_)::iterator victim = sessions_.end();
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    const auto& s = *it->second.first;
    if (now_ms - s.created_ms < eviction_ms_) continue;
    if (victim == sessions_.end() || s.size < victim->second.first->size ||
        (s.size == victim->second.first->size && s.id < victim->second.first->id)) {
      victim = it;
    }
  }
  if (victim == sessions_.end() || victim->second.first->size >= size) return false;
  lru_.erase(victim->second.second);
  sessions_.erase(victim);
  return true;
}

std::shared_ptr<fetch_session> fetch_sessions::find(int32_t id, int64_t now_ms) {
  base::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  lru_.splice(lru_.end(), lru_, it->second.second);
  it->second.first->last_used_ms = now_ms;
  return it->second.first;
}

void fetch_sessions::remove(int32_t id) {
  base::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  lru_.erase(it->second.second);
  sessions_.erase(it);
}

size_t fetch_sessions::size() {
  base::lock_guard lock(mu_);
  return sessions_.size();
}

}  // namespace silt::handlers
