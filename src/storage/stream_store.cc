#include "storage/stream_store.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <utility>

#include <sys/syscall.h>
#include <unistd.h>

#include "base/endian.h"
#include "base/log.h"
#include "base/sched.h"
#include "storage/wal/recovery.h"

namespace silt::storage {

stream_store::stream_store(const stream_store_options& options, object_store& store,
                           std::unique_ptr<metadata::stream_catalog> catalog)
    : options_(options),
      objects_(store),
      catalog_(std::move(catalog)),
      cache_(options.log_cache_bytes),
      cold_(*catalog_, store, cache_, options.block_cache_bytes, options.read_ahead_blocks,
            options.read_ahead_threads),
      uploader_(*catalog_, store, cache_, options.object_block_size, options.stream_object_bytes),
      compactor_(
          compactor_options{options.object_block_size, options.stream_object_bytes,
                            options.compaction_max_object_bytes, options.delete_delay,
                            options.sweep_grace, options.retention_ms, options.retention_bytes,
                            options.segment_ms, options.segment_bytes, options.node_id},
          *catalog_, store, cache_, cold_),
      cleaner_(
          [&options] {
            log_cleaner_options c = options.cleaner;
            c.block_size = options.object_block_size;
            c.max_object_bytes = options.compaction_max_object_bytes;
            c.segment_ms = options.segment_ms;
            c.segment_bytes = options.segment_bytes;
            c.node = options.node_id;
            return c;
          }(),
          *catalog_, store, cache_) {}

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
    s->cache_.load(id, c, c.owner == options.node_id || c.owner == base::node_id(-1));
  }
  std::string replay_error;
  auto replay = [&](const wal::replayed_record& rec) {
    const stream_ref ref = s->cache_.stream(rec.stream_id);
    auto& st = *ref;
    base::offset next;
    {
      base::lock_guard lock(st.mu);
      // Uploaded before the crash, WAL not trimmed.
      if (rec.offset < st.committed_end) return;
      next = st.next_offset;
    }
    if (rec.offset != next) {
      if (replay_error.empty()) {
        replay_error = "WAL record of stream " + std::to_string(rec.stream_id.value()) +
                       " at offset " + std::to_string(rec.offset.value()) +
                       " does not continue the stream at " + std::to_string(next.value());
      }
      return;
    }
    auto e = std::make_shared<entry>();
    e->stream_id = rec.stream_id;
    e->base_offset = rec.offset;
    e->end_offset = rec.offset;
    if (!batch::for_each(rec.payload, [&](const batch::view& b) {
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
    s->cache_.replayed(std::move(e));
  };
  tl::expected<std::unique_ptr<wal::wal>, wal::wal_error> w;
  std::string where = options.wal.path;
  if (options.object_wal) {
    auto o = *options.object_wal;
    o.store = &store;
    where = "in " + store.describe() + " under " + o.prefix;
    auto opened = wal::object_wal::open(std::move(o), replay);
    if (opened) {
      w = std::unique_ptr<wal::wal>(std::move(*opened));
    } else {
      w = tl::make_unexpected(opened.error());
    }
  } else {
    w = wal::wal::open(options.wal, replay);
  }
  if (!w)
    return tl::make_unexpected("cannot open the WAL " + where + ": " +
                               std::string(wal::wal_error_name(w.error())));
  if (!replay_error.empty()) return tl::make_unexpected(replay_error);
  s->wal_ = std::move(*w);
  s->wal_->set_room_callback([p = s.get()] {
    std::function<void()> listener;
    {
      base::lock_guard lock(p->room_mu_);
      listener = p->room_listener_;
    }
    if (listener) listener();
  });
  if (options.background) {
    s->background_ = std::thread([p = s.get()] {
      base::set_thread_name("silt-store-bg");
      p->background_loop();
    });
    s->cleaner_.start();
  }
  return s;
}

stream_store::~stream_store() {
  close();
}

void stream_store::close() {
  {
    base::lock_guard lock(bg_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  upload_wanted_.notify_all();
  cleaner_.stop();
  if (background_.joinable()) background_.join();
  if (wal_) wal_->close();
}

void stream_store::append(base::stream_id stream_id, std::vector<uint8_t> batches,
                          const append_callback& done) {
  auto owner = std::make_shared<std::vector<uint8_t>>(std::move(batches));
  const std::span<uint8_t> span(*owner);
  auto r = append(stream_id, std::move(owner), span, done);
  if (!r) done(fail(r.error()));
}

void stream_store::set_room_listener(std::function<void()> listener) {
  base::lock_guard lock(room_mu_);
  room_listener_ = std::move(listener);
}

tl::expected<base::offset, stream_error> stream_store::append(base::stream_id stream_id,
                                                              std::shared_ptr<const void> owner,
                                                              std::span<uint8_t> batches,
                                                              append_callback done) {
  return append_impl(stream_id, std::move(owner), batches, std::move(done), false);
}

tl::expected<base::offset, stream_error> stream_store::append_impl(
    base::stream_id stream_id, std::shared_ptr<const void> owner, std::span<uint8_t> batches,
    append_callback done, bool recovery) {
  auto e = std::make_shared<entry>();
  const stream_ref ref = cache_.stream(stream_id);
  auto& st = *ref;
  // The stream's mutex is held until the WAL has the batches: offsets of a stream are
  // assigned in its WAL order. Appends of other streams go on meanwhile.
  base::lock_guard lock(st.mu);
  {
    if (st.fenced || st.releasing || (st.recovering && !recovery)) {
      return fail(stream_error::fenced);
    }
    base::offset next = st.next_offset;
    int64_t max_ts = -1;
    // Assign offsets and the leader epoch in place: both are outside the batch CRC.
    const bool ok = !batches.empty() && batch::for_each(batches, [&](const batch::view& b) {
      auto* p = const_cast<uint8_t*>(b.bytes.data());
      base::store_be<int64_t>(p, next.value());
      base::store_be<int32_t>(p + batch::leader_epoch_offset, st.epoch.value());
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
    cache_.push_locked(st, e);
  }
  const base::offset first = e->base_offset;
  auto queued = wal_->try_append(
      stream_id, e->base_offset, e->data,
      [this, e, done = std::move(done)](tl::expected<wal::wal_position, wal::wal_error> r) {
        on_durable(e, r, done);
      });
  if (!queued) {
    // Not in the WAL: the append never happened. No other append of the stream ran
    // meanwhile (its mutex), so the entry is the stream's last.
    cache_.forget_locked(st, e);
    switch (queued.error()) {
      case wal::wal_error::full:
        return fail(stream_error::wal_full);
      case wal::wal_error::too_large:
        return fail(stream_error::too_large);
      default:
        return fail(stream_error::wal_failed);
    }
  }
  return first;
}

void stream_store::on_durable(const std::shared_ptr<entry>& e,
                              tl::expected<wal::wal_position, wal::wal_error> r,
                              const append_callback& done) {
  bool wake = false;
  if (!r) {
    // A failed write: the entry goes, and its offsets with it (the WAL fails every write
    // after it too, and refuses appends until it has recovered).
    const stream_ref ref = cache_.stream(e->stream_id);
    auto& st = *ref;
    base::lock_guard lock(st.mu);
    cache_.forget_locked(st, e);
  } else {
    wake = cache_.durable(e, *r, options_.upload_threshold_bytes);
  }
  if (wake) upload_wanted_.notify_one();
  if (r) {
    done(e->base_offset);
  } else {
    done(fail(stream_error::wal_failed));
  }
}

stream_offsets stream_store::offsets(base::stream_id stream_id) {
  return cache_.offsets(stream_id);
}

std::optional<tl::expected<read_result, stream_error>> stream_store::read_cached(
    base::stream_id stream_id, base::offset offset, size_t max_bytes) {
  return cache_.read(stream_id, offset, max_bytes);
}

tl::expected<read_result, stream_error> stream_store::read(base::stream_id stream_id,
                                                           base::offset offset, size_t max_bytes) {
  for (int attempt = 0;; ++attempt) {
    if (auto r = cache_.read(stream_id, offset, max_bytes)) return *r;
    auto cold = cold_.read(stream_id, offset, max_bytes);
    if (cold) return cold;
    if (cold.error() == stream_error::offset_out_of_range) {
      // The catalog holds nothing at `offset`. The start moves before the catalog is trimmed
      // (retention, trim()), so this is out of range only if the start is past `offset` now;
      // otherwise look again (the offset was below the cache when checked, and evicted data
      // is always in the catalog first), and never send a reader away from an offset that
      // exists: a lasting miss is the catalog's failure, which clients retry.
      if (offset < cache_.offsets(stream_id).start_offset) return cold;
      if (attempt >= 2) return fail(stream_error::catalog);
      continue;
    }
    // An object that compaction or retention removed in the meantime: look again.
    if (cold.error() != stream_error::object_store || attempt >= 2) return cold;
  }
}

tl::expected<stream_store::committed_read, stream_error> stream_store::read_committed(
    base::stream_id stream_id, base::offset offset, size_t max_bytes) {
  for (int attempt = 0;; ++attempt) {
    auto s = catalog_->stream(stream_id);
    if (!s) return fail(stream_error::catalog);
    if (!*s) return fail(stream_error::fenced);  // no row: no node took it yet
    committed_read out{(*s)->start_offset, (*s)->end_offset, {}};
    if (offset < out.start_offset || offset >= out.committed_end || max_bytes == 0) return out;
    auto cold = cold_.read(stream_id, offset, max_bytes);
    if (cold) {
      out.data = std::move(*cold);
      return out;
    }
    // Trimmed, or an object compacted or removed since the catalog was read: look again.
    const bool again = cold.error() == stream_error::offset_out_of_range ||
                       cold.error() == stream_error::object_store;
    if (!again || attempt >= 2) return tl::make_unexpected(cold.error());
  }
}

tl::expected<void, stream_error> stream_store::trim(base::stream_id stream_id,
                                                    base::offset offset) {
  base::node_id owner;
  base::leader_epoch epoch;
  {
    // The start moves first, as retention does: a reader never passes the start check and
    // then finds the catalog already trimmed.
    const stream_ref ref = cache_.stream(stream_id);
    auto& st = *ref;
    base::lock_guard lock(st.mu);
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

void stream_store::forget(const std::vector<base::stream_id>& stream_ids) {
  for (const base::stream_id id : stream_ids) {
    cleaner_.forget(id);
    (void)cache_.drop(id);
  }
}

tl::expected<void, stream_error> stream_store::drop(
    const std::vector<base::stream_id>& stream_ids) {
  forget(stream_ids);
  if (stream_ids.empty()) return {};
  if (auto r = catalog_->drop_streams(stream_ids); !r) return fail(stream_error::catalog);
  return {};
}

tl::expected<std::vector<metadata::epoch_start>, stream_error> stream_store::epochs(
    base::stream_id stream_id) {
  auto r = catalog_->epochs(stream_id);
  if (!r) return fail(stream_error::catalog);
  return std::move(*r);
}

tl::expected<std::vector<uint8_t>, stream_error> stream_store::producer_state(
    base::stream_id stream_id) {
  auto r = catalog_->producer_state(stream_id);
  if (!r) return fail(stream_error::catalog);
  return std::move(*r);
}

tl::expected<void, stream_error> stream_store::put_producer_state(
    base::stream_id stream_id, const std::vector<uint8_t>& data) {
  base::node_id owner;
  base::leader_epoch epoch;
  {
    const stream_ref ref = cache_.stream(stream_id);
    auto& st = *ref;
    base::lock_guard lock(st.mu);
    if (st.fenced) return fail(stream_error::fenced);
    owner = st.owner;
    epoch = st.epoch;
  }
  if (auto r = catalog_->put_producer_state(stream_id, owner, epoch, data); !r) {
    return fail(catalog_failure(r.error(), stream_id));
  }
  return {};
}

void stream_store::set_retention(base::stream_id stream_id, int64_t retention_ms,
                                 int64_t retention_bytes) {
  const stream_ref ref = cache_.stream(stream_id);
  auto& st = *ref;
  base::lock_guard lock(st.mu);
  st.retention_ms = retention_ms;
  st.retention_bytes = retention_bytes;
}

void stream_store::set_active_segment(base::stream_id stream_id, int64_t segment_ms,
                                      int64_t segment_bytes) {
  const stream_ref ref = cache_.stream(stream_id);
  auto& st = *ref;
  base::lock_guard lock(st.mu);
  st.segment_ms = segment_ms;
  st.segment_bytes = segment_bytes;
}

tl::expected<void, std::string> stream_store::run_upload_once() {
  base::lock_guard task(task_mu_);
  return uploader_.run_once(*wal_);
}

tl::expected<void, std::string> stream_store::run_compaction_once() {
  base::lock_guard task(task_mu_);
  return compactor_.compact();
}

tl::expected<void, std::string> stream_store::run_retention_once() {
  base::lock_guard task(task_mu_);
  return compactor_.apply_retention();
}

tl::expected<void, std::string> stream_store::run_deletions_once() {
  base::lock_guard task(task_mu_);
  return compactor_.delete_unreferenced();
}

tl::expected<void, std::string> stream_store::run_sweep_once() {
  base::lock_guard task(task_mu_);
  return compactor_.sweep();
}

stream_store_stats stream_store::stats() {
  const auto u = uploader_.stats();
  const auto c = compactor_.stats();
  stream_store_stats s;
  s.uploads = u.uploads;
  s.uploaded_bytes = u.uploaded_bytes;
  s.stream_set_objects = u.stream_set_objects;
  s.stream_objects = u.stream_objects;
  s.compactions = c.compactions;
  s.deleted_objects = c.deleted_objects;
  s.swept_objects = c.swept_objects;
  s.cold_reads = cold_.reads();
  s.object_gets = cold_.gets();
  s.read_ahead_gets = cold_.read_ahead_gets();
  s.read_ahead_waits = cold_.read_ahead_waits();
  s.log_cache_bytes = cache_.bytes();
  s.not_uploaded_bytes = cache_.pending_bytes();
  s.upload_lag = std::chrono::duration_cast<std::chrono::milliseconds>(cache_.upload_lag());
  const auto blocks = cold_.block_stats();
  s.block_cache_hits = blocks.hits;
  s.block_cache_misses = blocks.misses;
  s.log_cache_hits = cache_.hits();
  s.log_cache_misses = cache_.misses();
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
      base::unique_lock lock(bg_mu_);
      lock.wait_for(upload_wanted_, options_.upload_interval, [&]() REQUIRES(bg_mu_) {
        return stopping_ || cache_.pending_bytes() >= options_.upload_threshold_bytes;
      });
      if (stopping_) return;
    }
    // During an outage of the object store every round fails the same way: one line per
    // 10 s says so, with how many were left out.
    auto report = [this](const char* task, const tl::expected<void, std::string>& r) {
      uint64_t left_out = 0;
      if (!r && task_failures_.allow(left_out)) {
        SILT_LOG(warn, "stream store: %s: %s (%llu similar failure(s) since the last line)", task,
                 r.error().c_str(), static_cast<unsigned long long>(left_out));
      }
    };
    if (auto r = run_upload_once(); !r) {
      report("upload", r);
      // Wait a full interval before trying again rather than spinning on the threshold.
      base::unique_lock lock(bg_mu_);
      lock.wait_for(upload_wanted_, options_.upload_interval,
                    [&]() REQUIRES(bg_mu_) { return stopping_; });
    }
    const auto now = clock::now();
    const bool maintains = maintains_objects_.load(std::memory_order_relaxed);
    if (now >= next_compaction) {
      if (maintains) {
        report("compaction", run_compaction_once());
        report("deletion", run_deletions_once());
      }
      next_compaction = now + options_.compaction_interval;
    }
    if (now >= next_retention) {
      report("retention", run_retention_once());
      if (maintains) report("deletion", run_deletions_once());
      next_retention = now + options_.retention_interval;
    }
    if (maintains && now >= next_sweep) {
      report("sweep", run_sweep_once());
      next_sweep = now + options_.sweep_interval;
    }
  }
}

}  // namespace silt::storage
