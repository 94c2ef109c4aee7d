#include "base/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>

namespace silt::base {

size_t histogram::bucket_of(uint64_t value) {
  if (value < 16) return static_cast<size_t>(value);
  const int e = std::bit_width(value) - 1;  // 4..63
  const auto sub = static_cast<size_t>((value >> (e - 3)) & 7);
  return std::min(buckets - 1, 16 + static_cast<size_t>(e - 4) * 8 + sub);
}

uint64_t histogram::bucket_limit(size_t i) {
  if (i < 16) return i;
  const size_t e = 4 + (i - 16) / 8;
  const uint64_t sub = (i - 16) % 8;
  if (e >= 63 && sub == 7) return UINT64_MAX;
  return ((8 + sub + 1) << (e - 3)) - 1;
}

histogram_snapshot histogram::snapshot() const {
  histogram_snapshot s;
  for (size_t i = 0; i < buckets; ++i) s.counts_[i] = counts_[i].load(std::memory_order_relaxed);
  s.count_ = count_.load(std::memory_order_relaxed);
  s.sum_ = sum_.load(std::memory_order_relaxed);
  return s;
}

uint64_t histogram_snapshot::quantile(double q) const {
  uint64_t total = 0;
  for (const auto c : counts_) total += c;
  if (total == 0) return 0;
  const auto rank = static_cast<uint64_t>(std::ceil(std::clamp(q, 0.0, 1.0) * total));
  uint64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= std::max<uint64_t>(rank, 1)) return histogram::bucket_limit(i);
  }
  return histogram::bucket_limit(counts_.size() - 1);
}

std::string histogram_snapshot::percentiles_ms() const {
  char buf[96];
  std::snprintf(
      buf, sizeof buf, "p50=%.1f p99=%.1f max=%.1f", static_cast<double>(quantile(0.5)) / 1000.0,
      static_cast<double>(quantile(0.99)) / 1000.0, static_cast<double>(quantile(1.0)) / 1000.0);
  return buf;
}

histogram_snapshot histogram_snapshot::since(const histogram_snapshot& earlier) const {
  histogram_snapshot d;
  for (size_t i = 0; i < counts_.size(); ++i) d.counts_[i] = counts_[i] - earlier.counts_[i];
  d.count_ = count_ - earlier.count_;
  d.sum_ = sum_ - earlier.sum_;
  return d;
}

}  // namespace silt::base
