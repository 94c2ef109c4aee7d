#include "runner.h"

#include <cstdio>
#include <filesystem>
#include <string_view>

#include "report.h"
#include "session.h"

namespace silt::perf {

run_outcome run_workload(const workload& w, const run_options& o) {
  session s(w, o.tool_mode, o.progress);
  return s.run(o.notes);
}

int finish_run(const run_outcome& outcome, const std::string& json_path) {
  if (!outcome.result) {
    std::fprintf(stderr, "silt-perf: %s\n", outcome.error.c_str());
    return outcome.exit_code == 0 ? 1 : outcome.exit_code;
  }
  const run_result& r = *outcome.result;
  std::fputs(summary_table(r).c_str(), stdout);
  std::fflush(stdout);
  int code = outcome.exit_code;
  if (!outcome.error.empty()) std::fprintf(stderr, "silt-perf: %s\n", outcome.error.c_str());
  if (!json_path.empty()) {
    const std::string html = html_path_for(json_path);
    if (auto w = write_reports(r, json_path, html); !w) {
      std::fprintf(stderr, "silt-perf: cannot write the reports: %s\n", w.error().c_str());
      if (code == 0) code = 1;
    } else {
      std::printf("silt-perf: wrote %s and %s\n", json_path.c_str(), html.c_str());
    }
  }
  return code;
}

tl::expected<void, std::string> check_output_path(const std::string& json_path) {
  if (json_path.empty()) return {};
  const std::filesystem::path p(json_path);
  const auto dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return tl::make_unexpected("--output " + json_path + ": no folder " + dir.string());
  }
  return {};
}

std::string html_path_for(const std::string& json_path) {
  constexpr std::string_view ext = ".json";
  if (json_path.size() > ext.size() &&
      json_path.compare(json_path.size() - ext.size(), ext.size(), ext) == 0) {
    return json_path.substr(0, json_path.size() - ext.size()) + ".html";
  }
  return json_path + ".html";
}

}  // namespace silt::perf
