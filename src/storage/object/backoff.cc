#include "storage/object/backoff.h"

#include <algorithm>

namespace silt::storage {
namespace {

// SplitMix64: a good 64-bit mix of a counter, enough for jitter.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::chrono::milliseconds backoff::cap(uint32_t retry) const {
  const auto base = static_cast<uint64_t>(std::max<int64_t>(policy_.base_delay.count(), 0));
  const auto max = static_cast<uint64_t>(std::max<int64_t>(policy_.max_delay.count(), 0));
  // base * 2^retry, clamped to max without overflowing.
  const uint64_t grown = (retry >= 63 || base > (max >> retry)) ? max : base << retry;
  return std::chrono::milliseconds(static_cast<int64_t>(grown));
}

std::chrono::milliseconds backoff::delay(uint32_t retry) {
  const auto limit = static_cast<uint64_t>(cap(retry).count());
  const uint64_t draw = mix(seed_ ^ mix(draws_.fetch_add(1, std::memory_order_relaxed)));
  return std::chrono::milliseconds(static_cast<int64_t>(draw % (limit + 1)));
}

}  // namespace silt::storage
