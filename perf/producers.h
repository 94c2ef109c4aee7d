// The producers of a run: one librdkafka producer per (topic, producer index), driven by a
// few sender threads. A sender thread owns its producers: it sends each record when it is due
// (rate_control.h's send_schedule), serves their delivery reports with rd_kafka_poll, and
// sleeps until the next record is due or a delivery report arrives (librdkafka signals an
// eventfd when a producer's queue of reports becomes non-empty), so that acknowledgements are
// timed when they arrive, not when the thread next wakes.
//
// Produce latency runs from a record's due time to its delivery report. A record the client
// refuses because its queue is full is retried from the same due time; a record sent more
// than a second after its due time counts as a late send.
//
// Lifecycle: construct, start() (creates the producers and threads, all paused), then
// set_rate() and send_probes() from the runner's thread, in_flight() to drain, and stop() or
// the destructor, which wait for the threads and destroy the producers.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <tl/expected.hpp>

#include "base/mutex.h"
#include "client_config.h"
#include "payloads.h"
#include "rate_control.h"
#include "run_stats.h"

namespace silt::perf {

struct topic_layout {
  std::string name;
  int partitions = 1;
};

class producer_pool {
 public:
  struct options {
    std::vector<topic_layout> topics;
    int producers_per_topic = 1;
    key_distributor keys = key_distributor::no_key;
    const payload_pool* payloads = nullptr;
    run_stats* stats = nullptr;
    const clock_anchor* clock = nullptr;
    uint64_t run_id = 0;
    librdkafka_properties props;
    std::string bootstrap;
    int threads = 0;  // 0: one per core, at most one per producer
  };

  explicit producer_pool(options o);
  ~producer_pool();
  producer_pool(const producer_pool&) = delete;
  producer_pool& operator=(const producer_pool&) = delete;

  [[nodiscard]] tl::expected<void, std::string> start();

  // From `start` on, the producers share `rate` records/s (0: they stop sending). Records
  // due under the previous rate and not yet sent are dropped.
  void set_rate(double rate, steady_time start);
  // The schedule now in force, for counting the records due.
  [[nodiscard]] send_schedule schedule() const;

  // Each topic's first producer sends one probe record to every partition of its topic.
  void send_probes();
  [[nodiscard]] uint64_t probes_acked() const { return probes_acked_.load(); }
  [[nodiscard]] uint64_t probes_failed() const { return probes_failed_.load(); }
  [[nodiscard]] std::string last_probe_error() const;

  // Records handed to the clients and not yet reported delivered or failed.
  [[nodiscard]] int in_flight() const;
  // The largest lag of a send behind its due time since the last call, in microseconds.
  [[nodiscard]] uint64_t take_max_lag_us() { return max_lag_us_.exchange(0); }

  // Stops the threads; then waits up to `flush_ms` for what the clients still hold and
  // destroys them (what is left is purged and not counted).
  void stop(int flush_ms = 5000);

  [[nodiscard]] int producer_count() const { return static_cast<int>(producers_.size()); }

 private:
  struct producer;
  struct sender;
  static void on_delivery(rd_kafka_t* rk, const rd_kafka_message_t* m, void* opaque);
  static void on_error(rd_kafka_t* rk, int err, const char* reason, void* opaque);
  void run_sender(sender& s);
  // Sends producer p's record due at `due`; false when the client's queue is full.
  bool send_one(producer& p, steady_time due, steady_time now);
  void send_probes_of(producer& p);

  options o_;
  std::vector<std::unique_ptr<producer>> producers_;
  std::vector<std::unique_ptr<sender>> senders_;

  mutable base::mutex mu_;
  send_schedule plan_ GUARDED_BY(mu_);  // the rate, its start and the producer count
  std::string last_probe_error_ GUARDED_BY(mu_);
  std::atomic<uint64_t> plan_generation_{0};
  std::atomic<uint64_t> probe_generation_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> probes_acked_{0};
  std::atomic<uint64_t> probes_failed_{0};
  std::atomic<uint64_t> max_lag_us_{0};
};

}  // namespace silt::perf
