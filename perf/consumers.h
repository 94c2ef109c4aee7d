// The consumers of a run: for every topic, groups_per_topic consumer groups of
// consumers_per_group librdkafka KafkaConsumers, each subscribed to its topic in its group and
// served by a thread of its own (rd_kafka_consumer_poll blocks until a record arrives, so a
// record's end-to-end latency is taken when it is handed over, not when a shared thread next
// looks). Each record's end-to-end latency runs from the due time in its silt-perf header
// (payloads.h) to its consumption; records of other runs are skipped and counted.
//
// Readiness: a group is ready when its members' assignments cover the topic and it has read a
// probe record from every partition (the runner sends probes until then), so that no record
// of the run falls before a consumer's starting position.
//
// Lifecycle: construct, start(), pause()/resume while running, stop() or the destructor
// (closes the consumers: they leave their groups).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <tl/expected.hpp>

#include "client_config.h"
#include "payloads.h"
#include "producers.h"
#include "run_stats.h"

namespace silt::perf {

class consumer_pool {
 public:
  struct options {
    std::vector<topic_layout> topics;
    int groups_per_topic = 1;
    int consumers_per_group = 1;
    std::vector<std::string> group_ids;  // group g = topic * groups_per_topic + j
    run_stats* stats = nullptr;
    const clock_anchor* clock = nullptr;
    uint64_t run_id = 0;
    librdkafka_properties props;
    std::string bootstrap;
  };

  explicit consumer_pool(options o);
  ~consumer_pool();
  consumer_pool(const consumer_pool&) = delete;
  consumer_pool& operator=(const consumer_pool&) = delete;

  [[nodiscard]] tl::expected<void, std::string> start();

  // Stop fetching (the consumers stay in their groups and keep their positions), or go on.
  void pause(bool paused);

  // Every consumer has had an assignment and each group's assignments cover its topic.
  [[nodiscard]] bool assigned() const;
  // Groups that have read a probe from every partition of their topic.
  [[nodiscard]] int groups_probed() const;
  // Forget the probes read so far (a rebalance may have moved partitions since).
  void reset_probes();
  // Assignments and revocations so far, all consumers together.
  [[nodiscard]] uint64_t assignment_changes() const { return assignment_changes_.load(); }
  // What is missing for readiness, for an error message.
  [[nodiscard]] std::string readiness_detail() const;

  void stop();

  [[nodiscard]] int group_count() const { return static_cast<int>(groups_.size()); }

 private:
  struct group;
  struct consumer;
  static void on_rebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                           rd_kafka_topic_partition_list_t* partitions, void* opaque);
  static void on_error(rd_kafka_t* rk, int err, const char* reason, void* opaque);
  void run_consumer(consumer& c);
  void handle(consumer& c, const rd_kafka_message_t& m);

  options o_;
  std::vector<std::unique_ptr<group>> groups_;
  std::vector<std::unique_ptr<consumer>> consumers_;
  std::atomic<bool> paused_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> assignment_changes_{0};
};

}  // namespace silt::perf
