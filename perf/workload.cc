#include "workload.h"

#include <cmath>
#include <cstdio>

namespace silt::perf {

namespace {

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\f\v");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\f\v");
  return s.substr(first, last - first + 1);
}

std::string field(const field_names& names, const char* member) {
  const auto it = names.find(member);
  return it == names.end() ? std::string(member) : it->second;
}

// Kafka's legal topic characters (Topic.java): ASCII letters, digits, '.', '_', '-'.
bool legal_topic_text(std::string_view s) {
  for (const char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::optional<key_distributor> parse_key_distributor(std::string_view name) {
  if (name == "NO_KEY") return key_distributor::no_key;
  if (name == "KEY_ROUND_ROBIN") return key_distributor::key_round_robin;
  if (name == "RANDOM_NANO") return key_distributor::random_nano;
  return std::nullopt;
}

const char* to_string(key_distributor k) {
  switch (k) {
    case key_distributor::no_key:
      return "NO_KEY";
    case key_distributor::key_round_robin:
      return "KEY_ROUND_ROBIN";
    case key_distributor::random_nano:
      return "RANDOM_NANO";
  }
  return "?";
}

std::string concat(std::initializer_list<std::string_view> parts) {
  size_t n = 0;
  for (const auto p : parts) n += p.size();
  std::string out;
  out.reserve(n);
  for (const auto p : parts) out.append(p);
  return out;
}

std::string format_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

tl::expected<void, std::string> validate(const workload& w, const field_names& names) {
  auto bad = [&](const char* member, const std::string& rule, const std::string& got) {
    return tl::make_unexpected(field(names, member) + " " + rule + ", got " + got);
  };
  auto num = [](double v) { return format_number(v); };

  if (w.bootstrap_servers.empty()) {
    return tl::make_unexpected(field(names, "bootstrap_servers") + " is empty");
  }
  if (!w.topic_prefix.empty() && !legal_topic_text(w.topic_prefix)) {
    return bad("topic_prefix", "may hold only ASCII letters, digits, '.', '_' and '-'",
               "'" + w.topic_prefix + "'");
  }
  if (w.topic_prefix.size() > 240) {
    return bad("topic_prefix", "must be at most 240 characters",
               std::to_string(w.topic_prefix.size()));
  }
  if (w.topics < 1) return bad("topics", "must be at least 1", std::to_string(w.topics));
  if (w.topics > 10000) return bad("topics", "must be at most 10000", std::to_string(w.topics));
  if (w.partitions_per_topic < 1) {
    return bad("partitions_per_topic", "must be at least 1",
               std::to_string(w.partitions_per_topic));
  }
  if (w.replication_factor == 0 || w.replication_factor < -1) {
    return bad("replication_factor", "must be at least 1 (or -1: the broker's default)",
               std::to_string(w.replication_factor));
  }
  if (w.producers_per_topic < 1) {
    return bad("producers_per_topic", "must be at least 1", std::to_string(w.producers_per_topic));
  }
  if (w.groups_per_topic < 0) {
    return bad("groups_per_topic", "must be 0 or more", std::to_string(w.groups_per_topic));
  }
  if (w.groups_per_topic > 0 && w.consumers_per_group < 1) {
    return bad("consumers_per_group", "must be at least 1", std::to_string(w.consumers_per_group));
  }
  if (w.producer_count() > 10000 || w.consumer_count() > 10000) {
    return tl::make_unexpected(
        "too many clients for one process: " + std::to_string(w.producer_count()) +
        " producers and " + std::to_string(w.consumer_count()) + " consumers (at most 10000 each)");
  }
  if (w.record_size < 1)
    return bad("record_size", "must be at least 1", std::to_string(w.record_size));
  if (!(w.random_ratio >= 0 && w.random_ratio <= 1)) {
    return bad("random_ratio", "must be between 0.0 and 1.0", num(w.random_ratio));
  }
  if (w.random_pool_size < 1) {
    return bad("random_pool_size", "must be at least 1", std::to_string(w.random_pool_size));
  }
  if (!(w.send_rate >= 0) || !std::isfinite(w.send_rate)) {
    return bad("send_rate", "must be 0 (find the maximum) or a positive rate", num(w.send_rate));
  }
  if (!(w.search_start_rate > 0) || !std::isfinite(w.search_start_rate)) {
    return bad("search_start_rate", "must be positive", num(w.search_start_rate));
  }
  if (!(w.warmup_s >= 0) || !std::isfinite(w.warmup_s)) {
    return bad("warmup_s", "must be 0 or more", num(w.warmup_s));
  }
  if (!(w.test_s >= 0) || !std::isfinite(w.test_s)) {
    return bad("test_s", "must be 0 or more", num(w.test_s));
  }
  if (!(w.reporting_interval_s >= 0.05) || !std::isfinite(w.reporting_interval_s)) {
    return bad("reporting_interval_s", "must be at least 0.05 s", num(w.reporting_interval_s));
  }
  if (!(w.backlog_s >= 0) || !std::isfinite(w.backlog_s)) {
    return bad("backlog_s", "must be 0 or more", num(w.backlog_s));
  }
  if (!(w.backlog_bytes >= 0) || !std::isfinite(w.backlog_bytes)) {
    return bad("backlog_bytes", "must be 0 or more", num(w.backlog_bytes));
  }
  if (!(w.backlog_drain_ratio >= 0 && w.backlog_drain_ratio <= 1)) {
    return bad("backlog_drain_ratio", "must be between 0.0 and 1.0", num(w.backlog_drain_ratio));
  }
  if (w.has_backlog_test() && w.send_rate == 0) {
    // OMB refuses this too: the rate search measures whether consumers keep up, which a
    // backlog test stops them doing on purpose.
    return tl::make_unexpected("cannot search for the maximum sustainable rate (" +
                               field(names, "send_rate") + " 0) in a backlog test");
  }
  if (w.has_backlog_test() && w.groups_per_topic == 0) {
    return tl::make_unexpected(
        "a backlog test needs consumers: " + field(names, "groups_per_topic") + " is 0");
  }
  if (w.has_backlog_test() && w.test_s == 0) {
    return tl::make_unexpected("a backlog test follows the test phase, which has no end (" +
                               field(names, "test_s") + " 0)");
  }
  for (const auto* m :
       {&w.common_configs, &w.topic_configs, &w.producer_configs, &w.consumer_configs}) {
    for (const auto& [k, v] : *m) {
      if (k.empty())
        return tl::make_unexpected("a property with an empty name (value '" + v + "')");
    }
  }
  return {};
}

std::string topic_name(const workload& w, int index) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d", index);
  return w.topic_prefix + "-" + buf;
}

tl::expected<std::pair<std::string, std::string>, std::string> parse_property(
    std::string_view text) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos) {
    return tl::make_unexpected("'" + std::string(text) + "' is not key=value");
  }
  const auto key = trim(text.substr(0, eq));
  if (key.empty()) return tl::make_unexpected("'" + std::string(text) + "' has no key");
  return std::pair{std::string(key), std::string(trim(text.substr(eq + 1)))};
}

tl::expected<property_map, std::string> parse_properties_text(std::string_view text) {
  property_map out;
  std::string pending;  // a line continued with a backslash
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    std::string_view t = trim(line);
    if (pending.empty() && (t.empty() || t.front() == '#' || t.front() == '!')) {
      if (end == text.size()) break;
      continue;
    }
    if (!t.empty() && t.back() == '\\') {
      pending.append(t.substr(0, t.size() - 1));
      if (end == text.size()) break;
      continue;
    }
    pending.append(t);
    std::string_view full = pending;
    // The separator: the first '=' or ':' (Java's Properties also takes a blank; the driver
    // files never rely on that, and values such as "a b" would be misread).
    const auto sep = full.find_first_of("=:");
    if (sep == std::string_view::npos) {
      return tl::make_unexpected("line " + std::to_string(line_no) + ": '" + std::string(full) +
                                 "' is not key=value");
    }
    const auto key = trim(full.substr(0, sep));
    if (key.empty()) {
      return tl::make_unexpected("line " + std::to_string(line_no) + ": '" + std::string(full) +
                                 "' has no key");
    }
    out[std::string(key)] = std::string(trim(full.substr(sep + 1)));
    pending.clear();
    if (end == text.size()) break;
  }
  if (!pending.empty()) {
    return tl::make_unexpected("the text ends inside a continued line: '" + pending + "'");
  }
  return out;
}

std::map<std::string, std::string> describe(const workload& w) {
  std::map<std::string, std::string> p;
  p["topics"] = std::to_string(w.topics);
  p["partitions_per_topic"] = std::to_string(w.partitions_per_topic);
  p["replication_factor"] =
      w.replication_factor < 0 ? "broker default" : std::to_string(w.replication_factor);
  p["topic_prefix"] = w.topic_prefix;
  p["producers_per_topic"] = std::to_string(w.producers_per_topic);
  p["groups_per_topic"] = std::to_string(w.groups_per_topic);
  p["consumers_per_group"] = std::to_string(w.consumers_per_group);
  p["record_size"] = std::to_string(w.record_size);
  if (w.payload_file.empty()) {
    p["random_ratio"] = format_number(w.random_ratio);
    if (w.random_ratio > 0) p["random_pool_size"] = std::to_string(w.random_pool_size);
  } else {
    p["payload_file"] = w.payload_file;
  }
  p["key_distributor"] = to_string(w.keys);
  p["send_rate"] = w.send_rate == 0 ? "maximum sustainable" : format_number(w.send_rate);
  p["warmup_s"] = format_number(w.warmup_s);
  p["test_s"] = w.test_s == 0 ? "until interrupted" : format_number(w.test_s);
  p["reporting_interval_s"] = format_number(w.reporting_interval_s);
  if (w.backlog_s > 0) p["backlog_s"] = format_number(w.backlog_s);
  if (w.backlog_bytes > 0) p["backlog_bytes"] = format_number(w.backlog_bytes);
  if (w.has_backlog_test()) p["backlog_drain_ratio"] = format_number(w.backlog_drain_ratio);
  for (const auto& [k, v] : w.common_configs) p["common." + k] = v;
  for (const auto& [k, v] : w.topic_configs) p["topic." + k] = v;
  for (const auto& [k, v] : w.producer_configs) p["producer." + k] = v;
  for (const auto& [k, v] : w.consumer_configs) p["consumer." + k] = v;
  return p;
}

}  // namespace silt::perf
