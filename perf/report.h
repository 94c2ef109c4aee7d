// What silt-perf shows of a run (results.h): a progress line per reporting interval while it
// goes, then a plain-text summary, JSON that reads back in, and one self-contained HTML page
// with SVG charts. All are pure functions of the run_result; only write_reports touches files.
// report.cc holds the text and JSON, html_report.cc the HTML page.
//
// The JSON (version 1) mirrors results.h field by field, with the same names:
//
//   {"format": "silt-perf", "version": 1,
//    "tool_mode", "workload", "broker", "started_at": strings, "target_rate": number,
//    "parameters": {name: string...}, "warnings": [string...],
//    "test": interval, "catchup": interval or null, "intervals": [interval...]}
//   interval: {"start_s", "duration_s": numbers, "phase": string, "sent", "acked",
//              "produce_errors", "consumed", "acked_bytes", "consumed_bytes": unsigned,
//              "backlog": integer, "produce_msgs_per_s", "produce_mib_per_s",
//              "consume_msgs_per_s", "consume_mib_per_s": numbers,
//              "produce_latency", "e2e_latency": latency}
//   latency:  {"count": unsigned, "avg_ms", "p50_ms", "p75_ms", "p90_ms", "p95_ms", "p99_ms",
//              "p999_ms", "max_ms": numbers}
//
// A number that is not finite is written as null and read back as NaN. Readers ignore fields
// they do not know, so later versions may add fields without raising the version.
//
// The HTML page loads nothing (its Content-Security-Policy forbids every fetch) and runs no
// script: inline CSS, and SVG drawn here. Its charts are <svg class="chart" data-chart=NAME>,
// each line a <g class="series" data-series=NAME data-points=N> holding one <path> through
// its N points (gaps, where an interval has no latency samples, start a new subpath) and a
// <circle> for each point that has no neighbour to draw a line to. Charts: throughput_mib,
// throughput_msgs, produce_latency, e2e_latency, backlog.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>
#include <tl/expected.hpp>

#include "results.h"

namespace silt::perf {

// One interval in one line, phase and elapsed time (at the interval's end) first:
// "[test 00:01:30] produce 16,640 msg/s 1040.0 MiB/s (errors 0) | consume 16,640 msg/s
// 1040.0 MiB/s | backlog 1,234 | produce p50 2.10 p99 8.30 max 41.2 ms | e2e p50 ...".
// No trailing newline.
[[nodiscard]] std::string progress_line(const interval_stats& s);

// The run's result as plain text: what was run, then for the test phase (and the catch-up
// phase, if any) throughput and the produce and end-to-end latency table (average, P50, P75,
// P90, P95, P99, P99.9, maximum), then every warning. Ends with a newline.
[[nodiscard]] std::string summary_table(const run_result& r);

[[nodiscard]] nlohmann::json to_json(const run_result& r);
// The inverse of to_json; an error names the first field that is missing or of the wrong type.
[[nodiscard]] tl::expected<run_result, std::string> from_json(const nlohmann::json& j);

// The self-contained HTML page described above.
[[nodiscard]] std::string to_html(const run_result& r);

// Writes to_json (indented) to json_path and to_html to html_path; an empty path is skipped.
[[nodiscard]] tl::expected<void, std::string> write_reports(const run_result& r,
                                                            const std::string& json_path,
                                                            const std::string& html_path);

}  // namespace silt::perf
