// The text and JSON outputs of report.h: summarize_us, the progress line, the plain-text summary,
// the JSON and its reader, and write_reports. The HTML page is html_report.cc; the number formats
// and phase tables it shares with the text summary are defined here (report_format.h).
#include "report.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "report_format.h"

namespace silt::perf {

using report_format::clock_time;
using report_format::grouped;
using report_format::grouped_rate;
using report_format::grouped_signed;
using report_format::latency_rows;
using report_format::phase_heading;
using report_format::row;
using report_format::sformat;
using report_format::target_text;
using report_format::throughput_rows;

latency_summary summarize_us(const base::precise_histogram_snapshot& s) {
  latency_summary l;
  l.count = s.count();
  if (l.count == 0) return l;
  const auto ms = [](uint64_t us) { return static_cast<double>(us) / 1000.0; };
  l.avg_ms = static_cast<double>(s.sum()) / static_cast<double>(l.count) / 1000.0;
  l.p50_ms = ms(s.quantile(0.5));
  l.p75_ms = ms(s.quantile(0.75));
  l.p90_ms = ms(s.quantile(0.90));
  l.p95_ms = ms(s.quantile(0.95));
  l.p99_ms = ms(s.quantile(0.99));
  l.p999_ms = ms(s.quantile(0.999));
  l.max_ms = ms(s.max());
  return l;
}

namespace {

// ---- Number formats only the text uses ----

// A number with `decimals` decimals and its whole part grouped, "-" when not a number.
std::string grouped_fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  const std::string digits = sformat("%.*f", decimals, std::fabs(v));
  const size_t whole = std::min(digits.find('.'), digits.size());
  std::string out;
  if (std::signbit(v) && digits.find_first_of("123456789") != std::string::npos) out += '-';
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && i < whole && (whole - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// A latency with three significant digits or so, for the progress line.
std::string short_ms(double v) {
  if (!std::isfinite(v)) return "-";
  if (v < 10) return sformat("%.2f", v);
  if (v < 1000) return sformat("%.1f", v);
  return grouped_rate(v);
}

std::string latency_brief(const char* name, const latency_summary& l) {
  if (l.count == 0) return sformat("%s -", name);
  return sformat("%s p50 %s p99 %s max %s ms", name, short_ms(l.p50_ms).c_str(),
                 short_ms(l.p99_ms).c_str(), short_ms(l.max_ms).c_str());
}

std::string fixed1(double v) {
  return std::isfinite(v) ? sformat("%.1f", v) : "-";
}
std::string rate1(double v) {
  return grouped_fixed(v, 1);
}

}  // namespace

// ---- Shared with the HTML page (report_format.h) ----

namespace report_format {

std::string sformat(const char* f, ...) {
  // Twice: the length first, then the text (va_start again rather than va_copy).
  va_list args;
  va_start(args, f);
  const int n = std::vsnprintf(nullptr, 0, f, args);
  va_end(args);
  if (n <= 0) return {};
  std::string s(static_cast<size_t>(n), '\0');
  va_start(args, f);
  std::vsnprintf(s.data(), s.size() + 1, f, args);
  va_end(args);
  return s;
}

std::string grouped(uint64_t v) {
  const std::string digits = std::to_string(v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string grouped_signed(int64_t v) {
  if (v >= 0) return grouped(static_cast<uint64_t>(v));
  return "-" + grouped(static_cast<uint64_t>(-(v + 1)) + 1);
}

std::string grouped_rate(double v) {
  return grouped_fixed(v, 0);
}

std::string clock_time(double seconds) {
  const auto s =
      std::isfinite(seconds) && seconds > 0 ? std::llround(std::min(seconds, 1e15)) : 0LL;
  return sformat("%02lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
}

std::string ms3(double v) {
  return std::isfinite(v) ? sformat("%.3f", v) : "-";
}
std::string mib2(double v) {
  return grouped_fixed(v, 2);
}

std::vector<row> throughput_rows(const interval_stats& s) {
  return {
      {"", "Produce", "Consume"},
      {"Records", grouped(s.acked), grouped(s.consumed)},
      {"Records/s", rate1(s.produce_msgs_per_s), rate1(s.consume_msgs_per_s)},
      {"MiB/s", mib2(s.produce_mib_per_s), mib2(s.consume_mib_per_s)},
      {"Records sent", grouped(s.sent), ""},
      {"Errors", grouped(s.produce_errors), ""},
      {"Backlog at end", "", grouped_signed(s.backlog)},
  };
}

std::vector<row> latency_rows(const interval_stats& s) {
  const auto& p = s.produce_latency;
  const auto& e = s.e2e_latency;
  const auto cell = [](const latency_summary& l, double v) { return l.count ? ms3(v) : "-"; };
  return {
      {"Latency (ms)", "Produce", "E2E"},
      {"Average", cell(p, p.avg_ms), cell(e, e.avg_ms)},
      {"P50", cell(p, p.p50_ms), cell(e, e.p50_ms)},
      {"P75", cell(p, p.p75_ms), cell(e, e.p75_ms)},
      {"P90", cell(p, p.p90_ms), cell(e, e.p90_ms)},
      {"P95", cell(p, p.p95_ms), cell(e, e.p95_ms)},
      {"P99", cell(p, p.p99_ms), cell(e, e.p99_ms)},
      {"P99.9", cell(p, p.p999_ms), cell(e, e.p999_ms)},
      {"Maximum", cell(p, p.max_ms), cell(e, e.max_ms)},
      {"Samples", grouped(p.count), grouped(e.count)},
  };
}

std::string phase_heading(const char* name, const interval_stats& s) {
  return sformat("%s: %.1f s", name, s.duration_s);
}

std::string target_text(double rate) {
  return rate > 0 ? "target " + grouped_rate(rate) + " records/s" : "no target rate (flat out)";
}

}  // namespace report_format

namespace {

// ---- Text ----

void append_text_table(std::string& out, const std::vector<row>& rows) {
  for (const auto& r : rows) {
    std::string line = sformat("  %-18s%16s%16s", r[0].c_str(), r[1].c_str(), r[2].c_str());
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
}

// ---- JSON ----

// Key paths in error messages: "intervals[2].produce_latency.p99_ms".
std::string path_of(const std::string& where, std::string_view key) {
  return where.empty() ? std::string(key) : where + "." + std::string(key);
}

// Reads fields with a sticky error: each getter returns a zero value once anything failed,
// and the caller checks error() once at the end.
class json_reader {
 public:
  [[nodiscard]] const std::string& error() const { return error_; }

  const nlohmann::json* field(const nlohmann::json& o, const std::string& where,
                              std::string_view key) {
    if (!error_.empty()) return nullptr;
    if (!o.is_object()) {
      fail(where.empty() ? "the document" : where, "is not an object");
      return nullptr;
    }
    const auto it = o.find(key);
    if (it == o.end()) {
      fail(path_of(where, key), "is missing");
      return nullptr;
    }
    return &*it;
  }

  double number(const nlohmann::json& o, const std::string& where, std::string_view key) {
    const auto* v = field(o, where, key);
    if (v == nullptr) return 0;
    if (v->is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (!v->is_number()) {
      fail(path_of(where, key), "is not a number");
      return 0;
    }
    return v->get<double>();
  }

  uint64_t count(const nlohmann::json& o, const std::string& where, std::string_view key) {
    const auto* v = field(o, where, key);
    if (v == nullptr) return 0;
    if (!v->is_number_unsigned()) {
      fail(path_of(where, key), "is not a non-negative integer");
      return 0;
    }
    return v->get<uint64_t>();
  }

  int64_t integer(const nlohmann::json& o, const std::string& where, std::string_view key) {
    const auto* v = field(o, where, key);
    if (v == nullptr) return 0;
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(path_of(where, key), "is out of range");
      return 0;
    }
    if (!v->is_number_integer()) {
      fail(path_of(where, key), "is not an integer");
      return 0;
    }
    return v->get<int64_t>();
  }

  std::string text(const nlohmann::json& o, const std::string& where, std::string_view key) {
    const auto* v = field(o, where, key);
    if (v == nullptr) return {};
    if (!v->is_string()) {
      fail(path_of(where, key), "is not a string");
      return {};
    }
    return v->get<std::string>();
  }

  void fail(const std::string& what, const char* why) {
    if (error_.empty()) error_ = what + " " + why;
  }

 private:
  std::string error_;
};

nlohmann::json latency_json(const latency_summary& l) {
  return {{"count", l.count},   {"avg_ms", l.avg_ms},   {"p50_ms", l.p50_ms},
          {"p75_ms", l.p75_ms}, {"p90_ms", l.p90_ms},   {"p95_ms", l.p95_ms},
          {"p99_ms", l.p99_ms}, {"p999_ms", l.p999_ms}, {"max_ms", l.max_ms}};
}

latency_summary read_latency(json_reader& in, const nlohmann::json& o, const std::string& where) {
  latency_summary l;
  l.count = in.count(o, where, "count");
  l.avg_ms = in.number(o, where, "avg_ms");
  l.p50_ms = in.number(o, where, "p50_ms");
  l.p75_ms = in.number(o, where, "p75_ms");
  l.p90_ms = in.number(o, where, "p90_ms");
  l.p95_ms = in.number(o, where, "p95_ms");
  l.p99_ms = in.number(o, where, "p99_ms");
  l.p999_ms = in.number(o, where, "p999_ms");
  l.max_ms = in.number(o, where, "max_ms");
  return l;
}

nlohmann::json interval_json(const interval_stats& s) {
  return {{"start_s", s.start_s},
          {"duration_s", s.duration_s},
          {"phase", s.phase},
          {"sent", s.sent},
          {"acked", s.acked},
          {"produce_errors", s.produce_errors},
          {"consumed", s.consumed},
          {"acked_bytes", s.acked_bytes},
          {"consumed_bytes", s.consumed_bytes},
          {"backlog", s.backlog},
          {"produce_msgs_per_s", s.produce_msgs_per_s},
          {"produce_mib_per_s", s.produce_mib_per_s},
          {"consume_msgs_per_s", s.consume_msgs_per_s},
          {"consume_mib_per_s", s.consume_mib_per_s},
          {"produce_latency", latency_json(s.produce_latency)},
          {"e2e_latency", latency_json(s.e2e_latency)}};
}

interval_stats read_interval(json_reader& in, const nlohmann::json& o, const std::string& where) {
  interval_stats s;
  s.start_s = in.number(o, where, "start_s");
  s.duration_s = in.number(o, where, "duration_s");
  s.phase = in.text(o, where, "phase");
  s.sent = in.count(o, where, "sent");
  s.acked = in.count(o, where, "acked");
  s.produce_errors = in.count(o, where, "produce_errors");
  s.consumed = in.count(o, where, "consumed");
  s.acked_bytes = in.count(o, where, "acked_bytes");
  s.consumed_bytes = in.count(o, where, "consumed_bytes");
  s.backlog = in.integer(o, where, "backlog");
  s.produce_msgs_per_s = in.number(o, where, "produce_msgs_per_s");
  s.produce_mib_per_s = in.number(o, where, "produce_mib_per_s");
  s.consume_msgs_per_s = in.number(o, where, "consume_msgs_per_s");
  s.consume_mib_per_s = in.number(o, where, "consume_mib_per_s");
  if (const auto* l = in.field(o, where, "produce_latency")) {
    s.produce_latency = read_latency(in, *l, path_of(where, "produce_latency"));
  }
  if (const auto* l = in.field(o, where, "e2e_latency")) {
    s.e2e_latency = read_latency(in, *l, path_of(where, "e2e_latency"));
  }
  return s;
}

constexpr int json_version = 1;

tl::expected<void, std::string> write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) {
    return tl::unexpected("cannot create " + path + ": " +
                          std::error_code(errno, std::generic_category()).message());
  }
  f << text;
  f.close();
  if (!f) return tl::unexpected("cannot write " + path);
  return {};
}

}  // namespace

std::string progress_line(const interval_stats& s) {
  std::string line = sformat(
      "[%s %s] produce %s msg/s %s MiB/s (errors %s) | consume %s msg/s %s MiB/s | backlog %s | ",
      s.phase.c_str(), clock_time(s.start_s + s.duration_s).c_str(),
      grouped_rate(s.produce_msgs_per_s).c_str(), fixed1(s.produce_mib_per_s).c_str(),
      grouped(s.produce_errors).c_str(), grouped_rate(s.consume_msgs_per_s).c_str(),
      fixed1(s.consume_mib_per_s).c_str(), grouped_signed(s.backlog).c_str());
  line += latency_brief("produce", s.produce_latency);
  line += " | ";
  line += latency_brief("e2e", s.e2e_latency);
  return line;
}

std::string summary_table(const run_result& r) {
  std::string o =
      sformat("silt-perf %s: workload \"%s\", broker %s, started %s\n", r.tool_mode.c_str(),
              r.workload.c_str(), r.broker.c_str(), r.started_at.c_str());
  o += phase_heading("Test phase", r.test) + " (warm-up excluded), " + target_text(r.target_rate) +
       "\n";
  append_text_table(o, throughput_rows(r.test));
  o += '\n';
  append_text_table(o, latency_rows(r.test));
  if (r.catchup) {
    o += '\n' + phase_heading("Catch-up phase (reading the backlog)", *r.catchup) + "\n";
    append_text_table(o, throughput_rows(*r.catchup));
    o += '\n';
    append_text_table(o, latency_rows(*r.catchup));
  }
  if (!r.warnings.empty()) {
    o += "\nWarnings:\n";
    for (const auto& w : r.warnings) o += "  - " + w + "\n";
  }
  return o;
}

nlohmann::json to_json(const run_result& r) {
  nlohmann::json intervals = nlohmann::json::array();
  for (const auto& s : r.intervals) intervals.push_back(interval_json(s));
  return {{"format", "silt-perf"},
          {"version", json_version},
          {"tool_mode", r.tool_mode},
          {"workload", r.workload},
          {"broker", r.broker},
          {"started_at", r.started_at},
          {"target_rate", r.target_rate},
          {"parameters", r.parameters},
          {"warnings", r.warnings},
          {"test", interval_json(r.test)},
          {"catchup", r.catchup ? interval_json(*r.catchup) : nlohmann::json()},
          {"intervals", std::move(intervals)}};
}

tl::expected<run_result, std::string> from_json(const nlohmann::json& j) {
  json_reader in;
  const std::string top;
  if (in.text(j, top, "format") != "silt-perf" && in.error().empty()) {
    return tl::unexpected(std::string("not a silt-perf result (format is not \"silt-perf\")"));
  }
  const auto version = in.integer(j, top, "version");
  if (in.error().empty() && (version < 1 || version > json_version)) {
    return tl::unexpected("version " + std::to_string(version) +
                          " is not one this silt-perf reads (1)");
  }
  run_result r;
  r.tool_mode = in.text(j, top, "tool_mode");
  r.workload = in.text(j, top, "workload");
  r.broker = in.text(j, top, "broker");
  r.started_at = in.text(j, top, "started_at");
  r.target_rate = in.number(j, top, "target_rate");
  if (const auto* p = in.field(j, top, "parameters")) {
    if (!p->is_object()) in.fail("parameters", "is not an object");
    for (auto it = p->begin(); in.error().empty() && p->is_object() && it != p->end(); ++it) {
      if (!it.value().is_string())
        in.fail("parameters." + it.key(), "is not a string");
      else
        r.parameters[it.key()] = it.value().get<std::string>();
    }
  }
  if (const auto* w = in.field(j, top, "warnings")) {
    if (!w->is_array()) in.fail("warnings", "is not an array");
    for (size_t i = 0; in.error().empty() && w->is_array() && i < w->size(); ++i) {
      if (!(*w)[i].is_string())
        in.fail(sformat("warnings[%zu]", i), "is not a string");
      else
        r.warnings.push_back((*w)[i].get<std::string>());
    }
  }
  if (const auto* t = in.field(j, top, "test")) r.test = read_interval(in, *t, "test");
  if (const auto* c = in.field(j, top, "catchup"); c != nullptr && !c->is_null()) {
    r.catchup = read_interval(in, *c, "catchup");
  }
  if (const auto* iv = in.field(j, top, "intervals")) {
    if (!iv->is_array()) in.fail("intervals", "is not an array");
    for (size_t i = 0; in.error().empty() && iv->is_array() && i < iv->size(); ++i) {
      r.intervals.push_back(read_interval(in, (*iv)[i], sformat("intervals[%zu]", i)));
    }
  }
  if (!in.error().empty()) return tl::unexpected(in.error());
  return r;
}

tl::expected<void, std::string> write_reports(const run_result& r, const std::string& json_path,
                                              const std::string& html_path) {
  if (!json_path.empty()) {
    if (auto ok = write_file(json_path, to_json(r).dump(2) + "\n"); !ok) return ok;
  }
  if (!html_path.empty()) {
    if (auto ok = write_file(html_path, to_html(r)); !ok) return ok;
  }
  return {};
}

}  // namespace silt::perf
