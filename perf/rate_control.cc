#include "rate_control.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace silt::perf {

namespace {

constexpr double min_search_rate = 1.0;  // records/s below which the search gives up
constexpr double max_search_rate = 1e9;

std::string fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

}  // namespace

send_schedule::send_schedule(steady_time start, double rate, int producers, int index)
    : start_(start), rate_(rate), producers_(std::max(1, producers)), index_(index) {}

steady_time send_schedule::due(uint64_t k) const {
  const double n = static_cast<double>(k) * producers_ + index_;
  const auto ns = static_cast<int64_t>(n * 1e9 / rate_);
  return start_ + std::chrono::nanoseconds(ns);
}

uint64_t send_schedule::due_by(steady_time t) const {
  if (paused() || t < start_) return 0;
  const double elapsed_s = std::chrono::duration<double>(t - start_).count();
  // Record n is due at n / rate: records 0..floor(elapsed * rate) are due.
  return static_cast<uint64_t>(std::floor(elapsed_s * rate_)) + 1;
}

trial_verdict judge_trial(const rate_trial& t) {
  if (t.errors > 0) {
    return {false, fmt("%.0f produce errors", static_cast<double>(t.errors))};
  }
  if (static_cast<double>(t.sent) < 0.99 * static_cast<double>(t.scheduled)) {
    return {false, fmt("the producers sent %.0f of the %.0f records due",
                       static_cast<double>(t.sent), static_cast<double>(t.scheduled))};
  }
  if (!t.drained) {
    return {false, "its records were not all acknowledged and read in the pause after it"};
  }
  if (t.late_p50_ms > 2 * t.early_p50_ms + 5) {
    return {false, fmt("median produce latency grew from %.1f ms to %.1f ms within the trial",
                       t.early_p50_ms, t.late_p50_ms)};
  }
  const double backlog_limit = std::max(1000.0, t.rate);
  if (static_cast<double>(t.max_group_backlog) > backlog_limit) {
    return {false, fmt("a consumer group was %.0f records behind (limit %.0f)",
                       static_cast<double>(t.max_group_backlog), backlog_limit)};
  }
  return {true, fmt("median produce latency %.1f ms, then %.1f ms", t.early_p50_ms, t.late_p50_ms)};
}

max_rate_search::max_rate_search(double start_rate, double precision, int max_trials)
    : precision_(precision), max_trials_(max_trials), next_(start_rate) {}

bool max_rate_search::converged() const {
  return passed_ > 0 && std::isfinite(failed_) && failed_ - passed_ <= precision_ * passed_;
}

bool max_rate_search::done() const {
  if (trials_ >= max_trials_ || converged()) return true;
  if (passed_ == 0 && failed_ <= min_search_rate) return true;
  return !std::isfinite(failed_) && passed_ >= max_search_rate;
}

trial_verdict max_rate_search::record(const rate_trial& t) {
  ++trials_;
  auto v = judge_trial(t);
  if (v.sustainable && t.late_p50_ms > 4 * best_p50_ms_ + 5) {
    v = {false, fmt("median produce latency %.1f ms, over four times the lowest seen (%.1f ms)",
                    t.late_p50_ms, best_p50_ms_)};
  }
  if (v.sustainable) best_p50_ms_ = std::min(best_p50_ms_, t.late_p50_ms);
  if (v.sustainable) {
    passed_ = std::max(passed_, t.rate);
  } else {
    failed_ = std::min(failed_, t.rate);
  }
  // A rate that passed above one that failed (noise) invalidates the bracket: trust the
  // newer result.
  if (passed_ >= failed_) {
    if (v.sustainable) {
      failed_ = std::numeric_limits<double>::infinity();
    } else {
      passed_ = 0;
    }
  }
  if (!std::isfinite(failed_)) {
    next_ = passed_ * 2;
  } else if (passed_ == 0) {
    next_ = failed_ / 2;
  } else {
    next_ = (passed_ + failed_) / 2;
  }
  return v;
}

}  // namespace silt::perf
