#include "storage/cold_reader.h"

namespace silt::storage {

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

tl::expected<read_result, stream_error> cold_reader::read(base::stream_id stream_id,
                                                          base::offset offset, size_t max_bytes) {
  auto ranges = catalog_.find(stream_id, offset, 1);
  if (!ranges) return fail(stream_error::catalog);
  if (ranges->empty() || (*ranges)[0].range.start_offset > offset) {
    // Below the cache and in no object: the data was trimmed away in the meantime.
    return fail(stream_error::offset_out_of_range);
  }
  const auto& located = (*ranges)[0];
  auto index = object_index(located.key);
  if (!index) return tl::make_unexpected(index.error());
  const auto blocks = find_blocks(**index, stream_id, offset, max_bytes);
  if (blocks.empty()) return fail(stream_error::corrupt_object);

  auto& st = cache_.stream(stream_id);
  bool sequential;
  {
    base::lock_guard lock(st.mu);
    sequential = st.last_cold_end == offset;
  }
  // The blocks to fetch: those wanted, plus read-ahead of the stream's next blocks in this
  // object on a sequential read, in one ranged GET when they are not cached.
  std::vector<const block_entry*> wanted;
  for (const auto& b : blocks) wanted.push_back(&b);
  std::vector<const block_entry*> fetch = wanted;
  if (sequential && read_ahead_blocks_ > 0) {
    const block_entry* last = fetch.back();
    for (uint32_t i = 0; i < read_ahead_blocks_; ++i) {
      const block_entry* next = last + 1;
      if (next >= (*index)->data() + (*index)->size() || next->stream_id != stream_id ||
          next->start_offset != last->end_offset) {
        break;
      }
      fetch.push_back(next);
      last = next;
    }
  }
  std::vector<block_cache::block_ptr> data(fetch.size());
  size_t first_miss = fetch.size();
  for (size_t i = 0; i < fetch.size(); ++i) {
    data[i] = blocks_.get(located.key, fetch[i]->position);
    // Only a wanted block that is missing costs a GET; read-ahead rides along with it.
    if (!data[i] && i < wanted.size() && first_miss == fetch.size()) first_miss = i;
  }
  if (first_miss < fetch.size()) {
    // Blocks of one stream in one object are contiguous: one GET from the first missing
    // wanted block to the end of the read-ahead.
    size_t last_needed = fetch.size() - 1;
    const uint64_t begin = fetch[first_miss]->position;
    const uint64_t end = fetch[last_needed]->position + fetch[last_needed]->size;
    auto got = store_.get(located.key, begin, end - begin);
    gets_.fetch_add(1, std::memory_order_relaxed);
    // A short read (a response cut off) is the store's failure, not the object's: retried.
    if (!got || got->size() != end - begin) return fail(stream_error::object_store);
    // The blocks are views of the buffer read, which they keep alive; each is checked once,
    // here, before it is cached.
    auto bytes = std::make_shared<const std::vector<uint8_t>>(std::move(*got));
    for (size_t i = first_miss; i < fetch.size(); ++i) {
      if (data[i]) continue;
      const auto view = std::span(*bytes).subspan(fetch[i]->position - begin, fetch[i]->size);
      if (!open_block(*fetch[i], view)) return fail(stream_error::corrupt_object);
      auto block = std::make_shared<const block_cache::block>(block_cache::block{bytes, view});
      blocks_.put(located.key, fetch[i]->position, block);
      data[i] = std::move(block);
    }
  }
  read_result out;
  out.next_offset = offset;
  size_t out_bytes = 0;
  bool full = false;
  for (size_t i = 0; i < wanted.size() && !full; ++i) {
    auto batches = checked_block_batches(*wanted[i], data[i]->bytes);
    if (!batches || !batch::add_to(out, out_bytes, *batches, offset, max_bytes, full)) {
      return fail(stream_error::corrupt_object);
    }
    out.owners.push_back(data[i]);
  }
  {
    base::lock_guard lock(st.mu);
    st.last_cold_end = out.next_offset;
  }
  reads_.fetch_add(1, std::memory_order_relaxed);
  return out;
}

void cold_reader::forget(const std::string& key) {
  blocks_.erase_object(key);
  base::lock_guard lock(index_mu_);
  indexes_.erase(key);
}

}  // namespace silt::storage
