#include "base/histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace silt::base {

template <unsigned SubBits>
log_linear_snapshot<SubBits> log_linear_histogram<SubBits>::snapshot() const {
  log_linear_snapshot<SubBits> s;
  for (size_t i = 0; i < buckets; ++i) s.counts_[i] = counts_[i].load(std::memory_order_relaxed);
  s.count_ = count_.load(std::memory_order_relaxed);
  s.sum_ = sum_.load(std::memory_order_relaxed);
  s.max_ = max_.load(std::memory_order_relaxed);
  s.min_ = min_.load(std::memory_order_relaxed);
  return s;
}

template <unsigned SubBits>
uint64_t log_linear_snapshot<SubBits>::quantile(double q) const {
  uint64_t total = 0;
  for (const auto c : counts_) total += c;
  if (total == 0) return 0;
  // Nearest rank. q * total may come out a rounding error above a whole number (0.07 * 100 is
  // 7.000000000000001), which would take the next rank: shave off a few units in the last place.
  const double x = std::clamp(q, 0.0, 1.0) * static_cast<double>(total);
  const auto rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(x - x * 1e-12)));
  uint64_t seen = 0;
  size_t i = 0;
  for (; i + 1 < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) break;
  }
  // The largest value recorded bounds its bucket from above, unless a racing record() counted
  // a value before raising the maximum to it.
  const uint64_t limit = histogram_type::bucket_limit(i);
  if (max_ >= histogram_type::bucket_first(i)) return std::min(limit, max_);
  return limit;
}

template <unsigned SubBits>
std::string log_linear_snapshot<SubBits>::percentiles_ms() const {
  char buf[96];
  std::snprintf(
      buf, sizeof buf, "p50=%.1f p99=%.1f max=%.1f", static_cast<double>(quantile(0.5)) / 1000.0,
      static_cast<double>(quantile(0.99)) / 1000.0, static_cast<double>(quantile(1.0)) / 1000.0);
  return buf;
}

template <unsigned SubBits>
uint64_t log_linear_snapshot<SubBits>::count_at_most(uint64_t v) const {
  uint64_t n = 0;
  for (size_t i = 0; i < histogram_type::buckets && histogram_type::bucket_limit(i) <= v; ++i) {
    n += counts_[i];
  }
  return n;
}

template <unsigned SubBits>
log_linear_snapshot<SubBits> log_linear_snapshot<SubBits>::since(
    const log_linear_snapshot& earlier) const {
  log_linear_snapshot d;
  size_t lowest = counts_.size();
  size_t highest = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    d.counts_[i] = counts_[i] - earlier.counts_[i];
    if (d.counts_[i] == 0) continue;
    lowest = std::min(lowest, i);
    highest = i;
  }
  d.count_ = count_ - earlier.count_;
  d.sum_ = sum_ - earlier.sum_;
  if (lowest == counts_.size()) return d;  // nothing recorded: max 0, min UINT64_MAX
  // A new maximum was recorded in the interval, so it is the interval's maximum. Otherwise
  // the interval's largest value lies in its highest bucket, and no higher than the maximum.
  d.max_ = max_ > earlier.max_ ? max_ : std::min(histogram_type::bucket_limit(highest), max_);
  d.min_ = min_ < earlier.min_ ? min_ : std::max(histogram_type::bucket_first(lowest), min_);
  return d;
}

template <unsigned SubBits>
log_linear_snapshot<SubBits>& log_linear_snapshot<SubBits>::merge(
    const log_linear_snapshot& other) {
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  max_ = std::max(max_, other.max_);
  min_ = std::min(min_, other.min_);
  return *this;
}

template class log_linear_histogram<3>;
template class log_linear_snapshot<3>;
template class log_linear_histogram<7>;
template class log_linear_snapshot<7>;

}  // namespace silt::base
