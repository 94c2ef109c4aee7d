// Fetch (key 1): reads record batches from partitions' streams, long-polling up to
// max_wait_ms until min_bytes are there, within max_bytes per response and per partition
// (at least one batch, as KIP-74 asks), with incremental fetch sessions (KIP-227).
// Log-cache reads run on the connection; reads that need the object store run on the
// blocking pool.
#include <map>
#include <mutex>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "base/clock.h"
#include "handlers/handlers.h"

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
};

struct gathered {
  fetch_response::PartitionData data;
  std::vector<std::shared_ptr<const void>> owners;
  base::stream_id stream_id{};
  bool found = false;
};

// One partition of a fetch: what it has from its fetch offset on, within `budget` (which the
// bytes read are taken from). A read from the log cache runs on the calling thread; one that
// needs the catalog or the object store only when `may_block`; otherwise it returns false
// and leaves `budget` and `total` as they were, for the caller to do it again on a thread
// that may block (the cache may have evicted the data since the fetch looked at the
// stream's offsets: read_cached() decides under the store's lock).
bool gather_one(context& ctx, const wanted& w, gathered& g, size_t& budget, size_t& total,
                bool may_block) {
  g = gathered{};
  g.data.partition_index = w.partition;
  auto t = w.topic.empty() ? ctx.topic(w.topic_id.bytes) : ctx.topic(w.topic);
  const auto stream = stream_of(t, w.partition);
  if (!stream) {
    g.data.error_code = static_cast<int16_t>(error_code::unknown_topic_or_partition);
    return true;
  }
  const base::stream_id stream_id = *stream;
  const auto offs = ctx.store.offsets(stream_id);
  g.stream_id = stream_id;
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
  // The first partition with data gets at least one batch whatever the limits.
  const size_t limit = std::min(static_cast<size_t>(std::max(w.max_bytes, 0)), budget);
  if (limit == 0 && total > 0) return true;
  const size_t max = std::max<size_t>(limit, 1);
  auto cached = ctx.store.read_cached(g.stream_id, w.fetch_offset, max);
  if (!cached && !may_block) return false;
  auto r = cached ? std::move(*cached) : ctx.store.read(g.stream_id, w.fetch_offset, max);
  if (!r) {
    g.data.error_code = static_cast<int16_t>(
        r.error() == storage::stream_error::offset_out_of_range ? error_code::offset_out_of_range
        : r.error() == storage::stream_error::fenced            ? error_code::not_leader_or_follower
                                                                : error_code::kafka_storage_error);
    return true;
  }
  if (r->chunks.empty()) return true;
  const size_t n = r->bytes();
  // Batches from several buffers (log cache entries, object blocks) are sent from there, one
  // piece after the other.
  g.data.records = protocol::records_view(std::move(r->chunks));
  g.owners = std::move(r->owners);
  total += n;
  budget = budget > n ? budget - n : 0;
  return true;
}

// One pass over the partitions: what each has from its fetch offset on. From the first
// partition that needs a cold read on, the rest of the pass runs on the blocking pool, so
// that a fetch hands off to it once, not once per partition.
asio::awaitable<size_t> gather(context& ctx, std::vector<wanted>& ws, int32_t max_bytes,
                               std::vector<gathered>& out) {
  out.clear();
  out.resize(ws.size());
  size_t total = 0;
  size_t budget = static_cast<size_t>(std::max(max_bytes, 0));
  size_t i = 0;
  while (i < ws.size() && gather_one(ctx, ws[i], out[i], budget, total, false)) ++i;
  if (i < ws.size()) {
    co_await asio::co_spawn(
        ctx.blocking,
        [&]() -> asio::awaitable<void> {
          for (; i < ws.size(); ++i) (void)gather_one(ctx, ws[i], out[i], budget, total, true);
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
      for (int32_t p : ft.partitions) parts.erase({ft.topic, p});
    }
    for (const auto& t : req.topics) {
      for (const auto& p : t.partitions) {
        auto& sp = parts[{t.topic, p.partition}];
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
    const auto it = session.partitions.find({w.topic, w.partition});
    if (it == session.partitions.end()) continue;  // cannot happen while the epoch holds
    auto& sp = it->second;
    const auto& d = got[i].data;
    answer[i] = d.records.has_value() || d.error_code != 0 ||
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
  std::map<session_key, session_partition> parts;
  for (size_t i = 0; i < plan.partitions.size(); ++i) {
    const auto& w = plan.partitions[i];
    const auto& d = got[i].data;
    parts[{w.topic, w.partition}] = {
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

  std::vector<base::stream_id> streams;
  for (const auto& w : ws) {
    if (const auto stream = stream_of(ctx.topic(w.topic), w.partition)) {
      streams.push_back(*stream);
    }
  }
  const int64_t deadline = base::now_ms() + std::max(req.max_wait_ms, 0);
  const auto ex = co_await asio::this_coro::executor;
  std::vector<gathered> got;
  for (;;) {
    data_waiters::waiter_ptr waiter;
    if (!ctx.stopping && req.max_wait_ms > 0) waiter = ctx.waiters.subscribe(ex, streams);
    const size_t bytes = co_await gather(ctx, ws, req.max_bytes, got);
    bool error = false;
    for (const auto& g : got) error |= g.data.error_code != 0;
    const int64_t left = deadline - base::now_ms();
    if (!waiter || error || bytes >= static_cast<size_t>(std::max(req.min_bytes, 1)) || left <= 0 ||
        ctx.stopping) {
      if (waiter) ctx.waiters.unsubscribe(waiter);
      break;
    }
    (void)co_await data_waiters::wait(waiter, std::chrono::milliseconds(left));
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
  for (size_t i = 0; i < ws.size(); ++i) {
    if (!answer[i]) continue;
    auto& w = ws[i];
    auto& g = got[i];
    if (!g.data.records) g.data.records = protocol::records_view();
    if (req.isolation_level == 0) g.data.aborted_transactions.reset();
    if (resp.responses.empty() || resp.responses.back().topic != w.topic ||
        !(resp.responses.back().topic_id == w.topic_id)) {
      auto& rt = resp.responses.emplace_back();
      rt.topic = w.topic;
      rt.topic_id = w.topic_id;
    }
    if (g.data.error_code == static_cast<int16_t>(error_code::not_leader_or_follower)) {
      point_to_leader(ctx, g.stream_id, g.data.current_leader, resp.node_endpoints);
    }
    resp.responses.back().partitions.push_back(std::move(g.data));
    for (auto& o : g.owners) result.owners.push_back(std::move(o));
  }
  co_return result;
}

}  // namespace silt::handlers
