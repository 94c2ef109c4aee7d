#include "base/log.h"

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

namespace silt::base {
namespace {

// What `body` wrote to stderr.
template <typename Body>
std::string stderr_of(Body body) {
  std::fflush(stderr);
  char path[] = "/tmp/silt-log-XXXXXX";
  const int fd = ::mkstemp(path);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(fd, STDERR_FILENO);
  body();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string out;
  char buf[4096];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  ::unlink(path);
  return out;
}

TEST(Log, LinesCarryUtcTimeAndLevelAndAreDroppedBelowTheLevel) {
  const auto before = current_log_level();
  const std::string out = stderr_of([] {
    set_log_level(log_level::warn);
    SILT_LOG(info, "silt: not shown %d", 1);
    SILT_LOG(warn, "silt: shown %d of %s", 2, "two");
    SILT_LOG(error, "silt: and this");
  });
  set_log_level(before);
  EXPECT_TRUE(std::regex_match(
      out,
      std::regex("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z WARN silt: shown 2 of two\n"
                 "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z ERROR silt: and this\n")))
      << out;
}

TEST(Log, LevelsParseByName) {
  EXPECT_EQ(parse_log_level("debug"), log_level::debug);
  EXPECT_EQ(parse_log_level("warn"), log_level::warn);
  EXPECT_FALSE(parse_log_level("WARNING"));
}

TEST(LogLimiter, LetsTheFirstThroughThenOnePerIntervalCountingTheRest) {
  log_limiter limit(std::chrono::milliseconds(50));
  uint64_t left_out = 99;
  EXPECT_TRUE(limit.allow(left_out));
  EXPECT_EQ(left_out, 0u);
  EXPECT_FALSE(limit.allow(left_out));
  EXPECT_FALSE(limit.allow(left_out));
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_TRUE(limit.allow(left_out));
  EXPECT_EQ(left_out, 2u);
}

}  // namespace
}  // namespace silt::base
