// `silt-perf omb`: the command line, and running the workloads one after the other.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "omb.h"
#include "runner.h"

namespace silt::perf {

namespace {

namespace fs = std::filesystem;

tl::expected<std::string, std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return tl::make_unexpected("cannot read " + path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

tl::expected<omb_options, std::string> parse_omb_args(const std::vector<std::string>& args) {
  omb_options o;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    std::string value;
    bool has_inline = false;
    if (a.rfind("--", 0) == 0) {
      if (const auto eq = a.find('='); eq != std::string::npos) {
        value = a.substr(eq + 1);
        a = a.substr(0, eq);
        has_inline = true;
      }
    }
    auto need = [&]() -> tl::expected<std::string, std::string> {
      if (has_inline) return value;
      if (i + 1 >= args.size()) return tl::make_unexpected(a + " needs a value");
      return args[++i];
    };
    if (a == "-h" || a == "--help") {
      o.help = true;
    } else if (a == "--driver" || a == "--drivers" || a == "-d") {
      auto v = need();
      if (!v) return tl::make_unexpected(v.error());
      o.driver = *v;
    } else if (a == "--bootstrap-server" || a == "-B") {
      auto v = need();
      if (!v) return tl::make_unexpected(v.error());
      o.bootstrap_server = *v;
    } else if (a == "--output" || a == "-o") {
      auto v = need();
      if (!v) return tl::make_unexpected(v.error());
      o.output = *v;
    } else if (a == "--reporting-interval" || a == "-i") {
      auto v = need();
      if (!v) return tl::make_unexpected(v.error());
      char* end = nullptr;
      o.reporting_interval_s = std::strtod(v->c_str(), &end);
      if (v->empty() || *end != '\0' || !(o.reporting_interval_s >= 0.05)) {
        return tl::make_unexpected("--reporting-interval: '" + *v +
                                   "' is not a number of seconds >= 0.05");
      }
    } else if (!a.empty() && a[0] == '-') {
      return tl::make_unexpected("unknown flag " + a);
    } else {
      o.workloads.push_back(a);
    }
  }
  if (o.help) return o;
  if (o.driver.empty()) return tl::make_unexpected("--driver DRIVER.yaml is required");
  if (o.workloads.empty()) return tl::make_unexpected("no workload file given");
  return o;
}

std::string omb_output_path(const std::string& output, size_t i, size_t n,
                            const std::string& name) {
  if (output.empty() || n <= 1) return output;
  std::string slug;
  for (const char c : name) {
    slug += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '-';
  }
  const fs::path p(output);
  const std::string stem = p.stem().string() + "-" + std::to_string(i + 1) + "-" + slug;
  return (p.parent_path() / (stem + p.extension().string())).string();
}

int omb_main(const std::vector<std::string>& args) {
  auto o = parse_omb_args(args);
  if (!o) {
    std::fprintf(stderr,
                 "silt-perf omb: %s\nusage: silt-perf omb --driver DRIVER.yaml [--bootstrap-server "
                 "H] [--output FILE.json] [--reporting-interval S] WORKLOAD.yaml...\n",
                 o.error().c_str());
    return 2;
  }
  if (o->help) {
    std::puts(
        "usage: silt-perf omb --driver DRIVER.yaml [--bootstrap-server HOST:PORT]\n"
        "                     [--output FILE.json] [--reporting-interval S] WORKLOAD.yaml...\n"
        "Runs OpenMessaging Benchmark workload files with an OMB Kafka driver file.");
    return 0;
  }
  if (auto out = check_output_path(o->output); !out) {
    std::fprintf(stderr, "silt-perf omb: %s\n", out.error().c_str());
    return 2;
  }
  auto driver_text = read_file(o->driver);
  if (!driver_text) {
    std::fprintf(stderr, "silt-perf omb: %s\n", driver_text.error().c_str());
    return 2;
  }
  auto driver = parse_omb_driver(*driver_text, o->driver);
  if (!driver) {
    std::fprintf(stderr, "silt-perf omb: %s\n", driver.error().c_str());
    return 2;
  }
  if (!o->bootstrap_server.empty()) driver->bootstrap_servers = o->bootstrap_server;

  std::vector<workload> all;
  std::vector<std::vector<std::string>> all_notes;
  for (const auto& path : o->workloads) {
    auto text = read_file(path);
    if (!text) {
      std::fprintf(stderr, "silt-perf omb: %s\n", text.error().c_str());
      return 2;
    }
    auto ws = parse_omb_workloads(*text, path, *driver, all_notes);
    if (!ws) {
      std::fprintf(stderr, "silt-perf omb: %s\n", ws.error().c_str());
      return 2;
    }
    for (auto& w : *ws) {
      w.reporting_interval_s = o->reporting_interval_s;
      if (auto v = validate(w, omb_field_names()); !v) {
        std::fprintf(stderr, "silt-perf omb: %s (workload '%s'): %s\n", path.c_str(),
                     w.name.c_str(), v.error().c_str());
        return 2;
      }
      all.push_back(std::move(w));
    }
  }

  int code = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    std::printf("silt-perf: workload %zu of %zu: '%s' with driver '%s'\n", i + 1, all.size(),
                all[i].name.c_str(), driver->name.c_str());
    run_options ro;
    ro.tool_mode = "omb";
    ro.notes = driver->notes;
    ro.notes.insert(ro.notes.end(), all_notes[i].begin(), all_notes[i].end());
    const run_outcome outcome = run_workload(all[i], ro);
    const int c = finish_run(outcome, omb_output_path(o->output, i, all.size(), all[i].name));
    if (code == 0) code = c;
    if (c == 130) break;  // interrupted: the remaining workloads do not run
  }
  return code;
}

}  // namespace silt::perf
