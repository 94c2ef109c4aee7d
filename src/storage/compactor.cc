#include "storage/compactor.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "storage/object_format.h"

namespace silt::storage {

using base::now_ms;

namespace {

// One stream's data in an object read back for compaction: whole blocks, viewed in `object`.
struct piece {
  base::offset start, end;
  int64_t max_timestamp;
  metadata::stream_range range;  // the committed range the block belongs to
  std::shared_ptr<const std::vector<uint8_t>> object;
  std::span<const uint8_t> batches;
};

// Reads a whole object and appends its committed ranges' blocks to `by_stream`.
tl::expected<void, std::string> load_pieces(
    metadata::stream_catalog& catalog, object_store& store, const metadata::object_record& o,
    std::map<base::stream_id, std::vector<piece>>& by_stream) {
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
    metadata::stream_catalog& catalog, object_store& store, uint32_t block_size, base::node_id node,
    metadata::object_kind kind,
    const std::vector<std::pair<base::stream_id, std::span<const piece>>>& streams) {
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
  metadata::object_record record{*id, object_key(*id, kind == metadata::object_kind::stream),
                                 object.size, kind, now_ms()};
  // As in upload_object: an object left behind here is the sweep's to delete.
  if (!store.put_parts(record.key, object.parts)) {
    return tl::make_unexpected("compaction: upload of " + record.key + " failed");
  }
  if (auto c = catalog.replace(record, ranges, replaced, node); !c) {
    if (c.error() == metadata::catalog_error::discontinuous ||
        c.error() == metadata::catalog_error::lapsed) {
      (void)store.remove(record.key);
    }
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

tl::expected<void, std::string> compactor::compact() {
  if (auto r = compact_stream_sets(); !r) return r;
  if (auto r = compact_stream_objects(); !r) return r;
  return {};
}

compactor_stats compactor::stats() const {
  return {compactions_.load(), deleted_objects_.load(), swept_objects_.load()};
}

tl::expected<void, std::string> compactor::compact_stream_sets() {
  auto all = catalog_.objects(metadata::object_kind::stream_set);
  if (!all) return tl::make_unexpected("catalog: cannot list objects");
  // The small stream-set objects, oldest first, up to a bounded amount per round.
  std::vector<metadata::object_record> chosen;
  uint64_t total = 0;
  for (const auto& o : *all) {
    if (o.size > options_.max_object_bytes) continue;
    if (total + o.size > 4 * options_.max_object_bytes && !chosen.empty()) break;
    chosen.push_back(o);
    total += o.size;
  }
  if (chosen.size() < 2) return {};
  std::map<base::stream_id, std::vector<piece>> by_stream;
  for (const auto& o : chosen) {
    if (auto r = load_pieces(catalog_, store_, o, by_stream); !r) return r;
  }
  // A stream with enough data gets stream objects of its own (one per contiguous run); the
  // others are merged into as few stream-set objects as their size allows, so that many
  // small streams never make many small objects. An object holds one contiguous run per
  // stream: a stream whose pieces have gaps (a chosen object's neighbour was too big to be
  // chosen) puts its k-th run into the k-th series of merged objects.
  struct series {
    std::vector<std::pair<base::stream_id, std::span<const piece>>> streams;
    uint64_t bytes = 0;
  };
  std::vector<series> merged;
  auto flush = [&](series& m) -> tl::expected<void, std::string> {
    if (m.streams.empty()) return {};
    auto r = write_merged_object(catalog_, store_, options_.block_size, options_.node,
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
        if (auto r = write_merged_object(catalog_, store_, options_.block_size, options_.node,
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
      if (merged[k].bytes + bytes > options_.max_object_bytes) {
        if (auto r = flush(merged[k]); !r) return r;
      }
      merged[k].streams.emplace_back(stream, runs[k]);
      merged[k].bytes += bytes;
    }
  }
  for (auto& m : merged) {
    if (auto r = flush(m); !r) return r;
  }
  compactions_.fetch_add(1, std::memory_order_relaxed);
  return {};
}

tl::expected<void, std::string> compactor::compact_stream_objects() {
  // Small stream objects (from uploads of a stream just over the threshold, or from older
  // compactions) next to each other in their stream are merged, up to a bounded amount per
  // round.
  auto all = catalog_.objects(metadata::object_kind::stream);
  if (!all) return tl::make_unexpected("catalog: cannot list objects");
  struct small {
    metadata::object_record object;
    metadata::stream_range range;
  };
  std::map<base::stream_id, std::vector<small>> by_stream;
  for (const auto& o : *all) {
    if (o.size >= options_.stream_object_bytes) continue;
    auto ranges = catalog_.object_ranges(o.object_id);
    if (!ranges) return tl::make_unexpected("catalog: cannot read object ranges");
    if (ranges->size() != 1) continue;
    by_stream[ranges->front().stream_id].push_back({o, ranges->front()});
  }
  uint64_t budget = 4 * options_.max_object_bytes;
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
             bytes + objects[last + 1].object.size <= options_.max_object_bytes) {
        ++last;
        bytes += objects[last].object.size;
      }
      if (last > first) {
        std::map<base::stream_id, std::vector<piece>> pieces;
        for (size_t i = first; i <= last; ++i) {
          if (auto r = load_pieces(catalog_, store_, objects[i].object, pieces); !r) return r;
        }
        auto& run = pieces[stream];
        std::sort(run.begin(), run.end(),
                  [](const piece& a, const piece& b) { return a.start < b.start; });
        if (auto r = write_merged_object(catalog_, store_, options_.block_size, options_.node,
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
  if (merged_any) compactions_.fetch_add(1, std::memory_order_relaxed);
  return {};
}

tl::expected<void, std::string> compactor::apply_retention() {
  // One read of every committed range: the cost grows with the data kept, not with a query
  // per stream.
  auto all = catalog_.all_ranges();
  if (!all) return tl::make_unexpected("catalog: cannot read the ranges");
  const int64_t now = now_ms();
  for (size_t first = 0; first < all->size();) {
    const base::stream_id id = (*all)[first].stream_id;
    size_t end = first;
    uint64_t total = 0;
    while (end < all->size() && (*all)[end].stream_id == id) total += (*all)[end++].size;
    const std::span<const metadata::stream_range> ranges(all->data() + first, end - first);
    first = end;
    const stream_ref ref = cache_.stream(id);
    auto& st = *ref;
    int64_t ms;
    int64_t max_bytes;
    int64_t segment_ms;
    int64_t segment_bytes;
    {
      base::lock_guard lock(st.mu);
      ms = st.retention_ms == -2 ? options_.retention_ms : st.retention_ms;
      max_bytes = st.retention_bytes == -2 ? options_.retention_bytes : st.retention_bytes;
      segment_ms = st.segment_ms == -2 ? options_.segment_ms : st.segment_ms;
      segment_bytes = st.segment_bytes == -2 ? options_.segment_bytes : st.segment_bytes;
    }
    if (ms < 0 && max_bytes < 0) continue;
    std::optional<base::offset> new_start;
    for (const auto& r : ranges) {
      // Kafka never deletes the segment it appends to for its age, whatever its records'
      // timestamps (a replay, a mirror, a producer that stamps records in the past): here the
      // active segment is the stream's newest segment.bytes, for as long as they were written
      // within segment.ms. `total` is what this range and the ones after it hold.
      const uint64_t newer = total - r.size;
      const bool active = newer < static_cast<uint64_t>(std::max<int64_t>(segment_bytes, 0)) &&
                          r.written_ms > now - segment_ms;
      const bool expired = ms >= 0 && r.max_timestamp >= 0 && r.max_timestamp < now - ms && !active;
      // As Kafka's size retention: a range goes only if what remains is still at least
      // retention.bytes.
      const bool too_big =
          max_bytes >= 0 && total >= r.size && total - r.size >= static_cast<uint64_t>(max_bytes);
      if (!expired && !too_big) break;
      new_start = r.end_offset;
      total -= r.size;
    }
    if (!new_start) continue;
    // The start moves first: a reader that then finds nothing in the catalog below it knows
    // the offset is gone, and one that checked the start before still finds its data.
    base::node_id owner;
    base::leader_epoch epoch;
    {
      base::lock_guard lock(st.mu);
      if (st.fenced) continue;
      st.start_offset = std::max(st.start_offset, *new_start);
      owner = st.owner;
      epoch = st.epoch;
    }
    if (auto r = catalog_.trim(id, *new_start, owner, epoch); !r) {
      if (r.error() == metadata::catalog_error::fenced) {
        if (auto now = catalog_.stream(id)) (void)cache_.fenced_by(id, *now);
        continue;
      }
      return tl::make_unexpected("catalog: trim failed");
    }
  }
  return {};
}

tl::expected<void, std::string> compactor::delete_unreferenced() {
  auto gone = catalog_.deletable(now_ms() - options_.delete_delay.count());
  if (!gone) return tl::make_unexpected("catalog: cannot list deletable objects");
  for (const auto& o : *gone) {
    if (!store_.remove(o.key)) return tl::make_unexpected("cannot delete " + o.key);
    if (!catalog_.forget(o.object_id)) return tl::make_unexpected("cannot forget " + o.key);
    cold_.forget(o.key);
    deleted_objects_.fetch_add(1, std::memory_order_relaxed);
  }
  return {};
}

tl::expected<void, std::string> compactor::sweep() {
  // An upload allocates its object's id just before the PUT and commits just after, holding
  // task_mu_ throughout; an object not in the catalog whose id is a grace period old is left
  // over from an upload that failed or died. The id counter is read at each sweep, so that
  // a later sweep knows which ids were allocated a grace period before it.
  const auto now = std::chrono::steady_clock::now();
  auto last_id = catalog_.last_object_id();
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
  auto known = catalog_.object_keys();
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
    SILT_LOG(info, "stream store: sweep: deleted %s (%" PRIu64 " bytes), never committed",
             o.key.c_str(), o.size);
    ++swept;
  }
  swept_objects_.fetch_add(swept, std::memory_order_relaxed);
  if (!error.empty()) return tl::make_unexpected(error);
  return {};
}

}  // namespace silt::storage
