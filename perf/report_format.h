// Internal to silt-perf's reports, not part of report.h: the number formats and phase tables
// that both the text summary (report.cc, which defines them) and the HTML page (html_report.cc)
// show, so that the two give the same figures in the same digits.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "results.h"

namespace silt::perf::report_format {

// printf into a string; the attribute has the compiler check the arguments against `f`.
[[gnu::format(printf, 1, 2)]] [[nodiscard]] std::string sformat(const char* f, ...);

// 1234567 -> "1,234,567".
[[nodiscard]] std::string grouped(uint64_t v);
// -1234567 -> "-1,234,567".
[[nodiscard]] std::string grouped_signed(int64_t v);
// A rate rounded to a whole number and grouped, "-" when not a number.
[[nodiscard]] std::string grouped_rate(double v);
// Seconds as HH:MM:SS.
[[nodiscard]] std::string clock_time(double seconds);
// A latency in milliseconds with three decimals, "-" when not a number.
[[nodiscard]] std::string ms3(double v);
// MiB/s with two decimals and the whole part grouped, "-" when not a number.
[[nodiscard]] std::string mib2(double v);

using row = std::array<std::string, 3>;  // a label and two columns

// A phase's throughput, produce and consume side by side; the first row is the heading.
[[nodiscard]] std::vector<row> throughput_rows(const interval_stats& s);
// A phase's produce and end-to-end latencies (average, P50 to P99.9, maximum, samples), "-"
// where there were no samples; the first row is the heading.
[[nodiscard]] std::vector<row> latency_rows(const interval_stats& s);
// "Test phase: 60.0 s".
[[nodiscard]] std::string phase_heading(const char* name, const interval_stats& s);
// "target 16,640 records/s", or "no target rate (flat out)".
[[nodiscard]] std::string target_text(double rate);

}  // namespace silt::perf::report_format
