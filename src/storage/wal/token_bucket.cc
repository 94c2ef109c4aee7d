#include "storage/wal/token_bucket.h"

#include <algorithm>

namespace silt::storage::wal {

token_bucket::token_bucket(uint32_t rate, clock::time_point now)
    : rate_(rate), burst_(std::max(1.0, rate / 1000.0)), tokens_(burst_), last_(now) {}

void token_bucket::refill(clock::time_point now) {
  if (now <= last_) return;
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(burst_, tokens_ + elapsed * rate_);
  last_ = now;
}

token_bucket::clock::duration token_bucket::wait_time(clock::time_point now) {
  if (rate_ == 0) return clock::duration::zero();
  refill(now);
  if (tokens_ >= 1.0) return clock::duration::zero();
  const std::chrono::duration<double> wait((1.0 - tokens_) / rate_);
  // Rounded up so that the write is due when the wait ends.
  return std::chrono::ceil<clock::duration>(wait);
}

void token_bucket::take(uint32_t n, clock::time_point now) {
  if (rate_ == 0) return;
  refill(now);
  tokens_ -= n;
}

}  // namespace silt::storage::wal
