// Retry delays: exponential backoff with full jitter (AWS's "Exponential Backoff And Jitter"):
// before retry n (0 for the first retry) wait a uniformly random time in
// [0, min(max_delay, base_delay * 2^n)]. Full jitter spreads the retries of many clients that
// failed together, which is what a throttling server needs.
//
// Deterministic for a seed: the k-th delay drawn depends only on the seed, k and the retry
// number, so tests can predict it. Thread-safe (an atomic draw counter).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace silt::storage {

struct retry_policy {
  uint32_t max_attempts = 6;  // attempts in all, the first included; 1: no retries
  std::chrono::milliseconds base_delay{50};
  std::chrono::milliseconds max_delay{5000};
};

class backoff {
 public:
  backoff(retry_policy policy, uint64_t seed) : policy_(policy), seed_(seed) {}

  // The delay before retry `retry` (0 for the first retry).
  [[nodiscard]] std::chrono::milliseconds delay(uint32_t retry);
  // The upper bound that delay(retry) draws below (inclusive).
  [[nodiscard]] std::chrono::milliseconds cap(uint32_t retry) const;
  [[nodiscard]] const retry_policy& policy() const { return policy_; }

 private:
  const retry_policy policy_;
  const uint64_t seed_;
  std::atomic<uint64_t> draws_{0};
};

}  // namespace silt::storage
