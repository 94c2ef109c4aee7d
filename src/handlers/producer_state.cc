#include "handlers/producer_state.h"

#include <algorithm>

#include "base/clock.h"
#include "base/endian.h"
#include "base/log.h"
#include "handlers/stream_scan.h"

namespace silt::handlers {

namespace {

using protocol::error_code;
using protocol::record_batch_header;

constexpr size_t max_batches = 5;  // Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
constexpr int64_t id_block = 1000;
constexpr uint8_t snapshot_version = 1;

int32_t last_sequence(const record_batch_header& h) {
  const int64_t last = static_cast<int64_t>(h.base_sequence) + h.last_offset_delta;
  return static_cast<int32_t>(last > INT32_MAX ? last - INT32_MAX - 1 : last);
}

int32_t next_sequence(int32_t seq) {
  return seq == INT32_MAX ? 0 : seq + 1;
}

// Snapshot layout (docs/formats/producer-snapshot.md), big-endian:
//   version:u8 covered:i64 count:u32 producer*
//   producer := id:i64 epoch:i16 last_timestamp:i64 n:u8 batch{n}
//   batch    := first_seq:i32 last_seq:i32 first_offset:i64 last_offset:i64
template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t n = out.size();
  out.resize(n + sizeof(T));
  base::store_be(out.data() + n, v);
}

class cursor {
 public:
  explicit cursor(const std::vector<uint8_t>& b) : b_(b) {}
  template <typename T>
  bool get(T& v) {
    if (b_.size() - pos_ < sizeof(T)) return false;
    v = base::load_be<T>(b_.data() + pos_);
    pos_ += sizeof(T);
    return true;
  }
  bool get(base::offset& v) {
    int64_t raw = 0;
    if (!get(raw)) return false;
    v = base::offset(raw);
    return true;
  }
  [[nodiscard]] bool done() const { return pos_ == b_.size(); }

 private:
  const std::vector<uint8_t>& b_;
  size_t pos_ = 0;
};

}  // namespace

producer_state::producer_state(metadata::topic_registry& registry, storage::stream_store& store,
                               int64_t expiration_ms)
    : registry_(registry), store_(store), expiration_ms_(expiration_ms) {}

tl::expected<std::pair<base::producer_id, base::producer_epoch>, error_code>
producer_state::init_producer(base::producer_id producer_id, base::producer_epoch producer_epoch) {
  if (producer_id.value() >= 0 && producer_epoch.value() >= 0 &&
      producer_epoch.value() < INT16_MAX - 1) {
    // KIP-360: an idempotent producer bumps its epoch to reset its sequences.
    return std::pair{producer_id, producer_epoch.next()};
  }
  base::lock_guard lock(id_mu_);
  if (next_id_ >= id_limit_) {
    auto first = registry_.allocate_producer_ids(id_block);
    if (!first) return tl::make_unexpected(error_code::unknown_server_error);
    next_id_ = *first;
    id_limit_ = *first + id_block;
  }
  return std::pair{base::producer_id(next_id_++), base::producer_epoch(0)};
}

std::shared_ptr<producer_state::stream_producers> producer_state::slot(base::stream_id stream_id) {
  base::lock_guard lock(map_mu_);
  auto& slot = streams_[stream_id];
  if (!slot) slot = std::make_shared<stream_producers>();
  return slot;
}

bool producer_state::loaded(base::stream_id stream_id) {
  base::lock_guard lock(map_mu_);
  auto it = streams_.find(stream_id);
  return it != streams_.end() && it->second->loaded.load(std::memory_order_acquire);
}

bool producer_state::load(base::stream_id stream_id) {
  // A forget() while the state is read (the stream changed hands) makes what was read stale:
  // read again, a few times at most.
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::shared_ptr<stream_producers> sp;
    uint64_t generation;
    {
      base::lock_guard lock(lock_for(stream_id));
      sp = slot(stream_id);
      if (sp->loaded.load(std::memory_order_acquire)) return true;
      generation = sp->generation;
    }
    // Read without the stripe: appends of the streams that share it go on meanwhile. Nothing
    // of this stream's producers changes while it is not loaded (its idempotent batches wait
    // for the load; finish() records nothing), so what is read is whole when installed.
    std::unordered_map<base::producer_id, producer_entry> producers;
    const bool whole = read_state(stream_id, producers);
    base::lock_guard lock(lock_for(stream_id));
    if (sp->loaded.load(std::memory_order_acquire)) return true;  // another load installed
    if (sp->generation != generation) continue;
    {
      // Erased meanwhile (its topic deleted): nothing to install.
      base::lock_guard map_lock(map_mu_);
      const auto it = streams_.find(stream_id);
      if (it == streams_.end() || it->second != sp) return false;
    }
    if (!whole) return false;
    sp->producers = std::move(producers);
    sp->in_flight.clear();
    sp->loaded_at = std::chrono::steady_clock::now();
    for (auto& [id, e] : sp->producers) e.found_at_load = true;
    sp->loaded.store(true, std::memory_order_release);
    return true;
  }
  return false;
}

void producer_state::forget(base::stream_id stream_id) {
  base::lock_guard lock(lock_for(stream_id));
  base::lock_guard map_lock(map_mu_);
  auto it = streams_.find(stream_id);
  if (it == streams_.end()) return;
  auto& sp = *it->second;
  sp.loaded.store(false, std::memory_order_release);
  ++sp.generation;
  sp.dirty = false;
  sp.producers.clear();
  sp.in_flight.clear();
}

void producer_state::erase(const std::vector<base::stream_id>& stream_ids) {
  for (const base::stream_id id : stream_ids) {
    base::lock_guard lock(lock_for(id));
    base::lock_guard map_lock(map_mu_);
    auto it = streams_.find(id);
    if (it == streams_.end()) continue;
    it->second->loaded.store(false, std::memory_order_release);
    ++it->second->generation;
    streams_.erase(it);
  }
  base::lock_guard lock(refusals_mu_);
  for (const base::stream_id id : stream_ids) refusals_.erase(id);
}

size_t producer_state::stream_count() {
  base::lock_guard lock(map_mu_);
  return streams_.size();
}

void producer_state::note_refused(base::stream_id stream_id, const record_batch_header& h) {
  const auto now = std::chrono::steady_clock::now();
  const auto stale = [&](const refusal& r) { return now - r.at > refusal_window; };
  const base::producer_id id(h.producer_id);
  const base::producer_epoch epoch(h.producer_epoch);
  base::lock_guard lock(refusals_mu_);
  if (refusals_.size() >= max_refusal_streams && !refusals_.contains(stream_id)) {
    for (auto it = refusals_.begin(); it != refusals_.end();) {
      std::erase_if(it->second, stale);
      it = it->second.empty() ? refusals_.erase(it) : std::next(it);
    }
    if (refusals_.size() >= max_refusal_streams) return;  // a burst: Kafka's answers then
  }
  auto& list = refusals_[stream_id];
  std::erase_if(list, stale);
  for (auto& r : list) {
    if (r.producer == id && r.epoch == epoch) {
      r.first_seq = std::min(r.first_seq, h.base_sequence);
      r.at = now;
      return;
    }
  }
  if (list.size() >= max_refusals_per_stream) list.erase(list.begin());
  list.push_back({id, epoch, h.base_sequence, now});
}

bool producer_state::refused_before(base::stream_id stream_id, const record_batch_header& h) {
  const auto now = std::chrono::steady_clock::now();
  base::lock_guard lock(refusals_mu_);
  const auto it = refusals_.find(stream_id);
  if (it == refusals_.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(), [&](const refusal& r) {
    return r.producer == base::producer_id(h.producer_id) &&
           r.epoch == base::producer_epoch(h.producer_epoch) && r.first_seq < h.base_sequence &&
           now - r.at <= refusal_window;
  });
}

producer_state::stream_producers* producer_state::loaded_stream(base::stream_id stream_id) {
  base::lock_guard lock(map_mu_);
  auto it = streams_.find(stream_id);
  if (it == streams_.end() || !it->second->loaded.load(std::memory_order_acquire)) {
    return nullptr;
  }
  return it->second.get();
}

bool producer_state::loaded_recently(base::stream_id stream_id, const record_batch_header& h) {
  const stream_producers* sp = loaded_stream(stream_id);  // (a network thread asks)
  if (sp == nullptr || std::chrono::steady_clock::now() - sp->loaded_at > refusal_window) {
    return false;
  }
  const auto it = sp->producers.find(base::producer_id(h.producer_id));
  return it != sp->producers.end() && it->second.found_at_load;
}

bool producer_state::retry_to_come(base::stream_id stream_id, const record_batch_header& h,
                                   const check_result& checked) {
  return checked.error == error_code::out_of_order_sequence_number &&
         (refused_before(stream_id, h) || (checked.gap && loaded_recently(stream_id, h)));
}

const std::unordered_map<base::producer_id, producer_state::producer_entry>&
producer_state::producers(base::stream_id stream_id) {
  static const std::unordered_map<base::producer_id, producer_entry> none;
  const stream_producers* sp = loaded_stream(stream_id);
  return sp == nullptr ? none : sp->producers;
}

std::optional<producer_state::check_result> producer_state::check_if_loaded(
    base::stream_id stream_id, const record_batch_header& h) {
  const stream_producers* sp = loaded_stream(stream_id);
  if (sp == nullptr) return std::nullopt;
  return check_on(*sp, h);
}

producer_state::check_result producer_state::check(base::stream_id stream_id,
                                                   const record_batch_header& h) {
  if (auto c = check_if_loaded(stream_id, h)) return *c;
  return {verdict::reject, error_code::not_leader_or_follower, {}};
}

producer_state::check_result producer_state::check_on(const stream_producers& sp,
                                                      const record_batch_header& h) {
  const base::producer_id id(h.producer_id);
  const base::producer_epoch batch_epoch(h.producer_epoch);
  const auto it = sp.producers.find(id);
  const producer_entry* durable = it == sp.producers.end() ? nullptr : &it->second;
  const auto fit = sp.in_flight.find(id);
  const std::deque<pending_batch>* flying =
      fit == sp.in_flight.end() || fit->second.empty() ? nullptr : &fit->second;
  if (durable == nullptr && flying == nullptr) return {};  // a new (or expired) producer
  // The producer's latest epoch and last batch, counting the batches in flight.
  const base::producer_epoch epoch = flying != nullptr ? flying->back().epoch : durable->epoch;
  if (batch_epoch < epoch) {
    return {verdict::reject, error_code::invalid_producer_epoch, {}};
  }
  const int32_t last = last_sequence(h);
  if (batch_epoch == epoch) {
    if (durable != nullptr && durable->epoch == batch_epoch) {
      for (const auto& b : durable->batches) {
        if (b.first_seq == h.base_sequence && b.last_seq == last) {
          return {verdict::duplicate, error_code::none, b};
        }
      }
    }
    const batch_meta* previous = nullptr;
    if (flying != nullptr) {
      for (const auto& p : *flying) {
        if (p.epoch == batch_epoch && p.meta.first_seq == h.base_sequence &&
            p.meta.last_seq == last) {
          return {verdict::in_flight, error_code::none, p.meta};
        }
      }
      if (flying->back().epoch == batch_epoch) previous = &flying->back().meta;
    }
    if (previous == nullptr && durable != nullptr && durable->epoch == batch_epoch &&
        !durable->batches.empty()) {
      previous = &durable->batches.back();
    }
    if (previous != nullptr && h.base_sequence != next_sequence(previous->last_seq)) {
      // Ahead of the expected sequence, modulo the wrap at INT32_MAX (half the range counts as
      // ahead, half as behind).
      const uint32_t ahead = static_cast<uint32_t>(h.base_sequence) -
                             static_cast<uint32_t>(next_sequence(previous->last_seq));
      return {verdict::reject,
              error_code::out_of_order_sequence_number,
              {},
              (ahead & 0x7fffffffU) < 0x40000000U};
    }
    return {};
  }
  // A new epoch starts its sequences at 0.
  if (h.base_sequence != 0) {
    return {verdict::reject, error_code::out_of_order_sequence_number, {}};
  }
  return {};
}

void producer_state::begin(base::stream_id stream_id, const record_batch_header& h,
                           base::offset base_offset) {
  stream_producers* loaded = loaded_stream(stream_id);
  if (loaded == nullptr) return;  // not checked here: cannot happen under the caller's lock
  auto& sp = *loaded;
  sp.in_flight[base::producer_id(h.producer_id)].push_back(
      {base::producer_epoch(h.producer_epoch),
       {h.base_sequence, last_sequence(h), base_offset, base_offset + h.last_offset_delta}});
}

void producer_state::finish(base::stream_id stream_id, const record_batch_header& h,
                            std::optional<base::offset> durable_at) {
  const bool durable = durable_at.has_value();
  base::lock_guard lock(lock_for(stream_id));
  // Forgotten while the write was in flight (the stream went to another broker, or was
  // handed back): nothing to record. The next load replays the stream, this batch included
  // if it is durable (the durable end moves before this callback runs); loading here instead
  // would read a stream that may be another broker's by now.
  stream_producers* loaded = loaded_stream(stream_id);
  if (loaded == nullptr) return;
  auto& sp = *loaded;
  auto fit = sp.in_flight.find(base::producer_id(h.producer_id));
  if (fit != sp.in_flight.end()) {
    auto& q = fit->second;
    const auto at = std::find_if(q.begin(), q.end(), [&](const pending_batch& p) {
      return p.epoch == base::producer_epoch(h.producer_epoch) &&
             p.meta.first_seq == h.base_sequence;
    });
    if (at != q.end()) {
      // A failed write fails every write after it: the producer's later batches go with it,
      // so that its retry is checked against what is durable.
      q.erase(at, durable ? std::next(at) : q.end());
    } else if (!durable) {
      return;  // already forgotten with an earlier failed batch
    }
    if (q.empty()) sp.in_flight.erase(fit);
  }
  if (durable) {
    apply(sp.producers, h, *durable_at);
    sp.dirty = true;
  }
}

void producer_state::apply(std::unordered_map<base::producer_id, producer_entry>& m,
                           const record_batch_header& h, base::offset base_offset) {
  auto& e = m[base::producer_id(h.producer_id)];
  if (const base::producer_epoch epoch(h.producer_epoch); epoch != e.epoch) {
    e.epoch = epoch;
    e.batches.clear();
  }
  e.batches.push_back(
      {h.base_sequence, last_sequence(h), base_offset, base_offset + h.last_offset_delta});
  while (e.batches.size() > max_batches) e.batches.pop_front();
  e.last_timestamp = std::max(h.max_timestamp, base::now_ms());
}

void producer_state::record(base::stream_id stream_id, const record_batch_header& h,
                            base::offset base_offset) {
  stream_producers* loaded = loaded_stream(stream_id);
  if (loaded == nullptr) return;
  apply(loaded->producers, h, base_offset);
  loaded->dirty = true;
}

bool producer_state::read_state(base::stream_id stream_id,
                                std::unordered_map<base::producer_id, producer_entry>& producers) {
  const auto offsets = store_.offsets(stream_id);
  base::offset from = offsets.start_offset;
  auto blob = store_.producer_state(stream_id);
  if (blob && !blob->empty()) {
    cursor c(*blob);
    uint8_t version = 0;
    base::offset covered{};
    uint32_t count = 0;
    std::unordered_map<base::producer_id, producer_entry> m;
    bool ok = c.get(version) && version == snapshot_version && c.get(covered) && c.get(count);
    for (uint32_t i = 0; ok && i < count; ++i) {
      int64_t id = 0;
      int16_t epoch = 0;
      producer_entry e;
      uint8_t n = 0;
      ok = c.get(id) && c.get(epoch) && c.get(e.last_timestamp) && c.get(n) && n <= max_batches;
      for (uint8_t j = 0; ok && j < n; ++j) {
        batch_meta b;
        ok = c.get(b.first_seq) && c.get(b.last_seq) && c.get(b.first_offset) &&
             c.get(b.last_offset);
        e.batches.push_back(b);
      }
      e.epoch = base::producer_epoch(epoch);
      if (ok) m[base::producer_id(id)] = std::move(e);
    }
    if (ok && c.done() && covered >= from) {
      producers = std::move(m);
      from = covered;
    } else if (!ok || !c.done()) {
      SILT_LOG(warn, "producer state: snapshot of stream %llu is corrupt; rebuilding it",
               static_cast<unsigned long long>(stream_id.value()));
    }
  }
  // Replay the batch headers written after the snapshot.
  const bool whole = scan_batches(store_, stream_id, from, [&](const protocol::record_batch& b) {
    if (b.header.producer_id >= 0) {
      apply(producers, b.header, base::offset(b.header.base_offset));
    }
    return true;
  });
  if (!whole) {
    SILT_LOG(warn,
             "producer state: stream %llu could not be read to its end; its idempotent "
             "batches are refused until it can",
             static_cast<unsigned long long>(stream_id.value()));
  }
  return whole;
}

tl::expected<void, std::string> producer_state::snapshot() {
  std::vector<base::stream_id> ids;
  {
    base::lock_guard lock(map_mu_);
    for (auto& [id, sp] : streams_) ids.push_back(id);
  }
  const int64_t now = base::now_ms();
  for (base::stream_id stream_id : ids) {
    std::vector<uint8_t> out;
    {
      base::lock_guard lock(lock_for(stream_id));
      stream_producers* sp;
      {
        base::lock_guard map_lock(map_mu_);
        const auto it = streams_.find(stream_id);
        if (it == streams_.end()) continue;  // erased meanwhile (its topic deleted)
        sp = it->second.get();
      }
      if (!sp->loaded.load(std::memory_order_acquire) || !sp->dirty) continue;
      // Covered: up to the durable end, but not past a batch whose write is in flight. The
      // store's durable end moves before the write's callback records the batch here
      // (finish()), so a batch there may be durable already and still missing from
      // `producers`: the snapshot must leave it to the replay.
      base::offset covered = store_.offsets(stream_id).end_offset;
      for (const auto& [id, q] : sp->in_flight) {
        for (const auto& p : q) covered = std::min(covered, p.meta.first_offset);
      }
      // Expire idle producers, as Kafka does after producer.id.expiration.ms.
      for (auto it = sp->producers.begin(); it != sp->producers.end();) {
        if (expiration_ms_ >= 0 && now - it->second.last_timestamp > expiration_ms_) {
          it = sp->producers.erase(it);
        } else {
          ++it;
        }
      }
      put<uint8_t>(out, snapshot_version);
      put<int64_t>(out, covered.value());
      const size_t count_at = out.size();
      put<uint32_t>(out, 0);
      uint32_t count = 0;
      bool pending = false;
      for (const auto& [id, e] : sp->producers) {
        // Only what is durable: batches at or above `covered` are replayed (or lost) later.
        std::vector<batch_meta> durable;
        for (const auto& b : e.batches) {
          if (b.last_offset < covered) {
            durable.push_back(b);
          } else {
            pending = true;
          }
        }
        if (durable.empty()) continue;
        put<int64_t>(out, id.value());
        put<int16_t>(out, e.epoch.value());
        put<int64_t>(out, e.last_timestamp);
        put<uint8_t>(out, static_cast<uint8_t>(durable.size()));
        for (const auto& b : durable) {
          put<int32_t>(out, b.first_seq);
          put<int32_t>(out, b.last_seq);
          put<int64_t>(out, b.first_offset.value());
          put<int64_t>(out, b.last_offset.value());
        }
        ++count;
      }
      base::store_be<uint32_t>(out.data() + count_at, count);
      sp->dirty = pending;  // a batch in flight sets it when it is recorded (finish())
    }
    if (!store_.put_producer_state(stream_id, out)) {
      return tl::make_unexpected("cannot store the producer state of stream " +
                                 std::to_string(stream_id.value()));
    }
  }
  return {};
}

}  // namespace silt::handlers
