// A latency histogram that threads record into without locks, with log-linear buckets: exact
// below 16, then 8 buckets per power of two (at most 12.5% above the recorded value).
//
// record() is one relaxed atomic increment per bucket, count and sum; snapshot() copies the
// counters (not atomically as a whole: a snapshot taken while others record may be off by
// the values in flight). Snapshots subtract, so a reporter can print each interval's
// percentiles from two cumulative snapshots.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace silt::base {

class histogram_snapshot;

// A duration in whole microseconds, the unit the broker's latency histograms record.
[[nodiscard]] inline uint64_t micros(std::chrono::steady_clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

class histogram {
 public:
  static constexpr size_t buckets = 16 + 8 * 60;

  void record(uint64_t value) {
    counts_[bucket_of(value)].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(value, std::memory_order_relaxed);
  }
  [[nodiscard]] histogram_snapshot snapshot() const;

  [[nodiscard]] static size_t bucket_of(uint64_t value);
  // The largest value that falls into bucket i.
  [[nodiscard]] static uint64_t bucket_limit(size_t i);

 private:
  std::array<std::atomic<uint64_t>, buckets> counts_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_{0};
};

class histogram_snapshot {
 public:
  [[nodiscard]] uint64_t count() const { return count_; }
  [[nodiscard]] uint64_t sum() const { return sum_; }
  // The upper limit of the bucket holding the q-quantile (0 < q <= 1; 1 is the maximum);
  // 0 when empty.
  [[nodiscard]] uint64_t quantile(double q) const;
  // "p50=A p99=B max=C" in milliseconds with one decimal, for logs.
  [[nodiscard]] std::string percentiles_ms() const;
  // What was recorded between `earlier` and this snapshot.
  [[nodiscard]] histogram_snapshot since(const histogram_snapshot& earlier) const;

 private:
  friend class histogram;
  std::array<uint64_t, histogram::buckets> counts_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
};

}  // namespace silt::base
