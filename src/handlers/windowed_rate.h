// A rate over sliding sample windows, as Kafka's quota sensors measure it (its Rate over a
// SampledStat of WindowedSum): `samples` windows of `window_ms` each, the current one included;
// a window older than all of them together is forgotten; the rate is the sum of the kept
// windows over the time they span, which counts at least `samples - 1` whole windows so that a
// client's first burst is not measured over a few milliseconds.
//
// Not thread-safe: its owner (client_quotas) locks around it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace silt::handlers {

class windowed_rate {
 public:
  // `samples` >= 1, `window_ms` >= 1.
  windowed_rate(int32_t samples, int64_t window_ms);

  // Adds `value` at `now_ms` (a steady clock in milliseconds).
  void record(double value, int64_t now_ms);
  // The rate at `now_ms`, per second.
  [[nodiscard]] double measure(int64_t now_ms);
  // The time the rate at `now_ms` is measured over, in milliseconds (at least 1).
  [[nodiscard]] int64_t window_size_ms(int64_t now_ms);
  // When record() was last called (-1: never).
  [[nodiscard]] int64_t last_record_ms() const { return last_record_ms_; }

 private:
  struct sample {
    double value = 0;
    int64_t start_ms = 0;
    int64_t last_event_ms = 0;
    void reset(int64_t now_ms) {
      value = 0;
      start_ms = now_ms;
      last_event_ms = now_ms;
    }
  };
  sample& current(int64_t now_ms);
  void purge(int64_t now_ms);

  const int32_t samples_;
  const int64_t window_ms_;
  // Kafka keeps one sample more than it measures: the one that overlaps the window's start.
  std::vector<sample> windows_;
  size_t current_ = 0;
  int64_t last_record_ms_ = -1;
};

}  // namespace silt::handlers
