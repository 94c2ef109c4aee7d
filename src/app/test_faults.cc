#include "app/test_faults.h"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <utility>

namespace silt::app {

namespace {

// Walks a fault spec, "key=number,...", calling set(key, number) for each item; false from
// set: an unknown key.
tl::expected<void, std::string> walk_fault_spec(
    std::string_view spec, const std::function<bool(const std::string&, double)>& set) {
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return tl::make_unexpected("expected key=value");
    const std::string key(item.substr(0, eq));
    const std::string value(item.substr(eq + 1));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || v < 0) {
      std::string message = "bad value '";
      message += value;
      message += "' for ";
      message += key;
      return tl::make_unexpected(std::move(message));
    }
    if (!set(key, v)) return tl::make_unexpected("unknown key '" + key + "'");
  }
  return {};
}

}  // namespace

tl::expected<storage::wal::write_faults::options, std::string> parse_wal_faults(
    std::string_view spec) {
  storage::wal::write_faults::options o;
  auto walked = walk_fault_spec(spec, [&o](const std::string& key, double v) {
    if (key == "fail") {
      o.fail_probability = v;
    } else if (key == "delay") {
      o.delay_probability = v;
    } else if (key == "delay_ms") {
      o.delay = std::chrono::milliseconds(static_cast<int64_t>(v));
    } else if (key == "seed") {
      o.seed = static_cast<uint64_t>(v);
    } else {
      return false;
    }
    return true;
  });
  if (!walked) return tl::make_unexpected(walked.error());
  if (o.fail_probability + o.delay_probability > 1) {
    return tl::make_unexpected("fail + delay must be at most 1");
  }
  return o;
}

tl::expected<storage::faulty_store_options, std::string> parse_store_faults(std::string_view spec) {
  storage::faulty_store_options o;
  auto walked = walk_fault_spec(spec, [&o](const std::string& key, double v) {
    const auto ms = std::chrono::milliseconds(static_cast<int64_t>(v));
    if (key == "error") {
      o.error_probability = v;
    } else if (key == "throttle") {
      o.throttle_probability = v;
    } else if (key == "timeout") {
      o.timeout_probability = v;
    } else if (key == "slow") {
      o.slow_probability = v;
    } else if (key == "partial") {
      o.partial_probability = v;
    } else if (key == "lost") {
      o.lost_reply_probability = v;
    } else if (key == "delay_ms") {
      o.timeout_delay = ms;
      o.slow_delay = ms;
    } else if (key == "seed") {
      o.seed = static_cast<uint64_t>(v);
    } else if (key == "on_ms") {
      o.on_period = ms;
    } else if (key == "off_ms") {
      o.off_period = ms;
    } else {
      return false;
    }
    return true;
  });
  if (!walked) return tl::make_unexpected(walked.error());
  if (o.error_probability + o.throttle_probability + o.timeout_probability + o.slow_probability +
          o.partial_probability + o.lost_reply_probability >
      1) {
    return tl::make_unexpected("the probabilities add up to more than 1");
  }
  if (o.off_period.count() > 0 && o.on_period.count() <= 0) {
    return tl::make_unexpected("off_ms needs on_ms");
  }
  return o;
}

}  // namespace silt::app
