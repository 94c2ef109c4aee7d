#include "handlers/windowed_rate.h"

#include <algorithm>

namespace silt::handlers {

windowed_rate::windowed_rate(int32_t samples, int64_t window_ms)
    : samples_(std::max(samples, 1)), window_ms_(std::max<int64_t>(window_ms, 1)) {}

windowed_rate::sample& windowed_rate::current(int64_t now_ms) {
  if (windows_.empty())
    windows_.push_back({.value = 0, .start_ms = now_ms, .last_event_ms = now_ms});
  return windows_[current_];
}

void windowed_rate::record(double value, int64_t now_ms) {
  sample* s = &current(now_ms);
  if (now_ms - s->start_ms >= window_ms_) {
    // The next window; one more than `samples_` are kept, the oldest reused.
    current_ = (current_ + 1) % (static_cast<size_t>(samples_) + 1);
    if (current_ >= windows_.size()) {
      windows_.push_back({.value = 0, .start_ms = now_ms, .last_event_ms = now_ms});
    } else {
      windows_[current_].reset(now_ms);
    }
    s = &windows_[current_];
  }
  s->value += value;
  s->last_event_ms = now_ms;
  last_record_ms_ = now_ms;
}

void windowed_rate::purge(int64_t now_ms) {
  const int64_t expire = samples_ * window_ms_;
  for (auto& s : windows_) {
    // A window that overlaps the measured span is kept, even if it started before it.
    if (now_ms - s.last_event_ms >= expire) s.reset(now_ms);
  }
}

int64_t windowed_rate::window_size_ms(int64_t now_ms) {
  purge(now_ms);
  if (windows_.empty())
    windows_.push_back({.value = 0, .start_ms = now_ms, .last_event_ms = now_ms});
  int64_t oldest = windows_.front().start_ms;
  for (const auto& s : windows_) oldest = std::min(oldest, s.start_ms);
  int64_t elapsed = now_ms - oldest;
  const int64_t full = elapsed / window_ms_;
  const int64_t min_full = samples_ - 1;
  if (full < min_full) elapsed += (min_full - full) * window_ms_;
  return std::max<int64_t>(elapsed, 1);
}

double windowed_rate::measure(int64_t now_ms) {
  purge(now_ms);
  double sum = 0;
  for (const auto& s : windows_) sum += s.value;
  return sum / (static_cast<double>(window_size_ms(now_ms)) / 1000.0);
}

}  // namespace silt::handlers
