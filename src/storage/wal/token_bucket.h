// Paces writes to an IOPS cap: a token bucket refilled at `rate` tokens per second holding
// about a millisecond of tokens (at least one), so writes are spread out rather than sent in
// bursts that a provisioned-IOPS volume would throttle anyway.
//
// Owned and used by the WAL's I/O thread only.
#pragma once

#include <chrono>
#include <cstdint>

namespace silt::storage::wal {

class token_bucket {
 public:
  using clock = std::chrono::steady_clock;

  // `rate` 0: no cap (wait_time() is always zero).
  token_bucket(uint32_t rate, clock::time_point now);

  // Zero when a write may be sent now, else how long until it may.
  [[nodiscard]] clock::duration wait_time(clock::time_point now);

  // Takes `n` tokens. A write needing more tokens than the bucket holds (one that wraps the
  // ring end counts twice) runs it into debt rather than waiting forever.
  void take(uint32_t n, clock::time_point now);

 private:
  void refill(clock::time_point now);

  double rate_;
  double burst_;
  double tokens_;
  clock::time_point last_;
};

}  // namespace silt::storage::wal
