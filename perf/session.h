// One run of a workload, step by step (runner.h lists the steps): owns the statistics, the
// clients and the run_result being filled. Used by runner.cc only; lives on the thread that
// called run_workload, which is also the reporting thread. The producer and consumer threads
// record into the statistics, which outlive them (members are destroyed in reverse order).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client_config.h"
#include "consumers.h"
#include "payloads.h"
#include "producers.h"
#include "results.h"
#include "run_stats.h"
#include "runner.h"
#include "workload.h"

namespace silt::perf {

class session {
 public:
  session(workload w, std::string tool_mode, bool progress);
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  // Runs everything; `notes` (from reading the workload) open the warnings.
  [[nodiscard]] run_outcome run(const std::vector<std::string>& notes);

 private:
  using clock = std::chrono::steady_clock;
  using condition = std::function<bool(const run_stats::snapshot&)>;

  static constexpr double trial_s = 4;         // one rate-search trial
  static constexpr double drain_limit_s = 30;  // after the run, for consumers to read the rest
  static constexpr double interrupted_drain_s = 5;
  // A trial counts the records due up to this long before its end: a sender woken a little
  // late under load has not fallen behind.
  static constexpr auto send_slack = std::chrono::milliseconds(100);

  // SIGINT or SIGTERM came during run().
  [[nodiscard]] static bool interrupted();
  [[nodiscard]] static std::string fmt(const char* format, double a = 0, double b = 0, double c = 0,
                                       double d = 0);
  [[nodiscard]] static double seconds(clock::duration d);

  struct phase_result {
    interval_stats total;  // the whole phase
    run_stats::snapshot first;
    run_stats::snapshot last;
    clock::time_point last_time;  // when `last` was taken
    bool condition_met = false;
  };

  // Runs a phase until `duration_s` passes (0: no time limit), `until` holds, `max_s`
  // passes (0: none), or (when `interruptible`) a signal comes; reports its intervals. The
  // phase starts where the last one ended.
  phase_result phase(const std::string& name, double duration_s, const condition& until = {},
                     double max_s = 0, bool interruptible = true);
  // Sets the producers' rate from now on. The first call also starts the run's clock.
  void start_schedule(double rate);
  void report(const interval_stats& i);
  void say(const std::string& line);
  [[nodiscard]] double since_origin(clock::time_point t) const;

  [[nodiscard]] tl::expected<void, std::string> setup();
  [[nodiscard]] tl::expected<void, std::string> await_ready();
  // The highest sustainable rate (0: none found).
  [[nodiscard]] double search_rate();
  void backlog_test();
  void drain();
  void add_warnings(const phase_result& test, const send_schedule& schedule,
                    clock::time_point test_start, clock::time_point test_end);

  workload w_;
  std::string tool_mode_;
  bool progress_;
  uint64_t run_id_;
  run_result r_;
  clock_anchor clock_;
  clock::time_point origin_{};
  bool origin_set_ = false;

  librdkafka_properties admin_props_;
  librdkafka_properties producer_props_;
  librdkafka_properties consumer_props_;
  std::vector<topic_layout> topics_;
  std::vector<std::string> group_ids_;
  std::optional<payload_pool> payloads_;
  std::unique_ptr<run_stats> stats_;
  std::unique_ptr<consumer_pool> consumers_;
  std::unique_ptr<producer_pool> producers_;
  std::string interrupted_in_;  // the phase a signal ended
  // Where the last phase ended (or, before the first, the counters before the first send).
  std::optional<std::pair<run_stats::snapshot, clock::time_point>> carry_;
  run_stats::snapshot end_;  // at the end of the drain, before the clients close
};

}  // namespace silt::perf
