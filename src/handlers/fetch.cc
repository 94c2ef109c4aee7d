// Fetch (key 1): reads record batches from partitions' streams, long-polling up to
// max_wait_ms until min_bytes are there, within max_bytes per response and per partition
// (at least one batch, as KIP-74 asks), with incremental fetch sessions (KIP-227) and reads
// near the client (KIP-392: a consumer's rack, preferred read replicas).
// Log-cache reads run on the connection; reads that need the object store run on the
// blocking pool.
//
// ACLs, as Kafka's KafkaApis.handleFetchRequest: a consumer needs TOPIC:READ on each topic, a
// follower (replica_id >= 0) CLUSTER:CLUSTER_ACTION; a refused partition is answered
// TOPIC_AUTHORIZATION_FAILED whether it exists or not. An incremental fetch checks every
// partition of its session, not only those the request names (Kafka's
// IncrementalFetchContext.foreachPartition): READ revoked shows on the session's next fetch.
#include <map>
#include <mutex>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "base/clock.h"
#include "handlers/access.h"
#include "handlers/handlers.h"
#include "handlers/offsets_topic.h"

namespace silt::handlers {

namespace {

using protocol::error_code;
using protocol::fetch_response;

struct wanted {
  std::string topic;
  protocol::uuid topic_id;
  int32_t partition = 0;
  base::offset fetch_offset{};
  int32_t max_bytes = 0;
  int32_t current_leader_epoch = -1;
  std::optional<base::offset> log_start_offset;  // the client's
  bool refused = false;                          // by the ACLs: not read
};

// Who fetches, for reads near the client (KIP-392, when replica.selector.class asks for
// them): a consumer fetching with v11 or later may be served by a broker that does not own the
// partition, from what the owner committed to objects; one that names a rack other than this
// broker's is sent to a broker there for what this broker would read from the object store (data
// that left the log cache).
struct fetcher {
  bool may_read_elsewhere = false;
  std::string_view rack;
  std::optional<rack_view> racks;  // when the client names a rack other than this broker's
};

struct gathered {
  fetch_response::PartitionData data;
  std::vector<std::shared_ptr<const void>> owners;
  base::stream_id stream_id{};
  bool found = false;
  bool offsets_topic = false;  // a partition of __consumer_offsets (no stream)
};

error_code read_error(storage::stream_error e) {
  return e == storage::stream_error::offset_out_of_range ? error_code::offset_out_of_range
         : e == storage::stream_error::fenced            ? error_code::not_leader_or_follower
                                                         : error_code::kafka_storage_error;
}

// The records read for a partition, with at most `max` bytes, go into its answer; their bytes
// are taken from `budget`. A read gives at least one batch, which may exceed `max`: only the
// first partition with data may answer more than its limit (KIP-74, as Kafka's minOneMessage),
// so that a consumer always progresses and no response exceeds max_bytes for another reason.
// Any other partition whose first batch does not fit answers no records: the client asks again,
// and that partition comes first in a later fetch (the rotation of sessions and clients).
void add_records(gathered& g, storage::read_result r, size_t max, size_t& budget, size_t& total) {
  if (r.chunks.empty()) return;
  const size_t n = r.bytes();
  if (total > 0 && n > max) return;
  // Batches from several buffers (log cache entries, object blocks) are sent from there, one
  // piece after the other.
  g.data.records = protocol::records_view(std::move(r.chunks));
  g.owners = std::move(r.owners);
  total += n;
  budget = budget > n ? budget - n : 0;
}

// The bytes one partition may take: its own limit within what is left of the response's,
// but at least one batch for the first partition with data (KIP-74, add_records()). 0: none.
size_t partition_limit(const wanted& w, size_t budget, size_t total) {
  const size_t limit = std::min(static_cast<size_t>(std::max(w.max_bytes, 0)), budget);
  if (limit == 0 && total > 0) return 0;
  return std::max<size_t>(limit, 1);
}

// A partition another live broker owns, fetched by a consumer that a replica may serve: what
// the owner committed to objects is read here (the high watermark is the committed end); a
// consumer that has read all of it is sent to the owner for the rest (its preferred read
// replica), and one below the start gets OFFSET_OUT_OF_RANGE. Catalog and object store I/O:
// only when `may_block` (false otherwise, as gather_one()).
bool gather_elsewhere(context& ctx, const wanted& w, const storage::stream_offsets& offs,
                      gathered& g, size_t& budget, size_t& total, bool may_block) {
  if (const auto e = check_leader_epoch(w.current_leader_epoch, offs.epoch);
      e != error_code::none) {
    g.data.error_code = static_cast<int16_t>(e);
    return true;
  }
  if (ctx.leaving.load(std::memory_order_relaxed)) {
    g.found = true;
    g.data.preferred_read_replica = offs.owner.value();
    return true;
  }
  if (!may_block) return false;
  const size_t max = partition_limit(w, budget, total);
  auto r = ctx.store.read_committed(g.stream_id, w.fetch_offset, max);
  if (!r) {
    g.data.error_code = static_cast<int16_t>(read_error(r.error()));
    return true;
  }
  g.found = true;
  g.data.high_watermark = r->committed_end.value();
  g.data.last_stable_offset = r->committed_end.value();
  g.data.log_start_offset = r->start_offset.value();
  if (w.fetch_offset < r->start_offset) {
    g.data.error_code = static_cast<int16_t>(error_code::offset_out_of_range);
    return true;
  }
  if (w.fetch_offset >= r->committed_end) {
    g.data.preferred_read_replica = offs.owner.value();
    return true;
  }
  const size_t n = r->data.bytes();
  if (n == 0) return true;
  ctx.read_for_owner.fetch_add(1, std::memory_order_relaxed);
  ctx.read_for_owner_bytes.fetch_add(n, std::memory_order_relaxed);
  add_records(g, std::move(r->data), max, budget, total);
  return true;
}

// One partition of a fetch: what it has from its fetch offset on, within `budget` (which the
// bytes read are taken from). A read from the log cache runs on the calling thread; one that
// needs the catalog or the object store only when `may_block`; otherwise it returns false
// and leaves `budget` and `total` as they were, for the caller to do it again on a thread
// that may block (the cache may have evicted the data since the fetch looked at the
// stream's offsets: read_cached() decides under the store's lock).
bool gather_one(context& ctx, const wanted& w, const fetcher& who, gathered& g, size_t& budget,
                size_t& total, bool may_block) {
  g = gathered{};
  g.data.partition_index = w.partition;
  if (w.refused) {
    // As Kafka's FetchResponse.partitionResponse: no offsets.
    g.data.error_code = static_cast<int16_t>(error_code::topic_authorization_failed);
    g.data.high_watermark = -1;
    return true;
  }
  if (is_offsets_topic(ctx, w.topic)) {
    // The view of the groups' internal topic, from memory (offsets_topic.h).
    g.offsets_topic = true;
    const size_t max = partition_limit(w, budget, total);
    auto r = read_offsets_topic(ctx, w.partition, w.fetch_offset.value(), max);
    g.data.error_code = static_cast<int16_t>(r.error);
    g.data.high_watermark = r.high_watermark;
    g.data.last_stable_offset = r.high_watermark;
    g.data.log_start_offset = r.log_start_offset;
    g.found = r.error == error_code::none;
    if (r.batch && max > 0) {
      storage::read_result read;
      read.chunks.emplace_back(*r.batch);
      read.owners.push_back(std::move(r.batch));
      add_records(g, std::move(read), max, budget, total);
    }
    return true;
  }
  auto t = w.topic.empty() ? ctx.topic(w.topic_id.bytes) : ctx.topic(w.topic);
  const auto stream = stream_of(t, w.partition);
  if (!stream) {
    g.data.error_code = static_cast<int16_t>(error_code::unknown_topic_or_partition);
    return true;
  }
  const base::stream_id stream_id = *stream;
  const auto offs = ctx.store.offsets(stream_id);
  g.stream_id = stream_id;
  const int32_t owner = offs.owner.value();
  // (Only for an owner heard from lately and not stopping: a consumer sent on to one it cannot
  // reach may stay there; NOT_LEADER_OR_FOLLOWER sends it to the leader Metadata names.)
  if (offs.fenced && who.may_read_elsewhere && owner >= 0 && owner != ctx.node_id &&
      ctx.heard_lately(owner)) {
    return gather_elsewhere(ctx, w, offs, g, budget, total, may_block);
  }
  if (const auto e = check_leader(offs, w.current_leader_epoch); e != error_code::none) {
    g.data.error_code = static_cast<int16_t>(e);
    return true;
  }
  g.found = true;
  g.data.high_watermark = offs.end_offset.value();
  g.data.last_stable_offset = offs.end_offset.value();
  g.data.log_start_offset = offs.start_offset.value();
  if (w.fetch_offset < offs.start_offset || w.fetch_offset > offs.end_offset) {
    g.data.error_code = static_cast<int16_t>(error_code::offset_out_of_range);
    g.data.high_watermark = offs.end_offset.value();
    return true;
  }
  if (w.fetch_offset == offs.end_offset) return true;
  const size_t max = partition_limit(w, budget, total);
  if (max == 0) return true;
  auto cached = ctx.store.read_cached(g.stream_id, w.fetch_offset, max);
  if (!cached && who.racks) {
    // Data that left the log cache is read from the object store, which a broker in the
    // client's rack reads as well as this one, without crossing zones.
    if (const int32_t near = who.racks->reader(stream_id, who.rack, ctx.node_id);
        near >= 0 && near != ctx.node_id) {
      g.data.preferred_read_replica = near;
      ctx.sent_to_rack.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  if (!cached && !may_block) return false;
  auto r = cached ? std::move(*cached) : ctx.store.read(g.stream_id, w.fetch_offset, max);
  if (!r) {
    g.data.error_code = static_cast<int16_t>(read_error(r.error()));
    return true;
  }
  add_records(g, std::move(*r), max, budget, total);
  return true;
}

// One pass over the partitions: what each has from its fetch offset on. From the first
// partition that needs a cold read on, the rest of the pass runs on the blocking pool, so
// that a fetch hands off to it once, not once per partition.
asio::awaitable<size_t> gather(context& ctx, std::vector<wanted>& ws, const fetcher& who,
                               int32_t max_bytes, std::vector<gathered>& out) {
  out.clear();
  out.resize(ws.size());
  size_t total = 0;
  size_t budget = static_cast<size_t>(std::max(max_bytes, 0));
  size_t i = 0;
  while (i < ws.size() && gather_one(ctx, ws[i], who, out[i], budget, total, false)) ++i;
  if (i < ws.size()) {
    co_await asio::co_spawn(
        ctx.blocking,
        [&]() -> asio::awaitable<void> {
          for (; i < ws.size(); ++i) (void)gather_one(ctx, ws[i], who, out[i], budget, total, true);
          co_return;
        },
        asio::use_awaitable);
  }
  co_return total;
}

// What a fetch works on (Kafka's FetchManager.newContext): epoch -1 (final) closes the named
// session and fetches without one; epoch 0 (initial) closes the named session, if any, and
// fetches everything named, opening a new session with it once answered; any other epoch must
// be the named session's current one, and continues it. The session is locked only to check
// and change it; the partitions to read are copied out.
struct fetch_plan {
  error_code error = error_code::none;  // the whole request's
  std::vector<wanted> partitions;
  std::shared_ptr<fetch_session> session;  // the session an incremental fetch continues
  int32_t accepted_epoch = 0;              // the session's epoch once this fetch was accepted
  bool opens_session = false;
};

fetch_plan plan_fetch(context& ctx, int16_t version, const protocol::fetch_request& req) {
  fetch_plan plan;
  auto& ws = plan.partitions;
  plan.opens_session = version >= 7 && req.session_epoch == 0;
  if (version >= 7 && (req.session_epoch == -1 || req.session_epoch == 0)) {
    if (req.session_id != 0) ctx.sessions.remove(req.session_id);
  } else if (version >= 7) {
    auto session = ctx.sessions.find(req.session_id, base::now_ms());
    if (!session) {
      plan.error = error_code::fetch_session_id_not_found;
      return plan;
    }
    base::unique_lock lock(session->mu);
    if (req.session_epoch != session->epoch) {
      plan.error = error_code::invalid_fetch_session_epoch;
      return plan;
    }
    auto& parts = session->partitions;
    for (const auto& ft : req.forgotten_topics_data) {
      for (int32_t p : ft.partitions) {
        parts.erase({ft.topic, p});
        session->unknown.erase({ft.topic, p});
      }
    }
    for (const auto& t : req.topics) {
      const auto topic = ctx.topic(t.topic);
      for (const auto& p : t.partitions) {
        session_key key{t.topic, p.partition};
        if (!stream_of(topic, p.partition) && parts.find(key) == nullptr) {
          // Past the bound, a partition that exists nowhere is not kept: this fetch and the
          // next ones say nothing of it (a client that asks for it alone gets
          // UNKNOWN_TOPIC_OR_PARTITION from a full fetch).
          if (session->unknown.size() >= max_unknown_session_partitions) continue;
          session->unknown.insert(key);
        }
        auto& sp = parts.upsert(key);
        sp.fetch_offset = base::offset(p.fetch_offset);
        sp.max_bytes = p.partition_max_bytes;
        sp.log_start_offset = known_offset(p.log_start_offset);
      }
    }
    session->size = parts.size();
    if (parts.empty()) {
      // As Kafka: a session left with no partitions is closed and the fetch (of nothing)
      // answered without one.
      lock.unlock();
      ctx.sessions.remove(session->id);
      return plan;
    }
    session->epoch = next_session_epoch(session->epoch);
    plan.accepted_epoch = session->epoch;
    for (const auto& [key, sp] : parts) {
      ws.push_back(
          {key.first, {}, key.second, sp.fetch_offset, sp.max_bytes, -1, sp.log_start_offset});
    }
    plan.session = std::move(session);
    return plan;
  }
  for (const auto& t : req.topics) {
    for (const auto& p : t.partitions) {
      ws.push_back({t.topic, t.topic_id, p.partition, base::offset(p.fetch_offset),
                    p.partition_max_bytes, p.current_leader_epoch,
                    known_offset(p.log_start_offset)});
    }
  }
  return plan;
}

// Marks the partitions `a` may not read (only called with ACLs on): all of them for a follower
// without CLUSTER:CLUSTER_ACTION, else those of topics without TOPIC:READ, asked once per run of
// partitions of one topic. A topic asked for by an unknown id is left to the read (Kafka answers
// it UNKNOWN_TOPIC_ID before any check).
void refuse_unauthorized(const context& ctx, const access& a, bool follower,
                         std::vector<wanted>& ws) {
  if (follower) {
    if (!a.cluster(security::acl_operation::cluster_action)) {
      for (auto& w : ws) w.refused = true;
    }
    return;
  }
  std::string_view last;       // the topic of the previous partition
  topic_entry_ptr last_by_id;  // holds `last` when that topic was asked for by id
  bool last_allowed = false;
  bool first = true;
  for (auto& w : ws) {
    std::string_view name = w.topic;
    topic_entry_ptr by_id;
    if (name.empty()) {
      by_id = ctx.topic(w.topic_id.bytes);
      if (!by_id) continue;
      name = by_id->info->name;
    }
    if (first || name != last) {
      last_allowed = a.topic(security::acl_operation::read, name);
      last = name;
      last_by_id = std::move(by_id);
      first = false;
    }
    w.refused = !last_allowed;
  }
}

// An incremental fetch answers the partitions with news (records, an error, a moved high
// watermark or log start) and records in the session what it told. False, and nothing
// recorded, when another request of the session was accepted meanwhile: this one is then the
// stale duplicate (Kafka's IncrementalFetchContext refuses it the same way).
bool record_answer(const fetch_plan& plan, const std::vector<gathered>& got,
                   std::vector<bool>& answer) {
  auto& session = *plan.session;
  base::lock_guard lock(session.mu);
  if (session.epoch != plan.accepted_epoch) return false;
  for (size_t i = 0; i < plan.partitions.size(); ++i) {
    const auto& w = plan.partitions[i];
    const session_key key{w.topic, w.partition};
    auto* found = session.partitions.find(key);
    if (found == nullptr) continue;  // cannot happen while the epoch holds
    auto& sp = *found;
    const auto& d = got[i].data;
    if (d.records && !d.records->empty()) session.partitions.move_last(key);
    answer[i] = d.records.has_value() || d.error_code != 0 || d.preferred_read_replica >= 0 ||
                known_offset(d.high_watermark) != sp.last_high_watermark ||
                known_offset(d.log_start_offset) != sp.last_log_start;
    // After an error the partition is answered again once the error is gone.
    sp.last_high_watermark = d.error_code != 0 ? std::nullopt : known_offset(d.high_watermark);
    sp.last_log_start = known_offset(d.log_start_offset);
  }
  return true;
}

// A full fetch with epoch 0 opens a session holding its partitions and what it answered;
// returns its id, 0 when there is no room (the client keeps sending full fetches).
int32_t open_session(context& ctx, const fetch_plan& plan, const std::vector<gathered>& got) {
  session_partitions parts;
  for (size_t i = 0; i < plan.partitions.size(); ++i) {
    const auto& w = plan.partitions[i];
    const auto& d = got[i].data;
    parts.upsert({w.topic, w.partition}) = {
        w.fetch_offset, w.max_bytes, w.log_start_offset,
        d.error_code != 0 ? std::nullopt : known_offset(d.high_watermark),
        known_offset(d.log_start_offset)};
  }
  auto s = ctx.sessions.create(std::move(parts), base::now_ms());
  return s ? s->id : 0;
}

}  // namespace

asio::awaitable<with_owners<fetch_response>> handle_fetch(context& ctx, const net::request& raw,
                                                          const protocol::fetch_request& req) {
  const int16_t version = raw.header.header.request_api_version;
  with_owners<fetch_response> result;
  auto& resp = result.response;

  fetch_plan plan = plan_fetch(ctx, version, req);
  if (plan.error != error_code::none) {
    resp.error_code = static_cast<int16_t>(plan.error);
    co_return result;
  }
  auto& ws = plan.partitions;
  const int32_t replica = version >= 15 ? req.replica_state.replica_id : req.replica_id;
  if (const access a(ctx, raw); a.enabled()) refuse_unauthorized(ctx, a, replica >= 0, ws);

  std::vector<base::stream_id> streams;
  for (const auto& w : ws) {
    if (w.refused) continue;
    if (const auto stream = stream_of(ctx.topic(w.topic), w.partition)) {
      streams.push_back(*stream);
    }
  }
  fetcher who;
  // (Only for a consumer that names its rack: one that names none is not sent from broker to
  // broker, since librdkafka 2.0 keeps a preferred read replica that stopped answering.)
  who.may_read_elsewhere =
      ctx.reads_near_client() && version >= 11 && replica < 0 && !req.rack_id.empty();
  if (who.may_read_elsewhere && !req.rack_id.empty() && req.rack_id != ctx.config.broker_rack) {
    who.rack = req.rack_id;
    who.racks.emplace(ctx);
  }
  const int64_t deadline = base::now_ms() + std::max(req.max_wait_ms, 0);
  const auto ex = co_await asio::this_coro::executor;
  std::vector<gathered> got;
  for (;;) {
    data_waiters::waiter_ptr waiter;
    if (!ctx.stopping && req.max_wait_ms > 0) waiter = ctx.waiters.subscribe(ex, streams);
    const size_t bytes = co_await gather(ctx, ws, who, req.max_bytes, got);
    // An error, or a partition sent to another broker, is answered at once.
    bool error = false;
    for (const auto& g : got) error |= g.data.error_code != 0 || g.data.preferred_read_replica >= 0;
    const int64_t left = deadline - base::now_ms();
    if (!waiter || error || bytes >= static_cast<size_t>(std::max(req.min_bytes, 1)) || left <= 0 ||
        ctx.stopping) {
      if (waiter) ctx.waiters.unsubscribe(waiter);
      break;
    }
    const auto parked_from = std::chrono::steady_clock::now();
    (void)co_await data_waiters::wait(waiter, std::chrono::milliseconds(left));
    result.parked += std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - parked_from);
    ctx.waiters.unsubscribe(waiter);
  }

  std::vector<bool> answer(ws.size(), true);
  if (plan.session) {
    resp.session_id = plan.session->id;
    if (!record_answer(plan, got, answer)) {
      resp.error_code = static_cast<int16_t>(error_code::invalid_fetch_session_epoch);
      co_return result;
    }
  } else if (plan.opens_session) {
    resp.session_id = open_session(ctx, plan, got);
  }

  // Group the partitions by topic, in request (or session) order.
  topic_entry_ptr counted;  // the topic whose bytes out the records are counted in
  const wanted* counted_for = nullptr;
  for (size_t i = 0; i < ws.size(); ++i) {
    if (!answer[i]) continue;
    auto& w = ws[i];
    auto& g = got[i];
    if (g.data.records && !g.data.records->empty()) {
      if (!counted || counted_for == nullptr || counted_for->topic != w.topic ||
          !(counted_for->topic_id == w.topic_id)) {
        counted = w.topic.empty() ? ctx.topic(w.topic_id.bytes) : ctx.topic(w.topic);
        counted_for = &w;
      }
      if (counted) {
        counted->counters->bytes_out.fetch_add(g.data.records->size(), std::memory_order_relaxed);
      }
    }
    if (!g.data.records) g.data.records = protocol::records_view();
    if (req.isolation_level == 0) g.data.aborted_transactions.reset();
    if (resp.responses.empty() || resp.responses.back().topic != w.topic ||
        !(resp.responses.back().topic_id == w.topic_id)) {
      auto& rt = resp.responses.emplace_back();
      rt.topic = w.topic;
      rt.topic_id = w.topic_id;
    }
    if (g.data.error_code == static_cast<int16_t>(error_code::not_leader_or_follower) &&
        !g.offsets_topic) {
      point_to_leader(ctx, listener_of(raw), g.stream_id, g.data.current_leader,
                      resp.node_endpoints);
    }
    resp.responses.back().partitions.push_back(std::move(g.data));
    for (auto& o : g.owners) result.owners.push_back(std::move(o));
  }
  co_return result;
}

}  // namespace silt::handlers
