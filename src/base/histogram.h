// Latency histograms that threads record into without locks, with log-linear buckets (the
// HdrHistogram layout): with S = 2^SubBits sub-buckets per power of two, every value below 2S
// has a bucket of its own, and each power of two [2^e, 2^(e+1)) above is cut into S equal
// buckets, so a bucket is never wider than 1/S of the values in it.
//
//   histogram          (SubBits 3, 496 buckets, 4 KiB): the broker's request and WAL timings;
//                      exact below 16, a quantile at most 12.5% above the true value.
//   precise_histogram  (SubBits 7, 7,424 buckets, 58 KiB): silt-perf's latencies; exact below
//                      256, a quantile at most 1/128 (0.79%) above the true value.
//
// record() is one relaxed atomic increment per bucket, count and sum, plus two relaxed loads
// that compare the value with the largest and smallest so far (a compare-and-swap only when
// the value is a new extreme, which is rare after the first few records). Any thread may
// record; snapshot() may run at the same time on another thread. A snapshot copies the
// counters one by one, not as a whole: one taken while others record may be off by the
// values in flight.
//
// Snapshots are plain values owned by whoever took them: they subtract (since(), one
// reporting interval from two cumulative snapshots) and add (merge(), several threads'
// histograms into one).
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace silt::base {

template <unsigned SubBits>
class log_linear_snapshot;

// A duration in whole microseconds, the unit the broker's latency histograms record.
[[nodiscard]] inline uint64_t micros(std::chrono::steady_clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

template <unsigned SubBits>
class log_linear_histogram {
  static_assert(SubBits >= 1 && SubBits <= 16, "from 2 to 65536 sub-buckets per power of two");

 public:
  // Sub-buckets per power of two.
  static constexpr uint64_t sub_buckets = uint64_t{1} << SubBits;
  // Values below this have a bucket each.
  static constexpr uint64_t exact_below = 2 * sub_buckets;
  // exact_below single-value buckets, then sub_buckets for each power of two from
  // 2^(SubBits + 1) to 2^63.
  static constexpr size_t buckets = exact_below + sub_buckets * (63 - SubBits);

  void record(uint64_t value) {
    counts_[bucket_of(value)].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(value, std::memory_order_relaxed);
    uint64_t max = max_.load(std::memory_order_relaxed);
    while (value > max && !max_.compare_exchange_weak(max, value, std::memory_order_relaxed)) {
    }
    uint64_t min = min_.load(std::memory_order_relaxed);
    while (value < min && !min_.compare_exchange_weak(min, value, std::memory_order_relaxed)) {
    }
  }
  [[nodiscard]] log_linear_snapshot<SubBits> snapshot() const;

  [[nodiscard]] static constexpr size_t bucket_of(uint64_t value) {
    if (value < exact_below) return static_cast<size_t>(value);
    const auto e = static_cast<unsigned>(std::bit_width(value)) - 1;  // SubBits+1 .. 63
    const auto sub = static_cast<size_t>((value >> (e - SubBits)) & (sub_buckets - 1));
    return static_cast<size_t>(exact_below + (e - SubBits - 1) * sub_buckets) + sub;
  }
  // The smallest value that falls into bucket i.
  [[nodiscard]] static constexpr uint64_t bucket_first(size_t i) {
    if (i < exact_below) return i;
    const auto e = static_cast<unsigned>(SubBits + 1 + (i - exact_below) / sub_buckets);
    const uint64_t sub = (i - exact_below) % sub_buckets;
    return (sub_buckets + sub) << (e - SubBits);
  }
  // The largest value that falls into bucket i.
  [[nodiscard]] static constexpr uint64_t bucket_limit(size_t i) {
    if (i + 1 >= buckets) return UINT64_MAX;
    return bucket_first(i + 1) - 1;
  }

 private:
  std::array<std::atomic<uint64_t>, buckets> counts_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_{0};
  std::atomic<uint64_t> max_{0};
  std::atomic<uint64_t> min_{UINT64_MAX};
};

template <unsigned SubBits>
class log_linear_snapshot {
  using histogram_type = log_linear_histogram<SubBits>;

 public:
  [[nodiscard]] uint64_t count() const { return count_; }
  [[nodiscard]] uint64_t sum() const { return sum_; }
  // The largest and smallest values recorded, exact for a snapshot of a histogram and for
  // merged snapshots; 0 when empty. For an interval (since()) see there.
  [[nodiscard]] uint64_t max() const { return count_ == 0 ? 0 : max_; }
  [[nodiscard]] uint64_t min() const { return count_ == 0 ? 0 : min_; }
  // The q-quantile (0 <= q <= 1) by nearest rank: the ceil(q * n)-th smallest of the n values
  // recorded (the smallest for q = 0), 0 when empty. Given as the largest value of its bucket
  // capped at max(), so it is never below the true quantile and at most 1/sub_buckets above it
  // (exact below exact_below): within 12.5% for histogram, 0.79% for precise_histogram.
  // quantile(1.0) is max(), exact where max() is.
  [[nodiscard]] uint64_t quantile(double q) const;
  // How many values were recorded in buckets that lie wholly at or below `v`: every value
  // below v's bucket, none above it (a Prometheus histogram's cumulative `le` count).
  [[nodiscard]] uint64_t count_at_most(uint64_t v) const;
  // "p50=A p99=B max=C" in milliseconds with one decimal (values in microseconds), for logs.
  [[nodiscard]] std::string percentiles_ms() const;
  // What was recorded between `earlier` and this snapshot, both of the same histogram.
  // Counts, sum and quantiles are those of the interval. Its maximum cannot be known from two
  // cumulative snapshots in general: it is exact when the interval raised the histogram's
  // maximum, else the largest value of the highest bucket the interval recorded into (an upper
  // bound within the quantiles' error); the minimum likewise, a lower bound at the least.
  [[nodiscard]] log_linear_snapshot since(const log_linear_snapshot& earlier) const;
  // Adds what `other` recorded (another thread's histogram, say) to this snapshot.
  log_linear_snapshot& merge(const log_linear_snapshot& other);
  log_linear_snapshot& operator+=(const log_linear_snapshot& other) { return merge(other); }

 private:
  friend class log_linear_histogram<SubBits>;
  std::array<uint64_t, histogram_type::buckets> counts_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t max_ = 0;
  uint64_t min_ = UINT64_MAX;
};

extern template class log_linear_histogram<3>;
extern template class log_linear_snapshot<3>;
extern template class log_linear_histogram<7>;
extern template class log_linear_snapshot<7>;

using histogram = log_linear_histogram<3>;
using histogram_snapshot = log_linear_snapshot<3>;
using precise_histogram = log_linear_histogram<7>;
using precise_histogram_snapshot = log_linear_snapshot<7>;

}  // namespace silt::base
