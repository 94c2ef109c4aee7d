#include "storage/uploader.h"

#include <algorithm>
#include <map>

#include "base/clock.h"
#include "storage/object_format.h"

namespace silt::storage {

using base::now_ms;

tl::expected<void, std::string> uploader::upload_object(
    metadata::object_kind kind, const std::vector<std::shared_ptr<entry>>& entries) {
  object_writer writer(block_size_);
  std::vector<metadata::stream_range> ranges;
  for (const auto& e : entries) {
    // A view: `entries` keep the cached data alive until the object is written.
    if (auto r =
            writer.add_view(e->stream_id, e->base_offset, e->end_offset, e->max_timestamp, e->data);
        !r) {
      return tl::make_unexpected("object writer: " +
                                 std::string(object_format_error_name(r.error())));
    }
    if (!ranges.empty() && ranges.back().stream_id == e->stream_id &&
        ranges.back().end_offset == e->base_offset) {
      auto& last = ranges.back();
      last.end_offset = e->end_offset;
      last.max_timestamp = std::max(last.max_timestamp, e->max_timestamp);
      last.size += e->data.size();
    } else {
      ranges.push_back(
          {e->stream_id, e->base_offset, e->end_offset, e->max_timestamp, e->data.size()});
    }
  }
  // Each stream is committed at the owner and epoch this store holds it at.
  for (auto& r : ranges) {
    const stream_ref ref = cache_.stream(r.stream_id);
    auto& st = *ref;
    base::lock_guard lock(st.mu);
    r.owner = st.owner;
    r.epoch = st.epoch;
  }
  // The object as views of the cached batches: the store copies each byte once at most.
  const object_parts object = writer.finish_parts();
  auto id = catalog_.next_object_id();
  if (!id) return tl::make_unexpected("catalog: cannot allocate an object id");
  metadata::object_record record{*id, object_key(*id, kind == metadata::object_kind::stream),
                                 object.size, kind, now_ms()};
  // A failed PUT may still have written the object (a lost reply), and a crash may come
  // between PUT and commit: the sweep deletes such objects, which nothing references.
  if (auto put = store_.put_parts(record.key, object.parts); !put) {
    return tl::make_unexpected("upload of " + record.key +
                               " failed: " + std::string(store_error_name(put.error())));
  }
  if (auto c = catalog_.commit_object(record, ranges); !c) {
    // Only a refusal is sure to have committed nothing; after any other failure the commit
    // may have happened, and deleting the object would lose data. If the remove fails, or
    // is not tried and the commit did not happen, the sweep deletes the object later.
    if (c.error() == metadata::catalog_error::discontinuous ||
        c.error() == metadata::catalog_error::fenced) {
      (void)store_.remove(record.key);
    }
    if (c.error() == metadata::catalog_error::fenced) find_fenced(ranges);
    return tl::make_unexpected("commit of " + record.key +
                               " refused: " + std::string(metadata::catalog_error_name(c.error())));
  }
  cache_.uploaded(entries);
  if (measure_ingest_.load(std::memory_order_relaxed)) {
    base::lock_guard lock(ingested_mu_);
    for (const auto& r : ranges) ingested_[r.stream_id] += r.size;
  }
  uploads_.fetch_add(1, std::memory_order_relaxed);
  uploaded_bytes_.fetch_add(object.size, std::memory_order_relaxed);
  (kind == metadata::object_kind::stream ? stream_objects_ : stream_set_objects_)
      .fetch_add(1, std::memory_order_relaxed);
  return {};
}

void uploader::find_fenced(const std::vector<metadata::stream_range>& ranges) {
  for (const auto& r : ranges) {
    auto now = catalog_.stream(r.stream_id);
    if (!now) return;
    (void)cache_.fenced_by(r.stream_id, *now);
  }
}

tl::expected<void, std::string> uploader::run_once(wal::wal& wal) {
  // Everything durable up to one WAL position, so that the WAL can be trimmed to it after.
  const wal::wal_position upto = cache_.durable_wal_end();
  auto queued = cache_.pending(upto);
  std::map<base::stream_id, std::vector<std::shared_ptr<entry>>> by_stream;
  std::vector<std::shared_ptr<entry>> dropped;
  for (auto& e : queued) {
    const stream_ref ref = cache_.stream(e->stream_id);
    auto& st = *ref;
    bool fenced;
    {
      base::lock_guard lock(st.mu);
      fenced = st.fenced;
    }
    // A fenced stream's new owner has it now: this store's copy is dropped, not uploaded.
    (fenced ? dropped : by_stream[e->stream_id]).push_back(std::move(e));
  }
  if (!dropped.empty()) cache_.uploaded(dropped);
  std::vector<std::shared_ptr<entry>> set_entries;
  for (auto& [id, entries] : by_stream) {
    uint64_t bytes = 0;
    for (const auto& e : entries) bytes += e->data.size();
    if (bytes >= stream_object_bytes_) {
      if (auto r = upload_object(metadata::object_kind::stream, entries); !r) return r;
    } else {
      set_entries.insert(set_entries.end(), entries.begin(), entries.end());
    }
  }
  if (!set_entries.empty()) {
    if (auto r = upload_object(metadata::object_kind::stream_set, set_entries); !r) return r;
  }
  if (!queued.empty()) wal.trim(upto);
  cache_.evict();
  return {};
}

upload_stats uploader::stats() const {
  return {uploads_.load(), uploaded_bytes_.load(), stream_set_objects_.load(),
          stream_objects_.load()};
}

std::unordered_map<base::stream_id, uint64_t> uploader::take_ingested() {
  measure_ingest_.store(true, std::memory_order_relaxed);
  std::unordered_map<base::stream_id, uint64_t> out;
  base::lock_guard lock(ingested_mu_);
  out.swap(ingested_);
  return out;
}

}  // namespace silt::storage
