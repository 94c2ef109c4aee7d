// What one silt-perf run measured: the runner fills it, report.h writes it as text, JSON and
// HTML. Latencies are in milliseconds, rates per second, sizes in bytes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/histogram.h"

namespace silt::perf {

// Average, percentiles and maximum of a set of latencies.
struct latency_summary {
  uint64_t count = 0;
  double avg_ms = 0;
  double p50_ms = 0;
  double p75_ms = 0;
  double p90_ms = 0;
  double p95_ms = 0;
  double p99_ms = 0;
  double p999_ms = 0;
  double max_ms = 0;
};

// One reporting interval (or a whole phase, for the aggregates).
struct interval_stats {
  double start_s = 0;     // since the run started (its first send)
  double duration_s = 0;  // length of the interval
  // "search" (the maximum-rate trials), "warmup", "test", "backlog" (written for the catch-up
  // read), "catchup" or "drain" (what is left read after the test)
  std::string phase;
  uint64_t sent = 0;   // records sent (handed to the client) in the interval
  uint64_t acked = 0;  // records acknowledged by the broker
  uint64_t produce_errors = 0;
  uint64_t consumed = 0;
  uint64_t acked_bytes = 0;
  uint64_t consumed_bytes = 0;
  int64_t backlog = 0;  // records acknowledged and not yet consumed, summed over groups
  double produce_msgs_per_s = 0;
  double produce_mib_per_s = 0;
  double consume_msgs_per_s = 0;
  double consume_mib_per_s = 0;
  latency_summary produce_latency;  // from the scheduled send time to the acknowledgement
  latency_summary e2e_latency;      // from the record's CreateTime to its consumption
};

struct run_result {
  std::string tool_mode;   // "automq", "omb"
  std::string workload;    // the workload's name
  std::string broker;      // the bootstrap servers
  std::string started_at;  // UTC, ISO 8601
  // The workload and client settings as run, for the report's header.
  std::map<std::string, std::string> parameters;
  double target_rate = 0;  // records/s asked for (0: as fast as possible)
  std::vector<interval_stats> intervals;
  interval_stats test;                    // the test phase as a whole (warm-up excluded)
  std::optional<interval_stats> catchup;  // the backlog read, when the workload has one
  // Said in every output: the requested rate not kept, errors, anything a reader must know.
  std::vector<std::string> warnings;
};

// Latencies recorded in microseconds, summarised in milliseconds.
[[nodiscard]] latency_summary summarize_us(const base::precise_histogram_snapshot& s);

}  // namespace silt::perf
