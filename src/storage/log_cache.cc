#include "storage/log_cache.h"

#include <algorithm>
#include <cstdio>

#include "base/log.h"

namespace silt::storage {

stream_ref log_cache::stream(base::stream_id stream_id) {
  {
    base::shared_lock lock(table_mu_);
    if (auto it = streams_.find(stream_id); it != streams_.end()) return it->second;
  }
  base::exclusive_lock lock(table_mu_);
  auto& slot = streams_[stream_id];
  if (!slot) slot = std::make_shared<cached_stream>();
  return slot;
}

stream_ref log_cache::find(base::stream_id stream_id) {
  base::shared_lock lock(table_mu_);
  auto it = streams_.find(stream_id);
  return it == streams_.end() ? nullptr : it->second;
}

size_t log_cache::drop(base::stream_id stream_id) {
  stream_ref ref;
  {
    base::exclusive_lock lock(table_mu_);
    auto it = streams_.find(stream_id);
    if (it == streams_.end()) return 0;
    ref = std::move(it->second);
    streams_.erase(it);
  }
  auto& st = *ref;
  size_t freed = 0;
  {
    base::lock_guard lock(st.mu);
    for (const auto& e : st.cache) {
      // An entry still queued for upload leaves the queue's count, and one whose write is in
      // flight is not queued when it becomes durable.
      if (!e->uploaded.exchange(true, std::memory_order_relaxed) && e->durable) {
        pending_bytes_.fetch_sub(e->data.size(), std::memory_order_relaxed);
      }
      bytes_.fetch_sub(e->data.size(), std::memory_order_relaxed);
      freed += e->data.size();
    }
    st.cache.clear();
    st.fenced = true;
  }
  // Its entries leave the queues too: the eviction queue drains only while the cache is over
  // its capacity, and would keep them (and the request buffers they hold) until then.
  const auto of_stream = [stream_id](const std::shared_ptr<entry>& e) {
    return e->stream_id == stream_id;
  };
  base::lock_guard lock(queue_mu_);
  std::erase_if(upload_queue_, of_stream);
  std::erase_if(evict_queue_, of_stream);
  return freed;
}

size_t log_cache::stream_count() {
  base::shared_lock lock(table_mu_);
  return streams_.size();
}

void log_cache::load(base::stream_id stream_id, const metadata::stream_state& s, bool ours) {
  const stream_ref ref = stream(stream_id);
  auto& st = *ref;
  base::lock_guard lock(st.mu);
  st.fenced = !ours;
  st.recovering = ours && s.taken_from != base::node_id(-1);
  st.owner = s.owner;
  st.epoch = s.epoch;
  st.start_offset = s.start_offset;
  st.next_offset = st.durable_end = st.committed_end = s.end_offset;
}

bool log_cache::adoptable(base::stream_id stream_id, const metadata::stream_state& s) {
  const stream_ref ref = stream(stream_id);
  auto& st = *ref;
  base::lock_guard lock(st.mu);
  return s.epoch > st.epoch || (s.epoch == st.epoch && st.fenced);
}

bool log_cache::adopt(base::stream_id stream_id, const metadata::stream_state& s) {
  const stream_ref ref = stream(stream_id);
  auto& st = *ref;
  base::lock_guard lock(st.mu);
  // (Fenced at the same epoch: a refused write already read the catalog's new state.)
  const bool newer = s.epoch > st.epoch || (s.epoch == st.epoch && st.fenced);
  if (!newer) return false;
  for (const auto& e : st.cache) {
    // An entry still queued for upload is dropped from the queue's count; the queue skips it.
    if (!e->uploaded.exchange(true, std::memory_order_relaxed) && e->durable) {
      pending_bytes_.fetch_sub(e->data.size(), std::memory_order_relaxed);
    }
    bytes_.fetch_sub(e->data.size(), std::memory_order_relaxed);
  }
  st.cache.clear();
  st.fenced = false;
  st.releasing = false;
  st.owner = s.owner;
  st.epoch = s.epoch;
  st.start_offset = s.start_offset;
  st.next_offset = st.durable_end = st.committed_end = s.end_offset;
  st.read_ahead_end.reset();
  return true;
}

void log_cache::push_locked(cached_stream& st, std::shared_ptr<entry> e) {
  bytes_.fetch_add(e->data.size(), std::memory_order_relaxed);
  st.next_offset = e->end_offset;
  st.cache.push_back(std::move(e));
}

void log_cache::forget_locked(cached_stream& st, const std::shared_ptr<entry>& e) {
  st.next_offset = std::min(st.next_offset, e->base_offset);
  for (auto it = st.cache.rbegin(); it != st.cache.rend(); ++it) {
    if (*it == e) {
      bytes_.fetch_sub(e->data.size(), std::memory_order_relaxed);
      st.cache.erase(std::next(it).base());
      break;
    }
  }
}

bool log_cache::durable(const std::shared_ptr<entry>& e, wal::wal_position end,
                        uint64_t upload_threshold) {
  bool due = false;
  // (Not found: the stream was dropped while the write was in flight, and let the entry go.)
  if (const stream_ref ref = find(e->stream_id)) {
    auto& st = *ref;
    base::lock_guard lock(st.mu);
    e->durable = true;
    e->wal_end = end;
    e->durable_at = std::chrono::steady_clock::now();
    st.durable_end = std::max(st.durable_end, e->end_offset);
    // Queued and counted under the stream's lock, under which drop() and adopt() let a
    // stream's entries go: they find it either queued and counted, or marked and not queued.
    if (!e->uploaded.load(std::memory_order_relaxed)) {
      base::lock_guard queue_lock(queue_mu_);
      upload_queue_.push_back(e);
      const uint64_t pending =
          pending_bytes_.fetch_add(e->data.size(), std::memory_order_relaxed) + e->data.size();
      due = pending >= upload_threshold;
    }
  }
  auto prev = durable_wal_end_.load(std::memory_order_relaxed);
  while (prev < end && !durable_wal_end_.compare_exchange_weak(prev, end)) {
  }
  return due;
}

void log_cache::replayed(std::shared_ptr<entry> e) {
  const stream_ref ref = stream(e->stream_id);
  auto& st = *ref;
  e->durable_at = std::chrono::steady_clock::now();
  {
    base::lock_guard lock(st.mu);
    st.next_offset = st.durable_end = e->end_offset;
    st.cache.push_back(e);
  }
  bytes_.fetch_add(e->data.size(), std::memory_order_relaxed);
  pending_bytes_.fetch_add(e->data.size(), std::memory_order_relaxed);
  auto prev = durable_wal_end_.load(std::memory_order_relaxed);
  while (prev < e->wal_end && !durable_wal_end_.compare_exchange_weak(prev, e->wal_end)) {
  }
  base::lock_guard lock(queue_mu_);
  upload_queue_.push_back(std::move(e));
}

std::chrono::steady_clock::duration log_cache::upload_lag() {
  base::lock_guard lock(queue_mu_);
  // In WAL order: the first entry not uploaded is the oldest (those ahead of it, uploaded
  // out of order, leave the queue once it goes).
  for (const auto& e : upload_queue_) {
    if (!e->uploaded.load(std::memory_order_relaxed)) {
      return std::chrono::steady_clock::now() - e->durable_at;
    }
  }
  return {};
}

std::vector<std::shared_ptr<entry>> log_cache::pending(wal::wal_position upto) {
  std::vector<std::shared_ptr<entry>> out;
  base::lock_guard lock(queue_mu_);
  for (const auto& e : upload_queue_) {
    if (e->wal_end > upto) break;
    if (!e->uploaded.load(std::memory_order_relaxed)) out.push_back(e);
  }
  return out;
}

void log_cache::uploaded(const std::vector<std::shared_ptr<entry>>& entries) {
  for (const auto& e : entries) {
    const stream_ref ref = find(e->stream_id);
    if (!ref) {
      // Dropped meanwhile: it let its entries go.
      if (!e->uploaded.exchange(true, std::memory_order_relaxed)) {
        pending_bytes_.fetch_sub(e->data.size(), std::memory_order_relaxed);
      }
      continue;
    }
    auto& st = *ref;
    base::lock_guard lock(st.mu);
    st.committed_end = std::max(st.committed_end, e->end_offset);
    if (!e->uploaded.exchange(true, std::memory_order_relaxed)) {
      pending_bytes_.fetch_sub(e->data.size(), std::memory_order_relaxed);
    }
  }
  base::lock_guard lock(queue_mu_);
  while (!upload_queue_.empty() && upload_queue_.front()->uploaded.load()) {
    evict_queue_.push_back(std::move(upload_queue_.front()));
    upload_queue_.pop_front();
  }
}

void log_cache::evict() {
  // The oldest uploaded entries go first; never data that is not in a committed object yet.
  // Per stream, entries reach the eviction queue in offset order, so the one popped is its
  // stream's oldest cached entry.
  while (bytes() > capacity_) {
    std::shared_ptr<entry> e;
    {
      base::lock_guard lock(queue_mu_);
      if (evict_queue_.empty()) return;
      e = std::move(evict_queue_.front());
      evict_queue_.pop_front();
    }
    const stream_ref ref = find(e->stream_id);
    if (!ref) continue;  // dropped: it let its entries go
    auto& st = *ref;
    base::lock_guard lock(st.mu);
    auto it = std::find(st.cache.begin(), st.cache.end(), e);
    if (it == st.cache.end()) continue;
    st.cache.erase(it);
    bytes_.fetch_sub(e->data.size(), std::memory_order_relaxed);
  }
}

size_t log_cache::release_below(base::stream_id stream_id, base::offset end) {
  const stream_ref ref = find(stream_id);
  if (!ref) return 0;
  auto& st = *ref;
  base::lock_guard lock(st.mu);
  size_t released = 0;
  // The eviction queue may still hold them: evict() skips entries no longer cached.
  while (!st.cache.empty() && st.cache.front()->end_offset <= end &&
         st.cache.front()->uploaded.load(std::memory_order_acquire)) {
    released += st.cache.front()->data.size();
    st.cache.pop_front();
  }
  bytes_.fetch_sub(released, std::memory_order_relaxed);
  return released;
}

std::optional<tl::expected<read_result, stream_error>> log_cache::read(base::stream_id stream_id,
                                                                       base::offset offset,
                                                                       size_t max_bytes) {
  const stream_ref ref = stream(stream_id);
  auto& st = *ref;
  base::lock_guard lock(st.mu);
  if (st.fenced) return fail(stream_error::fenced);
  if (offset < st.start_offset || offset > st.durable_end) {
    return fail(stream_error::offset_out_of_range);
  }
  read_result out;
  out.next_offset = offset;
  if (offset == st.durable_end) return out;
  const base::offset cache_start =
      st.cache.empty() ? st.durable_end : st.cache.front()->base_offset;
  if (offset < cache_start) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  hits_.fetch_add(1, std::memory_order_relaxed);
  auto it = std::upper_bound(st.cache.begin(), st.cache.end(), offset,
                             [](base::offset o, const auto& e) { return o < e->end_offset; });
  size_t bytes = 0;
  bool full = false;
  for (; it != st.cache.end() && (*it)->durable && !full && bytes < max_bytes; ++it) {
    const size_t before = out.chunks.size();
    batch::add_to(out, bytes, (*it)->data, offset, max_bytes, full);
    if (out.chunks.size() > before) out.owners.push_back((*it)->owner);
  }
  return out;
}

bool log_cache::fenced_by(base::stream_id stream_id,
                          const std::optional<metadata::stream_state>& now) {
  const stream_ref ref = stream(stream_id);
  auto& st = *ref;
  base::lock_guard lock(st.mu);
  const base::node_id owner = now ? now->owner : base::node_id(-1);
  const base::leader_epoch epoch = now ? now->epoch : base::leader_epoch();
  if (st.fenced) return true;
  if (st.owner == owner && st.epoch == epoch) return false;
  st.fenced = true;
  SILT_LOG(warn,
           "stream store: stream %llu has a newer owner than node %d at epoch %d (node %d at "
           "epoch %d); it is no longer served here",
           static_cast<unsigned long long>(stream_id.value()), st.owner.value(), st.epoch.value(),
           owner.value(), epoch.value());
  // Who serves it now, for Metadata.
  st.owner = owner;
  st.epoch = epoch;
  return true;
}

void log_cache::observe_owner(base::stream_id stream_id, const metadata::stream_state& s,
                              base::node_id self) {
  if (s.owner == self) return;  // this store's own takes are the truth for its streams
  {
    base::shared_lock lock(table_mu_);
    if (!streams_.contains(stream_id)) return;  // a stream this store does not serve or know
  }
  const stream_ref ref = stream(stream_id);
  auto& st = *ref;
  {
    base::lock_guard lock(st.mu);
    // Epochs only grow: an older state (read before a take this store made since) is stale.
    if (s.epoch <= st.epoch) return;
    if (st.fenced) {
      st.owner = s.owner;
      st.epoch = s.epoch;
      return;
    }
  }
  (void)fenced_by(stream_id, s);
}

stream_offsets log_cache::offsets(base::stream_id stream_id) {
  const stream_ref ref = stream(stream_id);
  auto& st = *ref;
  base::lock_guard lock(st.mu);
  return {st.start_offset, st.durable_end, st.epoch,
          st.fenced,       st.owner,       st.releasing || st.recovering};
}

}  // namespace silt::storage
