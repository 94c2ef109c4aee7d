#include "base/log.h"

#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <string>

#include <unistd.h>

namespace silt::base {
namespace {
std::atomic<log_level> level_{log_level::info};

const char* name_of(log_level l) {
  switch (l) {
    case log_level::error:
      return "ERROR";
    case log_level::warn:
      return "WARN";
    case log_level::info:
      return "INFO";
    case log_level::debug:
      return "DEBUG";
  }
  return "?";
}
}  // namespace

void set_log_level(log_level level) {
  level_.store(level, std::memory_order_relaxed);
}

log_level current_log_level() {
  return level_.load(std::memory_order_relaxed);
}

std::optional<log_level> parse_log_level(std::string_view name) {
  if (name == "error") return log_level::error;
  if (name == "warn") return log_level::warn;
  if (name == "info") return log_level::info;
  if (name == "debug") return log_level::debug;
  return std::nullopt;
}

void log(log_level level, const char* format, ...) {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch());
  const std::time_t secs = static_cast<std::time_t>(ms.count() / 1000);
  std::tm utc{};
  ::gmtime_r(&secs, &utc);
  char head[64];
  const size_t h = std::strftime(head, sizeof head, "%Y-%m-%dT%H:%M:%S", &utc);
  std::string line(head, h);
  char tail[32];
  std::snprintf(tail, sizeof tail, ".%03dZ %s ", static_cast<int>(ms.count() % 1000),
                name_of(level));
  line += tail;
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  if (n > 0) {
    const size_t at = line.size();
    line.resize(at + static_cast<size_t>(n) + 1);
    std::vsnprintf(line.data() + at, static_cast<size_t>(n) + 1, format, args);
    line.resize(at + static_cast<size_t>(n));
  }
  va_end(args);
  line += '\n';
  // One write: a line is never split by another thread's.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, left);
    if (w <= 0) break;
    p += w;
    left -= static_cast<size_t>(w);
  }
}

bool log_limiter::allow(uint64_t& left_out) {
  const auto now = std::chrono::steady_clock::now();
  base::lock_guard lock(mu_);
  if (last_ && now - *last_ < interval_) {
    ++left_out_;
    return false;
  }
  last_ = now;
  left_out = left_out_;
  left_out_ = 0;
  return true;
}

}  // namespace silt::base
