// What the producer and consumer threads of a run count, and the reporter reads. Counters and
// histograms are cumulative from the run's start and written with relaxed atomics by any
// thread; the reporter takes snapshots and subtracts them (one interval, one phase). Produce
// errors are also kept by kind, to name them in the warnings.
//
// Owned by the runner, which outlives every thread recording into it.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/histogram.h"
#include "base/mutex.h"
#include "results.h"

namespace silt::perf {

class run_stats {
 public:
  // `topics` topics, each with `groups_per_topic` consumer groups: group g reads topic
  // g / groups_per_topic.
  run_stats(int topics, int groups_per_topic);

  void sent() { sent_.fetch_add(1, std::memory_order_relaxed); }
  void queue_full() { queue_full_.fetch_add(1, std::memory_order_relaxed); }
  void late_send() { late_sends_.fetch_add(1, std::memory_order_relaxed); }
  void acked(int topic, uint64_t bytes, uint64_t latency_us);
  // A record that failed: rejected by the client or the broker. `what` names the error.
  void produce_error(int topic, const std::string& what);
  void consumed(int group, uint64_t bytes, uint64_t e2e_us);
  // A record of another run (or no silt-perf record at all) read from a topic.
  void foreign_record() { foreign_.fetch_add(1, std::memory_order_relaxed); }
  // An error a client reported (librdkafka's error callback): counted by kind, the latest
  // detail kept.
  void client_error(const std::string& kind, const std::string& detail);
  void rebalance() { rebalances_.fetch_add(1, std::memory_order_relaxed); }

  struct snapshot {
    uint64_t sent = 0;
    uint64_t queue_full = 0;
    uint64_t late_sends = 0;
    uint64_t acked = 0;
    uint64_t acked_bytes = 0;
    uint64_t errors = 0;
    uint64_t consumed = 0;
    uint64_t consumed_bytes = 0;
    uint64_t foreign = 0;
    uint64_t rebalances = 0;
    std::vector<uint64_t> acked_per_topic;
    std::vector<uint64_t> consumed_per_group;
    std::shared_ptr<base::precise_histogram_snapshot> produce_us;
    std::shared_ptr<base::precise_histogram_snapshot> e2e_us;

    // Records acknowledged and not yet read by group g (0 when it read more: a record can be
    // read before its acknowledgement arrives).
    [[nodiscard]] int64_t group_backlog(int g, int groups_per_topic) const;
    [[nodiscard]] int64_t total_backlog(int groups_per_topic) const;
    [[nodiscard]] int64_t max_group_backlog(int groups_per_topic) const;
  };
  // Without `histograms` only the counters (cheap enough to poll a condition).
  [[nodiscard]] snapshot take(bool histograms = true) const;

  // Produce errors by kind, with their counts.
  [[nodiscard]] std::map<std::string, uint64_t> produce_errors_by_kind() const;
  struct client_error_count {
    uint64_t count = 0;
    std::string latest;
  };
  [[nodiscard]] std::map<std::string, client_error_count> client_errors_by_kind() const;

  [[nodiscard]] int groups_per_topic() const { return groups_per_topic_; }

 private:
  int groups_per_topic_;
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> queue_full_{0};
  std::atomic<uint64_t> late_sends_{0};
  std::atomic<uint64_t> acked_{0};
  std::atomic<uint64_t> acked_bytes_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> consumed_{0};
  std::atomic<uint64_t> consumed_bytes_{0};
  std::atomic<uint64_t> foreign_{0};
  std::atomic<uint64_t> rebalances_{0};
  std::unique_ptr<std::atomic<uint64_t>[]> acked_per_topic_;
  size_t topics_;
  std::unique_ptr<std::atomic<uint64_t>[]> consumed_per_group_;
  size_t groups_;
  // 58 KiB each: on the heap.
  std::unique_ptr<base::precise_histogram> produce_us_ =
      std::make_unique<base::precise_histogram>();
  std::unique_ptr<base::precise_histogram> e2e_us_ = std::make_unique<base::precise_histogram>();

  mutable base::mutex mu_;
  std::map<std::string, uint64_t> produce_error_kinds_ GUARDED_BY(mu_);
  std::map<std::string, client_error_count> client_error_kinds_ GUARDED_BY(mu_);
};

// The interval from snapshot `a` to `b`: counts, rates, backlog at `b`, latency summaries.
[[nodiscard]] interval_stats make_interval(const run_stats::snapshot& a,
                                           const run_stats::snapshot& b, const std::string& phase,
                                           double start_s, double duration_s, int groups_per_topic);

}  // namespace silt::perf
