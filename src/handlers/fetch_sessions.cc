#include "handlers/fetch_sessions.h"

namespace silt::handlers {

std::shared_ptr<fetch_session> fetch_sessions::create() {
  std::lock_guard lock(mu_);
  if (slots_ <= 0) return nullptr;
  while (static_cast<int32_t>(sessions_.size()) >= slots_) {
    sessions_.erase(lru_.front());
    lru_.pop_front();
  }
  int32_t id;
  do {
    id = next_id_;
    next_id_ = next_id_ == INT32_MAX ? 1 : next_id_ + 1;
  } while (sessions_.count(id) != 0);
  auto s = std::make_shared<fetch_session>();
  s->id = id;
  lru_.push_back(id);
  sessions_[id] = {s, std::prev(lru_.end())};
  return s;
}

std::shared_ptr<fetch_session> fetch_sessions::find(int32_t id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  lru_.splice(lru_.end(), lru_, it->second.second);
  return it->second.first;
}

void fetch_sessions::remove(int32_t id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  lru_.erase(it->second.second);
  sessions_.erase(it);
}

}  // namespace silt::handlers
