// The stream store's ownership of streams: taking them, learning other brokers' streams and
// following their owners, moves (targets, release, handover) and the takeover of a dead
// broker's WAL (docs/architecture.md, "Brokers sharing one metadata store"). Appends, reads,
// trims and the background work are in stream_store.cc.
#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include "base/log.h"
#include "storage/stream_store.h"
#include "storage/wal/recovery.h"

namespace silt::storage {

stream_error stream_store::catalog_failure(metadata::catalog_error e, base::stream_id stream_id) {
  if (e != metadata::catalog_error::fenced) return stream_error::catalog;
  // A write made stale by this store's own take() meanwhile is not a fence: try again.
  auto now = catalog_->stream(stream_id);
  return now && cache_.fenced_by(stream_id, *now) ? stream_error::fenced : stream_error::catalog;
}

tl::expected<void, stream_error> stream_store::take(
    const std::vector<base::stream_id>& stream_ids) {
  std::vector<metadata::stream_take> takes;
  takes.reserve(stream_ids.size());
  for (base::stream_id id : stream_ids) {
    const stream_ref ref = cache_.stream(id);
    auto& st = *ref;
    base::lock_guard lock(st.mu);
    takes.push_back({id, st.next_offset});
  }
  base::lock_guard owners(owners_mu_);
  auto epochs = catalog_->take(options_.node_id, takes);
  if (!epochs) return fail(stream_error::catalog);
  for (size_t i = 0; i < stream_ids.size(); ++i) {
    const stream_ref ref = cache_.stream(stream_ids[i]);
    auto& st = *ref;
    base::lock_guard lock(st.mu);
    st.owner = options_.node_id;
    st.epoch = (*epochs)[i];
    st.fenced = false;
  }
  return {};
}

tl::expected<std::vector<base::stream_id>, stream_error> stream_store::learn(
    const std::vector<base::stream_id>& stream_ids) {
  std::vector<base::stream_id> unsettled;
  for (const base::stream_id id : stream_ids) {
    auto state = catalog_->stream(id);
    if (!state) return fail(stream_error::catalog);
    if (!*state) {
      metadata::stream_state none;
      cache_.load(id, none, false);
      unsettled.push_back(id);
      continue;
    }
    const auto owner = (*state)->owner;
    cache_.load(id, **state, owner == options_.node_id || owner == base::node_id(-1));
  }
  return unsettled;
}

tl::expected<std::vector<base::stream_id>, stream_error> stream_store::refresh_owners(
    bool everything, const stream_list_callback& before_serving) {
  base::lock_guard owners(owners_mu_);
  if (everything) owners_seen_ = -1;
  auto changes = catalog_->ownership_changes_since(owners_seen_);
  if (!changes) return fail(stream_error::catalog);
  std::vector<base::stream_id> adopted;
  if (changes->version == owners_seen_) return adopted;
  const base::node_id self = options_.node_id;
  bool handed = false;
  std::vector<base::stream_id> coming;
  for (const auto& [id, s] : changes->streams) {
    if (s.owner == self && cache_.adoptable(id, s)) coming.push_back(id);
  }
  handed = !coming.empty();
  if (handed && before_serving) before_serving(coming);
  auto apply = [&] {
    for (const auto& [id, s] : changes->streams) {
      if (s.owner != self) {
        cache_.observe_owner(id, s, self);
      } else if (cache_.adopt(id, s)) {
        adopted.push_back(id);
      }
    }
  };
  if (handed) {
    // No upload runs while a handed stream drops what this store cached of it.
    base::lock_guard task(task_mu_);
    apply();
  } else {
    apply();
  }
  {
    base::lock_guard lock(targets_mu_);
    for (const auto& [id, s] : changes->streams) {
      if (s.target == base::node_id(-1)) {
        targets_.erase(id);
      } else {
        targets_[id] = s;
      }
    }
  }
  owners_seen_ = changes->version;
  return adopted;
}

std::vector<stream_store::move> stream_store::moves() {
  const base::node_id self = options_.node_id;
  std::vector<move> out;
  base::lock_guard lock(targets_mu_);
  for (const auto& [id, s] : targets_) {
    const bool release = s.owner == self && s.target != self;
    const bool take = s.owner == base::node_id(-1) && s.target == self;
    if (release || take) out.push_back({id, s.target});
  }
  return out;
}

tl::expected<void, stream_error> stream_store::assign(
    const std::vector<metadata::stream_target>& targets) {
  if (auto r = catalog_->assign(targets); !r) return fail(stream_error::catalog);
  return {};
}

std::vector<std::pair<base::stream_id, metadata::stream_state>> stream_store::targets() {
  base::lock_guard lock(targets_mu_);
  return {targets_.begin(), targets_.end()};
}

tl::expected<std::vector<base::stream_id>, stream_error> stream_store::prepare_release(
    const std::vector<base::stream_id>& stream_ids, std::chrono::milliseconds timeout) {
  const base::node_id self = options_.node_id;
  std::vector<base::stream_id> held;
  for (const base::stream_id id : stream_ids) {
    const stream_ref ref = cache_.stream(id);
    auto& st = *ref;
    base::lock_guard lock(st.mu);
    if (st.fenced || st.owner != self || st.recovering) continue;
    st.releasing = true;
    held.push_back(id);
  }
  auto resume = [&](const std::vector<base::stream_id>& ids) {
    for (const base::stream_id id : ids) {
      const stream_ref ref = cache_.stream(id);
      auto& st = *ref;
      base::lock_guard lock(st.mu);
      st.releasing = false;
    }
  };
  // Writes in flight end durable or failed (a failed one gives its offsets back).
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool settled = true;
    for (const base::stream_id id : held) {
      const stream_ref ref = cache_.stream(id);
      auto& st = *ref;
      base::lock_guard lock(st.mu);
      settled = settled && st.durable_end == st.next_offset;
    }
    if (settled) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      resume(held);
      return fail(stream_error::wal_failed);  // writes that do not end: the WAL is stuck
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (auto r = run_upload_once(); !r) {
    SILT_LOG(info, "stream store: upload before a handover: %s", r.error().c_str());
    resume(held);
    return fail(stream_error::object_store);
  }
  std::vector<base::stream_id> ready;
  std::vector<base::stream_id> not_ready;
  for (const base::stream_id id : held) {
    const stream_ref ref = cache_.stream(id);
    auto& st = *ref;
    base::lock_guard lock(st.mu);
    (st.committed_end == st.next_offset && !st.fenced ? ready : not_ready).push_back(id);
  }
  resume(not_ready);
  return ready;
}

tl::expected<void, stream_error> stream_store::handover(base::stream_id stream_id,
                                                        base::node_id to) {
  base::node_id owner;
  base::leader_epoch epoch;
  base::offset end;
  {
    const stream_ref ref = cache_.stream(stream_id);
    auto& st = *ref;
    base::lock_guard lock(st.mu);
    if (st.fenced) return fail(stream_error::fenced);
    owner = st.owner;
    epoch = st.epoch;
    end = st.next_offset;
  }
  auto next = catalog_->handover(stream_id, owner, epoch, to, end);
  const stream_ref ref = cache_.stream(stream_id);
  auto& st = *ref;
  if (!next) {
    const auto e = catalog_failure(next.error(), stream_id);
    base::lock_guard lock(st.mu);
    st.releasing = false;
    return fail(e);
  }
  base::lock_guard lock(st.mu);
  st.fenced = true;
  st.releasing = false;
  st.owner = to;
  st.epoch = *next;
  return {};
}

tl::expected<std::vector<base::stream_id>, std::string> stream_store::take_over(
    const std::vector<dead_wal>& from, std::chrono::milliseconds timeout,
    const stream_list_callback& before_serving) {
  const base::node_id self = options_.node_id;
  std::vector<base::node_id> nodes;
  nodes.reserve(from.size());
  for (const auto& d : from) nodes.push_back(d.node);
  std::set<base::stream_id> taken;
  {
    // As refresh_owners(): no refresh in between, and no upload while cached data is dropped.
    base::lock_guard owners(owners_mu_);
    base::lock_guard task(task_mu_);
    auto states = catalog_->take_over(self, nodes);
    if (!states) {
      return tl::make_unexpected("the catalog refused the takeover: " +
                                 std::string(metadata::catalog_error_name(states.error())));
    }
    for (const auto& [id, s] : *states) {
      (void)cache_.adopt(id, s);
      const stream_ref ref = cache_.stream(id);
      auto& st = *ref;
      base::lock_guard lock(st.mu);
      st.recovering = true;
      taken.insert(id);
    }
  }
  // The appends' callbacks may outlive this call (a timeout): they share this.
  struct progress {
    base::mutex mu;
    std::condition_variable done;
    size_t outstanding GUARDED_BY(mu) = 0;
    bool failed GUARDED_BY(mu) = false;
  };
  auto p = std::make_shared<progress>();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string error;
  size_t records = 0;
  uint64_t bytes = 0;
  auto replay = [&](const wal::replayed_record& rec) {
    if (!error.empty() || !taken.contains(rec.stream_id)) return;
    base::offset end = rec.offset;
    if (!batch::for_each(rec.payload, [&](const batch::view& b) { end = b.end_offset; })) {
      error = "a WAL record of stream " + std::to_string(rec.stream_id.value()) +
              " holds no whole record batches";
      return;
    }
    const stream_ref ref = cache_.stream(rec.stream_id);
    auto& st = *ref;
    base::offset next;
    {
      base::lock_guard lock(st.mu);
      next = st.next_offset;
    }
    if (end <= next) return;  // committed, or appended from another WAL
    if (rec.offset != next) {
      error = "the WAL record of stream " + std::to_string(rec.stream_id.value()) + " at offset " +
              std::to_string(rec.offset.value()) + " does not continue the stream at " +
              std::to_string(next.value());
      return;
    }
    auto copy = std::make_shared<std::vector<uint8_t>>(rec.payload.begin(), rec.payload.end());
    const std::span<uint8_t> span(*copy);
    {
      base::lock_guard lock(p->mu);
      ++p->outstanding;
    }
    auto done = [p](const tl::expected<base::offset, stream_error>& r) {
      base::lock_guard lock(p->mu);
      --p->outstanding;
      p->failed = p->failed || !r;
      p->done.notify_all();
    };
    for (;;) {
      auto a = append_impl(rec.stream_id, copy, span, done, true);
      if (a) break;
      if (a.error() == stream_error::wal_full && std::chrono::steady_clock::now() < deadline) {
        upload_wanted_.notify_one();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      base::lock_guard lock(p->mu);
      --p->outstanding;
      error = "appending to this broker's WAL failed: " + std::string(stream_error_name(a.error()));
      return;
    }
    ++records;
    bytes += rec.payload.size();
  };
  for (const auto& d : from) {
    // (The same WAL under another node id: this store replayed it when it opened.)
    std::error_code ec;
    if (d.location.starts_with(object_wal_location_prefix)) {
      const std::string prefix = d.location.substr(object_wal_location_prefix.size());
      if (options_.object_wal && options_.object_wal->prefix == prefix) continue;
      // A WAL in objects: a listing, whichever broker wrote it.
      if (auto r = wal::read_object_wal(objects_, prefix, replay); !r) {
        error = "cannot read the WAL of node " + std::to_string(d.node.value()) + " at " +
                d.location + ": " + std::string(wal::wal_error_name(r.error()));
      }
    } else if (std::filesystem::equivalent(d.location, options_.wal.path, ec)) {
      continue;
    } else if (auto r = wal::read_wal(d.location, replay); !r) {
      error = "cannot read the WAL of node " + std::to_string(d.node.value()) + " at " +
              d.location + ": " + std::string(wal::wal_error_name(r.error()));
    }
    if (!error.empty()) break;
  }
  {
    base::unique_lock lock(p->mu);
    const auto left = std::max(std::chrono::steady_clock::duration::zero(),
                               deadline - std::chrono::steady_clock::now());
    const bool settled =
        lock.wait_for(p->done, left, [&]() REQUIRES(p->mu) { return p->outstanding == 0; });
    if (error.empty() && !settled) error = "the appends to this broker's WAL did not end in time";
    if (error.empty() && p->failed) error = "an append to this broker's WAL failed";
  }
  if (!error.empty()) return tl::make_unexpected(error);
  if (auto f = catalog_->finish_take_over(self, nodes); !f) {
    return tl::make_unexpected("the catalog cannot end the takeover: " +
                               std::string(metadata::catalog_error_name(f.error())));
  }
  std::vector<base::stream_id> out(taken.begin(), taken.end());
  if (before_serving) before_serving(out);
  for (const base::stream_id id : out) {
    const stream_ref ref = cache_.stream(id);
    auto& st = *ref;
    base::lock_guard lock(st.mu);
    st.recovering = false;
  }
  SILT_LOG(info,
           "stream store: took over %zu stream(s) from %zu dead broker(s), %zu WAL record(s) "
           "(%llu bytes) beyond their committed ends",
           out.size(), from.size(), records, static_cast<unsigned long long>(bytes));
  return out;
}

}  // namespace silt::storage
