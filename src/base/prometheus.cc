#include "base/prometheus.h"

#include <cassert>
#include <cmath>
#include <cstdio>
#include <limits>

namespace silt::base {
namespace {

[[maybe_unused]] bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

void append_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else if (v == std::floor(v) && std::fabs(v) < 1e15) {
    out += std::to_string(static_cast<int64_t>(v));
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    out += buf;
  }
}

}  // namespace

std::string prometheus_escape(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

const std::vector<double>& prometheus_writer::bounds() {
  static const std::vector<double> b{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                     0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  return b;
}

void prometheus_writer::family(std::string_view name, type t, std::string_view help) {
  assert(valid_name(name));
  assert(t != type::counter || name.ends_with("_total"));
  // Named as its samples are, "_total" included (what promtool expects of the 0.0.4 format).
  const std::string_view family_name = name;
  out_ += "# HELP ";
  out_ += family_name;
  out_ += ' ';
  for (const char c : help) {
    if (c == '\\') {
      out_ += "\\\\";
    } else if (c == '\n') {
      out_ += "\\n";
    } else {
      out_ += c;
    }
  }
  out_ += "\n# TYPE ";
  out_ += family_name;
  out_ += t == type::counter ? " counter\n" : t == type::gauge ? " gauge\n" : " histogram\n";
}

void prometheus_writer::write_labels(labels l, std::string_view extra_name,
                                     std::string_view extra) {
  if (l.empty() && extra_name.empty()) return;
  out_ += '{';
  bool first = true;
  auto one = [&](std::string_view k, std::string_view v) {
    assert(valid_name(k));
    if (!first) out_ += ',';
    first = false;
    out_ += k;
    out_ += "=\"";
    out_ += prometheus_escape(v);
    out_ += '"';
  };
  for (const auto& [k, v] : l) one(k, v);
  if (!extra_name.empty()) one(extra_name, extra);
  out_ += '}';
}

void prometheus_writer::sample(std::string_view name, labels l, double value) {
  assert(valid_name(name));
  out_ += name;
  write_labels(l);
  out_ += ' ';
  append_number(out_, value);
  out_ += '\n';
}

void prometheus_writer::histogram(std::string_view name, labels l,
                                  const histogram_snapshot& micros) {
  assert(valid_name(name));
  const std::string bucket = std::string(name) + "_bucket";
  for (const double b : bounds()) {
    out_ += bucket;
    std::string le;
    append_number(le, b);
    write_labels(l, "le", le);
    out_ += ' ';
    append_number(out_, static_cast<double>(
                            micros.count_at_most(static_cast<uint64_t>(std::llround(b * 1e6)))));
    out_ += '\n';
  }
  // +Inf and the count from the same bucket counts, so that they agree even when the
  // snapshot was taken while others recorded.
  const uint64_t count = micros.count_at_most(std::numeric_limits<uint64_t>::max());
  out_ += bucket;
  write_labels(l, "le", "+Inf");
  out_ += ' ';
  append_number(out_, static_cast<double>(count));
  out_ += '\n';
  out_ += name;
  out_ += "_sum";
  write_labels(l);
  out_ += ' ';
  append_number(out_, static_cast<double>(micros.sum()) / 1e6);
  out_ += '\n';
  out_ += name;
  out_ += "_count";
  write_labels(l);
  out_ += ' ';
  append_number(out_, static_cast<double>(count));
  out_ += '\n';
}

}  // namespace silt::base
