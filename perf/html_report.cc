// to_html (report.h): the self-contained HTML report of a run, its inline CSS and the SVG
// charts drawn here (axes and ticks, shaded warm-up and catch-up bands, a path per series, dots
// for lone points), no script. Numbers and phase tables are formatted as in the text summary
// (report_format.h, defined in report.cc).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "report.h"
#include "report_format.h"

namespace silt::perf {

using report_format::clock_time;
using report_format::grouped;
using report_format::grouped_rate;
using report_format::grouped_signed;
using report_format::latency_rows;
using report_format::mib2;
using report_format::ms3;
using report_format::phase_heading;
using report_format::row;
using report_format::sformat;
using report_format::target_text;
using report_format::throughput_rows;

namespace {

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// An axis: its domain and where the ticks go.
struct axis {
  double lo = 0;
  double hi = 1;
  bool log = false;
  std::vector<double> ticks;

  // Where v falls between lo (0) and hi (1).
  [[nodiscard]] double fraction(double v) const {
    if (log) {
      v = std::max(v, lo);
      return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    }
    return (v - lo) / (hi - lo);
  }
};

// The 1, 2 or 5 times a power of ten at or above raw.
double nice_step(double raw) {
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / power;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * power;
}

axis linear_axis(double max) {
  if (!std::isfinite(max) || max < 1e-300 || max > 1e300) max = 1;
  axis a;
  const double step = nice_step(max / 5);
  const auto steps = static_cast<int>(std::ceil(max / step - 1e-9));  // 5 to 10
  a.hi = steps * step;
  for (int i = 0; i <= steps; ++i) a.ticks.push_back(i * step);
  return a;
}

// Decades from below min to above max, with 1-2-5 ticks when they are few.
axis log_axis(double min, double max) {
  axis a;
  a.log = true;
  const int hi_e = static_cast<int>(std::ceil(std::log10(max)));
  // Twelve decades at most: anything lower sits on the bottom edge.
  const int lo_e = std::clamp(static_cast<int>(std::floor(std::log10(min))), hi_e - 12, hi_e - 1);
  a.lo = std::pow(10.0, lo_e);
  a.hi = std::pow(10.0, hi_e);
  const bool dense = hi_e - lo_e <= 3;
  for (int e = lo_e; e <= hi_e; ++e) {
    for (const double m : {1.0, 2.0, 5.0}) {
      if (m > 1 && (!dense || e == hi_e)) continue;
      a.ticks.push_back(m * std::pow(10.0, e));
    }
  }
  return a;
}

// Elapsed seconds, with ticks on round numbers of seconds or minutes.
axis time_axis(double lo, double hi) {
  axis a;
  a.lo = lo;
  a.hi = hi > lo ? hi : lo + std::max(1.0, std::abs(lo) * 1e-9);
  const double span = a.hi - a.lo;
  double step = 0;
  for (const double s : {1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0,
                         3600.0, 7200.0, 14400.0, 28800.0, 86400.0}) {
    step = s;
    if (span / s <= 10) break;
  }
  while (span / step > 10) step *= 2;
  const double first = std::ceil(a.lo / step);
  for (int i = 0; i <= 10 && (first + i) * step <= a.hi + 1e-9; ++i) {
    a.ticks.push_back((first + i) * step);
  }
  return a;
}

std::string time_label(double seconds, bool hours) {
  const auto s = std::llround(std::clamp(seconds, 0.0, 1e15));
  if (hours) return sformat("%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  return sformat("%lld:%02lld", s / 60, s % 60);
}

std::string value_label(double v) {
  // Whole numbers a uint64_t holds get thousands separators; absurd ones print as %g.
  if (v >= 1000 && v < 1e18 && v == std::floor(v)) return grouped(static_cast<uint64_t>(v));
  return sformat("%g", v);
}

struct series {
  std::string name;
  const char* color;
  std::vector<double> values;  // one per interval; NaN where it has none
};

struct chart {
  std::string id;
  std::string title;
  std::string unit;
  bool may_use_log = false;  // latencies, whose tails may be 100 times their medians
  std::vector<series> lines;
};

// A stretch of the run that is not the test phase, shaded on every chart.
struct band {
  double from = 0;
  double to = 0;
  std::string phase;
};

constexpr double chart_width = 960;
constexpr double chart_height = 300;
constexpr double margin_left = 76;
constexpr double margin_right = 18;
constexpr double margin_top = 40;
constexpr double margin_bottom = 46;
constexpr double plot_width = chart_width - margin_left - margin_right;
constexpr double plot_height = chart_height - margin_top - margin_bottom;

std::string px(double v) {
  return sformat("%.1f", v);
}

// One chart as an <svg>: frame, grid, ticks, shaded bands, lines and legend.
std::string render_chart(const chart& c, const std::vector<double>& xs, const axis& x,
                         const std::vector<band>& bands) {
  double max = 0;
  double min_positive = std::numeric_limits<double>::infinity();
  size_t drawn = 0;
  for (const auto& l : c.lines) {
    for (const double v : l.values) {
      if (!std::isfinite(v)) continue;
      ++drawn;
      max = std::max(max, v);
      if (v > 0) min_positive = std::min(min_positive, v);
    }
  }
  const bool log = c.may_use_log && std::isfinite(min_positive) && max / min_positive > 30;
  const axis y = log ? log_axis(min_positive, max) : linear_axis(max);
  const auto to_x = [&](double v) { return margin_left + x.fraction(v) * plot_width; };
  const auto to_y = [&](double v) {
    return margin_top + plot_height - std::clamp(y.fraction(v), 0.0, 1.0) * plot_height;
  };

  std::string o;
  o += sformat(R"(<svg class="chart" data-chart="%s" data-empty="%s" viewBox="0 0 %.0f %.0f" )",
               escape(c.id).c_str(), drawn == 0 ? "true" : "false", chart_width, chart_height);
  o += sformat(R"(width="%.0f" height="%.0f" role="img" aria-label="%s">)", chart_width,
               chart_height, escape(c.title).c_str());
  o += "<title>" + escape(c.title) + "</title>\n";
  o += sformat(R"(<text class="title" x="%s" y="22">%s</text>)", px(margin_left).c_str(),
               escape(c.title).c_str());
  o += '\n';
  for (const auto& b : bands) {
    const double x0 = to_x(b.from);
    const double x1 = to_x(b.to);
    if (x1 <= x0) continue;
    o += sformat(R"(<rect class="band %s" x="%s" y="%s" width="%s" height="%s"/>)", b.phase.c_str(),
                 px(x0).c_str(), px(margin_top).c_str(), px(x1 - x0).c_str(),
                 px(plot_height).c_str());
    o += sformat(R"(<text class="band-label" x="%s" y="%s">%s</text>)", px(x0 + 4).c_str(),
                 px(margin_top + 12).c_str(), b.phase == "warmup" ? "warm-up" : "catch-up");
    o += '\n';
  }
  // Grid and tick labels.
  for (const double t : y.ticks) {
    const double py = to_y(t);
    o += sformat(R"(<line class="grid" x1="%s" x2="%s" y1="%s" y2="%s"/>)", px(margin_left).c_str(),
                 px(margin_left + plot_width).c_str(), px(py).c_str(), px(py).c_str());
    o += sformat(R"(<text class="tick y" x="%s" y="%s">%s</text>)", px(margin_left - 6).c_str(),
                 px(py + 4).c_str(), value_label(t).c_str());
    o += '\n';
  }
  const bool hours = x.hi >= 3600;
  for (const double t : x.ticks) {
    const double pxx = to_x(t);
    o += sformat(R"(<line class="tick" x1="%s" x2="%s" y1="%s" y2="%s"/>)", px(pxx).c_str(),
                 px(pxx).c_str(), px(margin_top + plot_height).c_str(),
                 px(margin_top + plot_height + 5).c_str());
    o += sformat(R"(<text class="tick x" x="%s" y="%s">%s</text>)", px(pxx).c_str(),
                 px(margin_top + plot_height + 18).c_str(), time_label(t, hours).c_str());
    o += '\n';
  }
  o += sformat(R"(<rect class="frame" x="%s" y="%s" width="%s" height="%s"/>)",
               px(margin_left).c_str(), px(margin_top).c_str(), px(plot_width).c_str(),
               px(plot_height).c_str());
  o += sformat(R"(<text class="axis-label" x="%s" y="%s">elapsed (%s)</text>)",
               px(margin_left + plot_width / 2).c_str(), px(chart_height - 6).c_str(),
               hours ? "h:mm:ss" : "m:ss");
  o += sformat(
      R"~(<text class="axis-label y" transform="translate(14 %s) rotate(-90)">%s%s</text>)~",
      px(margin_top + plot_height / 2).c_str(), escape(c.unit).c_str(), log ? ", log scale" : "");
  o += '\n';
  if (drawn == 0) {
    o +=
        sformat(R"(<text class="no-data" x="%s" y="%s">no data</text>)",
                px(margin_left + plot_width / 2).c_str(), px(margin_top + plot_height / 2).c_str());
    o += '\n';
  }

  // The lines: one path each, a new subpath after a gap, a dot for a point on its own.
  for (const auto& l : c.lines) {
    std::string d;
    std::string dots;
    size_t points = 0;
    size_t run = 0;
    std::pair<double, double> last;
    const auto end_run = [&] {
      if (run == 1) {
        dots += sformat(R"(<circle cx="%s" cy="%s" r="3" fill="%s"/>)", px(last.first).c_str(),
                        px(last.second).c_str(), l.color);
      }
      run = 0;
    };
    for (size_t i = 0; i < l.values.size() && i < xs.size(); ++i) {
      if (!std::isfinite(l.values[i]) || !std::isfinite(xs[i])) {
        end_run();
        continue;
      }
      last = {to_x(xs[i]), to_y(l.values[i])};
      if (!d.empty()) d += ' ';
      d +=
          sformat("%c%s,%s", run == 0 ? 'M' : 'L', px(last.first).c_str(), px(last.second).c_str());
      ++run;
      ++points;
    }
    end_run();
    o += sformat(R"(<g class="series" data-series="%s" data-points="%zu">)", escape(l.name).c_str(),
                 points);
    if (!d.empty()) {
      o += sformat(R"(<path d="%s" fill="none" stroke="%s" stroke-width="1.6" )", d.c_str(),
                   l.color);
      o += R"(stroke-linejoin="round" stroke-linecap="round"/>)";
    }
    o += dots + "</g>\n";
  }

  // The legend, right-aligned above the plot.
  double width = 0;
  for (const auto& l : c.lines) width += 30 + 7.0 * static_cast<double>(l.name.size()) + 14;
  double lx = margin_left + plot_width - width;
  for (const auto& l : c.lines) {
    o += sformat(R"(<g class="legend"><line x1="%s" x2="%s" y1="18" y2="18" stroke="%s" )",
                 px(lx).c_str(), px(lx + 22).c_str(), l.color);
    o += sformat(R"(stroke-width="3"/><text x="%s" y="22">%s</text></g>)", px(lx + 28).c_str(),
                 escape(l.name).c_str());
    lx += 30 + 7.0 * static_cast<double>(l.name.size()) + 14;
  }
  o += "</svg>\n";
  return o;
}

constexpr const char* produce_color = "#1f77b4";
constexpr const char* consume_color = "#ff7f0e";
constexpr const char* p50_color = "#2ca02c";
constexpr const char* p99_color = "#ff7f0e";
constexpr const char* p999_color = "#d62728";
constexpr const char* backlog_color = "#9467bd";

std::vector<chart> charts_of(const run_result& r) {
  const auto& iv = r.intervals;
  const auto column = [&](auto get) {
    std::vector<double> v;
    v.reserve(iv.size());
    for (const auto& s : iv) v.push_back(get(s));
    return v;
  };
  constexpr double none = std::numeric_limits<double>::quiet_NaN();
  const auto latency = [&](latency_summary interval_stats::*which, double latency_summary::*q) {
    return column([&](const interval_stats& s) {
      const auto& l = s.*which;
      return l.count == 0 ? none : l.*q;
    });
  };
  const auto latency_chart = [&](std::string id, std::string title,
                                 latency_summary interval_stats::*which) {
    return chart{std::move(id),
                 std::move(title),
                 "ms",
                 true,
                 {{"p50", p50_color, latency(which, &latency_summary::p50_ms)},
                  {"p99", p99_color, latency(which, &latency_summary::p99_ms)},
                  {"p99.9", p999_color, latency(which, &latency_summary::p999_ms)}}};
  };
  std::vector<chart> charts;
  charts.push_back(
      {"throughput_mib",
       "Throughput, MiB/s",
       "MiB/s",
       false,
       {{"produce", produce_color, column([](const auto& s) { return s.produce_mib_per_s; })},
        {"consume", consume_color, column([](const auto& s) { return s.consume_mib_per_s; })}}});
  charts.push_back(
      {"throughput_msgs",
       "Throughput, records/s",
       "records/s",
       false,
       {{"produce", produce_color, column([](const auto& s) { return s.produce_msgs_per_s; })},
        {"consume", consume_color, column([](const auto& s) { return s.consume_msgs_per_s; })}}});
  charts.push_back(latency_chart("produce_latency", "Produce latency (send to acknowledgement), ms",
                                 &interval_stats::produce_latency));
  charts.push_back(latency_chart("e2e_latency", "End-to-end latency (create to consume), ms",
                                 &interval_stats::e2e_latency));
  charts.push_back({"backlog",
                    "Backlog, records acknowledged and not yet consumed",
                    "records",
                    false,
                    {{"backlog", backlog_color,
                      column([](const auto& s) { return static_cast<double>(s.backlog); })}}});
  return charts;
}

std::vector<band> bands_of(const std::vector<interval_stats>& iv) {
  std::vector<band> bands;
  for (const auto& s : iv) {
    if (s.phase != "warmup" && s.phase != "catchup") continue;
    if (!bands.empty() && bands.back().phase == s.phase && bands.back().to >= s.start_s - 1e-6) {
      bands.back().to = std::max(bands.back().to, s.start_s + s.duration_s);
    } else {
      bands.push_back({s.start_s, s.start_s + s.duration_s, s.phase});
    }
  }
  return bands;
}

void append_html_table(std::string& o, const std::vector<row>& rows) {
  o += "<table>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const char* cell = i == 0 ? "th" : "td";
    o += "<tr>";
    for (size_t j = 0; j < rows[i].size(); ++j) {
      const char* tag = j == 0 ? "th" : cell;
      o += sformat("<%s>%s</%s>", tag, escape(rows[i][j]).c_str(), tag);
    }
    o += "</tr>\n";
  }
  o += "</table>\n";
}

void append_html_phase(std::string& o, const char* name, const interval_stats& s) {
  o += "<h2>" + escape(phase_heading(name, s)) + "</h2>\n<div class=\"tables\">\n";
  append_html_table(o, throughput_rows(s));
  append_html_table(o, latency_rows(s));
  o += "</div>\n";
}

void append_interval_table(std::string& o, const std::vector<interval_stats>& iv) {
  o += "<details><summary>Every interval (" + grouped(iv.size()) + ")</summary>\n<table>\n";
  o += "<tr><th>end</th><th>phase</th><th>produce rec/s</th><th>MiB/s</th><th>errors</th>"
       "<th>consume rec/s</th><th>MiB/s</th><th>backlog</th><th>produce p50</th><th>p99</th>"
       "<th>p99.9</th><th>max</th><th>e2e p50</th><th>p99</th><th>p99.9</th><th>max</th></tr>\n";
  const auto lat = [](const latency_summary& l, double v) { return l.count ? ms3(v) : "-"; };
  for (const auto& s : iv) {
    const auto& p = s.produce_latency;
    const auto& e = s.e2e_latency;
    o += "<tr><td>" + clock_time(s.start_s + s.duration_s) + "</td><td>" + escape(s.phase) +
         "</td><td>" + grouped_rate(s.produce_msgs_per_s) + "</td><td>" +
         mib2(s.produce_mib_per_s) + "</td><td>" + grouped(s.produce_errors) + "</td><td>" +
         grouped_rate(s.consume_msgs_per_s) + "</td><td>" + mib2(s.consume_mib_per_s) +
         "</td><td>" + grouped_signed(s.backlog) + "</td>";
    for (const double v : {p.p50_ms, p.p99_ms, p.p999_ms, p.max_ms}) {
      o += "<td>" + lat(p, v) + "</td>";
    }
    for (const double v : {e.p50_ms, e.p99_ms, e.p999_ms, e.max_ms}) {
      o += "<td>" + lat(e, v) + "</td>";
    }
    o += "</tr>\n";
  }
  o += "</table>\n</details>\n";
}

constexpr const char* style = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
       max-width: 1000px; margin: 24px auto; padding: 0 12px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; }
.meta { color: #555; margin: 0 0 16px; }
.warnings { background: #fff4e5; border: 1px solid #f0b46c; padding: 8px 8px 8px 28px; }
figure { margin: 0 0 16px; }
svg.chart { display: block; width: 100%; height: auto; max-width: 960px; }
svg.chart text { font-size: 11px; fill: #333; }
svg.chart text.title { font-size: 14px; font-weight: 600; }
svg.chart text.tick.y { text-anchor: end; }
svg.chart text.tick.x, svg.chart text.axis-label, svg.chart text.no-data { text-anchor: middle; }
svg.chart text.band-label { font-size: 10px; fill: #777; }
svg.chart text.no-data { font-size: 14px; fill: #999; }
svg.chart .grid { stroke: #e8e8e8; }
svg.chart .tick { stroke: #888; }
svg.chart .frame { fill: none; stroke: #888; }
svg.chart .band.warmup { fill: #ececec; }
svg.chart .band.catchup { fill: #e3eefa; }
.tables { display: flex; flex-wrap: wrap; gap: 32px; align-items: flex-start; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; text-align: right; border-bottom: 1px solid #e4e4e4; }
th:first-child, td:first-child, td.text { text-align: left; }
details { margin-top: 24px; }
details table { font-size: 12px; }
)";

}  // namespace

std::string to_html(const run_result& r) {
  std::string o;
  const std::string& name = r.workload.empty() ? r.tool_mode : r.workload;
  const std::string title = name.empty() ? "silt-perf report" : "silt-perf: " + name;
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // Nothing to fetch, nothing to run: a report that is opened years later, or mailed, shows the
  // same thing offline and cannot leak that it was opened.
  o += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
       "style-src 'unsafe-inline'\">\n";
  o += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  o += "<title>" + escape(title) + "</title>\n<style>" + style + "</style>\n</head>\n<body>\n";
  o += "<h1>" + escape(title) + "</h1>\n";
  std::vector<std::string> meta;
  if (!r.tool_mode.empty()) meta.push_back(r.tool_mode + " mode");
  if (!r.broker.empty()) meta.push_back("broker " + r.broker);
  if (!r.started_at.empty()) meta.push_back("started " + r.started_at);
  meta.push_back(target_text(r.target_rate));
  o += "<p class=\"meta\">";
  for (size_t i = 0; i < meta.size(); ++i) o += (i ? " &middot; " : "") + escape(meta[i]);
  o += "</p>\n";
  if (!r.warnings.empty()) {
    o += "<ul class=\"warnings\">\n";
    for (const auto& w : r.warnings) o += "<li>" + escape(w) + "</li>\n";
    o += "</ul>\n";
  }

  std::vector<double> xs;
  xs.reserve(r.intervals.size());
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  for (const auto& s : r.intervals) {
    xs.push_back(s.start_s + s.duration_s);
    if (std::isfinite(s.start_s)) lo = std::min(lo, s.start_s);
    if (std::isfinite(xs.back())) hi = std::max(hi, xs.back());
  }
  if (!std::isfinite(lo)) lo = 0;
  if (!std::isfinite(hi)) hi = lo;
  const axis x = time_axis(lo, hi);
  const auto bands = bands_of(r.intervals);
  o += "<section class=\"charts\">\n";
  for (const auto& c : charts_of(r))
    o += "<figure>\n" + render_chart(c, xs, x, bands) + "</figure>\n";
  o += "</section>\n";

  append_html_phase(o, "Test phase", r.test);
  if (r.catchup) append_html_phase(o, "Catch-up phase (reading the backlog)", *r.catchup);

  o += "<h2>Parameters</h2>\n";
  std::vector<row> params{{"Parameter", "Value", ""}};
  for (const auto& [k, v] : r.parameters) params.push_back({k, v, ""});
  o += "<table>\n";
  for (size_t i = 0; i < params.size(); ++i) {
    const char* tag = i == 0 ? "th" : "td";
    o += sformat("<tr><th>%s</th><%s class=\"text\">%s</%s></tr>\n", escape(params[i][0]).c_str(),
                 tag, escape(params[i][1]).c_str(), tag);
  }
  o += "</table>\n";
  if (!r.intervals.empty()) append_interval_table(o, r.intervals);
  o += "</body>\n</html>\n";
  return o;
}

}  // namespace silt::perf
