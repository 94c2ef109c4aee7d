#include "storage/log_cleaner.h"

#include <algorithm>
#include <cinttypes>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>

#include "base/clock.h"
#include "base/log.h"
#include "base/sched.h"
#include "protocol/record_batch.h"
#include "storage/object_format.h"
#include "storage/offset_map.h"

namespace silt::storage {

using base::now_ms;

namespace {

// Decompressed records of one batch are bounded as a Produce's are.
constexpr size_t max_decompressed_batch_bytes = size_t{64} << 20;

// One object read back whole, with its index; the last one read is kept for the next range.
struct read_object {
  std::string key;
  std::vector<uint8_t> bytes;
  std::vector<block_entry> index;
};

tl::expected<void, std::string> load(object_store& store, const std::string& key, read_object& out,
                                     uint64_t& read) {
  if (out.key == key) return {};
  out = {};
  auto size = store.head(key);
  if (!size) return tl::make_unexpected("cannot read the size of " + key);
  auto bytes = store.get(key, 0, *size);
  if (!bytes) return tl::make_unexpected("cannot read " + key);
  if (bytes->size() != *size || *size < object_footer_size) {
    return tl::make_unexpected(key + " has the wrong size");
  }
  read += *size;
  auto footer = parse_footer(std::span(*bytes).last(object_footer_size));
  if (!footer) return tl::make_unexpected("bad footer in " + key);
  auto index =
      parse_index(std::span(*bytes).subspan(footer->index_position, footer->index_size), *footer);
  if (!index) return tl::make_unexpected("bad index in " + key);
  out.key = key;
  out.bytes = std::move(*bytes);
  out.index = std::move(*index);
  return {};
}

// The batches of range `r` in the object, block by block in offset order.
tl::expected<std::vector<std::span<const uint8_t>>, std::string> range_blocks(
    const read_object& o, const metadata::stream_range& r) {
  std::vector<std::span<const uint8_t>> out;
  for (const auto& b : o.index) {
    if (b.stream_id != r.stream_id || b.start_offset < r.start_offset ||
        b.end_offset > r.end_offset) {
      continue;
    }
    auto batches = open_block(b, std::span(o.bytes).subspan(b.position, b.size));
    if (!batches) return tl::make_unexpected("corrupt block in " + o.key);
    out.push_back(*batches);
  }
  return out;
}

// Calls f(batch) for each batch of the blocks, in order; stops at f's error.
template <typename F>
tl::expected<void, std::string> for_each_batch(std::span<const std::span<const uint8_t>> blocks,
                                               const std::string& key, F&& f) {
  for (const auto& block : blocks) {
    protocol::batch_reader reader(block);
    for (;;) {
      auto next = reader.next();
      if (!next) return tl::make_unexpected("corrupt batch in " + key);
      if (!*next) break;
      if (auto r = f(**next); !r) return r;
    }
  }
  return {};
}

}  // namespace

log_cleaner::log_cleaner(const log_cleaner_options& options, metadata::stream_catalog& catalog,
                         object_store& store, log_cache& cache)
    : options_(options), catalog_(catalog), store_(store), cache_(cache) {
  base::lock_guard lock(pace_mu_);
  pace_start_ = std::chrono::steady_clock::now();
}

log_cleaner::~log_cleaner() {
  stop();
}

void log_cleaner::start() {
  if (!options_.enabled || !threads_.empty()) return;
  for (uint32_t i = 0; i < std::max<uint32_t>(options_.threads, 1); ++i) {
    threads_.emplace_back([this, i] {
      base::set_thread_name("silt-cleaner-" + std::to_string(i));
      loop();
    });
  }
}

void log_cleaner::stop() {
  {
    base::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void log_cleaner::set(base::stream_id stream_id, const compaction_settings& settings) {
  base::lock_guard lock(mu_);
  if (!settings.compact) {
    streams_.erase(stream_id);
    return;
  }
  streams_[stream_id].settings = settings;
}

void log_cleaner::forget(base::stream_id stream_id) {
  base::lock_guard lock(mu_);
  streams_.erase(stream_id);
}

log_cleaner_stats log_cleaner::stats() const {
  return {passes_.load(), bytes_read_.load(), bytes_written_.load(), records_removed_.load(),
          failures_.load()};
}

void log_cleaner::loop() {
  for (;;) {
    {
      base::unique_lock lock(mu_);
      if (stopping_) return;
    }
    if (auto r = clean_once(); !r) {
      SILT_LOG(warn, "log cleaner: %s", r.error().c_str());
    }
    base::unique_lock lock(mu_);
    lock.wait_for(wake_, options_.backoff, [&]() REQUIRES(mu_) { return stopping_; });
    if (stopping_) return;
  }
}

bool log_cleaner::stopping() {
  base::lock_guard lock(mu_);
  return stopping_;
}

void log_cleaner::pace(uint64_t bytes) {
  const double rate = options_.io_max_bytes_per_second;
  if (!(rate > 0) || rate >= 1e300) return;
  std::chrono::duration<double> wait{0};
  {
    base::lock_guard lock(pace_mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now - pace_start_ > std::chrono::seconds(1)) {
      pace_start_ = now;
      paced_bytes_ = 0;
    }
    paced_bytes_ += static_cast<double>(bytes);
    const std::chrono::duration<double> due(paced_bytes_ / rate);
    const std::chrono::duration<double> elapsed = now - pace_start_;
    if (due > elapsed) wait = due - elapsed;
  }
  if (wait.count() > 0) {
    base::unique_lock lock(mu_);
    lock.wait_for(wake_, std::min<std::chrono::duration<double>>(wait, std::chrono::seconds(10)),
                  [&]() REQUIRES(mu_) { return stopping_; });
  }
}

tl::expected<void, std::string> log_cleaner::clean_once(bool force) {
  std::vector<base::stream_id> ids;
  {
    base::lock_guard lock(mu_);
    for (const auto& [id, t] : streams_) {
      if (!t.busy) ids.push_back(id);
    }
  }
  std::string first_error;
  for (const auto id : ids) {
    {
      base::lock_guard lock(mu_);
      if (stopping_) break;
    }
    if (auto r = clean(id, force); !r) {
      if (stopping()) break;  // not a failure: the pass was cut short by stop()
      failures_.fetch_add(1, std::memory_order_relaxed);
      if (first_error.empty()) {
        first_error = "stream " + std::to_string(id.value()) + ": " + r.error();
      }
    }
  }
  if (!first_error.empty()) return tl::make_unexpected(first_error);
  return {};
}

tl::expected<bool, std::string> log_cleaner::clean(base::stream_id stream_id, bool force) {
  compaction_settings settings;
  base::offset cleaned_end{};
  int64_t horizon_due = INT64_MAX;
  {
    base::lock_guard lock(mu_);
    const auto it = streams_.find(stream_id);
    if (it == streams_.end() || it->second.busy) return false;
    it->second.busy = true;
    settings = it->second.settings;
    cleaned_end = it->second.cleaned_end;
    horizon_due = it->second.horizon_due;
  }
  struct release {
    log_cleaner* self;
    base::stream_id id;
    ~release() {
      base::lock_guard lock(self->mu_);
      if (const auto it = self->streams_.find(id); it != self->streams_.end()) {
        it->second.busy = false;
      }
    }
  } releaser{this, stream_id};

  const stream_ref ref = cache_.find(stream_id);
  if (!ref) return false;
  base::offset start{};
  int64_t segment_ms = 0;
  int64_t segment_bytes = 0;
  {
    auto& st = *ref;
    base::lock_guard lock(st.mu);
    if (st.fenced || st.releasing || st.owner != options_.node) return false;
    start = st.start_offset;
    segment_ms = st.segment_ms == -2 ? options_.segment_ms : st.segment_ms;
    segment_bytes = st.segment_bytes == -2 ? options_.segment_bytes : st.segment_bytes;
  }
  auto all = catalog_.ranges_with_age(stream_id);
  if (!all) return tl::make_unexpected("catalog: cannot read the ranges");
  std::vector<metadata::located_range> ranges;
  for (auto& r : *all) {
    if (r.range.end_offset > start) ranges.push_back(std::move(r));
  }
  if (ranges.empty()) return false;

  // 1. What may be cleaned: the ranges before the active segment and before the first one
  // younger than min.compaction.lag.ms.
  const int64_t now = now_ms();
  uint64_t total = 0;
  for (const auto& r : ranges) total += r.range.size;
  size_t cleanable = 0;
  uint64_t newer = total;
  for (const auto& r : ranges) {
    newer -= r.range.size;
    const bool active = newer < static_cast<uint64_t>(std::max<int64_t>(segment_bytes, 0)) &&
                        r.range.written_ms > now - segment_ms;
    const bool young = settings.min_compaction_lag_ms > 0 &&
                       r.range.max_timestamp > now - settings.min_compaction_lag_ms;
    if (active || young) break;
    ++cleanable;
  }
  if (cleanable == 0) return false;

  // 2. Whether it is due.
  size_t first_dirty = cleanable;
  uint64_t dirty_bytes = 0;
  uint64_t cleanable_bytes = 0;
  for (size_t i = 0; i < cleanable; ++i) {
    cleanable_bytes += ranges[i].range.size;
    if (ranges[i].range.end_offset > cleaned_end) {
      first_dirty = std::min(first_dirty, i);
      dirty_bytes += ranges[i].range.size;
    }
  }
  // A pass with nothing dirty still removes tombstones whose delete horizon has passed.
  const bool horizon_passed = horizon_due <= now;
  if (first_dirty == cleanable && !horizon_passed) return false;
  const double ratio = static_cast<double>(dirty_bytes) /
                       static_cast<double>(std::max<uint64_t>(cleanable_bytes, 1));
  const bool overdue =
      settings.max_compaction_lag_ms < INT64_MAX && first_dirty < cleanable &&
      ranges[first_dirty].range.max_timestamp >= 0 &&
      ranges[first_dirty].range.max_timestamp < now - settings.max_compaction_lag_ms;
  if (!force && ratio < settings.min_cleanable_dirty_ratio && !overdue && !horizon_passed) {
    return false;
  }

  // 3. The key map of the dirty part, and each idempotent producer's last batch in it.
  offset_map map(options_.dedupe_buffer_bytes / std::max<uint32_t>(options_.threads, 1),
                 options_.load_factor);
  std::unordered_map<int64_t, int64_t> producer_last;
  read_object object;
  uint64_t read = 0;
  std::vector<uint8_t> scratch;
  int64_t map_end =
      first_dirty < cleanable
          ? std::max(cleaned_end.value(), ranges[first_dirty].range.start_offset.value())
          : cleaned_end.value();
  const int64_t map_start = map_end;
  bool full = false;
  for (size_t i = first_dirty; i < cleanable && !full; ++i) {
    if (stopping()) return tl::make_unexpected("stopping");
    const auto& r = ranges[i];
    if (auto l = load(store_, r.key, object, read); !l) return tl::make_unexpected(l.error());
    auto blocks = range_blocks(object, r.range);
    if (!blocks) return tl::make_unexpected(blocks.error());
    auto scanned = for_each_batch(
        *blocks, r.key, [&](const protocol::record_batch& b) -> tl::expected<void, std::string> {
          const auto& h = b.header;
          if (full || h.last_offset() < map_end) return {};
          if (!h.is_control()) {
            auto section = protocol::records_section(b, scratch, max_decompressed_batch_bytes);
            if (!section)
              return tl::make_unexpected("undecodable batch at offset " +
                                         std::to_string(h.base_offset));
            protocol::record_walker walker(*section, h.records_count);
            for (;;) {
              auto next = walker.next();
              if (!next)
                return tl::make_unexpected("undecodable record at offset " +
                                           std::to_string(h.base_offset));
              if (!*next) break;
              const auto& rec = **next;
              if (!rec.key) continue;
              if (!map.put(*rec.key, h.base_offset + rec.offset_delta)) {
                full = true;  // this batch and the rest wait for the next pass
                return {};
              }
            }
          }
          if (h.producer_id >= 0) producer_last[h.producer_id] = h.last_offset();
          map_end = h.last_offset() + 1;
          return {};
        });
    if (!scanned) return tl::make_unexpected(scanned.error());
    pace(r.range.size);
  }
  if (first_dirty < cleanable && map_end <= map_start) {
    return tl::make_unexpected(
        "the key map holds no whole batch: raise "
        "log.cleaner.dedupe.buffer.size");
  }

  // 4. The rewrite of every range up to the mapped end, in objects of up to max_object_bytes.
  int64_t next_horizon = INT64_MAX;  // the earliest delete horizon of a tombstone kept
  const auto horizon_for = [&](const protocol::record_batch_header& h) {
    return [&h, &settings, &next_horizon, now](bool kept_tombstone) -> std::optional<int64_t> {
      if (!kept_tombstone) return std::nullopt;
      if (h.has_delete_horizon()) {
        next_horizon = std::min(next_horizon, h.base_timestamp);
        return std::nullopt;
      }
      const int64_t retention = std::max<int64_t>(settings.delete_retention_ms, 0);
      const int64_t horizon = retention > INT64_MAX - now ? INT64_MAX : now + retention;
      next_horizon = std::min(next_horizon, horizon);
      return horizon;
    };
  };
  object_writer writer(options_.block_size);
  std::vector<metadata::stream_range> replaced;
  bool changed = false;  // whether the object being built differs from what it replaces
  uint64_t removed = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  int64_t created_ms = 0;
  const auto flush = [&]() -> tl::expected<void, std::string> {
    if (replaced.empty()) return {};
    if (!changed) {
      (void)writer.finish_parts();
      replaced.clear();
      return {};
    }
    metadata::stream_range merged{stream_id, replaced.front().start_offset,
                                  replaced.back().end_offset, -1, 0};
    for (const auto& r : replaced)
      merged.max_timestamp = std::max(merged.max_timestamp, r.max_timestamp);
    const object_parts parts = writer.finish_parts();
    merged.size = parts.size;
    auto id = catalog_.next_object_id();
    if (!id) return tl::make_unexpected("catalog: cannot allocate an object id");
    // The object keeps the age of the newest data it holds (retention's active segment, and the
    // next pass's, count ages by it).
    metadata::object_record record{*id, object_key(*id, true), parts.size,
                                   metadata::object_kind::stream, created_ms};
    if (!store_.put_parts(record.key, parts.parts)) {
      return tl::make_unexpected("upload of " + record.key + " failed");
    }
    bytes_written_.fetch_add(parts.size, std::memory_order_relaxed);
    bytes_out += parts.size;
    pace(parts.size);
    if (auto c = catalog_.replace(record, {merged}, replaced, options_.node); !c) {
      if (c.error() == metadata::catalog_error::discontinuous ||
          c.error() == metadata::catalog_error::lapsed) {
        (void)store_.remove(record.key);
      }
      return tl::make_unexpected("commit of " + record.key + " refused: " +
                                 std::string(metadata::catalog_error_name(c.error())));
    }
    // The log cache may still hold the data as it was: reads below the object's end now
    // come from the object.
    (void)cache_.release_below(stream_id, merged.end_offset);
    replaced.clear();
    changed = false;
    created_ms = 0;
    return {};
  };
  for (const auto& r : ranges) {
    if (r.range.start_offset.value() >= map_end) break;
    // (The object being built is not written yet; those committed stay in force.)
    if (stopping()) return tl::make_unexpected("stopping");
    if (auto l = load(store_, r.key, object, read); !l) return tl::make_unexpected(l.error());
    auto blocks = range_blocks(object, r.range);
    if (!blocks) return tl::make_unexpected(blocks.error());
    std::vector<uint8_t> out;
    std::optional<std::vector<uint8_t>> last_dropped;  // the range's last batch, emptied
    auto rewritten = for_each_batch(
        *blocks, r.key, [&](const protocol::record_batch& b) -> tl::expected<void, std::string> {
          const auto& h = b.header;
          last_dropped.reset();
          if (h.base_offset >= map_end || h.is_control()) {
            // Beyond the map, or a control batch (transaction markers: kept until transactions
            // give the cleaner their rules).
            out.insert(out.end(), b.bytes.begin(), b.bytes.end());
            return {};
          }
          int32_t dropped = 0;
          auto filtered = protocol::filter_batch(
              b,
              [&](int64_t offset, const protocol::record_view& rec) {
                // A record without a key has nothing to be compacted by: Kafka's cleaner drops
                // it too. A tombstone goes once its batch's delete horizon has passed.
                const auto latest = rec.key ? map.get(*rec.key) : std::nullopt;
                const bool superseded = latest && offset < *latest;
                const bool expired =
                    !rec.value && h.has_delete_horizon() && now >= h.base_timestamp;
                const bool keep = rec.key && !superseded && !expired;
                dropped += keep ? 0 : 1;
                return keep;
              },
              horizon_for(h), scratch, max_decompressed_batch_bytes);
          if (!filtered) {
            return tl::make_unexpected("undecodable batch at offset " +
                                       std::to_string(h.base_offset));
          }
          removed += static_cast<uint64_t>(dropped);
          const bool same =
              dropped == 0 && filtered->bytes.size() == b.bytes.size() &&
              std::equal(filtered->bytes.begin(), filtered->bytes.end(), b.bytes.begin());
          if (same) {
            out.insert(out.end(), b.bytes.begin(), b.bytes.end());
            return {};
          }
          changed = true;
          const bool producers_last = h.producer_id >= 0 && producer_last.contains(h.producer_id) &&
                                      producer_last.at(h.producer_id) == h.last_offset();
          if (filtered->kept > 0 || producers_last) {
            out.insert(out.end(), filtered->bytes.begin(), filtered->bytes.end());
          } else {
            last_dropped = std::move(filtered->bytes);
          }
          return {};
        });
    if (!rewritten) return tl::make_unexpected(rewritten.error());
    // A range always ends with its last batch, emptied if need be, so that it ends where it
    // ended (a fetch from any offset in it finds a batch there or after).
    if (last_dropped) out.insert(out.end(), last_dropped->begin(), last_dropped->end());
    bytes_in += r.range.size;
    pace(r.range.size);
    // The writer keeps a view of the range's batches (no second copy), which `kept` owns.
    auto kept = std::make_shared<const std::vector<uint8_t>>(std::move(out));
    if (auto a = writer.add_view(stream_id, r.range.start_offset, r.range.end_offset,
                                 r.range.max_timestamp, *kept, kept);
        !a) {
      return tl::make_unexpected("the object writer refused the cleaned data");
    }
    metadata::stream_range old = r.range;
    old.written_ms = 0;
    replaced.push_back(old);
    created_ms = std::max(created_ms, r.range.written_ms);
    if (writer.size() >= options_.max_object_bytes) {
      if (auto f = flush(); !f) return tl::make_unexpected(f.error());
    }
  }
  if (auto f = flush(); !f) return tl::make_unexpected(f.error());
  bytes_read_.fetch_add(read, std::memory_order_relaxed);
  records_removed_.fetch_add(removed, std::memory_order_relaxed);
  passes_.fetch_add(1, std::memory_order_relaxed);
  {
    base::lock_guard lock(mu_);
    if (const auto it = streams_.find(stream_id); it != streams_.end()) {
      it->second.cleaned_end = base::offset(map_end);
      it->second.horizon_due = next_horizon;
    }
  }
  SILT_LOG(info,
           "log cleaner: stream %" PRIu64 ": cleaned up to offset %" PRId64 " (%" PRIu64
           " keys mapped, %" PRIu64 " records removed, %" PRIu64 " bytes -> %" PRIu64 ")",
           stream_id.value(), map_end, static_cast<uint64_t>(map.size()), removed, bytes_in,
           bytes_out);
  return true;
}

}  // namespace silt::storage
