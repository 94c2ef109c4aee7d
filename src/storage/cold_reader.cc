#include "storage/cold_reader.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>

#include "base/sched.h"

namespace silt::storage {

namespace {

// Read-ahead jobs waiting for a thread; more are not queued (the read then goes on without).
constexpr size_t max_queued_read_aheads = 1024;
// How long a read waits for a block being read ahead before it reads the block itself.
constexpr auto read_ahead_wait = std::chrono::seconds(10);

}  // namespace

cold_reader::cold_reader(metadata::stream_catalog& catalog, object_store& store, log_cache& cache,
                         size_t block_cache_bytes, uint32_t read_ahead_blocks,
                         uint32_t read_ahead_threads)
    : catalog_(catalog),
      store_(store),
      cache_(cache),
      blocks_(block_cache_bytes),
      read_ahead_blocks_(read_ahead_blocks) {
  if (read_ahead_blocks_ == 0) return;
  for (uint32_t i = 0; i < read_ahead_threads; ++i) {
    threads_.emplace_back([this, i] {
      base::set_thread_name("silt-readahead" + std::to_string(i));
      read_ahead_loop();
    });
  }
}

cold_reader::~cold_reader() {
  {
    base::lock_guard lock(queue_mu_);
    stopping_ = true;
    queue_.clear();
  }
  queue_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

tl::expected<std::shared_ptr<const std::vector<block_entry>>, stream_error>
cold_reader::object_index(const std::string& key) {
  {
    base::lock_guard lock(index_mu_);
    if (auto it = indexes_.find(key); it != indexes_.end()) return it->second;
  }
  auto size = store_.head(key);
  if (!size) return fail(stream_error::object_store);
  if (*size < object_footer_size) return fail(stream_error::corrupt_object);
  auto footer_bytes = store_.get(key, *size - object_footer_size, object_footer_size);
  if (!footer_bytes) return fail(stream_error::object_store);
  auto footer = parse_footer(*footer_bytes);
  if (!footer || footer->index_position + footer->index_size + object_footer_size != *size) {
    return fail(stream_error::corrupt_object);
  }
  auto index_bytes = store_.get(key, footer->index_position, footer->index_size);
  if (!index_bytes) return fail(stream_error::object_store);
  auto index = parse_index(*index_bytes, *footer);
  if (!index) return fail(stream_error::corrupt_object);
  auto shared = std::make_shared<const std::vector<block_entry>>(std::move(*index));
  base::lock_guard lock(index_mu_);
  if (indexes_.size() >= 4096) indexes_.clear();  // a crude bound; indexes are small
  indexes_[key] = shared;
  return shared;
}

tl::expected<cold_reader::located, stream_error> cold_reader::locate(base::stream_id stream_id,
                                                                     base::offset offset,
                                                                     size_t max_bytes) {
  auto ranges = catalog_.find(stream_id, offset, 1);
  if (!ranges) return fail(stream_error::catalog);
  if (ranges->empty() || (*ranges)[0].range.start_offset > offset) {
    // Below the cache and in no object: the data was trimmed away in the meantime.
    return fail(stream_error::offset_out_of_range);
  }
  auto& found = (*ranges)[0];
  auto index = object_index(found.key);
  if (!index) return tl::make_unexpected(index.error());
  const auto blocks = find_blocks(**index, stream_id, offset, max_bytes);
  if (blocks.empty()) return fail(stream_error::corrupt_object);
  return located{std::move(found.key), std::move(*index), blocks};
}

tl::expected<void, stream_error> cold_reader::get_blocks(const std::string& key,
                                                         std::span<const block_entry> blocks,
                                                         size_t first, size_t last,
                                                         std::vector<block_cache::block_ptr>& out) {
  // Blocks of one stream in one object are contiguous: one GET from the first to the last.
  const uint64_t begin = blocks[first].position;
  const uint64_t end = blocks[last].position + blocks[last].size;
  auto got = store_.get_shared(key, begin, end - begin);
  gets_.fetch_add(1, std::memory_order_relaxed);
  // A short read (a response cut off) is the store's failure, not the object's: retried.
  if (!got || got->bytes.size() != end - begin) return fail(stream_error::object_store);
  // The blocks are views of the buffer read, which they keep alive; each is checked once,
  // here, before it is cached.
  for (size_t i = first; i <= last; ++i) {
    if (out[i]) continue;
    const auto view = got->bytes.subspan(blocks[i].position - begin, blocks[i].size);
    if (!open_block(blocks[i], view)) return fail(stream_error::corrupt_object);
    auto block = std::make_shared<const block_cache::block>(block_cache::block{got->owner, view});
    blocks_.put(key, blocks[i].position, block);
    out[i] = std::move(block);
  }
  return {};
}

void cold_reader::end_flight(const std::string& key, std::span<const block_entry> blocks,
                             size_t first, size_t last) {
  {
    base::lock_guard lock(flight_mu_);
    for (size_t i = first; i <= last; ++i) {
      auto it = in_flight_.find(block_key{key, blocks[i].position});
      if (it != in_flight_.end() && --it->second == 0) in_flight_.erase(it);
    }
  }
  flight_cv_.notify_all();
}

tl::expected<std::vector<block_cache::block_ptr>, stream_error> cold_reader::load(
    const std::string& key, std::span<const block_entry> blocks, bool for_read_ahead) {
  std::vector<block_cache::block_ptr> out(blocks.size());
  bool may_wait = true;
  for (;;) {
    size_t first = blocks.size();
    size_t last = 0;
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (!out[i]) out[i] = blocks_.get(key, blocks[i].position);
      if (!out[i]) {
        first = std::min(first, i);
        last = i;
      }
    }
    if (first == blocks.size()) return out;
    base::unique_lock lock(flight_mu_);
    if (may_wait) {
      // Blocks another thread is reading: wait for them, then look in the cache again (once:
      // a read that failed, or blocks evicted meanwhile, are read here).
      // One bound for all of them.
      may_wait = false;
      bool waited = false;
      const auto deadline = std::chrono::steady_clock::now() + read_ahead_wait;
      for (size_t i = first; i <= last; ++i) {
        if (out[i]) continue;
        const block_key k{key, blocks[i].position};
        if (!in_flight_.contains(k)) continue;
        waited = true;
        const auto left = deadline - std::chrono::steady_clock::now();
        if (left <= left.zero()) break;
        lock.wait_for(flight_cv_, left,
                      [&]() REQUIRES(flight_mu_) { return !in_flight_.contains(k); });
      }
      if (waited) {
        if (!for_read_ahead) read_ahead_waits_.fetch_add(1, std::memory_order_relaxed);
        lock.unlock();
        continue;
      }
    }
    for (size_t i = first; i <= last; ++i) {
      if (!out[i]) ++in_flight_[block_key{key, blocks[i].position}];
    }
    lock.unlock();
    if (for_read_ahead) read_ahead_gets_.fetch_add(1, std::memory_order_relaxed);
    auto got = get_blocks(key, blocks, first, last, out);
    end_flight(key, blocks, first, last);
    if (!got) return tl::make_unexpected(got.error());
    return out;
  }
}

tl::expected<read_result, stream_error> cold_reader::read(base::stream_id stream_id,
                                                          base::offset offset, size_t max_bytes) {
  auto found = locate(stream_id, offset, max_bytes);
  if (!found) return tl::make_unexpected(found.error());
  auto data = load(found->key, found->blocks, false);
  if (!data) return tl::make_unexpected(data.error());
  read_result out;
  out.next_offset = offset;
  size_t out_bytes = 0;
  bool full = false;
  for (size_t i = 0; i < found->blocks.size() && !full; ++i) {
    auto batches = checked_block_batches(found->blocks[i], (*data)[i]->bytes);
    if (!batches || !batch::add_to(out, out_bytes, *batches, offset, max_bytes, full)) {
      return fail(stream_error::corrupt_object);
    }
    out.owners.push_back((*data)[i]);
  }
  maybe_read_ahead(stream_id, found->blocks.back().end_offset, out.next_offset);
  reads_.fetch_add(1, std::memory_order_relaxed);
  return out;
}

void cold_reader::maybe_read_ahead(base::stream_id stream_id, base::offset block_end,
                                   base::offset next_offset) {
  if (threads_.empty()) return;
  const stream_ref ref = cache_.stream(stream_id);
  auto& st = *ref;
  base::offset from;
  {
    base::lock_guard lock(st.mu);
    if (st.read_ahead_pending) return;
    if (st.read_ahead_end && *st.read_ahead_end > block_end) {
      // A window is ahead of this read: the next one once the reads pass its middle.
      if (next_offset < st.read_ahead_refill_at) return;
      from = *st.read_ahead_end;
    } else {
      from = block_end;
    }
    st.read_ahead_pending = true;
  }
  {
    base::lock_guard lock(queue_mu_);
    if (!stopping_ && queue_.size() < max_queued_read_aheads) {
      queue_.push_back({stream_id, from});
      queue_cv_.notify_one();
      return;
    }
  }
  base::lock_guard lock(st.mu);
  st.read_ahead_pending = false;
}

void cold_reader::read_ahead_loop() {
  for (;;) {
    read_ahead_job job;
    {
      base::unique_lock lock(queue_mu_);
      lock.wait(queue_cv_, [&]() REQUIRES(queue_mu_) { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = queue_.front();
      queue_.pop_front();
      ++running_;
    }
    read_ahead(job);
    {
      base::lock_guard lock(queue_mu_);
      --running_;
    }
    idle_cv_.notify_all();
  }
}

void cold_reader::read_ahead(const read_ahead_job& job) {
  base::offset pos = job.from;
  base::offset refill_at = job.from;
  uint32_t count = 0;
  while (count < read_ahead_blocks_) {
    {
      base::lock_guard lock(queue_mu_);
      if (stopping_) break;
    }
    // Past the last object (the rest is in the log cache) or a failure: the window ends here.
    auto found = locate(job.stream_id, pos, std::numeric_limits<size_t>::max());
    if (!found) break;
    const auto blocks =
        found->blocks.first(std::min<size_t>(found->blocks.size(), read_ahead_blocks_ - count));
    if (!load(found->key, blocks, true)) break;
    for (const auto& b : blocks) {
      if (count == read_ahead_blocks_ / 2) refill_at = b.start_offset;
      ++count;
      pos = b.end_offset;
    }
  }
  const stream_ref ref = cache_.find(job.stream_id);
  if (!ref) return;  // dropped meanwhile (its topic deleted)
  auto& st = *ref;
  base::lock_guard lock(st.mu);
  st.read_ahead_pending = false;
  if (count > 0) {
    st.read_ahead_end = pos;
    st.read_ahead_refill_at = count > read_ahead_blocks_ / 2 ? refill_at : pos;
  }
}

bool cold_reader::wait_read_ahead_idle(std::chrono::milliseconds timeout) {
  base::unique_lock lock(queue_mu_);
  return lock.wait_for(idle_cv_, timeout,
                       [&]() REQUIRES(queue_mu_) { return queue_.empty() && running_ == 0; });
}

void cold_reader::forget(const std::string& key) {
  blocks_.erase_object(key);
  base::lock_guard lock(index_mu_);
  indexes_.erase(key);
}

}  // namespace silt::storage
