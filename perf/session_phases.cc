// The phases of a run after the clients are ready, other than warm-up and test: the rate
// search, the backlog test, the final drain, and the warnings the run ends with.
#include <algorithm>

#include "rate_control.h"
#include "session.h"

namespace silt::perf {

double session::search_rate() {
  max_rate_search search(w_.search_start_rate);
  const int gpt = std::max(1, w_.groups_per_topic);
  say(fmt("searching for the maximum sustainable rate from %.0f msg/s (trials of %.0f s)",
          w_.search_start_rate, trial_s));
  while (!search.done() && !interrupted()) {
    const double rate = search.next_rate();
    start_schedule(rate);
    const run_stats::snapshot& before = carry_->first;
    const auto t0 = carry_->second;
    const uint64_t sent_before = before.sent;
    const uint64_t acked_before = before.acked;
    const uint64_t errors_before = before.errors;
    const phase_result a = phase("search", trial_s / 2);
    const phase_result b = phase("search", trial_s / 2);
    const auto t1 = b.last_time;
    const uint64_t scheduled = producers_->schedule().due_by(t1 - send_slack);
    producers_->set_rate(0, clock::now());
    const int64_t backlog_at_end = b.last.max_group_backlog(gpt);
    const phase_result pause = phase(
        "search", 0,
        [&](const run_stats::snapshot& s) {
          return producers_->in_flight() == 0 && (!consumers_ || s.max_group_backlog(gpt) == 0);
        },
        std::max(2.0, trial_s));
    rate_trial t;
    t.rate = rate;
    t.duration_s = seconds(t1 - t0);
    t.scheduled = scheduled;
    t.sent = b.last.sent - sent_before;
    t.acked = pause.last.acked - acked_before;
    t.errors = pause.last.errors - errors_before;
    t.early_p50_ms = a.total.produce_latency.p50_ms;
    t.late_p50_ms = b.total.produce_latency.p50_ms;
    t.max_group_backlog = consumers_ ? backlog_at_end : 0;
    t.drained = pause.condition_met;
    if (interrupted()) break;
    const trial_verdict v = search.record(t);
    say(fmt("rate search: trial %.0f at %.0f msg/s: ", search.trials(), rate) +
        (v.sustainable ? "sustained (" : "not sustained (") + v.reason + ")");
  }
  const double found = search.found();
  r_.parameters["rate_search"] =
      fmt("%.0f trials; highest sustained %.0f msg/s; lowest not sustained %.0f msg/s",
          search.trials(), found, search.lowest_failed());
  if (!interrupted() && found > 0 && !search.converged()) {
    r_.warnings.push_back(
        fmt("the rate search stopped after %.0f trials without narrowing the "
            "maximum to 5%%: ran at the highest rate sustained, %.0f msg/s",
            search.trials(), found));
  }
  return found;
}

void session::backlog_test() {
  const int gpt = w_.groups_per_topic;
  say(w_.backlog_s > 0
          ? fmt("backlog test: consumers paused for %.0f s while producers go on", w_.backlog_s)
          : fmt("backlog test: consumers paused until %.0f MiB are unread",
                w_.backlog_bytes / 1048576));
  consumers_->pause(true);
  const auto build_start = clock::now();
  const double record = w_.record_size;
  const phase_result build =
      phase("backlog", w_.backlog_s,
            w_.backlog_bytes > 0 ? condition([&](const run_stats::snapshot& s) {
              return static_cast<double>(s.total_backlog(gpt)) * record >= w_.backlog_bytes;
            })
                                 : condition{},
            w_.backlog_bytes > 0 ? 3600 : 0);
  const double build_s = seconds(clock::now() - build_start);
  consumers_->pause(false);
  if (interrupted()) return;
  // Each group must read what was acknowledged by the end of the build, less the part the
  // drain ratio lets it leave.
  std::vector<int64_t> need(static_cast<size_t>(w_.group_count()));
  for (int g = 0; g < w_.group_count(); ++g) {
    const auto acked =
        static_cast<int64_t>(build.last.acked_per_topic[static_cast<size_t>(g / gpt)]);
    const auto left = static_cast<int64_t>((1 - w_.backlog_drain_ratio) *
                                           static_cast<double>(build.last.group_backlog(g, gpt)));
    need[static_cast<size_t>(g)] = acked - left;
  }
  say(fmt("backlog of %.0f records built in %.1f s; reading it", build.last.total_backlog(gpt),
          build_s));
  const phase_result catchup = phase(
      "catchup", 0,
      [&](const run_stats::snapshot& s) {
        for (size_t g = 0; g < need.size(); ++g) {
          if (static_cast<int64_t>(s.consumed_per_group[g]) < need[g]) return false;
        }
        return true;
      },
      std::max(60.0, 10 * build_s));
  r_.catchup = catchup.total;
  if (!catchup.condition_met && !interrupted()) {
    r_.warnings.push_back(
        fmt("the consumers did not read the backlog within %.0f s: %.0f records "
            "still unread at the end of the catch-up phase",
            catchup.total.duration_s, catchup.last.total_backlog(gpt)));
  }
}

void session::drain() {
  producers_->set_rate(0, clock::now());
  const int gpt = std::max(1, w_.groups_per_topic);
  const bool was_interrupted = interrupted();
  const phase_result d = phase(
      "drain", 0,
      [&](const run_stats::snapshot& s) {
        return producers_->in_flight() == 0 && (!consumers_ || s.total_backlog(gpt) == 0);
      },
      was_interrupted ? interrupted_drain_s : drain_limit_s, false);
  end_ = d.last;
  if (!consumers_) return;
  for (int g = 0; g < w_.group_count(); ++g) {
    const uint64_t acked = d.last.acked_per_topic[static_cast<size_t>(g / gpt)];
    const uint64_t read = d.last.consumed_per_group[static_cast<size_t>(g)];
    if (read < acked) {
      r_.warnings.push_back("group " + group_ids_[static_cast<size_t>(g)] + " read " +
                            std::to_string(read) + " of the " + std::to_string(acked) +
                            " records acknowledged on " +
                            topics_[static_cast<size_t>(g / gpt)].name + " by the end of the run");
    } else if (read > acked) {
      r_.warnings.push_back(
          "group " + group_ids_[static_cast<size_t>(g)] + " read " + std::to_string(read) +
          " records, more than the " + std::to_string(acked) + " acknowledged on " +
          topics_[static_cast<size_t>(g / gpt)].name + " (records read twice after a rebalance)");
    }
  }
}

void session::add_warnings(const phase_result& test, const send_schedule& schedule,
                           clock::time_point test_start, clock::time_point test_end) {
  const double rate = schedule.rate();
  if (!schedule.paused() && test.total.duration_s > 0) {
    // The schedule ran unbroken from the warm-up on.
    const uint64_t due = schedule.due_by(test_end) - schedule.due_by(test_start);
    const uint64_t done = std::min(test.total.sent, test.total.acked);
    const uint64_t late = test.last.late_sends - test.first.late_sends;
    const uint64_t full = test.last.queue_full - test.first.queue_full;
    if (static_cast<double>(done) < 0.95 * static_cast<double>(due)) {
      r_.warnings.push_back(fmt("could not keep the requested rate: %.0f msg/s of %.0f msg/s (the "
                                "producers sent %.0f of the %.0f records due",
                                test.total.produce_msgs_per_s, rate,
                                static_cast<double>(test.total.sent), static_cast<double>(due)) +
                            fmt("; the client queue was full %.0f times; %.0f sends were more "
                                "than 1 s late)",
                                static_cast<double>(full), static_cast<double>(late)));
    } else if (late > 0) {
      r_.warnings.push_back(
          fmt("%.0f sends were more than 1 s behind schedule in the test phase "
              "(measured from when they were due)",
              static_cast<double>(late)));
    }
  }
  const run_stats::snapshot& end = end_;
  if (end.errors > 0) {
    std::string kinds;
    for (const auto& [kind, n] : stats_->produce_errors_by_kind()) {
      kinds += (kinds.empty() ? "" : "; ") + kind + " (" + std::to_string(n) + "x)";
    }
    r_.warnings.push_back(std::to_string(end.errors) + " produce errors in the run, " +
                          std::to_string(test.total.produce_errors) +
                          " in the test phase: " + kinds);
  }
  for (const auto& [kind, e] : stats_->client_errors_by_kind()) {
    r_.warnings.push_back("client error " + kind + ", " + std::to_string(e.count) +
                          " time(s) (latest: " + e.latest + ")");
  }
  const uint64_t unresolved = end.sent - std::min(end.sent, end.acked + end.errors);
  if (unresolved > 0) {
    r_.warnings.push_back(std::to_string(unresolved) +
                          " records were sent but neither acknowledged nor failed by the end of "
                          "the run (purged when the producers closed)");
  }
  if (end.foreign > 0) {
    r_.warnings.push_back(std::to_string(end.foreign) +
                          " records of other runs or writers were read and skipped");
  }
  if (end.rebalances > test.first.rebalances) {
    r_.warnings.push_back(
        std::to_string(end.rebalances - test.first.rebalances) +
        " consumer group assignment changes (rebalances) from the start of the test phase on");
  }
}

}  // namespace silt::perf
