// WAL append throughput and latency: one producer keeps `concurrency` appends outstanding
// (as a broker's connections would), each acknowledged by its callback once durable. Latency
// runs from append() to the callback. Printed, never asserted.
//
// Run: build/bench/wal_bench [--engine threads|uring|both] [--path FILE]
//        [--sync dsync|fdatasync|both] [--bs 4096,65536] [--concurrency 1,16,64] [--iodepth N]
//        [--iops N] [--seconds S] [--capacity BYTES]
//        [--csv]
// --iodepth defaults to the concurrency. bench/wal_vs_fio.sh compares it with fio.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "storage/wal/wal.h"

namespace {

using namespace silt::storage::wal;
using clock_type = std::chrono::steady_clock;

struct config {
  std::string path = "wal_bench.wal";
  std::vector<sync_mode> syncs = {sync_mode::dsync, sync_mode::fdatasync};
  std::vector<io_engine> engines = {io_engine::threads};
  std::vector<uint32_t> sizes = {4096, 65536};
  std::vector<uint32_t> concurrencies = {1, 16, 64};
  uint32_t iodepth = 0;  // 0: the concurrency
  uint32_t iops = 0;
  double seconds = 3;
  double warmup = 0.5;
  uint64_t capacity = 1ull << 30;
  bool csv = false;
};

struct result {
  double appends_per_s = 0;
  double mib_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
  double p999_us = 0;
  double writes_per_s = 0;
  double kib_per_write = 0;
};

std::vector<uint32_t> parse_list(const std::string& s) {
  std::vector<uint32_t> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(static_cast<uint32_t>(std::stoul(item)));
  return out;
}

const char* sync_name(sync_mode m) {
  return m == sync_mode::dsync ? "dsync" : "fdatasync";
}

const char* engine_name(io_engine e) {
  return e == io_engine::threads ? "threads" : "uring";
}

double percentile(std::vector<uint32_t>& ns, double p) {
  if (ns.empty()) return 0;
  const auto k = static_cast<size_t>(p * static_cast<double>(ns.size() - 1));
  std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(k), ns.end());
  return ns[k] / 1000.0;
}

// One measurement; nullopt (after a message) when the WAL fails.
std::optional<result> run_one(const config& cfg, io_engine engine, sync_mode sync, uint32_t size,
                              uint32_t concurrency) {
  wal_options options;
  options.path = cfg.path;
  options.capacity = cfg.capacity;
  options.sync = sync;
  options.engine = engine;
  options.iodepth = cfg.iodepth != 0 ? cfg.iodepth : concurrency;
  options.iops = cfg.iops;
  auto opened = wal::open(options, [](const replayed_record&) {});
  if (!opened) {
    std::fprintf(stderr, "wal_bench: open %s: %s\n", cfg.path.c_str(),
                 std::string(wal_error_name(opened.error())).c_str());
    return std::nullopt;
  }
  wal& w = **opened;
  // Everything replayed counts as uploaded: the ring starts empty.
  w.trim(w.durable_end());

  const std::vector<uint8_t> payload(size, 0x5a);
  std::mutex mu;
  std::condition_variable cv;
  uint32_t outstanding = 0;
  bool producer_waiting = false;
  // Owned by the I/O thread (callbacks) until the producer has drained them all.
  std::vector<uint32_t> latencies;
  latencies.reserve(4u << 20);
  uint64_t completed = 0;
  wal_position trimmed = w.trim_point();
  std::atomic<bool> measuring{false};
  std::atomic<bool> failed{false};

  const auto start = clock_type::now();
  const auto measure_from = start + std::chrono::duration_cast<clock_type::duration>(
                                        std::chrono::duration<double>(cfg.warmup));
  const auto measure_to = measure_from + std::chrono::duration_cast<clock_type::duration>(
                                             std::chrono::duration<double>(cfg.seconds));
  wal_stats stats_from{};
  bool stats_taken = false;
  for (silt::base::offset offset(0);; offset += 1) {
    const auto now = clock_type::now();
    if (now >= measure_to || failed.load()) break;
    if (!stats_taken && now >= measure_from) {
      stats_from = w.stats();
      measuring.store(true);
      stats_taken = true;
    }
    {
      std::unique_lock lock(mu);
      while (outstanding >= concurrency) {
        producer_waiting = true;
        cv.wait(lock);
        producer_waiting = false;
      }
      ++outstanding;
    }
    const bool counted = measuring.load(std::memory_order_relaxed);
    w.append(silt::base::stream_id(1), offset, payload,
             [&, t0 = clock_type::now(), counted](tl::expected<wal_position, wal_error> r) {
               if (!r) {
                 if (!failed.exchange(true)) {
                   std::fprintf(stderr, "wal_bench: append failed: %s\n",
                                std::string(wal_error_name(r.error())).c_str());
                 }
               } else if (counted && clock_type::now() <= measure_to) {
                 latencies.push_back(static_cast<uint32_t>(
                     std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - t0)
                         .count()));
                 ++completed;
               }
               // The data counts as uploaded at once: keep the ring from filling.
               if (r && *r - trimmed > cfg.capacity / 4) {
                 w.trim(*r);
                 trimmed = *r;
               }
               std::lock_guard lock(mu);
               --outstanding;
               if (producer_waiting) cv.notify_one();
             });
  }
  const wal_stats stats_to = w.stats();
  w.close();
  if (failed.load()) return std::nullopt;
  const double window = cfg.seconds;
  result r;
  r.appends_per_s = static_cast<double>(completed) / window;
  r.mib_per_s = r.appends_per_s * size / (1024.0 * 1024.0);
  r.p50_us = percentile(latencies, 0.50);
  r.p99_us = percentile(latencies, 0.99);
  r.p999_us = percentile(latencies, 0.999);
  const double writes = static_cast<double>(stats_to.writes - stats_from.writes);
  r.writes_per_s = writes / window;
  r.kib_per_write =
      writes > 0
          ? static_cast<double>(stats_to.write_bytes - stats_from.write_bytes) / writes / 1024
          : 0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  config cfg;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--csv") {
      cfg.csv = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "wal_bench: %s needs a value\n", arg.c_str());
      return 2;
    }
    const std::string value = argv[++i];
    if (arg == "--path") {
      cfg.path = value;
    } else if (arg == "--sync") {
      if (value == "dsync") {
        cfg.syncs = {sync_mode::dsync};
      } else if (value == "fdatasync") {
        cfg.syncs = {sync_mode::fdatasync};
      } else {
        cfg.syncs = {sync_mode::dsync, sync_mode::fdatasync};
      }
    } else if (arg == "--engine") {
      if (value == "threads") {
        cfg.engines = {io_engine::threads};
      } else if (value == "uring") {
        cfg.engines = {io_engine::uring};
      } else {
        cfg.engines = {io_engine::threads, io_engine::uring};
      }
    } else if (arg == "--bs") {
      cfg.sizes = parse_list(value);
    } else if (arg == "--concurrency") {
      cfg.concurrencies = parse_list(value);
    } else if (arg == "--iodepth") {
      cfg.iodepth = static_cast<uint32_t>(std::stoul(value));
    } else if (arg == "--iops") {
      cfg.iops = static_cast<uint32_t>(std::stoul(value));
    } else if (arg == "--seconds") {
      cfg.seconds = std::stod(value);
    } else if (arg == "--capacity") {
      cfg.capacity = std::stoull(value);
    } else {
      std::fprintf(stderr, "wal_bench: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  if (cfg.csv) {
    std::printf(
        "sync,bs,concurrency,iodepth,appends_per_s,mib_per_s,p50_us,p99_us,p999_us,"
        "writes_per_s,kib_per_write,engine\n");
  } else {
    std::printf("%-9s %6s %4s %4s %11s %9s %9s %9s %9s %10s %9s %8s\n", "sync", "bs", "conc", "qd",
                "appends/s", "MiB/s", "p50 us", "p99 us", "p99.9 us", "writes/s", "KiB/write",
                "engine");
  }
  for (const io_engine engine : cfg.engines) {
    for (const sync_mode sync : cfg.syncs) {
      for (const uint32_t size : cfg.sizes) {
        for (const uint32_t conc : cfg.concurrencies) {
          const uint32_t qd = cfg.iodepth != 0 ? cfg.iodepth : conc;
          const auto measured = run_one(cfg, engine, sync, size, conc);
          if (!measured) return 1;
          const result& r = *measured;
          if (cfg.csv) {
            std::printf("%s,%u,%u,%u,%.0f,%.1f,%.1f,%.1f,%.1f,%.0f,%.1f,%s\n", sync_name(sync),
                        size, conc, qd, r.appends_per_s, r.mib_per_s, r.p50_us, r.p99_us, r.p999_us,
                        r.writes_per_s, r.kib_per_write, engine_name(engine));
          } else {
            std::printf("%-9s %6u %4u %4u %11.0f %9.1f %9.1f %9.1f %9.1f %10.0f %9.1f %8s\n",
                        sync_name(sync), size, conc, qd, r.appends_per_s, r.mib_per_s, r.p50_us,
                        r.p99_us, r.p999_us, r.writes_per_s, r.kib_per_write, engine_name(engine));
          }
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
