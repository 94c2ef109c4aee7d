// What a silt-perf record carries: a value from a pool built before the run, an optional key
// from a fixed set, and one header that ties it to its run and its due time:
//
//   header "silt-perf": run id (8 bytes, big-endian) | due time (8 bytes, big-endian signed,
//                       microseconds since the Unix epoch; 0 for a readiness probe)
//
// Consumers measure end-to-end latency from that due time (the record's CreateTime holds the
// same instant in milliseconds, too coarse for millisecond latencies), and skip records of
// other runs (reused topics). The pool is read by every producer thread and must outlive the
// producers: values are sent without a copy.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "workload.h"

namespace silt::perf {

inline constexpr const char* record_header_name = "silt-perf";
inline constexpr size_t record_header_size = 16;

[[nodiscard]] std::array<unsigned char, record_header_size> encode_record_header(uint64_t run_id,
                                                                                 int64_t due_us);
struct record_header {
  uint64_t run_id = 0;
  int64_t due_us = 0;  // 0: a probe
};
[[nodiscard]] std::optional<record_header> decode_record_header(const void* data, size_t size);

// Steady-clock instants as wall-clock microseconds, anchored once per run: producers and
// consumers of one process convert with the same anchor, so clock steps (NTP) during the
// run do not show up as latency.
struct clock_anchor {
  std::chrono::steady_clock::time_point steady0 = std::chrono::steady_clock::now();
  int64_t wall0_us = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  [[nodiscard]] int64_t wall_us(std::chrono::steady_clock::time_point t) const {
    return wall0_us + std::chrono::duration_cast<std::chrono::microseconds>(t - steady0).count();
  }
  [[nodiscard]] int64_t now_wall_us() const { return wall_us(std::chrono::steady_clock::now()); }
};

class payload_pool {
 public:
  // The values of `w`: its payload file's content, else random_pool_size payloads of
  // record_size bytes whose first random_ratio part is random and whose rest is w.fill (one
  // payload when nothing is random). A payload file that cannot be read is an error;
  // `notes` says what was chosen where the workload left a choice.
  [[nodiscard]] static tl::expected<payload_pool, std::string> build(
      const workload& w, std::vector<std::string>& notes);

  [[nodiscard]] const std::string& value(uint64_t n) const { return values_[n % values_.size()]; }
  [[nodiscard]] size_t value_count() const { return values_.size(); }
  // The fixed key set (OMB's: 10,000 random keys).
  [[nodiscard]] const std::string& key(uint64_t n) const { return keys_[n % keys_.size()]; }
  [[nodiscard]] size_t key_count() const { return keys_.size(); }

 private:
  std::vector<std::string> values_;
  std::vector<std::string> keys_;
};

}  // namespace silt::perf
