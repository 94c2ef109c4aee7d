#include "handlers/dispatch.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "base/endian.h"
#include "handlers/handlers.h"
#include "protocol/request_header.h"

namespace silt::handlers {

template <typename Resp>
net::response encode_response(const protocol::parsed_request_header& h, const Resp& r,
                              size_t zero_copy_threshold) {
  const int16_t version = h.header.request_api_version;
  const int16_t header_version =
      protocol::response_header_version(h.header.request_api_key, version);
  protocol::writer w(r.encoded_size(version) + 16);
  w.set_zero_copy_threshold(zero_copy_threshold);
  w.int32(0);  // size, patched below
  w.int32(h.header.correlation_id);
  if (header_version >= 1) w.uvarint(0);  // no tagged fields
  r.encode(w, version);
  net::response out;
  if (!w.ok()) return net::response::close_connection();
  out.segments = w.segments();
  out.bytes = std::move(w.buffer());
  base::store_be<int32_t>(out.bytes.data(), static_cast<int32_t>(out.size() - 4));
  return out;
}

namespace {

using steady = std::chrono::steady_clock;

// Who a request's quotas are looked up for: its principal's name and its client id.
std::string_view quota_user(const net::request& raw) {
  return raw.identity != nullptr ? std::string_view(raw.identity->who.name) : "ANONYMOUS";
}
std::string_view quota_client(const net::request& raw) {
  const auto& id = raw.header.header.client_id;
  return id ? std::string_view(*id) : std::string_view();
}
int64_t steady_ms(steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// When a request's handling starts, for request_percentage: read only while such quotas exist.
steady::time_point request_start(const context& ctx) {
  return ctx.quotas.enabled(quota_type::request) ? steady::now() : steady::time_point{};
}

// The throttle time a request's handling from `start` earns under request_percentage (Kafka's
// ClientRequestQuotaManager: the time as a percentage of one thread for a second), less
// `parked`, time it waited with nothing to do (a fetch's long poll).
int32_t request_throttle(context& ctx, const net::request& raw, steady::time_point start,
                         std::chrono::microseconds parked = {}) {
  if (start == steady::time_point{} || !ctx.quotas.enabled(quota_type::request)) return 0;
  const auto now = steady::now();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - start - parked);
  const double percent = static_cast<double>(std::max<int64_t>(ns.count(), 0)) * 1e-7;
  return ctx.quotas.record(quota_type::request, quota_user(raw), quota_client(raw), percent,
                           steady_ms(now));
}

// Puts a throttle time into a response that has the field (the larger one wins).
template <typename Resp>
void add_throttle(Resp& resp, int32_t ms) {
  if constexpr (requires { resp.throttle_time_ms; }) {
    resp.throttle_time_ms = std::max(resp.throttle_time_ms, ms);
  }
}

// Requests exempt from request_percentage, as in Kafka: those a client needs before it can
// learn of a throttle (ApiVersions, the SASL exchange).
constexpr bool exempt_from_request_quota(int16_t api_key) {
  return api_key == protocol::api_versions_request::api_key ||
         api_key == protocol::sasl_handshake_request::api_key ||
         api_key == protocol::sasl_authenticate_request::api_key;
}

// Decodes the request body at its version, runs the handler and encodes what it returns.
// A body that does not decode closes the connection, as Kafka does. A request throttled under
// request_percentage is answered with its throttle time, and its connection muted for it.
template <typename Req, typename Fn>
asio::awaitable<net::response> serve(context& ctx, net::request& raw, Fn fn) {
  const int16_t version = raw.header.header.request_api_version;
  Req req;
  protocol::reader r(raw.body());
  req.decode(r, version);
  if (!r.ok()) co_return net::response::close_connection();
  const auto start =
      exempt_from_request_quota(Req::api_key) ? steady::time_point{} : request_start(ctx);
  auto resp = co_await fn(ctx, raw, req);
  const int32_t throttle = request_throttle(ctx, raw, start);
  add_throttle(resp, throttle);
  auto out = encode_response(raw.header, resp);
  out.throttle = std::chrono::milliseconds(throttle);
  co_return out;
}

// The same on the blocking pool, for APIs whose handlers use the metadata store (a
// transaction, an fsync or a database round trip each): network threads never wait on it.
template <typename Req, typename Fn>
asio::awaitable<net::response> serve_blocking(context& ctx, net::request& raw, Fn fn) {
  co_return co_await asio::co_spawn(ctx.blocking, serve<Req>(ctx, raw, fn), asio::use_awaitable);
}

}  // namespace

asio::awaitable<net::response> dispatcher::handle(net::request req) {
  const int16_t key = req.header.header.request_api_key;
  const int16_t version = req.header.header.request_api_version;
  const api_range* range = find_supported(key);
  if (key == protocol::api_versions_request::api_key &&
      (range == nullptr || version > range->max_version)) {
    // A client newer than the broker: answer at v0 with UNSUPPORTED_VERSION and the
    // ApiVersions range, so that it retries at a version both know (KIP-511; Kafka lists
    // only ApiVersions itself here).
    protocol::api_versions_response resp;
    resp.error_code = static_cast<int16_t>(protocol::error_code::unsupported_version);
    if (range != nullptr)
      resp.api_keys.push_back({key, range->min_version, range->max_version, {}});
    auto h = req.header;
    h.header.request_api_version = 0;
    co_return encode_response(h, resp);
  }
  if (range == nullptr || version < range->min_version || version > range->max_version) {
    co_return net::response::close_connection();
  }
  context& c = ctx_;
  switch (key) {
    case protocol::produce_request::api_key: {
      const int16_t v = version;
      protocol::produce_request pr;
      protocol::reader r(req.body());
      pr.decode(r, v);
      if (!r.ok()) co_return net::response::close_connection();
      const bool acks0 = pr.acks == 0;
      // producer_byte_rate counts the request's bytes, as Kafka does, before it is handled.
      int32_t throttle = 0;
      if (c.quotas.enabled(quota_type::produce)) {
        throttle =
            c.quotas.record(quota_type::produce, quota_user(req), quota_client(req),
                            static_cast<double>(req.frame->size()), steady_ms(steady::now()));
      }
      const auto start = request_start(c);
      auto resp = co_await handle_produce(c, req, pr);
      if (acks0) {
        // No answer for acks=0; an error closes the connection so the client notices. A
        // throttle still mutes the connection (Kafka records no request time for acks=0).
        for (const auto& t : resp.responses) {
          for (const auto& p : t.partition_responses) {
            if (p.error_code != 0) co_return net::response::close_connection();
          }
        }
        auto none = net::response::none();
        none.throttle = std::chrono::milliseconds(throttle);
        co_return none;
      }
      throttle = std::max(throttle, request_throttle(c, req, start));
      add_throttle(resp, throttle);
      auto out = encode_response(req.header, resp);
      out.throttle = std::chrono::milliseconds(throttle);
      co_return out;
    }
    case protocol::fetch_request::api_key: {
      protocol::fetch_request fr;
      protocol::reader r(req.body());
      fr.decode(r, version);
      if (!r.ok()) co_return net::response::close_connection();
      // Decoded: its bytes go back before it waits in a long poll, so that parked fetches
      // never hold other connections' reads up (queued.max.request.bytes).
      req.release_frame();
      // A consumer under consumer_byte_rate fetches at most what its quota allows over the
      // quota's whole span, as Kafka bounds it, so that one response never earns a throttle
      // of minutes.
      const bool fetch_quota = c.quotas.enabled(quota_type::fetch) && fr.replica_id < 0;
      if (fetch_quota) {
        if (auto most =
                c.quotas.max_in_window(quota_type::fetch, quota_user(req), quota_client(req))) {
          fr.max_bytes = static_cast<int32_t>(
              std::clamp(*most, 1.0, static_cast<double>(std::max(fr.max_bytes, 1))));
        }
      }
      const auto start = request_start(c);
      auto result = co_await handle_fetch(c, req, fr);
      int32_t throttle = request_throttle(c, req, start, result.parked);
      add_throttle(result.response, throttle);
      auto out = encode_response(req.header, result.response, 4096);
      if (fetch_quota) {
        // consumer_byte_rate counts the response's bytes. Kafka answers a throttled fetch with
        // an empty response and takes its bytes back; Silt sends the data it read (its fetch
        // session already moved past it) and mutes the connection for the throttle time.
        const int32_t bytes_throttle =
            c.quotas.record(quota_type::fetch, quota_user(req), quota_client(req),
                            static_cast<double>(out.size()), steady_ms(steady::now()));
        if (bytes_throttle > throttle) {
          throttle = bytes_throttle;
          result.response.throttle_time_ms = std::max(result.response.throttle_time_ms, throttle);
          out = encode_response(req.header, result.response, 4096);
        }
      }
      out.owners = std::move(result.owners);
      out.throttle = std::chrono::milliseconds(throttle);
      co_return out;
    }
    case protocol::api_versions_request::api_key:
      co_return co_await serve<protocol::api_versions_request>(c, req, handle_api_versions);
    case protocol::describe_acls_request::api_key:
      co_return co_await serve<protocol::describe_acls_request>(c, req, handle_describe_acls);
    case protocol::create_acls_request::api_key:
      co_return co_await serve_blocking<protocol::create_acls_request>(c, req, handle_create_acls);
    case protocol::delete_acls_request::api_key:
      co_return co_await serve_blocking<protocol::delete_acls_request>(c, req, handle_delete_acls);
    case protocol::sasl_handshake_request::api_key:
      co_return co_await serve<protocol::sasl_handshake_request>(c, req, handle_sasl_handshake);
    case protocol::sasl_authenticate_request::api_key:
      co_return co_await serve<protocol::sasl_authenticate_request>(c, req,
                                                                    handle_sasl_authenticate);
    case protocol::metadata_request::api_key:
      co_return co_await serve<protocol::metadata_request>(c, req, handle_metadata);
    case protocol::list_offsets_request::api_key:
      co_return co_await serve<protocol::list_offsets_request>(c, req, handle_list_offsets);
    case protocol::init_producer_id_request::api_key:
      co_return co_await serve_blocking<protocol::init_producer_id_request>(
          c, req, handle_init_producer_id);
    case protocol::offset_for_leader_epoch_request::api_key:
      co_return co_await serve_blocking<protocol::offset_for_leader_epoch_request>(
          c, req, handle_offset_for_leader_epoch);
    case protocol::delete_records_request::api_key:
      co_return co_await serve_blocking<protocol::delete_records_request>(c, req,
                                                                          handle_delete_records);
    case protocol::create_topics_request::api_key:
      co_return co_await serve_blocking<protocol::create_topics_request>(c, req,
                                                                         handle_create_topics);
    case protocol::delete_topics_request::api_key:
      co_return co_await serve_blocking<protocol::delete_topics_request>(c, req,
                                                                         handle_delete_topics);
    case protocol::create_partitions_request::api_key:
      co_return co_await serve_blocking<protocol::create_partitions_request>(
          c, req, handle_create_partitions);
    case protocol::describe_configs_request::api_key:
      co_return co_await serve<protocol::describe_configs_request>(c, req, handle_describe_configs);
    case protocol::alter_configs_request::api_key:
      co_return co_await serve_blocking<protocol::alter_configs_request>(c, req,
                                                                         handle_alter_configs);
    case protocol::incremental_alter_configs_request::api_key:
      co_return co_await serve_blocking<protocol::incremental_alter_configs_request>(
          c, req, handle_incremental_alter_configs);
    case protocol::alter_partition_reassignments_request::api_key:
      co_return co_await serve_blocking<protocol::alter_partition_reassignments_request>(
          c, req, handle_alter_partition_reassignments);
    case protocol::list_partition_reassignments_request::api_key:
      co_return co_await serve<protocol::list_partition_reassignments_request>(
          c, req, handle_list_partition_reassignments);
    case protocol::describe_cluster_request::api_key:
      co_return co_await serve<protocol::describe_cluster_request>(c, req, handle_describe_cluster);
    case protocol::describe_topic_partitions_request::api_key:
      co_return co_await serve<protocol::describe_topic_partitions_request>(
          c, req, handle_describe_topic_partitions);
    case protocol::describe_client_quotas_request::api_key:
      co_return co_await serve<protocol::describe_client_quotas_request>(
          c, req, handle_describe_client_quotas);
    case protocol::alter_client_quotas_request::api_key:
      co_return co_await serve_blocking<protocol::alter_client_quotas_request>(
          c, req, handle_alter_client_quotas);
    case protocol::describe_user_scram_credentials_request::api_key:
      co_return co_await serve<protocol::describe_user_scram_credentials_request>(
          c, req, handle_describe_user_scram_credentials);
    case protocol::alter_user_scram_credentials_request::api_key:
      co_return co_await serve_blocking<protocol::alter_user_scram_credentials_request>(
          c, req, handle_alter_user_scram_credentials);
    case protocol::offset_commit_request::api_key:
      co_return co_await serve<protocol::offset_commit_request>(c, req, handle_offset_commit);
    case protocol::offset_fetch_request::api_key:
      co_return co_await serve<protocol::offset_fetch_request>(c, req, handle_offset_fetch);
    case protocol::find_coordinator_request::api_key:
      co_return co_await serve<protocol::find_coordinator_request>(c, req, handle_find_coordinator);
    case protocol::join_group_request::api_key:
      co_return co_await serve<protocol::join_group_request>(c, req, handle_join_group);
    case protocol::heartbeat_request::api_key:
      co_return co_await serve<protocol::heartbeat_request>(c, req, handle_heartbeat);
    case protocol::leave_group_request::api_key:
      co_return co_await serve<protocol::leave_group_request>(c, req, handle_leave_group);
    case protocol::sync_group_request::api_key:
      co_return co_await serve<protocol::sync_group_request>(c, req, handle_sync_group);
    case protocol::describe_groups_request::api_key:
      co_return co_await serve<protocol::describe_groups_request>(c, req, handle_describe_groups);
    case protocol::list_groups_request::api_key:
      co_return co_await serve<protocol::list_groups_request>(c, req, handle_list_groups);
    case protocol::delete_groups_request::api_key:
      co_return co_await serve<protocol::delete_groups_request>(c, req, handle_delete_groups);
    case protocol::offset_delete_request::api_key:
      co_return co_await serve<protocol::offset_delete_request>(c, req, handle_offset_delete);
    case protocol::consumer_group_heartbeat_request::api_key:
      co_return co_await serve<protocol::consumer_group_heartbeat_request>(
          c, req, handle_consumer_group_heartbeat);
    case protocol::consumer_group_describe_request::api_key:
      co_return co_await serve<protocol::consumer_group_describe_request>(
          c, req, handle_consumer_group_describe);
    default:
      co_return net::response::close_connection();
  }
}

}  // namespace silt::handlers
