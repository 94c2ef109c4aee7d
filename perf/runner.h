// Runs one workload (workload.h) against a Kafka-compatible broker and measures it:
//
//   1. topics: created or found (topics.h); payloads built (payloads.h);
//   2. clients: the consumers join their groups, the producers start paused; probe records
//      go to every partition until every group has read one from each (readiness);
//   3. rate search, when the workload's rate is 0: trials of a few seconds each
//      (rate_control.h's max_rate_search), phase "search";
//   4. warm-up ("warmup"), then the test ("test") at the rate, on one schedule;
//   5. with a backlog test: consumers paused while producers go on ("backlog"), then resumed
//      until they have read the backlog ("catchup", run_result::catchup);
//   6. producers stop; consumers read what is left ("drain"), so that each group ends with
//      every acknowledged record read, or a warning says which did not.
//
// Each reporting interval becomes one interval_stats, printed as report.h's progress_line as
// it ends; a phase boundary ends an interval early. SIGINT or SIGTERM ends the current phase:
// the run then drains briefly and returns what it measured (a second signal kills it).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "results.h"
#include "workload.h"

namespace silt::perf {

struct run_options {
  std::string tool_mode;           // "automq", "omb"
  std::vector<std::string> notes;  // from reading the workload: copied into the warnings
  bool progress = true;            // print the progress lines and the run's steps to stdout
};

struct run_outcome {
  std::optional<run_result> result;  // absent when the run could not start
  std::string error;                 // what stopped it, when something did
  int exit_code = 0;  // 0; 1: an error prevented the run or the test acknowledged nothing;
                      // 130: interrupted
};

[[nodiscard]] run_outcome run_workload(const workload& w, const run_options& o);

// Prints the summary (report.h's summary_table) or the error, writes the JSON and HTML
// reports when `json_path` is set, and returns the exit code.
[[nodiscard]] int finish_run(const run_outcome& outcome, const std::string& json_path);

// An error when the reports could not be written to `json_path` (its folder is missing), so
// that a run of minutes does not end without them.
[[nodiscard]] tl::expected<void, std::string> check_output_path(const std::string& json_path);

// FILE.json -> FILE.html (FILE -> FILE.html).
[[nodiscard]] std::string html_path_for(const std::string& json_path);

}  // namespace silt::perf
