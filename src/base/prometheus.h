// Writes metrics in the Prometheus text exposition format (version 0.0.4): each family once,
// its `# HELP` and `# TYPE` lines first, then its samples, label values escaped. The writer
// only builds a string; the caller serves it (net/metrics_http.h) or logs it.
//
// Families must be written whole, one after the other: begin a family, write its samples, then
// the next family. Names are the caller's (Prometheus names: [a-zA-Z_:][a-zA-Z0-9_:]*; checked
// by assertion).
//
// Histograms come from the broker's latency histograms (base/histogram.h, microseconds) and
// are written in seconds, with cumulative `le` buckets at fixed bounds. A value counts under
// the first bound that its whole histogram bucket lies under: within a bucket's width (12.5%)
// of the bound, a value may be counted one bound later, never earlier.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/histogram.h"

namespace silt::base {

class prometheus_writer {
 public:
  using labels = std::span<const std::pair<std::string_view, std::string_view>>;
  enum class type : uint8_t { counter, gauge, histogram };

  // Starts a family: `# HELP name help` and `# TYPE name type`. A counter's name ends in
  // "_total", in these lines as in its samples.
  void family(std::string_view name, type t, std::string_view help);
  // One sample of the current counter or gauge family.
  void sample(std::string_view name, labels l, double value);
  void sample(std::string_view name, double value) { sample(name, {}, value); }
  // A family of one sample without labels.
  void single(std::string_view name, type t, std::string_view help, double value) {
    family(name, t, help);
    sample(name, value);
  }
  // The samples of one histogram of the current histogram family: `name_bucket{le=...}` for
  // each bound in seconds and +Inf, `name_sum` (seconds) and `name_count`.
  void histogram(std::string_view name, labels l, const histogram_snapshot& micros);

  // The bounds of histograms, in seconds: 100 us to 10 s.
  static const std::vector<double>& bounds();

  [[nodiscard]] const std::string& text() const { return out_; }
  [[nodiscard]] std::string take() { return std::move(out_); }

 private:
  void write_labels(labels l, std::string_view extra_name = {}, std::string_view extra = {});
  std::string out_;
};

// A label value escaped for the text format: backslash, double quote and newline.
[[nodiscard]] std::string prometheus_escape(std::string_view value);

}  // namespace silt::base
