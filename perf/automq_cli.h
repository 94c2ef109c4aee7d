// silt-perf's default mode: the command line of AutoMQ's perf-test tool
// (bin/automq-perf-test.sh, org.apache.kafka.tools.automq.PerfCommand), so that a command
// written for it runs here with only the tool's name changed. Flags take AutoMQ's long names
// and short aliases and its units: --warmup-duration and --test-duration in minutes (decimals
// allowed here), --backlog-duration and --reporting-interval in seconds, --send-throughput in
// MiB/s. The `k=v` lists (--common-configs, --topic-configs, --producer-configs,
// --consumer-configs) take every value up to the next flag and may repeat.
//
// Additions of silt-perf's own: --output FILE.json (with FILE.html beside it),
// --common-configs (AutoMQ has --common-config-file, also accepted), --replication-factor,
// --delete-topics. A send rate of 0 searches for the maximum sustainable rate.
#pragma once

#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "workload.h"

namespace silt::perf {

struct automq_options {
  workload w;
  std::string output;  // --output: the JSON report's path; empty: none
  bool help = false;
  std::vector<std::string> notes;  // said in the run's warnings
};

// The flags as a workload (not yet validated: see validate() with automq_field_names()).
// An error names the flag and the bad value.
[[nodiscard]] tl::expected<automq_options, std::string> parse_automq_args(
    const std::vector<std::string>& args);

// The flag that sets each workload field, for validate()'s messages.
[[nodiscard]] const field_names& automq_field_names();

// Runs the command line (all of it: AutoMQ perf-test flags); returns the exit code.
[[nodiscard]] int automq_main(const std::vector<std::string>& args);
void automq_print_help();

}  // namespace silt::perf
