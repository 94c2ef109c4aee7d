// Produce (key 0): validates each partition's record batches, assigns offsets, appends them
// to the partition's stream without copying them out of the request, and answers once they
// are durable in the WAL (acks 1 and all; acks 0 gets no answer).
//
// Checks, as Kafka's LogValidator does for message format v2: whole batches of magic 2 with
// a valid CRC, a record count matching the offset range, no batch above max.message.bytes,
// timestamps within message.timestamp.before/after.max.ms of now for CreateTime. The records
// of each batch are walked, decompressed first when the batch is compressed (into a scratch
// buffer that holds one batch's records at a time): exactly the counted records, each
// well-formed and filling its length, offset deltas 0, 1, ... in order, each record's
// timestamp in range, nothing after the last. What is appended is still the client's batch
// as it came, compressed or not. LogAppendTime topics get the broker's clock written into
// each batch. Idempotent batches go through producer_state.
//
// ACLs, as Kafka's KafkaApis.handleProduceRequest: a request carrying a transactional batch
// needs TRANSACTIONAL_ID:WRITE on its transactional_id (refused: every partition
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, nothing written); then each topic needs TOPIC:WRITE
// (refused: its partitions TOPIC_AUTHORIZATION_FAILED, whether the topic exists or not). Checked
// once per topic, not per partition. No CLUSTER:IDEMPOTENT_WRITE here: since Kafka 2.8
// InitProducerId checks it.
#include <algorithm>
#include <atomic>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "base/clock.h"
#include "base/endian.h"
#include "handlers/access.h"
#include "handlers/handlers.h"
#include "handlers/offsets_topic.h"
#include "protocol/record_batch.h"

namespace silt::handlers {

namespace {

using protocol::error_code;
using protocol::produce_response;
using partition_response = produce_response::PartitionProduceResponse;

// One partition's batches, checked and ready to append.
struct checked {
  partition_response* out = nullptr;
  topic_entry_ptr topic;
  base::stream_id stream_id{};
  std::span<uint8_t> records;
  bool idempotent = false;
  protocol::record_batch_header first;  // the (single) idempotent batch's header
  int32_t record_count = 0;
  // The partition as the request found it on arrival: served here, at this epoch.
  bool arrived_served = false;
  base::leader_epoch arrival_epoch{};
};

// A compressed batch may decompress to at most this much. Kafka streams records and sets no
// bound; a client's batch holds what its producer buffered (the Java producer's batch.size
// counts compressed bytes), far below this, and a batch that expands further is a
// decompression bomb, refused with MESSAGE_TOO_LARGE before it takes more memory.
constexpr size_t max_decompressed_batch_bytes = size_t{64} << 20;
// All the compressed batches of one request may decompress to at most this many times the
// request's size (and at least max_decompressed_batch_bytes): a request of small batches that
// each expand to the batch limit cannot make the broker decompress gigabytes.
constexpr size_t max_request_expansion = 32;
// A request with this many bytes of compressed batches or more is checked on the blocking
// pool: decompressing it takes long enough to hold up the network thread's other connections.
constexpr size_t off_thread_compressed_bytes = size_t{1} << 20;

// The partitions a request names more than once, sorted (none: no allocation).
std::vector<std::pair<std::string_view, int32_t>> partitions_named_twice(
    const protocol::produce_request& req) {
  size_t entries = 0;
  for (const auto& t : req.topic_data) entries += t.partition_data.size();
  if (entries < 2) return {};
  std::vector<std::pair<std::string_view, int32_t>> all;
  all.reserve(entries);
  for (const auto& t : req.topic_data) {
    for (const auto& pd : t.partition_data) all.emplace_back(t.name, pd.index);
  }
  std::sort(all.begin(), all.end());
  std::vector<std::pair<std::string_view, int32_t>> twice;
  for (size_t i = 1; i < all.size(); ++i) {
    if (all[i] == all[i - 1] && (twice.empty() || twice.back() != all[i])) twice.push_back(all[i]);
  }
  return twice;
}

// The bytes of compressed batches in a request's partitions (read from their first batch's
// attributes; what does not parse is left to the checks).
size_t compressed_bytes(const protocol::produce_request& req) {
  size_t n = 0;
  for (const auto& t : req.topic_data) {
    for (const auto& pd : t.partition_data) {
      if (!pd.records) continue;
      const auto bytes = pd.records->bytes();
      constexpr size_t attributes_at = 21;
      if (bytes.size() <= attributes_at + 1) continue;
      const auto attributes = base::load_be<int16_t>(bytes.data() + attributes_at);
      if ((attributes & 0x7) != 0) n += bytes.size();
    }
  }
  return n;
}

// Whether the first batch of some partition is transactional (Kafka's
// RequestUtils.hasTransactionalRecords; what does not parse is left to the checks).
bool has_transactional_records(const protocol::produce_request& req) {
  for (const auto& t : req.topic_data) {
    for (const auto& pd : t.partition_data) {
      if (!pd.records) continue;
      const auto bytes = pd.records->bytes();
      constexpr size_t attributes_at = 21;
      if (bytes.size() <= attributes_at + 1) continue;
      const auto attributes = base::load_be<int16_t>(bytes.data() + attributes_at);
      if ((attributes & protocol::record_batch_header::transactional_flag) != 0) return true;
    }
  }
  return false;
}

void set_error(partition_response& p, error_code e, std::string message = {}) {
  p.error_code = static_cast<int16_t>(e);
  p.base_offset = no_offset;
  if (!message.empty()) p.error_message = std::move(message);
}

// What is wrong with record `record` of a partition's batch.
std::string record_message(int32_t record, std::string_view what) {
  return "record " + std::to_string(record) + ": " + std::string(what);
}

// Whether a record's timestamp is outside message.timestamp.before/after.max.ms of `now`
// (LogValidator.validateTimestamp: -1, no timestamp, is always accepted).
bool timestamp_out_of_range(const config::topic_config& cfg, int64_t timestamp, int64_t now) {
  if (timestamp == -1) return false;
  // The distance in uint64_t: it cannot overflow whatever the timestamp.
  if (timestamp > now) {
    return static_cast<uint64_t>(timestamp) - static_cast<uint64_t>(now) >
           static_cast<uint64_t>(std::max<int64_t>(cfg.message_timestamp_after_max_ms, 0));
  }
  return static_cast<uint64_t>(now) - static_cast<uint64_t>(timestamp) >
         static_cast<uint64_t>(std::max<int64_t>(cfg.message_timestamp_before_max_ms, 0));
}

// Kafka's message for a record without a key produced to a compacted topic, before the topic
// partition.
constexpr const char* kNoKeyMessage =
    "Compacted topic cannot accept message without key in topic partition ";

// Walks the records of one batch (decompressing them into `scratch` if need be), checking what
// LogValidator checks of each record a client produces. Returns none or the partition's error.
error_code validate_records(const config::topic_config& cfg, const protocol::record_batch& b,
                            int64_t now, std::vector<uint8_t>& scratch, size_t& decompress_left,
                            std::string& message, int32_t& no_key_record) {
  const auto& h = b.header;
  if (h.codec() != protocol::compression_codec::none && decompress_left == 0) {
    message = "the request's compressed records decompress to more than its limit in all";
    return error_code::message_too_large;
  }
  auto section = protocol::records_section(b, scratch,
                                           std::min(max_decompressed_batch_bytes, decompress_left));
  if (section && h.codec() != protocol::compression_codec::none) {
    decompress_left -= std::min(decompress_left, section->size());
  }
  if (!section) {
    const std::string codec(protocol::compression_codec_name(h.codec()));
    switch (section.error()) {
      case protocol::batch_error::unknown_codec:
        message = "unknown compression codec id " + std::to_string(static_cast<int>(h.codec()));
        break;
      case protocol::batch_error::decompressed_too_large:
        message = "the " + codec + " records decompress to more than " +
                  std::to_string(max_decompressed_batch_bytes) + " bytes";
        break;
      default:
        message = "the " + codec + " records do not decompress";
        break;
    }
    return protocol::to_error_code(section.error());
  }
  const bool create_time = cfg.message_timestamp_type == config::timestamp_type::create_time;
  protocol::record_walker walker(*section, h.records_count);
  for (int32_t i = 0;; ++i) {
    auto next = walker.next();
    if (!next) {
      message = record_message(next.error().index, next.error().what);
      return protocol::to_error_code(next.error().error);
    }
    if (!*next) break;
    const protocol::record_view& r = **next;
    // Consumers take base_offset + offset_delta as a record's offset and the client's batch
    // is stored as it is, so the deltas must be 0, 1, ... (Kafka stores an uncompressed batch
    // with other deltas as sent, and rebuilds a compressed one).
    if (cfg.compact && !r.key) {
      // LogValidator.validateKey (the caller adds the partition and the record's index).
      message = kNoKeyMessage;
      no_key_record = i;
      return error_code::invalid_record;
    }
    if (r.offset_delta != i) {
      message = record_message(
          i, "offset delta " + std::to_string(r.offset_delta) + ", expected " + std::to_string(i));
      return error_code::invalid_record;
    }
    if (create_time) {
      // Java's long arithmetic: deltas wrap. A batch marked log-append-time gives every record
      // its max timestamp.
      const int64_t timestamp =
          h.log_append_time() ? h.max_timestamp
                              : static_cast<int64_t>(static_cast<uint64_t>(h.base_timestamp) +
                                                     static_cast<uint64_t>(r.timestamp_delta));
      if (timestamp_out_of_range(cfg, timestamp, now)) {
        message = record_message(i, "timestamp " + std::to_string(timestamp) +
                                        " is out of range: it must be within "
                                        "message.timestamp.before.max.ms and "
                                        "message.timestamp.after.max.ms of the broker's clock");
        return error_code::invalid_timestamp;
      }
    }
  }
  return error_code::none;
}

// Validates the batches of one partition and rewrites what the broker owns in them (leader
// epoch; max timestamp and CRC for LogAppendTime). Returns none or the partition's error.
error_code validate(const config::topic_config& cfg, std::span<uint8_t> records, int64_t now,
                    std::vector<uint8_t>& scratch, size_t& decompress_left, checked& c,
                    std::string& message, int32_t& no_key_record) {
  if (records.empty()) return error_code::invalid_record;
  protocol::batch_reader reader(records);
  int batches = 0;
  for (;;) {
    auto next = reader.next();
    if (!next) return protocol::to_error_code(next.error());
    if (!*next) break;
    const auto& b = **next;
    const auto& h = b.header;
    if (++batches > 1) {
      // ProduceRequest.validateRecords: from version 3 on (Silt serves no older ones).
      message = "a produce request carries exactly one record batch per partition";
      return error_code::invalid_record;
    }
    if (b.bytes.size() > static_cast<size_t>(std::max(cfg.max_message_bytes, 0))) {
      message = "the record batch is " + std::to_string(b.bytes.size()) +
                " bytes, larger than max.message.bytes " + std::to_string(cfg.max_message_bytes);
      return error_code::message_too_large;
    }
    if (h.records_count <= 0 || h.last_offset_delta < 0 ||
        static_cast<int64_t>(h.last_offset_delta) + 1 != h.records_count) {
      message = "inconsistent batch offset range and record count";
      return error_code::invalid_record;
    }
    c.record_count = h.records_count;
    if (h.is_control()) {
      message = "clients may not produce control batches";
      return error_code::invalid_record;
    }
    if (h.is_transactional()) {
      message = "transactions are not supported yet";
      return error_code::invalid_record;
    }
    if (h.producer_id >= 0) {
      if (h.producer_epoch < 0 || h.base_sequence < 0) {
        message = "an idempotent batch carries an epoch and a sequence";
        return error_code::invalid_record;
      }
      c.idempotent = true;
      c.first = h;
    }
    const error_code records_error =
        validate_records(cfg, b, now, scratch, decompress_left, message, no_key_record);
    if (records_error != error_code::none) return records_error;
    auto* p = const_cast<uint8_t*>(b.bytes.data());
    const std::span<uint8_t> mutable_batch(p, b.bytes.size());
    if (cfg.message_timestamp_type == config::timestamp_type::log_append_time) {
      const auto attributes =
          static_cast<int16_t>(h.attributes | protocol::record_batch_header::log_append_time_flag);
      base::store_be<int16_t>(p + 21, attributes);
      base::store_be<int64_t>(p + 35, now);
      protocol::update_crc(mutable_batch);
    } else {
      if (h.max_timestamp > now && h.max_timestamp - now > cfg.message_timestamp_after_max_ms) {
        message = "timestamp " + std::to_string(h.max_timestamp) +
                  " is more than message.timestamp.after.max.ms ahead of the broker's clock";
        return error_code::invalid_timestamp;
      }
      if (h.base_timestamp >= 0 && h.base_timestamp < now &&
          now - h.base_timestamp > cfg.message_timestamp_before_max_ms) {
        message = "timestamp " + std::to_string(h.base_timestamp) +
                  " is more than message.timestamp.before.max.ms behind the broker's clock";
        return error_code::invalid_timestamp;
      }
    }
  }
  return error_code::none;
}

// What became of one partition's batch.
enum class outcome : uint8_t {
  settled,   // answered already: an error, or a duplicate of a durable batch
  appended,  // in the WAL, durable or not yet
  durable,   // the WAL write ended well
  failed,    // the WAL write failed: nothing of it is left
};

// The appends of one produce. The WAL thread records each write's end here and the last one
// wakes the handler; shared, so that a handler that stopped waiting (its timeout, shutdown)
// leaves late callbacks somewhere to write.
struct pending {
  pending(data_waiters::waiter_ptr w, size_t n) : waiter(std::move(w)), outcomes(n) {}
  data_waiters::waiter_ptr waiter;  // woken by the last write
  std::atomic<int> remaining{1};    // 1 for the handler itself until it has issued everything
  std::vector<std::atomic<outcome>> outcomes;
  void finish_one() {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) waiter->wake();
  }
};

// Whether a partition's batch went on (appended, or answered) or must wait: for room in the
// WAL, or for a batch in flight that this one retries.
// load: the stream's producer state is not in memory (forgotten since it was loaded: another
// broker served the stream meanwhile); the caller loads it on the blocking pool and tries again.
enum class attempt : uint8_t { done, wait, load };

// The first idempotent batch of a partition since the start, or since another broker served it:
// its producer state is read (registry, and a replay that may read objects) on the blocking
// pool.
// False when it could not be read (the object store failing): see refuse_unloaded().
asio::awaitable<bool> load_producers(context& ctx, base::stream_id stream) {
  co_return co_await asio::co_spawn(
      ctx.blocking,
      [&ctx, stream]() -> asio::awaitable<bool> { co_return ctx.producers.load(stream); },
      asio::use_awaitable);
}

// An idempotent batch of a partition whose producer state could not be read: judged without
// the producers' last batches, a retry of one of them would be OUT_OF_ORDER_SEQUENCE_NUMBER
// (fatal to the producer) instead of a duplicate. Refused retriably, like a partition not yet
// served, until the state can be read.
void refuse_unloaded(context& ctx, checked& c) {
  set_error(*c.out, error_code::not_leader_or_follower,
            "the producer state of this partition cannot be read yet (object store): retry");
  ctx.producers.note_refused(c.stream_id, c.first);
}

// Notes whether the partition is served here as the request arrives, and at which epoch.
void note_arrival(context& ctx, checked& c) {
  const auto offs = ctx.store.offsets(c.stream_id);
  c.arrived_served = !offs.fenced && !offs.moving;
  c.arrival_epoch = offs.epoch;
}

// Appends the batch of `c` to its stream: its base offset, or what the attempt came to
// (wait: no room in the WAL; done: refused, with the error set).
tl::expected<base::offset, attempt> append_batch(context& ctx, net::request& raw,
                                                 const std::shared_ptr<pending>& p, size_t i,
                                                 checked& c) {
  auto on_durable = [p, &ctx, i, stream = c.stream_id, idempotent = c.idempotent,
                     h = c.first](tl::expected<base::offset, storage::stream_error> r) {
    if (idempotent) {
      ctx.producers.finish(stream, h, r ? std::optional<base::offset>(*r) : std::nullopt);
    }
    p->outcomes[i].store(r ? outcome::durable : outcome::failed, std::memory_order_release);
    // Long polls of the stream, and retries waiting for this batch.
    ctx.waiters.notify(stream);
    p->finish_one();
  };
  p->remaining.fetch_add(1, std::memory_order_relaxed);
  // Before the append: its callback may run before append() returns.
  p->outcomes[i].store(outcome::appended, std::memory_order_relaxed);
  auto base = ctx.store.append(c.stream_id, raw.frame, c.records, on_durable);
  if (!base) {
    p->outcomes[i].store(outcome::settled, std::memory_order_relaxed);
    p->finish_one();
    switch (base.error()) {
      case storage::stream_error::wal_full:
        return tl::make_unexpected(attempt::wait);
      case storage::stream_error::too_large:
        set_error(*c.out, error_code::message_too_large,
                  "the record batch is larger than the WAL (wal.capacity.bytes) can hold");
        return tl::make_unexpected(attempt::done);
      case storage::stream_error::fenced:
        set_error(*c.out, error_code::not_leader_or_follower,
                  "another broker has taken this partition");
        if (c.idempotent) ctx.producers.note_refused(c.stream_id, c.first);
        return tl::make_unexpected(attempt::done);
      default:
        set_error(*c.out, error_code::kafka_storage_error);
        return tl::make_unexpected(attempt::done);
    }
  }
  c.out->base_offset = base->value();
  auto& counters = *c.topic->counters;
  counters.bytes_in.fetch_add(c.records.size(), std::memory_order_relaxed);
  counters.messages_in.fetch_add(static_cast<uint64_t>(c.record_count), std::memory_order_relaxed);
  return *base;
}

attempt try_append(context& ctx, net::request& raw, const std::shared_ptr<pending>& p, size_t i,
                   checked& c) {
  if (!c.idempotent) {
    const auto appended = append_batch(ctx, raw, p, i, c);
    return appended ? attempt::done : appended.error();
  }
  {
    // The producer state's check, the append and begin() are one step for the stream.
    base::lock_guard lock(ctx.producers.lock_for(c.stream_id));
    // Leadership before sequences, as Kafka: a batch refused while the partition moves leaves
    // a gap that the next batch must not be judged against (OUT_OF_ORDER_SEQUENCE_NUMBER).
    // Judged as of the request's arrival too: a producer pipelines, and of two requests that
    // arrived while the partition was not served here, the second must not be taken (and
    // found out of order) because the partition became served while the first was answered.
    if (const auto offs = ctx.store.offsets(c.stream_id); offs.fenced || offs.moving) {
      set_error(*c.out, error_code::not_leader_or_follower,
                offs.moving ? "this partition is moving to another broker"
                            : "another broker has taken this partition");
      ctx.producers.note_refused(c.stream_id, c.first);
      return attempt::done;
    } else if (!c.arrived_served || offs.epoch != c.arrival_epoch) {
      set_error(*c.out, error_code::not_leader_or_follower,
                "this partition changed hands after the request arrived");
      ctx.producers.note_refused(c.stream_id, c.first);
      return attempt::done;
    }
    // Not in memory (forgotten since loaded): read on the blocking pool, not here.
    const auto checked_batch = ctx.producers.check_if_loaded(c.stream_id, c.first);
    if (!checked_batch) return attempt::load;
    const auto& verdict = *checked_batch;
    switch (verdict.v) {
      case producer_state::verdict::reject:
        if (ctx.producers.retry_to_come(c.stream_id, c.first, verdict)) {
          // The gap is a batch refused (here, or by the previous leader) while the partition
          // changed hands: its retry comes first. OUT_OF_ORDER_SEQUENCE_NUMBER would be fatal
          // to librdkafka's producer, or make it bump its epoch and write its unacknowledged
          // batches again.
          set_error(*c.out, error_code::not_leader_or_follower,
                    "an earlier batch of this producer was refused, or has not arrived, since "
                    "this partition changed hands; it must be retried first");
          return attempt::done;
        }
        set_error(*c.out, verdict.error);
        return attempt::done;
      case producer_state::verdict::duplicate:
        // Producer state holds durable batches only: the first write is acknowledged truly.
        c.out->base_offset = verdict.duplicate.first_offset.value();
        return attempt::done;
      case producer_state::verdict::in_flight:
        return attempt::wait;
      case producer_state::verdict::append:
        break;
    }
    const auto appended = append_batch(ctx, raw, p, i, c);
    if (!appended) return appended.error();
    ctx.producers.begin(c.stream_id, c.first, *appended);
  }
  return attempt::done;
}

}  // namespace

// GCC 12 reports a mismatched operator new/delete pair in this coroutine's frame, which
// Boost.Asio allocates and frees with its own pair; a false positive that comes and goes with
// the frame's contents.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
asio::awaitable<protocol::produce_response> handle_produce(context& ctx, net::request& raw,
                                                           protocol::produce_request& req) {
  const int16_t version = raw.header.header.request_api_version;
  // Before anything can suspend: this request's place among the connection's produces.
  produce_turn turn(ctx.order, ctx.order.take(raw.connection_id));
  produce_response resp;
  resp.responses.reserve(req.topic_data.size());
  for (const auto& t : req.topic_data) {
    auto& rt = resp.responses.emplace_back();
    rt.name = t.name;
    rt.partition_responses.resize(t.partition_data.size());
    for (size_t i = 0; i < t.partition_data.size(); ++i) {
      rt.partition_responses[i].index = t.partition_data[i].index;
    }
  }
  const access a(ctx, raw);
  if (a.enabled() && has_transactional_records(req) &&
      !(req.transactional_id &&
        a.allowed(security::acl_operation::write, security::acl_resource_type::transactional_id,
                  *req.transactional_id))) {
    for (auto& rt : resp.responses) {
      for (auto& p : rt.partition_responses) {
        set_error(p, error_code::transactional_id_authorization_failed);
      }
    }
    co_return resp;
  }
  // Message format v0/v1 producers (Produce v0-2) are gone in Kafka 4.
  const bool bad_version = version < 3;
  const bool bad_acks = req.acks != 0 && req.acks != 1 && req.acks != -1;
  const int64_t now = base::now_ms();

  // A broker whose cluster lease may have lapsed takes no writes (the client finds the leader
  // again and retries).
  const bool member = ctx.can_acknowledge();
  std::vector<checked> work;
  // A partition named twice in one request: each time INVALID_REQUEST, nothing appended (its
  // batches would be checked, and decompressed, once per copy).
  const auto named_twice = partitions_named_twice(req);
  size_t decompress_left =
      std::max(max_decompressed_batch_bytes,
               max_request_expansion * (raw.frame != nullptr ? raw.frame->size() : 0));
  auto check_all = [&] {
    std::vector<uint8_t> scratch;  // decompressed records, one batch at a time
    for (size_t ti = 0; ti < req.topic_data.size(); ++ti) {
      const auto& t = req.topic_data[ti];
      auto topic = ctx.topic(t.name);
      if (topic) topic->counters->produce_requests.fetch_add(1, std::memory_order_relaxed);
      const bool may_write = a.topic(security::acl_operation::write, t.name);
      for (size_t pi = 0; pi < t.partition_data.size(); ++pi) {
        const auto& pd = t.partition_data[pi];
        auto& out = resp.responses[ti].partition_responses[pi];
        if (bad_version) {
          set_error(out, error_code::unsupported_version);
          continue;
        }
        if (!may_write) {
          set_error(out, error_code::topic_authorization_failed);
          continue;
        }
        if (bad_acks) {
          set_error(out, error_code::invalid_required_acks);
          continue;
        }
        if (!named_twice.empty() &&
            std::binary_search(named_twice.begin(), named_twice.end(),
                               std::pair<std::string_view, int32_t>(t.name, pd.index))) {
          set_error(out, error_code::invalid_request,
                    "partition " + std::to_string(pd.index) + " of " + t.name +
                        " is named more than once in the request");
          continue;
        }
        if (t.name == offsets_topic_name) {
          // As Kafka: only the group coordinator writes its internal topic.
          set_error(out, error_code::invalid_topic_exception,
                    "Cannot append to internal topic __consumer_offsets");
          continue;
        }
        const auto stream = stream_of(topic, pd.index);
        if (!stream) {
          set_error(out, error_code::unknown_topic_or_partition);
          continue;
        }
        if (!member) {
          set_error(out, error_code::not_leader_or_follower,
                    "this broker's cluster membership lease has lapsed");
          // Noted as the refusals of a moving partition are: a batch the producer pipelined
          // behind this one, arriving once the lease holds again, is then answered
          // NOT_LEADER_OR_FOLLOWER rather than OUT_OF_ORDER_SEQUENCE_NUMBER (fatal to
          // librdkafka's idempotent producer).
          if (pd.records) {
            protocol::batch_reader reader(pd.records->bytes());
            if (auto b = reader.next(); b && *b && (**b).header.producer_id >= 0) {
              ctx.producers.note_refused(*stream, (**b).header);
            }
          }
          continue;
        }
        if (req.transactional_id) {
          set_error(out, error_code::transactional_id_authorization_failed,
                    "transactions are not supported yet");
          continue;
        }
        checked c;
        c.out = &out;
        c.topic = topic;
        c.stream_id = *stream;
        note_arrival(ctx, c);
        if (pd.records) {
          // The records view points into the request frame, which this handler may modify.
          const auto bytes = pd.records->bytes();
          c.records = std::span<uint8_t>(const_cast<uint8_t*>(bytes.data()), bytes.size());
        }
        std::string message;
        int32_t no_key_record = -1;
        const error_code e = validate(topic->cfg, c.records, now, scratch, decompress_left, c,
                                      message, no_key_record);
        if (e != error_code::none) {
          if (no_key_record >= 0) {
            message += t.name + "-" + std::to_string(pd.index) + ".";
            out.record_errors.push_back({no_key_record, std::nullopt});
          }
          set_error(out, e, std::move(message));
          continue;
        }
        out.log_append_time_ms =
            topic->cfg.message_timestamp_type == config::timestamp_type::log_append_time ? now : -1;
        work.push_back(std::move(c));
      }
    }
  };
  if (compressed_bytes(req) >= off_thread_compressed_bytes) {
    // Long to decompress: on the blocking pool, then back on the connection's executor.
    // (Posting to the pool and awaiting that would resume here at once: a use_awaitable
    // completion runs on the coroutine's own executor.)
    co_await asio::co_spawn(
        ctx.blocking,
        [&check_all]() -> asio::awaitable<void> {
          check_all();
          co_return;
        },
        asio::use_awaitable);
  } else {
    check_all();
  }

  // Waits end by the request's timeout: for room in the WAL, for a batch in flight that a
  // retry matches, for durability. Partitions not written by then get REQUEST_TIMED_OUT.
  const int64_t deadline = now + std::max<int64_t>(req.timeout_ms, 0);
  const auto ex = co_await asio::this_coro::executor;
  auto p = std::make_shared<pending>(std::make_shared<data_waiters::waiter>(ex), work.size());
  // The connection's earlier produces append first (they may be waiting for room).
  co_await ctx.order.wait_turn(turn.ticket());
  for (size_t i = 0; i < work.size(); ++i) {
    auto& c = work[i];
    // (Only for a partition served here: state loaded before this broker serves the partition
    // would miss what the broker serving it writes meanwhile. Otherwise it is refused below.)
    if (c.idempotent && c.arrived_served && !ctx.producers.loaded(c.stream_id) &&
        !co_await load_producers(ctx, c.stream_id)) {
      refuse_unloaded(ctx, c);
      continue;
    }
    attempt first = try_append(ctx, raw, p, i, c);
    if (first == attempt::load) {
      if (!co_await load_producers(ctx, c.stream_id)) {
        refuse_unloaded(ctx, c);
        continue;
      }
      first = try_append(ctx, raw, p, i, c);
    }
    if (first == attempt::done) continue;
    for (;;) {
      // Subscribed before trying again, so that the wake-up cannot fall in between.
      auto w = ctx.waiters.subscribe(ex, {data_waiters::wal_room, c.stream_id});
      const attempt again = try_append(ctx, raw, p, i, c);
      if (again == attempt::done) {
        ctx.waiters.unsubscribe(w);
        break;
      }
      if (again == attempt::load) {
        ctx.waiters.unsubscribe(w);
        if (!co_await load_producers(ctx, c.stream_id)) {
          refuse_unloaded(ctx, c);
          break;
        }
        continue;
      }
      const int64_t left = deadline - base::now_ms();
      if (left <= 0 || ctx.stopping) {
        ctx.waiters.unsubscribe(w);
        set_error(*c.out, error_code::request_timed_out,
                  ctx.stopping ? "the broker is shutting down"
                               : "not written within the request's timeout (no room in the WAL, "
                                 "or an earlier attempt of this batch still being written)");
        break;
      }
      (void)co_await data_waiters::wait(w, std::chrono::milliseconds(left));
      ctx.waiters.unsubscribe(w);
    }
  }
  turn.release();  // appends issued: the connection's next produce may append
  p->finish_one();
  // Until every write has ended, the timeout, or shutdown: looked at every second, so that the
  // waiter need not be registered anywhere (no shared bookkeeping per produce).
  while (p->remaining.load(std::memory_order_acquire) > 0 && !ctx.stopping) {
    const int64_t left = deadline - base::now_ms();
    if (left <= 0) break;
    (void)co_await data_waiters::wait(p->waiter,
                                      std::chrono::milliseconds(std::min<int64_t>(left, 1000)));
  }
  // Durable in the WAL, but not acknowledged by a broker that may no longer own the
  // partitions; an idempotent producer's retry finds the batch, as with a lost reply.
  const bool still_member = ctx.can_acknowledge();
  for (size_t i = 0; i < work.size(); ++i) {
    auto& c = work[i];
    switch (p->outcomes[i].load(std::memory_order_acquire)) {
      case outcome::settled:
        break;
      case outcome::appended:
        set_error(*c.out, error_code::request_timed_out,
                  "the WAL write did not complete within the request's timeout");
        break;
      case outcome::failed:
        set_error(*c.out, error_code::kafka_storage_error, "the WAL write failed");
        break;
      case outcome::durable:
        if (!still_member) {
          set_error(*c.out, error_code::not_leader_or_follower,
                    "this broker's cluster membership lease lapsed before the write was "
                    "acknowledged");
        }
        break;
    }
    if (c.out->error_code == static_cast<int16_t>(error_code::not_leader_or_follower)) {
      point_to_leader(ctx, listener_of(raw), c.stream_id, c.out->current_leader,
                      resp.node_endpoints);
    }
    if (c.out->error_code == 0) {
      c.out->log_start_offset = ctx.store.offsets(c.stream_id).start_offset.value();
    } else {
      c.out->base_offset = no_offset;
    }
  }
  co_return resp;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace silt::handlers
