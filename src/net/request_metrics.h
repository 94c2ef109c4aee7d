// Per-API request timing, in microseconds, after Kafka's request metrics (TotalTimeMs and its
// parts): for each request the server records
//   total  from the request's last byte read to its response's last byte written,
//   handle from that last byte to the handler's end (for a produce: checks, append, WAL
//          durability),
//   queue  from the handler's end to the start of the response's write (waiting behind the
//          connection's earlier responses and the writer),
//   send   the write of the response.
// A request without a response (acks=0) records total and handle only.
//
// Recording is lock-free; a histogram per API is created on its first request. report()
// prints one line per API with requests since the previous report.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/histogram.h"
#include "base/mutex.h"

namespace silt::net {

class request_metrics {
 public:
  struct api_timing {
    base::histogram total, handle, queue, send;
  };
  static constexpr int16_t max_key = 127;

  request_metrics();
  ~request_metrics();
  request_metrics(const request_metrics&) = delete;
  request_metrics& operator=(const request_metrics&) = delete;

  // The histograms of API `key`; nullptr for keys outside 0..max_key.
  [[nodiscard]] api_timing* of(int16_t key);
  // The same without creating them: nullptr for an API not requested yet.
  [[nodiscard]] const api_timing* find(int16_t key) const {
    if (key < 0 || key > max_key) return nullptr;
    return apis_[static_cast<size_t>(key)].load(std::memory_order_acquire);
  }

  // One line per API with requests since the previous report() (all since start on the
  // first), e.g. "Produce n=5210 total p50=2.1 p99=9.8 max=14.2 | handle p50=... | queue
  // p50=... | send p50=... ms"; empty when nothing was requested.
  // Each line starts with `prefix`.
  [[nodiscard]] std::string report(std::string_view prefix = {});

 private:
  struct snapshots;
  std::array<std::atomic<api_timing*>, max_key + 1> apis_{};
  base::mutex report_mu_;
  std::unique_ptr<snapshots> last_ GUARDED_BY(report_mu_);
};

}  // namespace silt::net
