#include "session.h"

#include <csignal>
#include <cstdio>
#include <ctime>
#include <random>
#include <set>
#include <thread>

#include "rate_control.h"
#include "report.h"
#include "topics.h"

namespace silt::perf {

namespace {

using std::chrono::duration;
using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr auto ready_timeout = std::chrono::seconds(120);
constexpr auto probe_wait = std::chrono::seconds(3);

std::atomic<bool> interrupted_flag{false};

void on_signal(int /*sig*/) {
  interrupted_flag.store(true);
}

// SIGINT and SIGTERM end the current phase; SA_RESETHAND: a second one kills the process.
class signal_guard {
 public:
  signal_guard() {
    interrupted_flag.store(false);
    struct sigaction sa {};
    sa.sa_handler = &on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~signal_guard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  signal_guard(const signal_guard&) = delete;
  signal_guard& operator=(const signal_guard&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

std::string utc_now_iso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string hex(uint64_t v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return std::string(buf + 16 - digits);
}

void add_unique(std::vector<std::string>& to, const std::vector<std::string>& from) {
  std::set<std::string> seen(to.begin(), to.end());
  for (const auto& s : from) {
    if (seen.insert(s).second) to.push_back(s);
  }
}

}  // namespace

bool session::interrupted() {
  return interrupted_flag.load();
}

std::string session::fmt(const char* format, double a, double b, double c, double d) {
  char buf[512];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

double session::seconds(clock::duration d) {
  return duration<double>(d).count();
}

session::session(workload w, std::string tool_mode, bool progress)
    : w_(std::move(w)), tool_mode_(std::move(tool_mode)), progress_(progress) {
  std::random_device rd;
  run_id_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  if (run_id_ == 0) run_id_ = 1;
}

void session::say(const std::string& line) {
  if (!progress_) return;
  std::printf("silt-perf: %s\n", line.c_str());
  std::fflush(stdout);
}

void session::report(const interval_stats& i) {
  r_.intervals.push_back(i);
  if (!progress_) return;
  std::printf("%s\n", progress_line(i).c_str());
  std::fflush(stdout);
}

double session::since_origin(clock::time_point t) const {
  return origin_set_ ? seconds(t - origin_) : 0;
}

session::phase_result session::phase(const std::string& name, double duration_s,
                                     const condition& until, double max_s, bool interruptible) {
  const auto interval = duration_cast<clock::duration>(duration<double>(w_.reporting_interval_s));
  // Phases follow each other without a gap: each starts where the last one ended, so every
  // record is counted in exactly one interval.
  if (!carry_) carry_.emplace(stats_->take(), clock::now());
  const auto start = carry_->second;
  const bool timed = duration_s > 0;
  const auto end = start + duration_cast<clock::duration>(duration<double>(duration_s));
  const auto limit = max_s > 0 ? start + duration_cast<clock::duration>(duration<double>(max_s))
                               : clock::time_point::max();
  phase_result out;
  out.first = carry_->first;
  run_stats::snapshot prev = out.first;
  auto prev_t = start;
  auto next_report = start + interval;
  while (true) {
    const auto now = clock::now();
    bool over = (interruptible && interrupted()) || (timed && now >= end) || now >= limit;
    if (!over && until && until(stats_->take(false))) {
      over = true;
      out.condition_met = true;
    }
    // A report due just before a timed phase's end waits for it: no sliver of an interval.
    const bool end_is_near = timed && end - now < interval / 20;
    if (over || (now >= next_report && !end_is_near)) {
      run_stats::snapshot cur = stats_->take();
      const bool idle = cur.sent == prev.sent && cur.acked == prev.acked &&
                        cur.consumed == prev.consumed && cur.errors == prev.errors;
      if (now - prev_t >= milliseconds(5) || !idle) {
        report(make_interval(prev, cur, name, since_origin(prev_t), seconds(now - prev_t),
                             std::max(1, w_.groups_per_topic)));
        prev = std::move(cur);
        prev_t = now;
      }
      while (next_report <= now) next_report += interval;
    }
    if (over) break;
    auto wake = std::min(next_report, now + milliseconds(50));
    if (timed) wake = std::min(wake, end);
    std::this_thread::sleep_until(wake);
  }
  if (interruptible && interrupted() && interrupted_in_.empty()) interrupted_in_ = name;
  out.total = make_interval(out.first, prev, name, since_origin(start), seconds(prev_t - start),
                            std::max(1, w_.groups_per_topic));
  out.last = prev;
  out.last_time = prev_t;
  carry_.emplace(std::move(prev), prev_t);
  return out;
}

void session::start_schedule(double rate) {
  // Before the first phase, the counters as they are before the schedule's first record.
  if (!carry_) carry_.emplace(stats_->take(), clock::now());
  const auto t = clock::now();
  if (!origin_set_) {
    origin_ = t;
    origin_set_ = true;
    carry_->second = t;
  }
  producers_->set_rate(rate, t);
}

tl::expected<void, std::string> session::setup() {
  if (w_.topic_prefix.empty()) w_.topic_prefix = "silt-perf-" + hex(run_id_, 6);
  r_.parameters = describe(w_);

  auto admin = to_librdkafka(w_.common_configs, client_role::admin);
  if (!admin) return tl::make_unexpected(admin.error());
  auto producer =
      to_librdkafka(merge(w_.common_configs, w_.producer_configs), client_role::producer);
  if (!producer) return tl::make_unexpected(producer.error());
  property_map consumer_java = merge(w_.common_configs, w_.consumer_configs);
  auto consumer = to_librdkafka(consumer_java, client_role::consumer);
  if (!consumer) return tl::make_unexpected(consumer.error());
  admin_props_ = std::move(*admin);
  producer_props_ = std::move(*producer);
  consumer_props_ = std::move(*consumer);
  add_unique(r_.warnings, admin_props_.notes);
  add_unique(r_.warnings, producer_props_.notes);
  add_unique(r_.warnings, consumer_props_.notes);

  std::vector<std::string> notes;
  auto payloads = payload_pool::build(w_, notes);
  if (!payloads) return tl::make_unexpected(payloads.error());
  payloads_ = std::move(*payloads);
  add_unique(r_.warnings, notes);

  say("preparing " + std::to_string(w_.topics) + " topic(s) " + w_.topic_prefix + "-NNNN of " +
      std::to_string(w_.partitions_per_topic) + " partition(s) on " + w_.bootstrap_servers);
  notes.clear();
  auto topics = prepare_topics(w_, admin_props_, notes);
  if (!topics) return tl::make_unexpected(topics.error());
  topics_ = std::move(*topics);
  add_unique(r_.warnings, notes);

  // New topics hold nothing older than this run: a new group starts at their beginning and
  // misses nothing. On reused topics it starts at their end (the probes make sure it has a
  // position before the run's first record).
  if (!consumer_java.contains("auto.offset.reset")) {
    const bool reused = std::any_of(notes.begin(), notes.end(),
                                    [](const std::string& n) { return n.rfind("used ", 0) == 0; });
    consumer_props_.settings.emplace_back("auto.offset.reset", reused ? "latest" : "earliest");
  }
  for (const auto& [k, v] : producer_props_.settings) r_.parameters["librdkafka.producer." + k] = v;
  for (const auto& [k, v] : consumer_props_.settings) r_.parameters["librdkafka.consumer." + k] = v;

  for (int t = 0; t < w_.topics; ++t) {
    for (int j = 0; j < w_.groups_per_topic; ++j) {
      group_ids_.push_back(
          w_.reuse_topics
              ? topics_[static_cast<size_t>(t)].name + "-group-" + std::to_string(j)
              : "silt-perf-" + hex(run_id_, 8) + "-" + std::to_string(t) + "-" + std::to_string(j));
    }
  }

  stats_ = std::make_unique<run_stats>(w_.topics, std::max(1, w_.groups_per_topic));
  if (w_.groups_per_topic > 0) {
    consumer_pool::options co;
    co.topics = topics_;
    co.groups_per_topic = w_.groups_per_topic;
    co.consumers_per_group = w_.consumers_per_group;
    co.group_ids = group_ids_;
    co.stats = stats_.get();
    co.clock = &clock_;
    co.run_id = run_id_;
    co.props = consumer_props_;
    co.bootstrap = w_.bootstrap_servers;
    consumers_ = std::make_unique<consumer_pool>(std::move(co));
    if (auto s = consumers_->start(); !s) return tl::make_unexpected(s.error());
  }
  producer_pool::options po;
  po.topics = topics_;
  po.producers_per_topic = w_.producers_per_topic;
  po.keys = w_.keys;
  po.payloads = &*payloads_;
  po.stats = stats_.get();
  po.clock = &clock_;
  po.run_id = run_id_;
  po.props = producer_props_;
  po.bootstrap = w_.bootstrap_servers;
  producers_ = std::make_unique<producer_pool>(std::move(po));
  if (auto s = producers_->start(); !s) return tl::make_unexpected(s.error());
  return {};
}

tl::expected<void, std::string> session::await_ready() {
  const auto start = clock::now();
  const auto deadline = start + ready_timeout;
  auto failed = [&](const std::string& what) -> tl::expected<void, std::string> {
    std::string why = what;
    if (producers_->probes_failed() > 0)
      why += "; probe records failed: " + producers_->last_probe_error();
    for (const auto& [kind, e] : stats_->client_errors_by_kind()) {
      why += "; " + kind + " (" + std::to_string(e.count) + "x, latest: " + e.latest + ")";
    }
    return tl::make_unexpected(why);
  };
  if (!consumers_) {
    uint64_t partitions = 0;
    for (const auto& t : topics_) partitions += static_cast<uint64_t>(t.partitions);
    producers_->send_probes();
    while (producers_->probes_acked() < partitions) {
      if (interrupted()) return failed("interrupted while waiting for the producers");
      if (clock::now() > deadline) {
        return failed("the producers' probe records were not acknowledged in 120 s");
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
  } else {
    while (true) {
      if (interrupted()) return failed("interrupted while the consumers joined their groups");
      if (clock::now() > deadline) {
        return failed("the consumers were not ready in 120 s: " + consumers_->readiness_detail());
      }
      if (!consumers_->assigned()) {
        std::this_thread::sleep_for(milliseconds(50));
        continue;
      }
      const uint64_t changes = consumers_->assignment_changes();
      consumers_->reset_probes();
      producers_->send_probes();
      const auto until = clock::now() + probe_wait;
      while (clock::now() < until && consumers_->groups_probed() < consumers_->group_count() &&
             consumers_->assignment_changes() == changes && !interrupted()) {
        std::this_thread::sleep_for(milliseconds(20));
      }
      if (consumers_->groups_probed() == consumers_->group_count() &&
          consumers_->assignment_changes() == changes) {
        break;
      }
    }
  }
  say(fmt("%.0f producer(s) and %.0f consumer(s) in %.0f group(s) ready in %.1f s",
          producers_->producer_count(), w_.consumer_count(), w_.group_count(),
          seconds(clock::now() - start)));
  return {};
}

run_outcome session::run(const std::vector<std::string>& notes) {
  signal_guard signals;
  run_outcome out;
  r_.tool_mode = tool_mode_;
  r_.workload = w_.name;
  r_.broker = w_.bootstrap_servers;
  r_.started_at = utc_now_iso();
  r_.target_rate = w_.send_rate;
  add_unique(r_.warnings, notes);

  if (auto s = setup(); !s) {
    out.error = s.error();
    out.exit_code = 1;
    return out;
  }
  if (auto s = await_ready(); !s) {
    out.error = s.error();
    out.exit_code = interrupted() ? 130 : 1;
    return out;
  }

  double rate = w_.send_rate;
  if (rate == 0) {
    rate = search_rate();
    r_.target_rate = rate;
    if (rate == 0 && !interrupted()) {
      out.error = "the rate search found no sustainable rate: " + r_.parameters["rate_search"];
      out.exit_code = 1;
    } else {
      say(fmt("running at %.0f msg/s, the highest rate sustained", rate));
    }
  }

  phase_result test;
  send_schedule test_schedule;
  auto test_start = clock::now();
  auto test_end = test_start;
  if (rate > 0 && !interrupted()) {
    start_schedule(rate);
    if (w_.warmup_s > 0) {
      say(fmt("warming up for %.1f s at %.0f msg/s", w_.warmup_s, rate));
      (void)phase("warmup", w_.warmup_s);
    }
    if (!interrupted()) {
      say(w_.test_s > 0 ? fmt("testing for %.1f s at %.0f msg/s", w_.test_s, rate)
                        : fmt("testing at %.0f msg/s until interrupted", rate));
      test_start = carry_->second;
      test = phase("test", w_.test_s);
      test_end = clock::now();
      test_schedule = producers_->schedule();
      r_.test = test.total;
    }
    if (w_.has_backlog_test() && !interrupted()) backlog_test();
  }
  const bool stopped_by_signal = interrupted();
  drain();
  producers_->stop();
  if (consumers_) consumers_->stop();

  if (!test.first.produce_us) test.first = test.last = stats_->take();
  add_warnings(test, test_schedule, test_start, test_end);
  if (stopped_by_signal && !(w_.test_s == 0 && interrupted_in_ == "test")) {
    r_.warnings.push_back("interrupted in the " + interrupted_in_ +
                          " phase: the results cover what ran until then");
    out.exit_code = 130;
  }
  if (out.exit_code == 0 && rate > 0 && r_.test.acked == 0) {
    r_.warnings.push_back("no record was acknowledged in the test phase");
    out.exit_code = 1;
  }
  if (w_.delete_topics) {
    std::vector<std::string> names;
    for (const auto& t : topics_) names.push_back(t.name);
    if (auto d = delete_topics(names, admin_props_, w_.bootstrap_servers); !d) {
      r_.warnings.push_back(d.error());
    }
  }
  out.result = std::move(r_);
  return out;
}

}  // namespace silt::perf
