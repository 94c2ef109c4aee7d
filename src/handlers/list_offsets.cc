// ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3), earliest local (-4,
// the same as earliest: every offset is served), latest tiered (-5: none, as in Kafka without
// tiered storage), and by timestamp: the first offset whose record timestamp is at or after
// the target. Timestamp searches scan the partition's batches on the blocking pool (there is
// no time index yet; batches whose max timestamp is below the target are skipped unread).
//
// ACLs, as Kafka's KafkaApis.handleListOffsetRequest: TOPIC:DESCRIBE on each topic (not READ);
// a refused topic's partitions are answered TOPIC_AUTHORIZATION_FAILED (no offset, no
// timestamp) whether it exists or not, after the other topics.
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "handlers/access.h"
#include "handlers/handlers.h"
#include "handlers/offsets_topic.h"
#include "handlers/stream_scan.h"
#include "protocol/record_batch.h"

namespace silt::handlers {

namespace {

using protocol::error_code;

struct found {
  std::optional<base::offset> offset;  // none: no record matched
  int64_t timestamp = -1;
  bool read = true;  // false: the stream could not be read (the object store failing); set
                     // from scan_batches' result once the scan has ended
};

// Scans a stream for the first record with timestamp >= target (target >= 0), or for the
// record with the largest timestamp (target == -3, the first one of equals).
found scan(storage::stream_store& store, base::stream_id stream, int64_t target) {
  found best;
  // Records are walked in place: their headers, which a hostile producer may have made
  // millions of, are never decoded one by one.
  std::vector<uint8_t> scratch;
  best.read = scan_batches(store, stream, base::offset(0), [&](const protocol::record_batch& b) {
    const auto& h = b.header;
    const bool wanted = target >= 0 ? h.max_timestamp >= target : h.max_timestamp > best.timestamp;
    if (!wanted) return true;
    if (h.log_append_time()) {
      // Every record of a log-append-time batch carries the batch's max timestamp.
      best = {base::offset(h.base_offset), h.max_timestamp};
      return target < 0;
    }
    auto section = protocol::records_section(b, scratch, size_t{64} << 20);
    if (!section) return true;
    protocol::record_walker walker(*section, h.records_count);
    for (;;) {
      auto next = walker.next();
      if (!next || !*next) break;
      const protocol::record_view& rec = **next;
      const base::offset o(h.base_offset + rec.offset_delta);
      const int64_t ts = h.base_timestamp + rec.timestamp_delta;
      if (target >= 0 && ts >= target) {
        best = {o, ts};
        return false;
      }
      if (target < 0 && ts > best.timestamp) best = {o, ts};
    }
    return true;
  });
  return best;
}

}  // namespace

asio::awaitable<protocol::list_offsets_response> handle_list_offsets(
    context& ctx, const net::request& raw, const protocol::list_offsets_request& req) {
  protocol::list_offsets_response resp;
  const access a(ctx, raw);
  // The topics refused, answered last (none without ACLs).
  std::vector<const protocol::list_offsets_request::ListOffsetsTopic*> refused;
  // A partition named twice is answered once, with INVALID_REQUEST, as Kafka does.
  std::map<std::pair<std::string_view, int32_t>, int> asked;
  for (const auto& t : req.topics) {
    for (const auto& p : t.partitions) ++asked[{t.name, p.partition_index}];
  }
  for (const auto& t : req.topics) {
    if (!a.topic(security::acl_operation::describe, t.name)) {
      refused.push_back(&t);
      continue;
    }
    auto& rt = resp.topics.emplace_back();
    rt.name = t.name;
    auto topic = ctx.topic(t.name);
    for (const auto& p : t.partitions) {
      int& times = asked[{t.name, p.partition_index}];
      if (times == 0) continue;  // a duplicate, answered already
      auto& rp = rt.partitions.emplace_back();
      rp.partition_index = p.partition_index;
      if (times > 1) {
        times = 0;
        rp.error_code = static_cast<int16_t>(error_code::invalid_request);
        continue;
      }
      if (is_offsets_topic(ctx, t.name)) {
        const auto o = list_offsets_topic(ctx, p.partition_index, p.timestamp);
        rp.error_code = static_cast<int16_t>(o.error);
        rp.offset = o.offset;
        rp.timestamp = o.timestamp;
        rp.leader_epoch = o.leader_epoch;
        continue;
      }
      const auto known = stream_of(topic, p.partition_index);
      if (!known) {
        rp.error_code = static_cast<int16_t>(error_code::unknown_topic_or_partition);
        continue;
      }
      const base::stream_id stream = *known;
      const auto offs = ctx.store.offsets(stream);
      if (const auto e = check_leader(offs, p.current_leader_epoch); e != error_code::none) {
        rp.error_code = static_cast<int16_t>(e);
        continue;
      }
      rp.leader_epoch = offs.epoch.value();
      switch (p.timestamp) {
        case -1:  // latest
          rp.offset = offs.end_offset.value();
          break;
        case -2:  // earliest
        case -4:  // earliest local
          rp.offset = offs.start_offset.value();
          break;
        case -5:  // latest tiered: nothing is tiered in Kafka's sense
          rp.offset = no_offset;
          rp.leader_epoch = -1;
          break;
        default: {
          if (p.timestamp < -5) {
            rp.error_code = static_cast<int16_t>(error_code::invalid_request);
            break;
          }
          auto& store = ctx.store;
          const int64_t target = p.timestamp;
          const found f = co_await asio::co_spawn(
              ctx.blocking,
              [&store, stream, target]() -> asio::awaitable<found> {
                co_return scan(store, stream, target);
              },
              asio::use_awaitable);
          if (!f.read) {
            // Not "no such record": what could not be read may hold it. Retriable.
            rp.error_code = static_cast<int16_t>(error_code::kafka_storage_error);
            break;
          }
          rp.offset = f.offset ? f.offset->value() : no_offset;
          rp.timestamp = f.timestamp;
          if (!f.offset) rp.leader_epoch = -1;
          break;
        }
      }
    }
  }
  for (const auto* t : refused) {
    auto& rt = resp.topics.emplace_back();
    rt.name = t->name;
    for (const auto& p : t->partitions) {
      auto& rp = rt.partitions.emplace_back();
      rp.partition_index = p.partition_index;
      rp.error_code = static_cast<int16_t>(error_code::topic_authorization_failed);
    }
  }
  co_return resp;
}

}  // namespace silt::handlers
