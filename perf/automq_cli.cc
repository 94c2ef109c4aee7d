#include "automq_cli.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>

#include "runner.h"

namespace silt::perf {

namespace {

enum class arity { one, list, none };

struct flag {
  const char* long_name;
  const char* short_name;  // "" when none
  arity kind;
  const char* metavar;
  const char* help;
};

// AutoMQ's flags (PerfConfig.java) in its order, then silt-perf's additions.
constexpr flag flags[] = {
    {"--bootstrap-server", "-B", arity::one, "HOST:PORT", "the bootstrap servers (localhost:9092)"},
    {"--common-configs", "", arity::list, "K=V...", "properties for every client, admin too"},
    {"--common-config-file", "-F", arity::one, "FILE", "a properties file of common configs"},
    {"--topic-configs", "-T", arity::list, "K=V...", "configs of the topics created"},
    {"--producer-configs", "-P", arity::list, "K=V...", "producer properties"},
    {"--consumer-configs", "-C", arity::list, "K=V...", "consumer properties"},
    {"--reuse-topics", "", arity::none, "", "use existing topics of the prefix as they are"},
    {"--topic-prefix", "-X", arity::one, "PREFIX", "topics are PREFIX-0000... (random prefix)"},
    {"--topics", "-t", arity::one, "N", "topics (1)"},
    {"--partitions-per-topic", "-n", arity::one, "N", "partitions per topic (1)"},
    {"--groups-per-topic", "-g", arity::one, "N", "consumer groups per topic, 0 or more (1)"},
    {"--consumers-per-group", "-c", arity::one, "N", "consumers per group (1)"},
    {"--producers-per-topic", "-p", arity::one, "N", "producers per topic (1)"},
    {"--record-size", "-s", arity::one, "BYTES", "record value size (1024)"},
    {"--random-ratio", "-R", arity::one, "R", "random fraction of each payload, 0.0-1.0 (0.0)"},
    {"--random-pool-size", "-S", arity::one, "N", "distinct payloads when random (1000)"},
    {"--send-rate", "-r", arity::one, "MSG/S", "records per second in all (1000; 0: the maximum)"},
    {"--send-throughput", "-f", arity::one, "MIB/S", "the rate in MiB/s instead of --send-rate"},
    {"--backlog-duration", "-b", arity::one, "S",
     "after the test: S s of producing with consumers paused, then the catch-up read (0)"},
    {"--warmup-duration", "-w", arity::one, "MIN", "warm-up minutes, left out of the results (1)"},
    {"--test-duration", "-d", arity::one, "MIN", "test minutes (5)"},
    {"--reporting-interval", "-i", arity::one, "S", "seconds between progress lines (1)"},
    {"--output", "-o", arity::one, "FILE.json", "write the results as JSON, and FILE.html"},
    {"--replication-factor", "", arity::one, "N", "of the topics created (the broker's default)"},
    {"--delete-topics", "", arity::none, "", "delete the run's topics at the end"},
};

const flag* find_flag(const std::string& name) {
  for (const auto& f : flags) {
    if (name == f.long_name || (f.short_name[0] != '\0' && name == f.short_name)) return &f;
  }
  return nullptr;
}

tl::expected<long long, std::string> to_int(const flag& f, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end == v.c_str() || *end != '\0' || errno == ERANGE || n < INT32_MIN ||
      n > INT32_MAX) {
    return tl::make_unexpected(std::string(f.long_name) + ": '" + v + "' is not an integer");
  }
  return n;
}

tl::expected<double, std::string> to_double(const flag& f, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || end == v.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(d)) {
    return tl::make_unexpected(std::string(f.long_name) + ": '" + v + "' is not a number");
  }
  return d;
}

}  // namespace

const field_names& automq_field_names() {
  static const field_names names = {
      {"bootstrap_servers", "--bootstrap-server"},
      {"topic_prefix", "--topic-prefix"},
      {"topics", "--topics"},
      {"partitions_per_topic", "--partitions-per-topic"},
      {"replication_factor", "--replication-factor"},
      {"producers_per_topic", "--producers-per-topic"},
      {"groups_per_topic", "--groups-per-topic"},
      {"consumers_per_group", "--consumers-per-group"},
      {"record_size", "--record-size"},
      {"random_ratio", "--random-ratio"},
      {"random_pool_size", "--random-pool-size"},
      {"send_rate", "--send-rate"},
      {"warmup_s", "--warmup-duration (in seconds)"},
      {"test_s", "--test-duration (in seconds)"},
      {"reporting_interval_s", "--reporting-interval"},
      {"backlog_s", "--backlog-duration"},
  };
  return names;
}

tl::expected<automq_options, std::string> parse_automq_args(const std::vector<std::string>& args) {
  automq_options o;
  workload& w = o.w;
  w.name = "automq-perf";
  w.warmup_s = 60;
  w.test_s = 300;
  w.fill = payload_fill::repeated_block;
  std::optional<double> send_rate;
  std::optional<double> send_throughput;
  std::string common_file;
  property_map common_flags;

  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::optional<std::string> inline_value;
    if (name == "-h" || name == "--help") {
      o.help = true;
      continue;
    }
    if (name.rfind("--", 0) == 0) {
      if (const auto eq = name.find('='); eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
    }
    const flag* f = find_flag(name);
    if (f == nullptr) {
      if (name.empty() || name[0] != '-') {
        return tl::make_unexpected("unexpected argument '" + name + "' (flags start with --)");
      }
      return tl::make_unexpected("unknown flag " + name);
    }
    std::vector<std::string> values;
    if (f->kind == arity::list) {
      if (inline_value) values.push_back(*inline_value);
      while (i + 1 < args.size() && (args[i + 1].empty() || args[i + 1][0] != '-')) {
        values.push_back(args[++i]);
      }
    } else if (f->kind == arity::one) {
      if (inline_value) {
        values.push_back(*inline_value);
      } else if (i + 1 < args.size()) {
        values.push_back(args[++i]);
      } else {
        return tl::make_unexpected(std::string(f->long_name) + " needs a value (" + f->metavar +
                                   ")");
      }
    } else if (inline_value && *inline_value != "true") {
      return tl::make_unexpected(std::string(f->long_name) + " takes no value");
    }

    const std::string flag_name = f->long_name;
    const std::string v = values.empty() ? std::string{} : values.front();
    auto as_int = [&](int& to) -> tl::expected<void, std::string> {
      auto n = to_int(*f, v);
      if (!n) return tl::make_unexpected(n.error());
      to = static_cast<int>(*n);
      return {};
    };
    auto as_double = [&](double& to, double scale) -> tl::expected<void, std::string> {
      auto d = to_double(*f, v);
      if (!d) return tl::make_unexpected(d.error());
      to = *d * scale;
      return {};
    };
    auto as_properties = [&](property_map& to) -> tl::expected<void, std::string> {
      for (const auto& kv : values) {
        auto p = parse_property(kv);
        if (!p) return tl::make_unexpected(flag_name + ": " + p.error());
        to[p->first] = p->second;
      }
      return {};
    };

    tl::expected<void, std::string> r;
    if (flag_name == "--bootstrap-server") {
      w.bootstrap_servers = v;
    } else if (flag_name == "--common-configs") {
      r = as_properties(common_flags);
    } else if (flag_name == "--common-config-file") {
      common_file = v;
    } else if (flag_name == "--topic-configs") {
      r = as_properties(w.topic_configs);
    } else if (flag_name == "--producer-configs") {
      r = as_properties(w.producer_configs);
    } else if (flag_name == "--consumer-configs") {
      r = as_properties(w.consumer_configs);
    } else if (flag_name == "--reuse-topics") {
      w.reuse_topics = true;
    } else if (flag_name == "--topic-prefix") {
      w.topic_prefix = v;
    } else if (flag_name == "--topics") {
      r = as_int(w.topics);
    } else if (flag_name == "--partitions-per-topic") {
      r = as_int(w.partitions_per_topic);
    } else if (flag_name == "--groups-per-topic") {
      r = as_int(w.groups_per_topic);
    } else if (flag_name == "--consumers-per-group") {
      r = as_int(w.consumers_per_group);
    } else if (flag_name == "--producers-per-topic") {
      r = as_int(w.producers_per_topic);
    } else if (flag_name == "--record-size") {
      r = as_int(w.record_size);
    } else if (flag_name == "--random-ratio") {
      r = as_double(w.random_ratio, 1);
    } else if (flag_name == "--random-pool-size") {
      r = as_int(w.random_pool_size);
    } else if (flag_name == "--send-rate") {
      double d = 0;
      r = as_double(d, 1);
      send_rate = d;
    } else if (flag_name == "--send-throughput") {
      double d = 0;
      r = as_double(d, 1);
      send_throughput = d;
    } else if (flag_name == "--backlog-duration") {
      r = as_double(w.backlog_s, 1);
    } else if (flag_name == "--warmup-duration") {
      r = as_double(w.warmup_s, 60);
    } else if (flag_name == "--test-duration") {
      r = as_double(w.test_s, 60);
    } else if (flag_name == "--reporting-interval") {
      r = as_double(w.reporting_interval_s, 1);
    } else if (flag_name == "--output") {
      o.output = v;
    } else if (flag_name == "--replication-factor") {
      r = as_int(w.replication_factor);
    } else if (flag_name == "--delete-topics") {
      w.delete_topics = true;
    }
    if (!r) return tl::make_unexpected(r.error());
  }

  if (!common_file.empty()) {
    std::ifstream in(common_file);
    if (!in) return tl::make_unexpected("--common-config-file: cannot read " + common_file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto props = parse_properties_text(text);
    if (!props)
      return tl::make_unexpected("--common-config-file " + common_file + ": " + props.error());
    w.common_configs = std::move(*props);
  }
  for (const auto& [k, v] : common_flags) w.common_configs[k] = v;
  if (const auto it = w.common_configs.find("bootstrap.servers"); it != w.common_configs.end()) {
    o.notes.push_back("common config bootstrap.servers=" + it->second +
                      " is overridden by --bootstrap-server " + w.bootstrap_servers);
  }

  if (send_rate && send_throughput) {
    return tl::make_unexpected("--send-rate and --send-throughput both set: give one");
  }
  if (send_throughput) {
    if (!(*send_throughput > 0)) {
      return tl::make_unexpected("--send-throughput must be positive, got " +
                                 format_number(*send_throughput));
    }
    if (w.record_size < 1) {
      return tl::make_unexpected("--record-size must be at least 1, got " +
                                 std::to_string(w.record_size));
    }
    // AutoMQ's conversion: MiB/s over the record size, rounded down.
    w.send_rate = std::floor(*send_throughput * 1024 * 1024 / w.record_size);
    if (w.send_rate < 1) {
      return tl::make_unexpected("--send-throughput " + format_number(*send_throughput) +
                                 " MiB/s is less than one record of " +
                                 std::to_string(w.record_size) + " bytes per second");
    }
  } else if (send_rate) {
    w.send_rate = *send_rate;
  }
  if (w.reuse_topics && w.topic_prefix.empty()) {
    o.notes.push_back("--reuse-topics without --topic-prefix: the random prefix names new topics");
  }
  return o;
}

void automq_print_help() {
  std::puts(
      "\nAutoMQ perf-test flags (bin/automq-perf-test.sh; durations as AutoMQ: minutes for\n"
      "warm-up and test, seconds for backlog and reporting):");
  for (const auto& f : flags) {
    std::string names = f.short_name[0] != '\0' ? std::string(f.short_name) + ", " : "    ";
    names += f.long_name;
    if (f.metavar[0] != '\0') names += std::string(" ") + f.metavar;
    std::printf("  %-40s %s\n", names.c_str(), f.help);
  }
}

int automq_main(const std::vector<std::string>& args) {
  auto o = parse_automq_args(args);
  if (!o) {
    std::fprintf(stderr, "silt-perf: %s\n(silt-perf --help lists the flags)\n", o.error().c_str());
    return 2;
  }
  if (o->help) {
    automq_print_help();
    return 0;
  }
  if (auto v = validate(o->w, automq_field_names()); !v) {
    std::fprintf(stderr, "silt-perf: %s\n", v.error().c_str());
    return 2;
  }
  if (auto out = check_output_path(o->output); !out) {
    std::fprintf(stderr, "silt-perf: %s\n", out.error().c_str());
    return 2;
  }
  if (o->w.test_s <= 0) {
    std::fprintf(stderr, "silt-perf: --test-duration must be positive, got %s\n",
                 format_number(o->w.test_s / 60).c_str());
    return 2;
  }
  run_options ro;
  ro.tool_mode = "automq";
  ro.notes = o->notes;
  const run_outcome outcome = run_workload(o->w, ro);
  return finish_run(outcome, o->output);
}

}  // namespace silt::perf
