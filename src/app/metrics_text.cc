#include "app/metrics_text.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <map>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <unistd.h>

#include "base/memory.h"
#include "base/prometheus.h"
#include "metadata/sql.h"
#include "net/frame_arena.h"
#include "protocol/generated/api_table.h"
#include "storage/object/metered_store.h"

namespace silt::app {
namespace {

using base::prometheus_writer;
using label = std::pair<std::string_view, std::string_view>;
using kind = prometheus_writer::type;

void requests(prometheus_writer& w, net::request_metrics& m) {
  struct api {
    std::string name;
    const net::request_metrics::api_timing* t;
  };
  std::vector<api> apis;
  for (int16_t key = 0; key <= net::request_metrics::max_key; ++key) {
    const auto* t = m.find(key);
    if (t == nullptr) continue;
    const auto* info = protocol::find_api(key);
    apis.push_back({info != nullptr ? std::string(info->name) : std::to_string(key), t});
  }
  w.family("kafka_network_requestmetrics_requests_total", kind::counter,
           "Requests handled, per API (Kafka's RequestMetrics RequestsPerSec).");
  for (const auto& a : apis) {
    const label l[] = {{"request", a.name}};
    w.sample("kafka_network_requestmetrics_requests_total", l,
             static_cast<double>(a.t->total.snapshot().count()));
  }
  using part = base::histogram net::request_metrics::api_timing::*;
  const std::array<std::tuple<std::string_view, part, std::string_view>, 4> parts{{
      {"kafka_network_requestmetrics_totaltime_seconds", &net::request_metrics::api_timing::total,
       "From a request's last byte read to its response's last byte written (TotalTimeMs)."},
      {"kafka_network_requestmetrics_localtime_seconds", &net::request_metrics::api_timing::handle,
       "Handling a request, the WAL write of a produce included (LocalTimeMs)."},
      {"kafka_network_requestmetrics_responsequeuetime_seconds",
       &net::request_metrics::api_timing::queue,
       "A response waiting behind its connection's earlier ones (ResponseQueueTimeMs)."},
      {"kafka_network_requestmetrics_responsesendtime_seconds",
       &net::request_metrics::api_timing::send, "Writing a response (ResponseSendTimeMs)."},
  }};
  for (const auto& [name, member, help] : parts) {
    w.family(name, kind::histogram, help);
    for (const auto& a : apis) {
      const label l[] = {{"request", a.name}};
      w.histogram(name, l, (a.t->*member).snapshot());
    }
  }
}

void topics(prometheus_writer& w, const handlers::context& ctx) {
  const auto all = ctx.topics();
  using counter = std::atomic<uint64_t> handlers::topic_counters::*;
  const std::array<std::tuple<std::string_view, counter, std::string_view>, 4> families{{
      {"kafka_server_brokertopicmetrics_bytesin_total", &handlers::topic_counters::bytes_in,
       "Record batch bytes appended, per topic (BytesInPerSec)."},
      {"kafka_server_brokertopicmetrics_messagesin_total", &handlers::topic_counters::messages_in,
       "Records appended, per topic (MessagesInPerSec)."},
      {"kafka_server_brokertopicmetrics_bytesout_total", &handlers::topic_counters::bytes_out,
       "Record batch bytes sent to fetchers, per topic (BytesOutPerSec)."},
      {"kafka_server_brokertopicmetrics_totalproducerequests_total",
       &handlers::topic_counters::produce_requests,
       "Produce requests naming the topic (TotalProduceRequestsPerSec)."},
  }};
  for (const auto& [name, member, help] : families) {
    w.family(name, kind::counter, help);
    for (const auto& t : all) {
      const label l[] = {{"topic", t->info->name}};
      w.sample(name, l, static_cast<double>((t->counters.get()->*member).load()));
    }
  }
}

void storage_metrics(prometheus_writer& w, node& broker) {
  auto& store = broker.ctx().store;
  const auto wal = store.wal_stats();
  w.single("silt_wal_appends_total", kind::counter, "Record batches made durable in the WAL.",
           static_cast<double>(wal.appends));
  w.single("silt_wal_writes_total", kind::counter, "WAL writes (group commits) completed.",
           static_cast<double>(wal.writes));
  w.single("silt_wal_write_bytes_total", kind::counter,
           "Bytes written to the WAL, padding included.", static_cast<double>(wal.write_bytes));
  w.single("silt_wal_held_writes_total", kind::counter,
           "WAL writes whose batch waited for more appends (wal.commit.delay.us).",
           static_cast<double>(wal.held));
  w.single("silt_wal_held_gathered_total", kind::counter,
           "Of the WAL writes that waited for more appends, those that gathered appends of "
           "later requests.",
           static_cast<double>(wal.held_gathered));
  w.single("silt_wal_failed_writes_total", kind::counter,
           "WAL writes that failed (each starts a new WAL epoch).",
           static_cast<double>(wal.failed_writes));
  w.family("silt_wal_write_seconds", kind::histogram,
           "A WAL write from its submission to its durability.");
  w.histogram("silt_wal_write_seconds", {}, wal.write_us);
  w.family("silt_wal_batch_wait_seconds", kind::histogram,
           "A WAL write from its first append to its submission (group commit).");
  w.histogram("silt_wal_batch_wait_seconds", {}, wal.batch_wait_us);

  const auto s = store.stats();
  w.single("kafka_server_brokertopicmetrics_remotecopylagbytes", kind::gauge,
           "Bytes durable in the WAL and not yet uploaded to the object store.",
           static_cast<double>(s.not_uploaded_bytes));
  w.single("silt_upload_lag_seconds", kind::gauge,
           "How long the oldest data not yet uploaded has waited since it was durable.",
           static_cast<double>(s.upload_lag.count()) / 1000.0);
  w.single("silt_uploads_total", kind::counter, "Uploads committed (objects of the WAL's data).",
           static_cast<double>(s.uploads));
  w.single("silt_uploaded_bytes_total", kind::counter, "Bytes uploaded.",
           static_cast<double>(s.uploaded_bytes));
  w.single("silt_compactions_total", kind::counter, "Compactions committed.",
           static_cast<double>(s.compactions));
  const auto cleaner = store.cleaner_stats();
  w.single("silt_log_cleaner_passes_total", kind::counter,
           "Compacted streams cleaned (passes of the log cleaner that rewrote a stream).",
           static_cast<double>(cleaner.passes));
  w.single("silt_log_cleaner_read_bytes_total", kind::counter,
           "Bytes of objects the log cleaner read.", static_cast<double>(cleaner.bytes_read));
  w.single("silt_log_cleaner_written_bytes_total", kind::counter,
           "Bytes of cleaned objects the log cleaner wrote.",
           static_cast<double>(cleaner.bytes_written));
  w.single("silt_log_cleaner_removed_records_total", kind::counter,
           "Records the log cleaner removed (older values of their key, expired tombstones).",
           static_cast<double>(cleaner.records_removed));
  w.single("silt_log_cleaner_failures_total", kind::counter,
           "Passes of the log cleaner that failed (retried after log.cleaner.backoff.ms).",
           static_cast<double>(cleaner.failures));
  w.single("silt_log_cache_bytes", kind::gauge, "Bytes in the log cache (recent data).",
           static_cast<double>(s.log_cache_bytes));
  w.family("silt_log_cache_reads_total", kind::counter,
           "Reads from an offset the log cache holds (hit) or below it (miss: an object read).");
  const label hit[] = {{"result", "hit"}};
  const label miss[] = {{"result", "miss"}};
  w.sample("silt_log_cache_reads_total", hit, static_cast<double>(s.log_cache_hits));
  w.sample("silt_log_cache_reads_total", miss, static_cast<double>(s.log_cache_misses));
  w.family("silt_block_cache_reads_total", kind::counter,
           "Object blocks found in the block cache (hit) or read from the object store (miss).");
  w.sample("silt_block_cache_reads_total", hit, static_cast<double>(s.block_cache_hits));
  w.sample("silt_block_cache_reads_total", miss, static_cast<double>(s.block_cache_misses));

  const auto& objects = broker.object_metrics();
  constexpr std::array ops{storage::store_operation::put, storage::store_operation::get,
                           storage::store_operation::head, storage::store_operation::remove,
                           storage::store_operation::list};
  std::array<storage::metered_store::operation_stats, ops.size()> stats;
  for (size_t i = 0; i < ops.size(); ++i) stats[i] = objects.stats(ops[i]);
  w.family("silt_object_store_requests_total", kind::counter,
           "Object store calls, per operation (each with its retries inside).");
  for (size_t i = 0; i < ops.size(); ++i) {
    const label l[] = {{"operation", storage::store_operation_name(ops[i])}};
    w.sample("silt_object_store_requests_total", l, static_cast<double>(stats[i].calls));
  }
  w.family("silt_object_store_errors_total", kind::counter,
           "Object store calls that failed after their retries, per operation and error.");
  for (size_t i = 0; i < ops.size(); ++i) {
    for (size_t e = 0; e < storage::store_error_count; ++e) {
      const label l[] = {
          {"operation", storage::store_operation_name(ops[i])},
          {"error", storage::store_error_name(static_cast<storage::store_error>(e))}};
      w.sample("silt_object_store_errors_total", l, static_cast<double>(stats[i].errors[e]));
    }
  }
  w.family("silt_object_store_bytes_total", kind::counter,
           "Bytes written (put) and read (get) by object store calls.");
  for (size_t i = 0; i < 2; ++i) {
    const label l[] = {{"operation", storage::store_operation_name(ops[i])}};
    w.sample("silt_object_store_bytes_total", l, static_cast<double>(stats[i].bytes));
  }
  w.family("silt_object_store_request_seconds", kind::histogram,
           "Object store calls from start to end, retries included, per operation.");
  for (size_t i = 0; i < ops.size(); ++i) {
    const label l[] = {{"operation", storage::store_operation_name(ops[i])}};
    w.histogram("silt_object_store_request_seconds", l, stats[i].latency_us);
  }
}

void groups(prometheus_writer& w, const handlers::context& ctx) {
  std::map<std::pair<std::string_view, std::string_view>, size_t> by;
  const auto list = ctx.groups().list();
  for (const auto& g : list) ++by[{g.state, g.type}];
  w.single("kafka_coordinator_group_groupmetadatamanager_numgroups", kind::gauge,
           "Groups this broker coordinates (NumGroups).", static_cast<double>(list.size()));
  w.family("silt_groups", kind::gauge, "Groups this broker coordinates, per state and protocol.");
  for (const auto& [key, n] : by) {
    const label l[] = {{"state", key.first}, {"type", key.second}};
    w.sample("silt_groups", l, static_cast<double>(n));
  }
}

// Client quotas (docs/security.md): throttled requests and their throttle time, per quota type
// (Kafka's Produce, Fetch and Request quotas).
void quotas(prometheus_writer& w, const handlers::context& ctx, const net::server& server) {
  constexpr std::array types{handlers::quota_type::produce, handlers::quota_type::fetch,
                             handlers::quota_type::request};
  w.family("silt_quota_throttled_requests_total", kind::counter,
           "Requests whose client was over a quota (producer_byte_rate, consumer_byte_rate, "
           "request_percentage), answered with a throttle time.");
  for (const auto t : types) {
    const label l[] = {{"quota", handlers::quota_type_name(t)}};
    w.sample("silt_quota_throttled_requests_total", l,
             static_cast<double>(ctx.quotas.stats(t).throttled));
  }
  w.family("silt_quota_throttle_time_ms_total", kind::counter,
           "The throttle time those requests were given, in milliseconds.");
  for (const auto t : types) {
    const label l[] = {{"quota", handlers::quota_type_name(t)}};
    w.sample("silt_quota_throttle_time_ms_total", l,
             static_cast<double>(ctx.quotas.stats(t).throttle_ms));
  }
  w.single("silt_connections_throttled_total", kind::counter,
           "Times a connection was muted after a throttled response (KIP-219).",
           static_cast<double>(server.stats().throttled_responses));
}

void connections(prometheus_writer& w, const net::server& server) {
  const auto s = server.stats();
  w.single("kafka_server_socketservermetrics_connections", kind::gauge,
           "Open client connections (connection-count).", static_cast<double>(s.connections_open));
  w.single("silt_connections_accepted_total", kind::counter, "Client connections accepted.",
           static_cast<double>(s.connections_accepted));
  w.single("silt_connections_idle_closed_total", kind::counter,
           "Connections closed for idling (connections.max.idle.ms).",
           static_cast<double>(s.idle_closed));
  w.single("silt_connections_refused_per_ip_total", kind::counter,
           "Connections closed at once: their address had max.connections.per.ip open.",
           static_cast<double>(s.refused_per_ip));
  w.single("silt_tls_handshakes_total", kind::counter, "TLS handshakes completed on SSL listeners.",
           static_cast<double>(s.tls_handshakes));
  w.single("silt_tls_handshake_failures_total", kind::counter,
           "TLS handshakes that failed or timed out (a plaintext client on an SSL port, an "
           "unknown client certificate...), and client certificates no mapping rule applied to.",
           static_cast<double>(s.tls_handshake_failures));
  w.single("silt_tls_handshake_timeouts_total", kind::counter,
           "TLS handshakes not done within 10 s (the connection is closed).",
           static_cast<double>(s.tls_handshake_timeouts));
  w.single("silt_sasl_authentications_total", kind::counter,
           "SASL authentications that succeeded on SASL listeners (re-authentications included).",
           static_cast<double>(s.sasl_authentications));
  w.single("silt_sasl_reauthentications_total", kind::counter,
           "SASL re-authentications that succeeded (connections.max.reauth.ms, KIP-368).",
           static_cast<double>(s.sasl_reauthentications));
  w.single("silt_sasl_authentication_failures_total", kind::counter,
           "SASL authentications that failed (wrong credentials, an unsupported mechanism, a "
           "request out of place before authentication).",
           static_cast<double>(s.sasl_failures));
  w.single("silt_sasl_expired_sessions_total", kind::counter,
           "SASL connections closed because a request came after the session expired without "
           "re-authentication.",
           static_cast<double>(s.sasl_expired_sessions));
  w.single("silt_responses_unsent_bytes", kind::gauge,
           "Bytes of responses handled and not yet written to their clients.",
           static_cast<double>(s.unsent_response_bytes));
  w.single("silt_reads_held_for_responses_total", kind::counter,
           "Times a connection was not read because its responses were not taken "
           "(queued.max.response.bytes).",
           static_cast<double>(s.reads_held_for_responses));
}

// The standard process metrics, from /proc/self/stat.
void process(prometheus_writer& w) {
  std::FILE* f = std::fopen("/proc/self/stat", "re");
  if (f == nullptr) return;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // After the command name's closing parenthesis: state is field 3; utime 14, stime 15,
  // starttime 22, rss 24 (pages).
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return;
  unsigned long long utime = 0, stime = 0, start = 0;
  long long rss = 0;
  if (std::sscanf(p + 2,
                  "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
                  "%llu %*u %lld",
                  &utime, &stime, &start, &rss) != 4) {
    return;
  }
  const auto ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  w.single("process_cpu_seconds_total", kind::counter, "User and system CPU time spent.",
           static_cast<double>(utime + stime) / ticks);
  w.single("process_resident_memory_bytes", kind::gauge, "Resident memory size.",
           static_cast<double>(rss) * static_cast<double>(::sysconf(_SC_PAGESIZE)));
  w.single("silt_heap_allocated_bytes", kind::gauge,
           "Heap memory allocated and not freed (without what the allocator keeps free).",
           static_cast<double>(base::heap_allocated_bytes()));
  w.single("silt_metadata_sqlite_memory_bytes", kind::gauge,
           "Heap memory SQLite holds for the metadata store (page caches and statements).",
           static_cast<double>(metadata::sql::sqlite_memory_bytes()));
  const auto chunks = net::frame_arena::stats();
  w.single("silt_request_buffer_mapped_bytes", kind::gauge,
           "Memory mapped for request buffers (chunks in use and kept free for reuse).",
           static_cast<double>((chunks.chunks_mapped - chunks.chunks_unmapped) *
                               net::frame_arena::chunk_size));
  w.single("silt_request_buffer_free_bytes", kind::gauge,
           "Request buffer chunks kept free for reuse (returned once idle for a while).",
           static_cast<double>(chunks.chunks_free * net::frame_arena::chunk_size));
}

}  // namespace

std::string render_metrics(node& broker, net::server& server) {
  prometheus_writer w;
  requests(w, server.metrics());
  topics(w, broker.ctx());
  storage_metrics(w, broker);
  groups(w, broker.ctx());
  connections(w, server);
  quotas(w, broker.ctx(), server);
  process(w);
  return w.take();
}

}  // namespace silt::app
