// When records are due (the send schedule every produce latency is measured from), and the
// search for the highest rate a broker sustains (a workload's send_rate 0, OMB's
// producerRate 0). Plain values and pure functions: the producer threads and the runner use
// them, the tests feed them synthetic numbers.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

namespace silt::perf {

using steady_time = std::chrono::steady_clock::time_point;

// The schedule of producer `index` of `producers` that share `rate` records/s from `start`:
// its record k is due at start + (k * producers + index) / rate. The producers' records
// interleave into one evenly spaced sequence, record n of the whole due at start + n / rate.
// A record sent late is measured from when it was due (no coordinated omission), and the
// schedule never waits for a slow producer: it falls behind and says so.
class send_schedule {
 public:
  send_schedule() = default;  // paused: nothing is ever due
  send_schedule(steady_time start, double rate, int producers, int index);

  [[nodiscard]] bool paused() const { return rate_ <= 0; }
  // When this producer's k-th record (from 0) is due. Not for a paused schedule.
  [[nodiscard]] steady_time due(uint64_t k) const;
  // How many records of all producers are due at or before t (0 before start).
  [[nodiscard]] uint64_t due_by(steady_time t) const;
  [[nodiscard]] double rate() const { return rate_; }
  [[nodiscard]] steady_time start() const { return start_; }

 private:
  steady_time start_{};
  double rate_ = 0;
  int producers_ = 1;
  int index_ = 0;
};

// What one trial of the rate search saw: `rate` asked for during `duration_s`, then a pause
// in which the runner waits for the trial's records to be acknowledged and consumed.
struct rate_trial {
  double rate = 0;
  double duration_s = 0;
  uint64_t scheduled = 0;  // records due until shortly (100 ms) before the trial's end
  uint64_t sent = 0;       // records handed to the clients
  uint64_t acked = 0;      // acknowledged, by the end of the pause
  uint64_t errors = 0;     // produce errors
  // Median produce latency (from the due time) of the records acknowledged in the trial's
  // first and second half.
  double early_p50_ms = 0;
  double late_p50_ms = 0;
  // The largest number of records one consumer group had yet to read at the trial's end.
  int64_t max_group_backlog = 0;
  bool drained = true;  // all acknowledged and read within the pause
};

struct trial_verdict {
  bool sustainable = false;
  std::string reason;  // why not, or what was seen
};

// A rate is sustainable when, over its trial: no produce errors; the producers sent at least
// 99% of the records due (the client kept up with the schedule); the median produce latency
// of the second half was at most twice that of the first half plus 5 ms (a queue that grows
// makes latency measured from due times grow with it); no consumer group was more than
// max(1000 records, 1 s of the rate) behind at the end; and everything was acknowledged and
// read in the pause after it.
[[nodiscard]] trial_verdict judge_trial(const rate_trial& t);

// Finds the highest sustainable rate by trials: doubles the rate from `start_rate` while
// trials pass (judge_trial, and a median produce latency in the second half of at most four
// times the lowest one a sustained trial had, plus 5 ms: a rate that multiplies the latency
// is past the knee, even when the latency is steady within the trial); after the first failure
// halves it until one passes; then bisects between the highest rate that passed and the lowest that
// failed until they are within `precision` (relative) of each other. Stops after `max_trials` (the
// answer is then the highest rate that passed), or when even 1 record/s fails (found() is 0).
class max_rate_search {
 public:
  explicit max_rate_search(double start_rate, double precision = 0.05, int max_trials = 16);

  [[nodiscard]] bool done() const;
  // The rate of the next trial (meaningless once done()).
  [[nodiscard]] double next_rate() const { return next_; }
  // Judges a trial (at next_rate()) and picks the next rate.
  trial_verdict record(const rate_trial& t);
  // The highest rate that passed; 0 while none has.
  [[nodiscard]] double found() const { return passed_; }
  // The lowest rate that failed; infinity while none has.
  [[nodiscard]] double lowest_failed() const { return failed_; }
  [[nodiscard]] int trials() const { return trials_; }
  [[nodiscard]] bool converged() const;

 private:
  double precision_;
  int max_trials_;
  int trials_ = 0;
  double next_;
  double passed_ = 0;
  double failed_ = std::numeric_limits<double>::infinity();
  // The lowest second-half median produce latency of a sustained trial.
  double best_p50_ms_ = std::numeric_limits<double>::infinity();
};

}  // namespace silt::perf
