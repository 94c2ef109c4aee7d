#include "run_stats.h"

#include <algorithm>

namespace silt::perf {

run_stats::run_stats(int topics, int groups_per_topic)
    : groups_per_topic_(groups_per_topic),
      acked_per_topic_(new std::atomic<uint64_t>[static_cast<size_t>(topics)]),
      topics_(static_cast<size_t>(topics)),
      consumed_per_group_(
          new std::atomic<uint64_t>[static_cast<size_t>(std::max(1, topics * groups_per_topic))]),
      groups_(static_cast<size_t>(topics * groups_per_topic)) {
  for (size_t i = 0; i < topics_; ++i) acked_per_topic_[i].store(0);
  for (size_t i = 0; i < std::max<size_t>(1, groups_); ++i) consumed_per_group_[i].store(0);
}

void run_stats::acked(int topic, uint64_t bytes, uint64_t latency_us) {
  produce_us_->record(latency_us);
  acked_per_topic_[static_cast<size_t>(topic)].fetch_add(1, std::memory_order_relaxed);
  acked_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  acked_.fetch_add(1, std::memory_order_relaxed);
}

void run_stats::produce_error(int /*topic*/, const std::string& what) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  base::lock_guard l(mu_);
  ++produce_error_kinds_[what];
}

void run_stats::consumed(int group, uint64_t bytes, uint64_t e2e_us) {
  e2e_us_->record(e2e_us);
  consumed_per_group_[static_cast<size_t>(group)].fetch_add(1, std::memory_order_relaxed);
  consumed_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  consumed_.fetch_add(1, std::memory_order_relaxed);
}

void run_stats::client_error(const std::string& kind, const std::string& detail) {
  base::lock_guard l(mu_);
  auto& e = client_error_kinds_[kind];
  ++e.count;
  e.latest = detail;
}

run_stats::snapshot run_stats::take(bool histograms) const {
  snapshot s;
  // Consumption first: a record counted as read is then surely counted as acknowledged if
  // its acknowledgement came before, so the backlog is not understated by the order of reads.
  s.consumed = consumed_.load(std::memory_order_relaxed);
  s.consumed_bytes = consumed_bytes_.load(std::memory_order_relaxed);
  s.consumed_per_group.resize(groups_);
  for (size_t i = 0; i < groups_; ++i) {
    s.consumed_per_group[i] = consumed_per_group_[i].load(std::memory_order_relaxed);
  }
  if (histograms) {
    s.e2e_us = std::make_shared<base::precise_histogram_snapshot>(e2e_us_->snapshot());
  }
  s.sent = sent_.load(std::memory_order_relaxed);
  s.queue_full = queue_full_.load(std::memory_order_relaxed);
  s.late_sends = late_sends_.load(std::memory_order_relaxed);
  s.acked = acked_.load(std::memory_order_relaxed);
  s.acked_bytes = acked_bytes_.load(std::memory_order_relaxed);
  s.errors = errors_.load(std::memory_order_relaxed);
  s.foreign = foreign_.load(std::memory_order_relaxed);
  s.rebalances = rebalances_.load(std::memory_order_relaxed);
  s.acked_per_topic.resize(topics_);
  for (size_t i = 0; i < topics_; ++i) {
    s.acked_per_topic[i] = acked_per_topic_[i].load(std::memory_order_relaxed);
  }
  if (histograms) {
    s.produce_us = std::make_shared<base::precise_histogram_snapshot>(produce_us_->snapshot());
  }
  return s;
}

std::map<std::string, uint64_t> run_stats::produce_errors_by_kind() const {
  base::lock_guard l(mu_);
  return produce_error_kinds_;
}

std::map<std::string, run_stats::client_error_count> run_stats::client_errors_by_kind() const {
  base::lock_guard l(mu_);
  return client_error_kinds_;
}

int64_t run_stats::snapshot::group_backlog(int g, int groups_per_topic) const {
  const auto topic = static_cast<size_t>(g / groups_per_topic);
  const auto acked_records = static_cast<int64_t>(acked_per_topic[topic]);
  const auto read = static_cast<int64_t>(consumed_per_group[static_cast<size_t>(g)]);
  return std::max<int64_t>(0, acked_records - read);
}

int64_t run_stats::snapshot::total_backlog(int groups_per_topic) const {
  int64_t sum = 0;
  for (size_t g = 0; g < consumed_per_group.size(); ++g) {
    sum += group_backlog(static_cast<int>(g), groups_per_topic);
  }
  return sum;
}

int64_t run_stats::snapshot::max_group_backlog(int groups_per_topic) const {
  int64_t most = 0;
  for (size_t g = 0; g < consumed_per_group.size(); ++g) {
    most = std::max(most, group_backlog(static_cast<int>(g), groups_per_topic));
  }
  return most;
}

interval_stats make_interval(const run_stats::snapshot& a, const run_stats::snapshot& b,
                             const std::string& phase, double start_s, double duration_s,
                             int groups_per_topic) {
  interval_stats i;
  i.start_s = start_s;
  i.duration_s = duration_s;
  i.phase = phase;
  i.sent = b.sent - a.sent;
  i.acked = b.acked - a.acked;
  i.produce_errors = b.errors - a.errors;
  i.consumed = b.consumed - a.consumed;
  i.acked_bytes = b.acked_bytes - a.acked_bytes;
  i.consumed_bytes = b.consumed_bytes - a.consumed_bytes;
  i.backlog = b.total_backlog(groups_per_topic);
  if (duration_s > 0) {
    constexpr double mib = 1024.0 * 1024.0;
    i.produce_msgs_per_s = static_cast<double>(i.acked) / duration_s;
    i.produce_mib_per_s = static_cast<double>(i.acked_bytes) / mib / duration_s;
    i.consume_msgs_per_s = static_cast<double>(i.consumed) / duration_s;
    i.consume_mib_per_s = static_cast<double>(i.consumed_bytes) / mib / duration_s;
  }
  if (a.produce_us && b.produce_us) {
    i.produce_latency = summarize_us(b.produce_us->since(*a.produce_us));
  }
  if (a.e2e_us && b.e2e_us) i.e2e_latency = summarize_us(b.e2e_us->since(*a.e2e_us));
  return i;
}

}  // namespace silt::perf
