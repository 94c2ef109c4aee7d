#include "storage/stream_store.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <string_view>
#include <utility>

#include <sys/syscall.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/endian.h"

namespace silt::storage {

namespace {

tl::unexpected<stream_error> fail(stream_error e) {
  return tl::make_unexpected(e);
}

using base::now_ms;

// The fields of a Kafka v2 record batch header the store needs (see protocol/record_batch.h
// for the layout): the store keeps batches as sent and only assigns their base offsets.
constexpr size_t batch_header_size = 61;
constexpr size_t batch_length_offset = 8;
constexpr size_t batch_magic_offset = 16;
constexpr size_t batch_last_delta_offset = 23;
constexpr size_t batch_max_timestamp_offset = 35;

struct batch_view {
  std::span<const uint8_t> bytes;
  int64_t base_offset;
  int64_t end_offset;  // exclusive
  int64_t max_timestamp;
};

// Calls f(batch_view) for each whole batch of `data`; false when `data` is not whole batches.
template <typename F>
bool for_each_batch(std::span<const uint8_t> data, F&& f) {
  size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < batch_header_size) return false;
    const uint8_t* p = data.data() + pos;
    const int32_t length = base::load_be<int32_t>(p + batch_length_offset);
    if (length < static_cast<int32_t>(batch_header_size - 12) ||
        static_cast<size_t>(length) + 12 > data.size() - pos || p[batch_magic_offset] != 2) {
      return false;
    }
    const int32_t last_delta = base::load_be<int32_t>(p + batch_last_delta_offset);
    if (last_delta < 0) return false;
    const int64_t base = base::load_be<int64_t>(p);
    const size_t size = static_cast<size_t>(length) + 12;
    f(batch_view{data.subspan(pos, size), base, base + last_delta + 1,
                 base::load_be<int64_t>(p + batch_max_timestamp_offset)});
    pos += size;
  }
  return true;
}

// Adds the batches of `data` that end after `offset` to `out`, while they fit in max_bytes
// (the first batch of a read always fits). `bytes` counts what `out` holds. Returns false when
// `data` is not whole batches; sets `full` when a batch did not fit.
bool add_batches(read_result& out, size_t& bytes, std::span<const uint8_t> data, int64_t offset,
                 size_t max_bytes, bool& full) {
  return for_each_batch(data, [&](const batch_view& b) {
    if (full || b.end_offset <= offset) return;
    if (!out.chunks.empty() && bytes + b.bytes.size() > max_bytes) {
      full = true;
      return;
    }
    out.chunks.push_back(b.bytes);
    out.next_offset = b.end_offset;
    bytes += b.bytes.size();
  });
}

// Every object the store writes lies under this prefix; the sweep looks nowhere else.
constexpr std::string_view object_prefix = "objects/";

std::string object_key(uint64_t id, metadata::object_kind kind) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "objects/%016" PRIx64 ".%s", id,
                kind == metadata::object_kind::stream ? "stream" : "set");
  return buf;
}

// The id in a key object_key() made; nullopt for any other key.
std::optional<uint64_t> object_key_id(std::string_view key) {
  constexpr size_t digits = 16;
  if (!key.starts_with(object_prefix) || key.size() < object_prefix.size() + digits) {
    return std::nullopt;
  }
  const std::string_view hex = key.substr(object_prefix.size(), digits);
  uint64_t id = 0;
  for (const char c : hex) {
    const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return std::nullopt;
    id = id << 4 | static_cast<uint64_t>(v);
  }
  // Exactly the key of one kind: no other suffix, no upper-case digits.
  for (const auto kind : {metadata::object_kind::stream_set, metadata::object_kind::stream}) {
    if (object_key(id, kind) == key) return id;
  }
  return std::nullopt;
}

}  // namespace

std::string_view stream_error_name(stream_error e) {
  switch (e) {
    case stream_error::offset_out_of_range:
      return "offset out of range";
    case stream_error::invalid_batch:
      return "invalid record batch";
    case stream_error::wal_failed:
      return "WAL failed";
    case stream_error::wal_full:
      return "WAL full";
    case stream_error::too_large:
      return "too large for the WAL";
    case stream_error::object_store:
      return "object store error";
    case stream_error::corrupt_object:
      return "corrupt object";
    case stream_error::catalog:
      return "catalog error";
    case stream_error::fenced:
      return "fenced: the stream has a newer owner";
  }
  return "unknown";
}

size_t read_result::bytes() const {
  size_t n = 0;
  for (const auto& c : chunks) n += c.size();
  return n;
}

std::vector<uint8_t> read_result::concatenate() const {
  std::vector<uint8_t> out;
  out.reserve(bytes());
  for (const auto& c : chunks) out.insert(out.end(), c.begin(), c.end());
  return out;
}

// A run of batches appended together: the log cache's unit, and the WAL's record.
struct stream_store::entry {
  uint64_t stream_id = 0;
  int64_t base_offset = 0;
  int64_t end_offset = 0;
  int64_t max_timestamp = -1;
  std::shared_ptr<const void> owner;  // keeps `data` alive (a request frame, a WAL replay copy)
  std::span<const uint8_t> data;
  wal::wal_position wal_end = 0;
  bool durable = false;
  bool uploaded = false;
};

struct stream_store::stream_state {
  int64_t start_offset = 0;
  int64_t next_offset = 0;                   // assigned to appends (durable or not)
  int64_t durable_end = 0;                   // readers see offsets below this
  int64_t committed_end = 0;                 // in objects (catalog)
  std::deque<std::shared_ptr<entry>> cache;  // offset order; everything above committed_end
  int64_t retention_ms = -2;                 // -2: the store's default
  int64_t retention_bytes = -2;
  int64_t last_cold_end = -1;  // where the last cold read stopped (read-ahead detection)
  int32_t owner = -1;          // owner and epoch as this store holds the stream
  int32_t epoch = 0;
  bool fenced = false;  // a commit found a newer owner: no appends, reads or uploads here
};

stream_store::stream_store(const stream_store_options& options, object_store& store,
                           std::unique_ptr<metadata::stream_catalog> catalog)
    : options_(options),
      store_(store),
      catalog_(std::move(catalog)),
      blocks_(options.block_cache_bytes) {}

tl::expected<std::unique_ptr<stream_store>, std::string> stream_store::open(
    const stream_store_options& options, object_store& store) {
  auto catalog = options.metadata ? metadata::stream_catalog::open(options.metadata)
                                  : metadata::stream_catalog::open(options.metadata_uri);
  if (!catalog) return tl::make_unexpected(catalog.error());
  std::unique_ptr<stream_store> s(new stream_store(options, store, std::move(*catalog)));
  // Every stream's offsets, now: from here on the store keeps them itself, and the request
  // path never waits on the catalog to touch a stream.
  auto states = s->catalog_->stream_states();
  if (!states) {
    return tl::make_unexpected(std::string("cannot read the streams of the catalog"));
  }
  for (const auto& [id, c] : *states) {
    stream_state st;
    st.owner = c.owner;
    st.epoch = c.epoch;
    st.start_offset = c.start_offset;
    st.next_offset = st.durable_end = st.committed_end = c.end_offset;
    s->streams_.emplace(id, std::move(st));
  }
  std::string replay_error;
  auto w = wal::wal::open(options.wal, [&](const wal::replayed_record& rec) {
    std::lock_guard lock(s->state_mu_);
    auto& st = s->stream_locked(rec.stream_id);
    if (rec.offset < st.committed_end) return;  // uploaded before the crash, WAL not trimmed
    if (rec.offset != st.next_offset) {
      if (replay_error.empty()) {
        replay_error = "WAL record of stream " + std::to_string(rec.stream_id) + " at offset " +
                       std::to_string(rec.offset) + " does not continue the stream at " +
                       std::to_string(st.next_offset);
      }
      return;
    }
    auto e = std::make_shared<entry>();
    e->stream_id = rec.stream_id;
    e->base_offset = rec.offset;
    e->end_offset = rec.offset;
    if (!for_each_batch(rec.payload, [&](const batch_view& b) {
          e->end_offset = b.end_offset;
          e->max_timestamp = std::max(e->max_timestamp, b.max_timestamp);
        })) {
      if (replay_error.empty()) replay_error = "WAL record holds no whole record batches";
      return;
    }
    auto copy =
        std::make_shared<const std::vector<uint8_t>>(rec.payload.begin(), rec.payload.end());
    e->data = *copy;
    e->owner = std::move(copy);
    e->wal_end = rec.end;
    e->durable = true;
    st.next_offset = st.durable_end = e->end_offset;
    st.cache.push_back(e);
    s->cache_bytes_ += e->data.size();
    s->pending_upload_bytes_ += e->data.size();
  });
  if (!w)
    return tl::make_unexpected("cannot open the WAL " + options.wal.path + ": " +
                               std::string(wal::wal_error_name(w.error())));
  if (!replay_error.empty()) return tl::make_unexpected(replay_error);
  s->wal_ = std::move(*w);
  s->wal_->set_room_callback([p = s.get()] {
    std::function<void()> listener;
    {
      std::lock_guard lock(p->room_mu_);
      listener = p->room_listener_;
    }
    if (listener) listener();
  });
  s->durable_wal_end_ = s->wal_->durable_end();
  if (options.background) s->background_ = std::thread([p = s.get()] { p->background_loop(); });
  return s;
}

stream_store::~stream_store() {
  close();
}

void stream_store::close() {
  {
    std::lock_guard lock(state_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  upload_wanted_.notify_all();
  if (background_.joinable()) background_.join();
  if (wal_) wal_->close();
}

stream_store::stream_state& stream_store::stream_locked(uint64_t stream_id) {
  // Streams the catalog knows were loaded at open; any other one is new, at offset 0.
  return streams_[stream_id];
}

void stream_store::append(uint64_t stream_id, std::vector<uint8_t> batches,
                          const append_callback& done) {
  auto owner = std::make_shared<std::vector<uint8_t>>(std::move(batches));
  const std::span<uint8_t> span(*owner);
  auto r = append(stream_id, std::move(owner), span, done);
  if (!r) done(fail(r.error()));
}

void stream_store::set_room_listener(std::function<void()> listener) {
  std::lock_guard lock(room_mu_);
  room_listener_ = std::move(listener);
}

tl::expected<int64_t, stream_error> stream_store::append(uint64_t stream_id,
                                                         std::shared_ptr<const void> owner,
                                                         std::span<uint8_t> batches,
                                                         append_callback done) {
  std::unique_lock append_lock(append_mu_);
  auto e = std::make_shared<entry>();
  {
    std::lock_guard lock(state_mu_);
    if (stopping_) return fail(stream_error::wal_failed);
    auto& st = stream_locked(stream_id);
    if (st.fenced) return fail(stream_error::fenced);
    int64_t next = st.next_offset;
    int64_t max_ts = -1;
    // Assign offsets and the leader epoch in place: both are outside the batch CRC.
    const bool ok = !batches.empty() && for_each_batch(batches, [&](const batch_view& b) {
      auto* p = const_cast<uint8_t*>(b.bytes.data());
      base::store_be<int64_t>(p, next);
      base::store_be<int32_t>(p + 12, st.epoch);
      next += b.end_offset - b.base_offset;
      max_ts = std::max(max_ts, b.max_timestamp);
    });
    if (!ok) return fail(stream_error::invalid_batch);
    e->stream_id = stream_id;
    e->base_offset = st.next_offset;
    e->end_offset = next;
    e->max_timestamp = max_ts;
    e->owner = std::move(owner);
    e->data = batches;
    st.next_offset = next;
    st.cache.push_back(e);
    cache_bytes_ += e->data.size();
  }
  const int64_t base = e->base_offset;
  auto queued = wal_->try_append(
      stream_id, e->base_offset, e->data,
      [this, e, done = std::move(done)](tl::expected<wal::wal_position, wal::wal_error> r) {
        on_durable(e, r, done);
      });
  if (!queued) {
    // Not in the WAL: the append never happened. No other append ran meanwhile
    // (append_mu_), so the entry is the stream's last.
    std::lock_guard lock(state_mu_);
    forget_locked(e);
    switch (queued.error()) {
      case wal::wal_error::full:
        return fail(stream_error::wal_full);
      case wal::wal_error::too_large:
        return fail(stream_error::too_large);
      default:
        return fail(stream_error::wal_failed);
    }
  }
  return base;
}

void stream_store::forget_locked(const std::shared_ptr<entry>& e) {
  auto& st = stream_locked(e->stream_id);
  // Every append after a failed one fails too, so its offsets are the stream's end again.
  st.next_offset = std::min(st.next_offset, e->base_offset);
  for (auto it = st.cache.rbegin(); it != st.cache.rend(); ++it) {
    if (*it == e) {
      cache_bytes_ -= e->data.size();
      st.cache.erase(std::next(it).base());
      break;
    }
  }
}

void stream_store::on_durable(const std::shared_ptr<entry>& e,
                              tl::expected<wal::wal_position, wal::wal_error> r,
                              const append_callback& done) {
  bool wake = false;
  if (!r) {
    // A failed write: the entry goes, and its offsets with it. append_mu_ keeps an append
    // from taking offsets between this and the entries failed after it.
    std::lock_guard append_lock(append_mu_);
    std::lock_guard lock(state_mu_);
    forget_locked(e);
  } else {
    std::lock_guard lock(state_mu_);
    e->durable = true;
    e->wal_end = *r;
    durable_wal_end_ = std::max(durable_wal_end_, *r);
    auto& st = stream_locked(e->stream_id);
    st.durable_end = std::max(st.durable_end, e->end_offset);
    pending_upload_bytes_ += e->data.size();
    wake = pending_upload_bytes_ >= options_.upload_threshold_bytes ||
           cache_bytes_ >= options_.log_cache_bytes;
  }
  if (wake) upload_wanted_.notify_one();
  if (r) {
    done(e->base_offset);
  } else {
    done(fail(stream_error::wal_failed));
  }
}

stream_offsets stream_store::offsets(uint64_t stream_id) {
  std::lock_guard lock(state_mu_);
  const auto& st = stream_locked(stream_id);
  return {st.start_offset, st.durable_end, st.epoch, st.fenced};
}

std::optional<tl::expected<read_result, stream_error>> stream_store::read_cached_locked(
    const stream_state& st, int64_t offset, size_t max_bytes) {
  if (st.fenced) return fail(stream_error::fenced);
  if (offset < st.start_offset || offset > st.durable_end) {
    return fail(stream_error::offset_out_of_range);
  }
  read_result out;
  out.next_offset = offset;
  if (offset == st.durable_end) return out;
  const int64_t cache_start = st.cache.empty() ? st.durable_end : st.cache.front()->base_offset;
  if (offset < cache_start) return std::nullopt;
  auto it = std::upper_bound(st.cache.begin(), st.cache.end(), offset,
                             [](int64_t o, const auto& e) { return o < e->end_offset; });
  size_t bytes = 0;
  bool full = false;
  for (; it != st.cache.end() && (*it)->durable && !full && bytes < max_bytes; ++it) {
    const size_t before = out.chunks.size();
    add_batches(out, bytes, (*it)->data, offset, max_bytes, full);
    if (out.chunks.size() > before) out.owners.push_back((*it)->owner);
  }
  return out;
}

std::optional<tl::expected<read_result, stream_error>> stream_store::read_cached(uint64_t stream_id,
                                                                                 int64_t offset,
                                                                                 size_t max_bytes) {
  std::lock_guard lock(state_mu_);
  return read_cached_locked(stream_locked(stream_id), offset, max_bytes);
}

tl::expected<read_result, stream_error> stream_store::read(uint64_t stream_id, int64_t offset,
                                                           size_t max_bytes) {
  for (int attempt = 0;; ++attempt) {
    {
      std::lock_guard lock(state_mu_);
      if (auto r = read_cached_locked(stream_locked(stream_id), offset, max_bytes)) return *r;
    }
    auto cold = read_cold(stream_id, offset, max_bytes);
    if (cold) return cold;
    if (cold.error() == stream_error::offset_out_of_range) {
      // The catalog holds nothing at `offset`. The start moves before the catalog is trimmed
      // (retention, trim()), so this is out of range only if the start is past `offset` now;
      // otherwise look again (the offset was below the cache when checked, and evicted data
      // is always in the catalog first), and never send a reader away from an offset that
      // exists: a lasting miss is the catalog's failure, which clients retry.
      std::lock_guard lock(state_mu_);
      if (offset < stream_locked(stream_id).start_offset) return cold;
      if (attempt >= 2) return fail(stream_error::catalog);
      continue;
    }
    // An object that compaction or retention removed in the meantime: look again.
    if (cold.error() != stream_error::object_store || attempt >= 2) return cold;
  }
}

tl::expected<std::shared_ptr<const std::vector<block_entry>>, stream_error>
stream_store::object_index(const std::string& key) {
  {
    std::lock_guard lock(index_mu_);
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
  std::lock_guard lock(index_mu_);
  if (indexes_.size() >= 4096) indexes_.clear();  // a crude bound; indexes are small
  indexes_[key] = shared;
  return shared;
}

tl::expected<read_result, stream_error> stream_store::read_cold(uint64_t stream_id, int64_t offset,
                                                                size_t max_bytes) {
  auto ranges = catalog_->find(stream_id, offset, 1);
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

  bool sequential;
  {
    std::lock_guard lock(state_mu_);
    sequential = stream_locked(stream_id).last_cold_end == offset;
  }
  // The blocks to fetch: those wanted, plus read-ahead of the stream's next blocks in this
  // object on a sequential read, in one ranged GET when they are not cached.
  std::vector<const block_entry*> wanted;
  for (const auto& b : blocks) wanted.push_back(&b);
  std::vector<const block_entry*> fetch = wanted;
  if (sequential && options_.read_ahead_blocks > 0) {
    const block_entry* last = fetch.back();
    for (uint32_t i = 0; i < options_.read_ahead_blocks; ++i) {
      const block_entry* next = last + 1;
      if (next >= (*index)->data() + (*index)->size() || next->stream_id != stream_id ||
          next->start_offset != last->end_offset) {
        break;
      }
      fetch.push_back(next);
      last = next;
    }
  }
  std::vector<std::shared_ptr<const std::vector<uint8_t>>> data(fetch.size());
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
    auto bytes = store_.get(located.key, begin, end - begin);
    {
      std::lock_guard lock(state_mu_);
      ++stats_.object_gets;
    }
    // A short read (a response cut off) is the store's failure, not the object's: retried.
    if (!bytes || bytes->size() != end - begin) return fail(stream_error::object_store);
    for (size_t i = first_miss; i < fetch.size(); ++i) {
      if (data[i]) continue;
      const auto from = static_cast<ptrdiff_t>(fetch[i]->position - begin);
      auto block = std::make_shared<const std::vector<uint8_t>>(
          bytes->begin() + from, bytes->begin() + from + fetch[i]->size);
      if (!open_block(*fetch[i], *block)) return fail(stream_error::corrupt_object);
      blocks_.put(located.key, fetch[i]->position, block);
      data[i] = std::move(block);
    }
  }
  read_result out;
  out.next_offset = offset;
  size_t out_bytes = 0;
  bool full = false;
  for (size_t i = 0; i < wanted.size() && !full; ++i) {
    auto batches = open_block(*wanted[i], *data[i]);
    if (!batches || !add_batches(out, out_bytes, *batches, offset, max_bytes, full)) {
      return fail(stream_error::corrupt_object);
    }
    out.owners.push_back(data[i]);
  }
  {
    std::lock_guard lock(state_mu_);
    stream_locked(stream_id).last_cold_end = out.next_offset;
    ++stats_.cold_reads;
  }
  return out;
}

tl::expected<void, stream_error> stream_store::trim(uint64_t stream_id, int64_t offset) {
  int32_t owner;
  int32_t epoch;
  {
    // The start moves first, as retention does: a reader never passes the start check and
    // then finds the catalog already trimmed.
    std::lock_guard lock(state_mu_);
    auto& st = stream_locked(stream_id);
    if (st.fenced) return fail(stream_error::fenced);
    if (offset > st.durable_end) return fail(stream_error::offset_out_of_range);
    if (offset <= st.start_offset) return {};
    st.start_offset = offset;
    owner = st.owner;
    epoch = st.epoch;
  }
  // The catalog's transaction runs without the state lock: readers and appends go on. (If it
  // fails, the start stays moved in memory; the caller gets the error and may try again.)
  if (auto r = catalog_->trim(stream_id, offset, owner, epoch); !r)
    return fail(catalog_failure(r.error(), stream_id));
  return {};
}

stream_error stream_store::catalog_failure(metadata::catalog_error e, uint64_t stream_id) {
  if (e != metadata::catalog_error::fenced) return stream_error::catalog;
  std::lock_guard lock(state_mu_);
  mark_fenced_locked(stream_id);
  return stream_error::fenced;
}

void stream_store::mark_fenced_locked(uint64_t stream_id) {
  auto& st = stream_locked(stream_id);
  if (st.fenced) return;
  st.fenced = true;
  std::fprintf(stderr,
               "stream store: stream %llu has a newer owner than node %d at epoch %d; it is no "
               "longer served here\n",
               static_cast<unsigned long long>(stream_id), st.owner, st.epoch);
}

tl::expected<void, stream_error> stream_store::take(const std::vector<uint64_t>& stream_ids) {
  std::vector<metadata::stream_take> takes;
  takes.reserve(stream_ids.size());
  {
    std::lock_guard lock(state_mu_);
    for (uint64_t id : stream_ids) takes.push_back({id, stream_locked(id).next_offset});
  }
  auto epochs = catalog_->take(options_.node_id, takes);
  if (!epochs) return fail(stream_error::catalog);
  std::lock_guard lock(state_mu_);
  for (size_t i = 0; i < stream_ids.size(); ++i) {
    auto& st = stream_locked(stream_ids[i]);
    st.owner = options_.node_id;
    st.epoch = (*epochs)[i];
    st.fenced = false;
  }
  return {};
}

tl::expected<std::vector<metadata::epoch_start>, stream_error> stream_store::epochs(
    uint64_t stream_id) {
  auto r = catalog_->epochs(stream_id);
  if (!r) return fail(stream_error::catalog);
  return std::move(*r);
}

tl::expected<std::vector<uint8_t>, stream_error> stream_store::producer_state(uint64_t stream_id) {
  auto r = catalog_->producer_state(stream_id);
  if (!r) return fail(stream_error::catalog);
  return std::move(*r);
}

tl::expected<void, stream_error> stream_store::put_producer_state(
    uint64_t stream_id, const std::vector<uint8_t>& data) {
  int32_t owner;
  int32_t epoch;
  {
    std::lock_guard lock(state_mu_);
    const auto& st = stream_locked(stream_id);
    if (st.fenced) return fail(stream_error::fenced);
    owner = st.owner;
    epoch = st.epoch;
  }
  if (auto r = catalog_->put_producer_state(stream_id, owner, epoch, data); !r) {
    return fail(catalog_failure(r.error(), stream_id));
  }
  return {};
}

void stream_store::set_retention(uint64_t stream_id, int64_t retention_ms,
                                 int64_t retention_bytes) {
  std::lock_guard lock(state_mu_);
  auto& st = stream_locked(stream_id);
  st.retention_ms = retention_ms;
  st.retention_bytes = retention_bytes;
}

void stream_store::evict_locked() {
  // Evict the oldest uploaded entries (by WAL position) until the cache fits; never data
  // that is not in a committed object yet.
  while (cache_bytes_ > options_.log_cache_bytes) {
    stream_state* victim = nullptr;
    for (auto& [id, st] : streams_) {
      if (st.cache.empty() || !st.cache.front()->uploaded) continue;
      if (victim == nullptr || st.cache.front()->wal_end < victim->cache.front()->wal_end) {
        victim = &st;
      }
    }
    if (victim == nullptr) return;
    cache_bytes_ -= victim->cache.front()->data.size();
    victim->cache.pop_front();
  }
}

tl::expected<void, std::string> stream_store::upload_object(
    metadata::object_kind kind, const std::vector<std::shared_ptr<entry>>& entries) {
  object_writer writer(options_.object_block_size);
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
  {
    // Each stream is committed at the owner and epoch this store holds it at.
    std::lock_guard lock(state_mu_);
    for (auto& r : ranges) {
      const auto& st = stream_locked(r.stream_id);
      r.owner = st.owner;
      r.epoch = st.epoch;
    }
  }
  // The object as views of the cached batches: the store copies each byte once at most.
  const object_parts object = writer.finish_parts();
  auto id = catalog_->next_object_id();
  if (!id) return tl::make_unexpected("catalog: cannot allocate an object id");
  metadata::object_record record{*id, object_key(*id, kind), object.size, kind, now_ms()};
  // A failed PUT may still have written the object (a lost reply), and a crash may come
  // between PUT and commit: the sweep deletes such objects, which nothing references.
  if (auto put = store_.put_parts(record.key, object.parts); !put) {
    return tl::make_unexpected("upload of " + record.key +
                               " failed: " + std::string(store_error_name(put.error())));
  }
  if (auto c = catalog_->commit_object(record, ranges); !c) {
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
  std::lock_guard lock(state_mu_);
  for (const auto& e : entries) {
    e->uploaded = true;
    pending_upload_bytes_ -= std::min<uint64_t>(pending_upload_bytes_, e->data.size());
    auto& st = stream_locked(e->stream_id);
    st.committed_end = std::max(st.committed_end, e->end_offset);
  }
  ++stats_.uploads;
  stats_.uploaded_bytes += object.size;
  if (kind == metadata::object_kind::stream) {
    ++stats_.stream_objects;
  } else {
    ++stats_.stream_set_objects;
  }
  return {};
}

void stream_store::find_fenced(const std::vector<metadata::stream_range>& ranges) {
  for (const auto& r : ranges) {
    auto now = catalog_->stream(r.stream_id);
    if (!now) return;
    if (*now && ((*now)->owner != r.owner || (*now)->epoch != r.epoch)) {
      std::lock_guard lock(state_mu_);
      mark_fenced_locked(r.stream_id);
    }
  }
}

tl::expected<void, std::string> stream_store::run_upload_once() {
  std::lock_guard task(task_mu_);
  // Everything durable up to one WAL position, so that the WAL can be trimmed to it after.
  wal::wal_position upto;
  std::map<uint64_t, std::vector<std::shared_ptr<entry>>> by_stream;
  {
    std::lock_guard lock(state_mu_);
    upto = durable_wal_end_;
    for (auto& [id, st] : streams_) {
      for (const auto& e : st.cache) {
        if (e->uploaded) continue;
        if (!e->durable || e->wal_end > upto) break;
        if (st.fenced) {
          // The stream's new owner has it now: this store's copy is dropped, not uploaded.
          e->uploaded = true;
          pending_upload_bytes_ -= std::min<uint64_t>(pending_upload_bytes_, e->data.size());
          continue;
        }
        by_stream[id].push_back(e);
      }
    }
  }
  if (by_stream.empty()) return {};
  std::vector<std::shared_ptr<entry>> set_entries;
  for (auto& [id, entries] : by_stream) {
    uint64_t bytes = 0;
    for (const auto& e : entries) bytes += e->data.size();
    if (bytes >= options_.stream_object_bytes) {
      if (auto r = upload_object(metadata::object_kind::stream, entries); !r) return r;
    } else {
      set_entries.insert(set_entries.end(), entries.begin(), entries.end());
    }
  }
  if (!set_entries.empty()) {
    if (auto r = upload_object(metadata::object_kind::stream_set, set_entries); !r) return r;
  }
  wal_->trim(upto);
  std::lock_guard lock(state_mu_);
  evict_locked();
  return {};
}

namespace {

// One stream's data in an object read back for compaction: whole blocks, viewed in `object`.
struct piece {
  int64_t start, end, max_timestamp;
  metadata::stream_range range;  // the committed range the block belongs to
  std::shared_ptr<const std::vector<uint8_t>> object;
  std::span<const uint8_t> batches;
};

// Reads a whole object and appends its committed ranges' blocks to `by_stream`.
tl::expected<void, std::string> load_pieces(metadata::stream_catalog& catalog, object_store& store,
                                            const metadata::object_record& o,
                                            std::map<uint64_t, std::vector<piece>>& by_stream) {
  auto ranges = catalog.object_ranges(o.object_id);
  if (!ranges) return tl::make_unexpected("catalog: cannot read object ranges");
  if (ranges->empty()) return {};
  auto bytes = store.get(o.key, 0, o.size);
  if (!bytes) return tl::make_unexpected("compaction: cannot read " + o.key);
  auto object = std::make_shared<const std::vector<uint8_t>>(std::move(*bytes));
  if (object->size() != o.size || o.size < object_footer_size) {
    return tl::make_unexpected("compaction: " + o.key + " has the wrong size");
  }
  auto footer = parse_footer(std::span(*object).last(object_footer_size));
  if (!footer) return tl::make_unexpected("compaction: bad footer in " + o.key);
  auto index =
      parse_index(std::span(*object).subspan(footer->index_position, footer->index_size), *footer);
  if (!index) return tl::make_unexpected("compaction: bad index in " + o.key);
  for (const auto& r : *ranges) {
    for (const auto& b : *index) {
      if (b.stream_id != r.stream_id || b.start_offset < r.start_offset ||
          b.end_offset > r.end_offset) {
        continue;
      }
      auto batches = open_block(b, std::span(*object).subspan(b.position, b.size));
      if (!batches) return tl::make_unexpected("compaction: corrupt block in " + o.key);
      by_stream[r.stream_id].push_back(
          {b.start_offset, b.end_offset, b.max_timestamp, r, object, *batches});
    }
  }
  return {};
}

// Writes the pieces of several streams (each stream's in offset order) as one object of
// `kind` and commits it in place of the ranges they replace: for each stream, its pieces
// merged where they touch.
tl::expected<void, std::string> write_merged_object(
    metadata::stream_catalog& catalog, object_store& store, uint32_t block_size,
    metadata::object_kind kind,
    const std::vector<std::pair<uint64_t, std::span<const piece>>>& streams) {
  object_writer writer(block_size);
  std::vector<metadata::stream_range> ranges;
  std::vector<metadata::stream_range> replaced;
  for (const auto& [stream, pieces] : streams) {
    for (const auto& p : pieces) {
      // Views into the objects read back, which the pieces keep alive.
      if (!writer.add_view(stream, p.start, p.end, p.max_timestamp, p.batches)) {
        return tl::make_unexpected("compaction: the object writer refused stream data");
      }
      if (!ranges.empty() && ranges.back().stream_id == stream &&
          ranges.back().end_offset == p.start) {
        ranges.back().end_offset = p.end;
        ranges.back().max_timestamp = std::max(ranges.back().max_timestamp, p.max_timestamp);
        ranges.back().size += p.batches.size();
      } else {
        ranges.push_back({stream, p.start, p.end, p.max_timestamp, p.batches.size()});
      }
      // The blocks of one range are consecutive pieces.
      if (replaced.empty() || !(replaced.back() == p.range)) replaced.push_back(p.range);
    }
  }
  const object_parts object = writer.finish_parts();
  auto id = catalog.next_object_id();
  if (!id) return tl::make_unexpected("catalog: cannot allocate an object id");
  metadata::object_record record{*id, object_key(*id, kind), object.size, kind, now_ms()};
  // As in upload_object: an object left behind here is the sweep's to delete.
  if (!store.put_parts(record.key, object.parts)) {
    return tl::make_unexpected("compaction: upload of " + record.key + " failed");
  }
  if (auto c = catalog.replace(record, ranges, replaced); !c) {
    if (c.error() == metadata::catalog_error::discontinuous) (void)store.remove(record.key);
    return tl::make_unexpected("compaction: commit of " + record.key +
                               " refused: " + std::string(metadata::catalog_error_name(c.error())));
  }
  return {};
}

uint64_t bytes_of(std::span<const piece> pieces) {
  uint64_t n = 0;
  for (const auto& p : pieces) n += p.batches.size();
  return n;
}

}  // namespace

tl::expected<void, std::string> stream_store::run_compaction_once() {
  std::lock_guard task(task_mu_);
  if (auto r = compact_stream_sets(); !r) return r;
  if (auto r = compact_stream_objects(); !r) return r;
  return {};
}

tl::expected<void, std::string> stream_store::compact_stream_sets() {
  auto all = catalog_->objects(metadata::object_kind::stream_set);
  if (!all) return tl::make_unexpected("catalog: cannot list objects");
  // The small stream-set objects, oldest first, up to a bounded amount per round.
  std::vector<metadata::object_record> chosen;
  uint64_t total = 0;
  for (const auto& o : *all) {
    if (o.size > options_.compaction_max_object_bytes) continue;
    if (total + o.size > 4 * options_.compaction_max_object_bytes && !chosen.empty()) break;
    chosen.push_back(o);
    total += o.size;
  }
  if (chosen.size() < 2) return {};
  std::map<uint64_t, std::vector<piece>> by_stream;
  for (const auto& o : chosen) {
    if (auto r = load_pieces(*catalog_, store_, o, by_stream); !r) return r;
  }
  // A stream with enough data gets stream objects of its own (one per contiguous run); the
  // others are merged into as few stream-set objects as their size allows, so that many
  // small streams never make many small objects. An object holds one contiguous run per
  // stream: a stream whose pieces have gaps (a chosen object's neighbour was too big to be
  // chosen) puts its k-th run into the k-th series of merged objects.
  struct series {
    std::vector<std::pair<uint64_t, std::span<const piece>>> streams;
    uint64_t bytes = 0;
  };
  std::vector<series> merged;
  auto flush = [&](series& m) -> tl::expected<void, std::string> {
    if (m.streams.empty()) return {};
    auto r = write_merged_object(*catalog_, store_, options_.object_block_size,
                                 metadata::object_kind::stream_set, m.streams);
    m.streams.clear();
    m.bytes = 0;
    return r;
  };
  for (auto& [stream, pieces] : by_stream) {
    std::sort(pieces.begin(), pieces.end(),
              [](const piece& a, const piece& b) { return a.start < b.start; });
    const std::span<const piece> all_pieces(pieces);
    std::vector<std::span<const piece>> runs;
    for (size_t first = 0; first < pieces.size();) {
      size_t last = first;
      while (last + 1 < pieces.size() && pieces[last + 1].start == pieces[last].end) ++last;
      runs.push_back(all_pieces.subspan(first, last - first + 1));
      first = last + 1;
    }
    if (bytes_of(all_pieces) >= options_.stream_object_bytes) {
      for (const auto& run : runs) {
        if (auto r = write_merged_object(*catalog_, store_, options_.object_block_size,
                                         metadata::object_kind::stream, {{stream, run}});
            !r) {
          return r;
        }
      }
      continue;
    }
    if (merged.size() < runs.size()) merged.resize(runs.size());
    for (size_t k = 0; k < runs.size(); ++k) {
      const uint64_t bytes = bytes_of(runs[k]);
      if (merged[k].bytes + bytes > options_.compaction_max_object_bytes) {
        if (auto r = flush(merged[k]); !r) return r;
      }
      merged[k].streams.emplace_back(stream, runs[k]);
      merged[k].bytes += bytes;
    }
  }
  for (auto& m : merged) {
    if (auto r = flush(m); !r) return r;
  }
  std::lock_guard lock(state_mu_);
  ++stats_.compactions;
  return {};
}

tl::expected<void, std::string> stream_store::compact_stream_objects() {
  // Small stream objects (from uploads of a stream just over the threshold, or from older
  // compactions) next to each other in their stream are merged, up to a bounded amount per
  // round.
  auto all = catalog_->objects(metadata::object_kind::stream);
  if (!all) return tl::make_unexpected("catalog: cannot list objects");
  struct small {
    metadata::object_record object;
    metadata::stream_range range;
  };
  std::map<uint64_t, std::vector<small>> by_stream;
  for (const auto& o : *all) {
    if (o.size >= options_.stream_object_bytes) continue;
    auto ranges = catalog_->object_ranges(o.object_id);
    if (!ranges) return tl::make_unexpected("catalog: cannot read object ranges");
    if (ranges->size() != 1) continue;
    by_stream[ranges->front().stream_id].push_back({o, ranges->front()});
  }
  uint64_t budget = 4 * options_.compaction_max_object_bytes;
  bool merged_any = false;
  for (auto& [stream, objects] : by_stream) {
    std::sort(objects.begin(), objects.end(), [](const small& a, const small& b) {
      return a.range.start_offset < b.range.start_offset;
    });
    for (size_t first = 0; first < objects.size() && budget > 0;) {
      size_t last = first;
      uint64_t bytes = objects[first].object.size;
      while (last + 1 < objects.size() &&
             objects[last + 1].range.start_offset == objects[last].range.end_offset &&
             bytes + objects[last + 1].object.size <= options_.compaction_max_object_bytes) {
        ++last;
        bytes += objects[last].object.size;
      }
      if (last > first) {
        std::map<uint64_t, std::vector<piece>> pieces;
        for (size_t i = first; i <= last; ++i) {
          if (auto r = load_pieces(*catalog_, store_, objects[i].object, pieces); !r) return r;
        }
        auto& run = pieces[stream];
        std::sort(run.begin(), run.end(),
                  [](const piece& a, const piece& b) { return a.start < b.start; });
        if (auto r = write_merged_object(*catalog_, store_, options_.object_block_size,
                                         metadata::object_kind::stream, {{stream, run}});
            !r) {
          return r;
        }
        merged_any = true;
        budget -= std::min(budget, bytes);
      }
      first = last + 1;
    }
  }
  if (merged_any) {
    std::lock_guard lock(state_mu_);
    ++stats_.compactions;
  }
  return {};
}

tl::expected<void, std::string> stream_store::run_retention_once() {
  std::lock_guard task(task_mu_);
  auto ids = catalog_->streams();
  if (!ids) return tl::make_unexpected("catalog: cannot list streams");
  const int64_t now = now_ms();
  for (uint64_t id : *ids) {
    int64_t ms;
    int64_t max_bytes;
    {
      std::lock_guard lock(state_mu_);
      const auto& st = stream_locked(id);
      ms = st.retention_ms == -2 ? options_.retention_ms : st.retention_ms;
      max_bytes = st.retention_bytes == -2 ? options_.retention_bytes : st.retention_bytes;
    }
    if (ms < 0 && max_bytes < 0) continue;
    auto ranges = catalog_->ranges(id);
    if (!ranges || ranges->empty()) continue;
    uint64_t total = 0;
    for (const auto& r : *ranges) total += r.range.size;
    int64_t new_start = -1;
    for (const auto& r : *ranges) {
      const bool expired =
          ms >= 0 && r.range.max_timestamp >= 0 && r.range.max_timestamp < now - ms;
      // As Kafka's size retention: a range goes only if what remains is still at least
      // retention.bytes.
      const bool too_big = max_bytes >= 0 && total >= r.range.size &&
                           total - r.range.size >= static_cast<uint64_t>(max_bytes);
      if (!expired && !too_big) break;
      new_start = r.range.end_offset;
      total -= r.range.size;
    }
    if (new_start < 0) continue;
    // The start moves first: a reader that then finds nothing in the catalog below it knows
    // the offset is gone, and one that checked the start before still finds its data.
    int32_t owner;
    int32_t epoch;
    {
      std::lock_guard lock(state_mu_);
      auto& st = stream_locked(id);
      if (st.fenced) continue;
      st.start_offset = std::max(st.start_offset, new_start);
      owner = st.owner;
      epoch = st.epoch;
    }
    if (auto r = catalog_->trim(id, new_start, owner, epoch); !r) {
      if (catalog_failure(r.error(), id) == stream_error::fenced) continue;
      return tl::make_unexpected("catalog: trim failed");
    }
  }
  return {};
}

tl::expected<void, std::string> stream_store::run_deletions_once() {
  std::lock_guard task(task_mu_);
  auto gone = catalog_->deletable(now_ms() - options_.delete_delay.count());
  if (!gone) return tl::make_unexpected("catalog: cannot list deletable objects");
  for (const auto& o : *gone) {
    if (!store_.remove(o.key)) return tl::make_unexpected("cannot delete " + o.key);
    if (!catalog_->forget(o.object_id)) return tl::make_unexpected("cannot forget " + o.key);
    blocks_.erase_object(o.key);
    {
      std::lock_guard lock(index_mu_);
      indexes_.erase(o.key);
    }
    std::lock_guard lock(state_mu_);
    ++stats_.deleted_objects;
  }
  return {};
}

tl::expected<void, std::string> stream_store::run_sweep_once() {
  std::lock_guard task(task_mu_);
  // An upload allocates its object's id just before the PUT and commits just after, holding
  // task_mu_ throughout; an object not in the catalog whose id is a grace period old is left
  // over from an upload that failed or died. The id counter is read at each sweep, so that
  // a later sweep knows which ids were allocated a grace period before it.
  const auto now = std::chrono::steady_clock::now();
  auto last_id = catalog_->last_object_id();
  if (!last_id) return tl::make_unexpected("catalog: cannot read the object id counter");
  if (sweep_marks_.empty() || sweep_marks_.back().last_id != *last_id) {
    sweep_marks_.push_back({now, *last_id});
  }
  const auto old_enough = now - options_.sweep_grace;
  while (sweep_marks_.size() > 1 && sweep_marks_[1].at <= old_enough) sweep_marks_.pop_front();
  if (sweep_marks_.front().at > old_enough) return {};
  const uint64_t max_id = sweep_marks_.front().last_id;
  // List before reading the catalog: an object committed in between is then in the catalog.
  auto listed = store_.list(object_prefix);
  if (!listed) {
    return tl::make_unexpected("sweep: cannot list " + std::string(object_prefix) + ": " +
                               std::string(store_error_name(listed.error())));
  }
  auto known = catalog_->object_keys();
  if (!known) return tl::make_unexpected("catalog: cannot list object keys");
  std::string error;
  uint64_t swept = 0;
  for (const auto& o : *listed) {
    // Keys not of the store's making, and ids this catalog has not handed out (a bucket
    // shared by mistake), are not the sweep's to delete.
    const auto id = object_key_id(o.key);
    if (!id || *id == 0 || *id > max_id) continue;
    if (std::binary_search(known->begin(), known->end(), o.key)) continue;
    if (auto r = store_.remove(o.key); !r) {
      if (error.empty()) {
        error = "sweep: cannot delete " + o.key + ": " + std::string(store_error_name(r.error()));
      }
      continue;
    }
    std::fprintf(stderr, "stream store: sweep: deleted %s (%" PRIu64 " bytes), never committed\n",
                 o.key.c_str(), o.size);
    ++swept;
  }
  {
    std::lock_guard lock(state_mu_);
    stats_.swept_objects += swept;
  }
  if (!error.empty()) return tl::make_unexpected(error);
  return {};
}

stream_store_stats stream_store::stats() {
  std::lock_guard lock(state_mu_);
  stream_store_stats s = stats_;
  s.log_cache_bytes = cache_bytes_;
  return s;
}

void stream_store::background_loop() {
  // Uploads and compaction write big objects; the WAL's small synchronous writes should not
  // queue behind them. Lowest best-effort I/O priority for this thread (honoured by the
  // mq-deadline and bfq schedulers; harmless elsewhere).
  constexpr int ioprio_class_be = 2;
  constexpr int ioprio_class_shift = 13;
  constexpr int ioprio_who_thread = 1;  // IOPRIO_WHO_PROCESS with tid 0: this thread
  ::syscall(SYS_ioprio_set, ioprio_who_thread, 0, (ioprio_class_be << ioprio_class_shift) | 7);
  using clock = std::chrono::steady_clock;
  auto next_compaction = clock::now() + options_.compaction_interval;
  auto next_retention = clock::now() + options_.retention_interval;
  // The first sweep right away: it records the id counter (and with a grace period does no
  // more), so that objects a crash left behind go one grace period after the start.
  auto next_sweep = clock::now();
  for (;;) {
    {
      std::unique_lock lock(state_mu_);
      upload_wanted_.wait_for(lock, options_.upload_interval, [&] {
        return stopping_ || pending_upload_bytes_ >= options_.upload_threshold_bytes;
      });
      if (stopping_) return;
    }
    auto report = [](const char* task, const tl::expected<void, std::string>& r) {
      if (!r) std::fprintf(stderr, "stream store: %s: %s\n", task, r.error().c_str());
    };
    if (auto r = run_upload_once(); !r) {
      report("upload", r);
      // Wait a full interval before trying again rather than spinning on the threshold.
      std::unique_lock lock(state_mu_);
      upload_wanted_.wait_for(lock, options_.upload_interval, [&] { return stopping_; });
    }
    const auto now = clock::now();
    if (now >= next_compaction) {
      report("compaction", run_compaction_once());
      report("deletion", run_deletions_once());
      next_compaction = now + options_.compaction_interval;
    }
    if (now >= next_retention) {
      report("retention", run_retention_once());
      report("deletion", run_deletions_once());
      next_retention = now + options_.retention_interval;
    }
    if (now >= next_sweep) {
      report("sweep", run_sweep_once());
      next_sweep = now + options_.sweep_interval;
    }
  }
}

}  // namespace silt::storage
