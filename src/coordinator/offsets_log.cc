#include "coordinator/offsets_log.h"

#include <algorithm>

#include "protocol/record_batch.h"

namespace silt::coordinator {

namespace {

// The leader epoch the view's batches carry: Metadata shows the topic's partitions at epoch 0.
constexpr int32_t view_leader_epoch = 0;

}  // namespace

offsets_log::offsets_log(int32_t shards, size_t tail_records)
    : tail_records_(tail_records), shards_(static_cast<size_t>(std::max(shards, 1))) {}

void offsets_log::load(int32_t shard, base::leader_epoch epoch,
                       const metadata::group_store::loaded& state, int64_t now) {
  base::lock_guard lock(mu_);
  if (shard < 0 || static_cast<size_t>(shard) >= shards_.size()) return;
  auto& s = shards_[static_cast<size_t>(shard)].emplace();
  s.epoch = epoch;
  s.start = base_offset(epoch);
  s.next = s.start;
  for (const auto& g : state.groups) put_group(s, g, now);
  for (const auto& o : state.offsets) put_offset(s, o);
}

void offsets_log::drop(int32_t shard) {
  base::lock_guard lock(mu_);
  if (shard < 0 || static_cast<size_t>(shard) >= shards_.size()) return;
  shards_[static_cast<size_t>(shard)].reset();
}

void offsets_log::apply(const metadata::shard_write& w, int64_t now) {
  base::lock_guard lock(mu_);
  if (w.shard < 0 || static_cast<size_t>(w.shard) >= shards_.size()) return;
  auto& s = shards_[static_cast<size_t>(w.shard)];
  if (!s || s->epoch != w.epoch) return;
  // In the order the store applies them: deletions, then insertions.
  for (const auto& g : w.deleted_groups) delete_group(*s, g, now);
  for (const auto& k : w.deleted_offsets) delete_offset(*s, k, now);
  for (const auto& g : w.groups) put_group(*s, g, now);
  for (const auto& o : w.offsets) put_offset(*s, o);
}

void offsets_log::forget_topic(std::string_view topic, int64_t now) {
  base::lock_guard lock(mu_);
  for (auto& s : shards_) {
    if (!s) continue;
    std::vector<metadata::offset_key> gone;
    for (const auto& [group, keys] : s->groups) {
      for (const auto& [t, p] : keys.offsets) {
        if (t == topic) gone.push_back({group, t, p});
      }
    }
    for (const auto& k : gone) delete_offset(*s, k, now);
  }
}

std::optional<offsets_log::bounds> offsets_log::offsets(int32_t shard) const {
  base::lock_guard lock(mu_);
  if (shard < 0 || static_cast<size_t>(shard) >= shards_.size()) return std::nullopt;
  const auto& s = shards_[static_cast<size_t>(shard)];
  if (!s) return std::nullopt;
  return bounds{s->start, s->next};
}

tl::expected<offsets_log::read_result, offsets_log::read_error> offsets_log::read(
    int32_t shard, int64_t from, size_t max_bytes) const {
  base::lock_guard lock(mu_);
  if (shard < 0 || static_cast<size_t>(shard) >= shards_.size() ||
      !shards_[static_cast<size_t>(shard)]) {
    return tl::make_unexpected(read_error::not_held);
  }
  const auto& s = *shards_[static_cast<size_t>(shard)];
  read_result out{{s.start, s.next}, nullptr};
  if (from < s.start || from > s.next) return tl::make_unexpected(read_error::out_of_range);
  auto it = std::lower_bound(s.entries.begin(), s.entries.end(), from,
                             [](const entry& e, int64_t o) { return e.offset < o; });
  if (it == s.entries.end()) return out;
  protocol::record_batch_builder b;
  const int64_t base = it->offset;
  b.base_offset(base).partition_leader_epoch(view_leader_epoch);
  size_t bytes = 0;
  for (; it != s.entries.end(); ++it) {
    const size_t n = it->key.size() + (it->value ? it->value->size() : 0) + 16;
    if (b.record_count() > 0 && bytes + n > max_bytes) break;
    // (One batch spans less than 2^31 offsets: a log of one epoch never comes near.)
    if (it->offset - base > INT32_MAX) break;
    bytes += n;
    b.add_at(static_cast<int32_t>(it->offset - base), it->timestamp,
             std::span<const uint8_t>(it->key),
             it->value ? std::optional<std::span<const uint8_t>>(*it->value) : std::nullopt);
  }
  out.batch = std::make_shared<const std::vector<uint8_t>>(b.build());
  return out;
}

std::optional<offsets_log::found> offsets_log::offset_for_time(int32_t shard,
                                                               int64_t timestamp) const {
  base::lock_guard lock(mu_);
  if (shard < 0 || static_cast<size_t>(shard) >= shards_.size()) return std::nullopt;
  const auto& s = shards_[static_cast<size_t>(shard)];
  if (!s) return std::nullopt;
  found best;
  for (const auto& e : s->entries) {
    if (timestamp >= 0 && e.timestamp >= timestamp) return found{e.offset, e.timestamp};
    if (timestamp < 0 && e.timestamp > best.timestamp) best = {e.offset, e.timestamp};
  }
  return best;
}

void offsets_log::append(shard_log& s, int64_t timestamp, std::vector<uint8_t> key,
                         std::optional<std::vector<uint8_t>> value) {
  const int64_t offset = s.next++;
  s.latest[key] = offset;
  s.entries.push_back({offset, timestamp, std::move(key), std::move(value)});
  if (s.entries.size() > 2 * s.latest.size() + tail_records_) compact(s);
}

void offsets_log::put_offset(shard_log& s, const metadata::committed_offset& o) {
  s.groups[o.key.group].offsets.insert({o.key.topic, o.key.partition});
  append(s, o.commit_ms, offset_commit_key(o.key.group, o.key.topic, o.key.partition),
         offset_commit_value(o));
}

void offsets_log::delete_offset(shard_log& s, const metadata::offset_key& k, int64_t now) {
  auto g = s.groups.find(k.group);
  if (g == s.groups.end() || g->second.offsets.erase({k.topic, k.partition}) == 0) return;
  if (g->second.offsets.empty() && !g->second.metadata) s.groups.erase(g);
  append(s, now, offset_commit_key(k.group, k.topic, k.partition), std::nullopt);
}

void offsets_log::put_group(shard_log& s, const metadata::group_record& g, int64_t now) {
  auto r = group_metadata(g.group, g.data);
  if (!r) return;
  auto& keys = s.groups[g.group];
  // A group that changed protocol has its other kind of record deleted.
  if (keys.metadata && *keys.metadata != r->type) {
    append(s, now, group_metadata_key(*keys.metadata, g.group), std::nullopt);
  }
  keys.metadata = r->type;
  append(s, now, std::move(r->key), std::move(r->value));
}

void offsets_log::delete_group(shard_log& s, const std::string& group, int64_t now) {
  auto g = s.groups.find(group);
  if (g == s.groups.end()) return;
  const group_keys keys = std::move(g->second);
  s.groups.erase(g);
  // As Kafka deletes a group: its offsets, then its own record.
  for (const auto& [topic, partition] : keys.offsets) {
    append(s, now, offset_commit_key(group, topic, partition), std::nullopt);
  }
  if (keys.metadata) append(s, now, group_metadata_key(*keys.metadata, group), std::nullopt);
}

void offsets_log::compact(shard_log& s) {
  const size_t keep_from = s.entries.size() > tail_records_ ? s.entries.size() - tail_records_ : 0;
  std::deque<entry> kept;
  for (size_t i = 0; i < s.entries.size(); ++i) {
    auto& e = s.entries[i];
    if (i < keep_from) {
      auto l = s.latest.find(e.key);
      const bool last = l != s.latest.end() && l->second == e.offset;
      if (!last) continue;
      if (!e.value) {
        // A tombstone out of the tail goes, and its key with it.
        s.latest.erase(l);
        continue;
      }
    }
    kept.push_back(std::move(e));
  }
  s.entries = std::move(kept);
}

}  // namespace silt::coordinator
