// The broker's log: levelled lines on stderr, each written whole with one write(2) so that
// lines of several threads never interleave:
//
//   2026-12-04T06:27:22.123Z WARN silt: cluster: heartbeat to the metadata store failed (io)
//
// (UTC time with milliseconds, the level, the message as the caller wrote it). Lines below the
// level set (`log.level`, info by default) are dropped before they are formatted. Thread-safe.
//
// A failure that repeats goes through a log_limiter: its first occurrence is logged, then at
// most one line per interval, saying how many were left out.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "base/mutex.h"

namespace silt::base {

enum class log_level : uint8_t { error, warn, info, debug };

void set_log_level(log_level level);
[[nodiscard]] log_level current_log_level();
[[nodiscard]] inline bool log_enabled(log_level level) {
  return level <= current_log_level();
}
// "error", "warn", "info" or "debug"; nullopt for anything else.
[[nodiscard]] std::optional<log_level> parse_log_level(std::string_view name);

// printf-style; the newline is added. Callers use SILT_LOG, which skips the formatting of
// lines below the level.
void log(log_level level, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Lets the first of a repeating message through, then one per `interval`.
class log_limiter {
 public:
  explicit log_limiter(std::chrono::steady_clock::duration interval) : interval_(interval) {}
  // Whether to log now; `left_out` is set to how many were not logged since the last one.
  [[nodiscard]] bool allow(uint64_t& left_out);

 private:
  const std::chrono::steady_clock::duration interval_;
  base::mutex mu_;
  std::optional<std::chrono::steady_clock::time_point> last_ GUARDED_BY(mu_);
  uint64_t left_out_ GUARDED_BY(mu_) = 0;
};

}  // namespace silt::base

// SILT_LOG(warn, "cannot take %zu stream(s): %s", n, why): a macro so that the format string
// reaches log() as a literal the compiler checks against the arguments.
#define SILT_LOG(level, ...)                                          \
  do {                                                                \
    if (::silt::base::log_enabled(::silt::base::log_level::level)) {  \
      ::silt::base::log(::silt::base::log_level::level, __VA_ARGS__); \
    }                                                                 \
  } while (false)
