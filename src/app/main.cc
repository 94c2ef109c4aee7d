// silt: the broker. Reads its configuration (an optional properties file and --override
// key=value), opens storage, serves Kafka clients on its listeners until SIGTERM or SIGINT,
// then shuts down cleanly: stops accepting, answers what is in flight, syncs the WAL.
#include <csignal>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <sys/resource.h>

#include "app/listener_setup.h"
#include "app/metrics_text.h"
#include "app/node.h"
#include "base/log.h"
#include "base/memory.h"
#include "base/sched.h"
#include "config/config.h"
#include "metadata/sql.h"
#include "net/frame_arena.h"
#include "net/io_pool.h"
#include "net/metrics_http.h"
#include "net/server.h"

namespace {

constexpr const char* usage =
    "usage: silt [server.properties] [--override key=value]... [--print-config-docs]\n"
    "Starts a Kafka-compatible broker; with no arguments it listens on localhost:9092 and\n"
    "keeps its data under ./data. Settings: docs/configuration.md.\n";

// Every client connection is a file descriptor: take all the kernel allows.
void raise_fd_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
}

// A ratio for the periodic report, e.g. "1.9" (a whole number would read 1.9 as 1).
std::string one_decimal(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// latency.threads.nice: whether the kernel lets a thread take that nice value, tried on a
// thread of its own (threads created afterwards would inherit it from this one). Where it
// does not, the setting becomes 0 (the process's value) and the broker says why, once.
void check_thread_nice(silt::config::broker_config& cfg) {
  if (cfg.latency_threads_nice == 0) return;
  std::optional<std::string> refused;
  std::thread([&] { refused = silt::base::set_thread_nice(cfg.latency_threads_nice); }).join();
  if (!refused) return;
  SILT_LOG(warn,
           "silt: latency.threads.nice=%d not applied (%s; it needs root, CAP_SYS_NICE or "
           "RLIMIT_NICE): the network and WAL threads keep the process's nice value",
           cfg.latency_threads_nice, refused->c_str());
  cfg.latency_threads_nice = 0;
}

}  // namespace

static int run(int argc, char** argv) {
  namespace asio = boost::asio;
  auto cmd = silt::config::parse_command_line(argc, argv);
  if (!cmd) {
    std::fprintf(stderr, "silt: %s\n%s", cmd.error().c_str(), usage);
    return 2;
  }
  if (cmd->help) {
    std::fputs(usage, stdout);
    return 0;
  }
  if (cmd->print_config_docs) {
    std::fputs(silt::config::config_docs_markdown().c_str(), stdout);
    return 0;
  }
  auto cfg = silt::config::load(*cmd);
  if (!cfg) {
    SILT_LOG(error, "silt: %s", cfg.error().c_str());
    return 2;
  }
  silt::base::set_log_level(*silt::base::parse_log_level(cfg->log_level));  // validated
  raise_fd_limit();
  check_thread_nice(*cfg);
  // The TLS contexts first: a bad key store stops the broker before it opens its storage.
  silt::net::tls_reloader tls_reloader(std::chrono::seconds(5));
  silt::app::sasl_sources sasl_sources;
  auto listener_options = silt::app::listener_options_of(*cfg, tls_reloader, sasl_sources);
  if (!listener_options) {
    SILT_LOG(error, "silt: %s", listener_options.error().c_str());
    return 2;
  }
  auto broker = silt::app::node::open(*cfg);
  if (!broker) {
    SILT_LOG(error, "silt: %s", broker.error().c_str());
    return 1;
  }
  sasl_sources.scram->set(&(*broker)->credentials());

  // The listeners, signals and timers run on `io`, the main thread's; connections on the
  // pool's worker contexts, one thread each (on `io` too with one network thread).
  silt::net::io_pool pool(cfg->num_network_threads);
  asio::io_context& io = pool.main();
  // Taken before the listeners open: a client (or a test) that sees the port may signal at
  // once, and a signal that comes before its handler waits is kept for it, where the default
  // action would end the process.
  asio::signal_set signals(io, SIGTERM, SIGINT);
  asio::signal_set usr1(io, SIGUSR1);
  std::signal(SIGPIPE, SIG_IGN);
  silt::net::server_options so;
  so.max_request_bytes = cfg->socket_request_max_bytes;
  so.queued_max_bytes = cfg->queued_max_request_bytes;
  so.queued_max_response_bytes = cfg->queued_max_response_bytes;
  so.max_inflight = cfg->max_inflight_requests;
  so.idle_timeout = std::chrono::milliseconds(cfg->connections_max_idle_ms);
  so.max_connections = cfg->max_connections;
  so.max_connections_per_ip = cfg->max_connections_per_ip;
  for (const auto& [host, count] :
       silt::config::parse_ip_overrides(cfg->max_connections_per_ip_overrides)
           .value_or(std::vector<std::pair<std::string, int32_t>>{})) {
    // A name stands for every address it has (resolved once, here).
    boost::system::error_code ec;
    asio::ip::tcp::resolver resolver(io);
    const auto found = resolver.resolve(host, "", ec);
    if (ec || found.empty()) {
      SILT_LOG(error, "silt: max.connections.per.ip.overrides: cannot resolve '%s': %s",
               host.c_str(), ec.message().c_str());
      return 1;
    }
    for (const auto& r : found) so.max_connections_per_ip_overrides[r.endpoint().address()] = count;
  }
  silt::net::server server(io, pool.workers(), so, (*broker)->handler());
  for (const auto& l : cfg->listeners) {
    const auto& lo = listener_options->at(l.listener_name);
    auto port = server.listen(l.host, l.port, lo);
    if (!port) {
      SILT_LOG(error, "silt: %s", port.error().c_str());
      return 1;
    }
    SILT_LOG(info, "silt: listening on %s:%u, listener %s (%s) (node %d, cluster %s, data in %s)",
             l.host.empty() ? "*" : l.host.c_str(), *port, l.listener_name.c_str(),
             silt::net::to_string(lo.protocol), cfg->node_id, (*broker)->ctx().cluster_id.c_str(),
             cfg->data_dir.c_str());
  }
  server.start();
  (*broker)->start_background(std::chrono::seconds(30));

  // The metrics endpoint (Prometheus), on the main thread's context.
  std::unique_ptr<silt::net::metrics_http> metrics_endpoint;
  if (!cfg->metrics_listener.empty()) {
    const auto where = silt::config::parse_http_endpoint(cfg->metrics_listener);  // validated
    std::shared_ptr<silt::net::tls_context_source> tls;
    if (where->tls) {
      auto options = silt::app::tls_options_of(cfg->ssl);
      auto ctx = silt::net::make_tls_context(options);
      if (!ctx) {
        SILT_LOG(error, "silt: metrics.listener: %s", ctx.error().c_str());
        return 2;
      }
      tls = std::make_shared<silt::net::tls_context_source>(std::move(*ctx));
      tls_reloader.watch("metrics", std::move(options), tls);
    }
    metrics_endpoint = std::make_unique<silt::net::metrics_http>(
        io, where->path, [&] { return silt::app::render_metrics(**broker, server); }, tls);
    auto port = metrics_endpoint->listen(where->host, where->port);
    if (!port) {
      SILT_LOG(error, "silt: metrics.listener: %s", port.error().c_str());
      return 1;
    }
    metrics_endpoint->start();
    SILT_LOG(info, "silt: metrics on %s://%s:%u%s", where->tls ? "https" : "http",
             where->host.empty() ? "*" : where->host.c_str(), *port, where->path.c_str());
  }
  // Once every listener's TLS files are known (the metrics listener's too).
  tls_reloader.start();

  // Request latencies, per interval when asked for; the rest is logged at shutdown.
  std::mutex wal_report_mu;
  silt::storage::wal::wal_stats wal_before;        // guarded by wal_report_mu
  silt::storage::stream_store_stats store_before;  // guarded by wal_report_mu
  uint64_t transactions_before = 0;                // guarded by wal_report_mu
  uint64_t statements_before = 0;                  // guarded by wal_report_mu
  auto log_metrics = [&] {
    std::string text = server.metrics().report("silt: requests: ");
    {
      std::lock_guard lock(wal_report_mu);
      const auto wal = (*broker)->ctx().store.wal_stats();
      const auto writes = wal.write_us.since(wal_before.write_us);
      if (writes.count() > 0) {
        const auto waits = wal.batch_wait_us.since(wal_before.batch_wait_us);
        text += "silt: wal: writes n=" + std::to_string(writes.count()) + " avg KiB=" +
                std::to_string((wal.write_bytes - wal_before.write_bytes) / writes.count() / 1024) +
                " appends/write=" +
                one_decimal(static_cast<double>(wal.appends - wal_before.appends) /
                            static_cast<double>(writes.count())) +
                " held=" + std::to_string(wal.held - wal_before.held) + " (gathered " +
                std::to_string(wal.held_gathered - wal_before.held_gathered) + ")" +
                " | batch wait " + waits.percentiles_ms() + " | write " + writes.percentiles_ms() +
                " ms\n";
      }
      if (wal.failed_writes != wal_before.failed_writes) {
        text += "silt: wal: failed writes " +
                std::to_string(wal.failed_writes - wal_before.failed_writes) +
                ", recoveries (new epochs) " +
                std::to_string(wal.recoveries - wal_before.recoveries) + "\n";
      }
      wal_before = wal;
      const auto store = (*broker)->ctx().store.stats();
      const uint64_t transactions = silt::metadata::sql::committed_transactions();
      const uint64_t statements = silt::metadata::sql::statements_sent();
      if (store.uploads != store_before.uploads || store.compactions != store_before.compactions ||
          transactions != transactions_before) {
        text += "silt: store: uploads " + std::to_string(store.uploads - store_before.uploads) +
                " (stream-set objects " +
                std::to_string(store.stream_set_objects - store_before.stream_set_objects) +
                ", stream objects " +
                std::to_string(store.stream_objects - store_before.stream_objects) +
                "), compactions " + std::to_string(store.compactions - store_before.compactions) +
                ", objects deleted " +
                std::to_string(store.deleted_objects - store_before.deleted_objects) +
                " | metadata transactions " + std::to_string(transactions - transactions_before) +
                ", statements " + std::to_string(statements - statements_before) + "\n";
      }
      if (store.cold_reads != store_before.cold_reads) {
        text += "silt: cold reads " + std::to_string(store.cold_reads - store_before.cold_reads) +
                " | object GETs " + std::to_string(store.object_gets - store_before.object_gets) +
                " (read-ahead " +
                std::to_string(store.read_ahead_gets - store_before.read_ahead_gets) +
                "), reads that waited for read-ahead " +
                std::to_string(store.read_ahead_waits - store_before.read_ahead_waits) + "\n";
      }
      const auto& ctx = (*broker)->ctx();
      const uint64_t sent = ctx.sent_to_rack.load(std::memory_order_relaxed);
      const uint64_t served = ctx.read_for_owner.load(std::memory_order_relaxed);
      if (sent + served > 0) {
        text += "silt: reads near the client since start: sent to a broker of the client's rack " +
                std::to_string(sent) + ", read for partitions other brokers own " +
                std::to_string(served) + " (" +
                std::to_string(ctx.read_for_owner_bytes.load(std::memory_order_relaxed)) +
                " bytes)\n";
      }
      // Last: a reader that sees this line has the whole report.
      text += "silt: log cache: " + std::to_string(store.log_cache_bytes) + " bytes, " +
              std::to_string(store.not_uploaded_bytes) + " bytes not yet uploaded\n";
      store_before = store;
      transactions_before = transactions;
      statements_before = statements;
    }
    std::fputs(text.c_str(), stderr);
  };
  asio::steady_timer metrics_timer(io);
  std::function<void()> schedule_metrics = [&] {
    if (cfg->metrics_log_interval_ms <= 0) return;
    metrics_timer.expires_after(std::chrono::milliseconds(cfg->metrics_log_interval_ms));
    metrics_timer.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      log_metrics();
      schedule_metrics();
    });
  };
  schedule_metrics();
  // What a burst of work (a topic deletion, a rebalance, a traffic peak) left allocated for
  // reuse goes back to the system once the broker no longer needs it: request buffer chunks
  // and WAL write buffers free since the previous round; and once the broker is quiet (under
  // 100 requests a second over the round), the chunk each network thread is carving request
  // buffers from (freed with its last frame) and the allocator's free pages. Not under load:
  // the allocator's trim holds each arena's lock while it walks it, tens of milliseconds with a
  // busy heap. On the blocking pool, but for the chunks, which each network thread drops itself.
  asio::steady_timer upkeep_timer(io);
  uint64_t requests_before = 0;  // the upkeep's, on the main context
  std::function<void()> schedule_upkeep = [&] {
    upkeep_timer.expires_after(std::chrono::seconds(10));
    upkeep_timer.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      const uint64_t requests = server.stats().requests;
      const bool quiet = requests - requests_before < 1000;
      requests_before = requests;
      if (quiet) {
        for (auto* worker : pool.workers()) {
          asio::post(*worker, [] { silt::net::frame_arena::release_thread_chunk(); });
        }
        silt::net::frame_arena::release_thread_chunk();  // (the main context's thread: this one)
      }
      asio::post((*broker)->ctx().blocking, [quiet, &broker] {
        (void)silt::net::frame_arena::release_idle();
        (void)(*broker)->ctx().store.release_idle_buffers();
        if (quiet) silt::base::release_free_memory();
      });
      schedule_upkeep();
    });
  };
  schedule_upkeep();
  // SIGUSR1: log them now (a benchmark marks the start and end of its measured run).
  std::function<void()> on_usr1 = [&] {
    usr1.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      log_metrics();
      on_usr1();
    });
  };
  on_usr1();

  // In a cluster, the partitions go to the other brokers first, on a thread of its own (it
  // uploads and writes the metadata store) while clients are still served. On the main thread,
  // once: on a signal, or when the object store turns out to be another cluster's.
  std::thread handing;
  bool shutting_down = false;
  int exit_code = 0;
  auto shut_down = [&] {
    if (shutting_down) return;
    shutting_down = true;
    signals.cancel();
    metrics_timer.cancel();
    upkeep_timer.cancel();
    usr1.cancel();
    if (metrics_endpoint) metrics_endpoint->stop();
    handing = std::thread([&] {
      (*broker)->hand_over_partitions();
      asio::post(io, [&] {
        (*broker)->begin_shutdown();
        // Once every connection is closed, the contexts run dry (bounded: io_pool.h).
        server.stop([&pool] { pool.finish(std::chrono::seconds(10)); });
      });
    });
  };
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    SILT_LOG(info, "silt: signal %d, shutting down", sig);
    shut_down();
  });
  // An object store that could not be read at start and is another cluster's: nothing was
  // written to it (node.h), and the broker stops as it would have at start, with an error.
  (*broker)->on_store_refused([&](const std::string& message) {
    asio::post(io, [&, message] {
      SILT_LOG(error, "silt: %s", message.c_str());
      exit_code = 1;
      shut_down();
    });
  });

  // The threads that serve connections never run a metadata statement (the store refuses
  // them there): a slow database must not stall a connection.
  pool.run([nice = cfg->latency_threads_nice] {
    silt::metadata::sql::mark_network_thread(true);
    if (nice != 0) (void)silt::base::set_thread_nice(nice);
  });
  if (handing.joinable()) handing.join();
  silt::metadata::sql::mark_network_thread(false);
  if (const uint64_t n = silt::metadata::sql::network_thread_violations(); n > 0) {
    SILT_LOG(warn, "silt: %llu metadata statement(s) were refused on network threads",
             static_cast<unsigned long long>(n));
  }
  log_metrics();
  (*broker)->close();
  SILT_LOG(info, "silt: stopped");
  return exit_code;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    SILT_LOG(error, "silt: %s", e.what());
    return 1;
  }
}
