#include "report.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace silt::perf {
namespace {

latency_summary latency(double p50, uint64_t count = 1000) {
  latency_summary l;
  l.count = count;
  l.avg_ms = p50 * 1.1;
  l.p50_ms = p50;
  l.p75_ms = p50 * 1.3;
  l.p90_ms = p50 * 1.7;
  l.p95_ms = p50 * 2;
  l.p99_ms = p50 * 4;
  l.p999_ms = p50 * 20;
  l.max_ms = p50 * 50;
  return l;
}

interval_stats interval(double start, const char* phase, double rate) {
  interval_stats s;
  s.start_s = start;
  s.duration_s = 10;
  s.phase = phase;
  s.sent = static_cast<uint64_t>(rate * 10);
  s.acked = s.sent;
  s.consumed = s.sent;
  s.acked_bytes = s.acked * 65536;
  s.consumed_bytes = s.consumed * 65536;
  s.backlog = 12;
  s.produce_msgs_per_s = rate;
  s.produce_mib_per_s = rate / 16;
  s.consume_msgs_per_s = rate;
  s.consume_mib_per_s = rate / 16;
  s.produce_latency = latency(2 + start / 100);
  s.e2e_latency = latency(3 + start / 100);
  return s;
}

// A run with a warm-up, a test phase with one interval that consumed nothing (no end-to-end
// samples: a gap in that chart), and a catch-up phase.
run_result sample_run() {
  run_result r;
  r.tool_mode = "automq";
  r.workload = "1 topic, 288 partitions, 64 KiB";
  r.broker = "broker-1:9092";
  r.started_at = "2025-06-01T12:00:00Z";
  r.parameters = {{"record-size", "65536"}, {"send-rate", "16640"}, {"topics", "1"}};
  r.target_rate = 16640;
  for (int i = 0; i < 3; ++i) r.intervals.push_back(interval(i * 10, "warmup", 16000 + i * 100));
  for (int i = 3; i < 9; ++i) r.intervals.push_back(interval(i * 10, "test", 16640 - i));
  r.intervals[5].e2e_latency = {};
  r.intervals[5].consumed = 0;
  r.intervals[5].consume_msgs_per_s = 0;
  r.intervals[5].consume_mib_per_s = 0;
  r.intervals[5].backlog = 166400;
  for (int i = 9; i < 12; ++i) {
    auto s = interval(i * 10, "catchup", 0);
    s.consume_msgs_per_s = 50000;
    s.consume_mib_per_s = 3125;
    s.produce_latency = {};
    s.backlog = 1000000 - (i - 8) * 300000;
    r.intervals.push_back(s);
  }
  r.test = interval(30, "test", 16634.5);
  r.test.duration_s = 60;
  r.test.produce_errors = 3;
  r.test.produce_latency = latency(8.125, 998000);
  r.test.e2e_latency = latency(9.169, 998000);
  r.catchup = interval(90, "catchup", 0);
  r.catchup->consume_msgs_per_s = 50000;
  r.warnings = {"the send rate fell 2% short of 16,640 records/s",
                "3 produce errors: Broker: Not enough in-sync replicas"};
  return r;
}

// ---- summarize_us ----

TEST(SummarizeUs, PercentilesInMillisecondsWithinOnePercent) {
  auto h = std::make_unique<base::precise_histogram>();
  for (uint64_t ms = 1; ms <= 1000; ++ms) h->record(ms * 1000);  // 1 ms .. 1 s
  const auto l = summarize_us(h->snapshot());
  EXPECT_EQ(l.count, 1000U);
  EXPECT_DOUBLE_EQ(l.avg_ms, 500.5);
  const std::map<double, double> exact{{500, l.p50_ms}, {750, l.p75_ms}, {900, l.p90_ms},
                                       {950, l.p95_ms}, {990, l.p99_ms}, {999, l.p999_ms}};
  for (const auto& [want, got] : exact) {
    EXPECT_GE(got, want);
    EXPECT_LT(got, want * 1.01) << want;
  }
  EXPECT_DOUBLE_EQ(l.max_ms, 1000.0);
}

TEST(SummarizeUs, AnEmptyHistogramIsAllZero) {
  auto h = std::make_unique<base::precise_histogram>();
  const auto l = summarize_us(h->snapshot());
  EXPECT_EQ(l.count, 0U);
  EXPECT_EQ(l.avg_ms, 0);
  EXPECT_EQ(l.p99_ms, 0);
  EXPECT_EQ(l.max_ms, 0);
}

TEST(SummarizeUs, SubMillisecondLatenciesKeepTheirMicroseconds) {
  auto h = std::make_unique<base::precise_histogram>();
  h->record(120);
  h->record(180);
  const auto l = summarize_us(h->snapshot());
  EXPECT_DOUBLE_EQ(l.avg_ms, 0.15);
  EXPECT_DOUBLE_EQ(l.p50_ms, 0.12);  // exact below 256 us
  EXPECT_DOUBLE_EQ(l.max_ms, 0.18);
}

// ---- progress_line ----

TEST(ProgressLine, PhaseAndElapsedTimeFirstThenRatesBacklogAndLatencies) {
  auto s = interval(80, "test", 16640);
  s.consume_msgs_per_s = 66560;
  s.consume_mib_per_s = 4160;
  s.produce_mib_per_s = 1040;
  s.backlog = 1234;
  s.produce_latency.p50_ms = 2.1;
  s.produce_latency.p99_ms = 8.3;
  s.produce_latency.max_ms = 41.25;
  s.e2e_latency.p50_ms = 3.4;
  s.e2e_latency.p99_ms = 12.1;
  s.e2e_latency.max_ms = 1234.6;
  EXPECT_EQ(progress_line(s),
            "[test 00:01:30] produce 16,640 msg/s 1040.0 MiB/s (errors 0) | consume 66,560 msg/s "
            "4160.0 MiB/s | backlog 1,234 | produce p50 2.10 p99 8.30 max 41.2 ms | e2e p50 3.40 "
            "p99 12.1 max 1,235 ms");
}

TEST(ProgressLine, AnIntervalWithoutSamplesShowsADash) {
  auto s = interval(3600, "catchup", 0);
  s.produce_latency = {};
  s.backlog = -3;
  const auto line = progress_line(s);
  EXPECT_EQ(line.rfind("[catchup 01:00:10] produce 0 msg/s 0.0 MiB/s", 0), 0U) << line;
  EXPECT_NE(line.find("backlog -3 |"), std::string::npos) << line;
  EXPECT_NE(line.find("| produce - | e2e p50"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

// ---- summary_table ----

TEST(SummaryTable, ShowsThroughputAndBothLatencyColumnsAsInPublishedReports) {
  const auto text = summary_table(sample_run());
  for (const char* want : {"workload \"1 topic, 288 partitions, 64 KiB\"",
                           "broker broker-1:9092",
                           "Test phase: 60.0 s",
                           "target 16,640 records/s",
                           "Records/s",
                           "16,634.5",
                           "MiB/s",
                           "1,039.66",
                           "Errors",
                           "Latency (ms)",
                           "Produce",
                           "E2E",
                           "Average",
                           "8.938",
                           "P50",
                           "8.125",
                           "9.169",
                           "P75",
                           "P90",
                           "P95",
                           "P99",
                           "32.500",
                           "P99.9",
                           "162.500",
                           "Maximum",
                           "406.250",
                           "Samples",
                           "998,000",
                           "Catch-up phase",
                           "Warnings:",
                           "  - the send rate fell 2% short of 16,640 records/s",
                           "  - 3 produce errors: Broker: Not enough in-sync replicas"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  EXPECT_EQ(text.back(), '\n');
}

TEST(SummaryTable, LeavesOutWhatTheRunDidNotHave) {
  auto r = sample_run();
  r.catchup.reset();
  r.warnings.clear();
  r.test.e2e_latency = {};
  r.target_rate = 0;
  const auto text = summary_table(r);
  EXPECT_EQ(text.find("Catch-up"), std::string::npos) << text;
  EXPECT_EQ(text.find("Warnings"), std::string::npos) << text;
  EXPECT_NE(text.find("no target rate"), std::string::npos) << text;
  std::istringstream lines(text);
  std::string line;
  bool found = false;
  while (std::getline(lines, line)) {
    if (line.rfind("  P99.9", 0) == 0) {
      found = true;
      EXPECT_NE(line.find("162.500"), std::string::npos) << line;
      EXPECT_EQ(line.back(), '-') << line;  // no end-to-end samples
    }
  }
  EXPECT_TRUE(found) << text;
}

// ---- JSON ----

TEST(ReportJson, RoundTripsThroughText) {
  const auto r = sample_run();
  const auto text = to_json(r).dump(2);
  const auto back = from_json(nlohmann::json::parse(text));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(to_json(*back), to_json(r));
  EXPECT_EQ(back->workload, r.workload);
  EXPECT_EQ(back->parameters, r.parameters);
  EXPECT_EQ(back->warnings, r.warnings);
  ASSERT_EQ(back->intervals.size(), r.intervals.size());
  EXPECT_EQ(back->intervals[5].e2e_latency.count, 0U);
  EXPECT_EQ(back->intervals[10].backlog, r.intervals[10].backlog);
  EXPECT_EQ(back->test.produce_latency.p999_ms, r.test.produce_latency.p999_ms);
  EXPECT_EQ(back->test.acked_bytes, r.test.acked_bytes);
  ASSERT_TRUE(back->catchup);
  EXPECT_EQ(back->catchup->consume_msgs_per_s, 50000);
}

TEST(ReportJson, HasTheParametersAggregatesAndSeries) {
  const auto j = to_json(sample_run());
  EXPECT_EQ(j.at("format"), "silt-perf");
  EXPECT_EQ(j.at("version"), 1);
  EXPECT_EQ(j.at("parameters").at("record-size"), "65536");
  EXPECT_EQ(j.at("test").at("produce_latency").at("p50_ms"), 8.125);
  EXPECT_EQ(j.at("intervals").size(), 12U);
  EXPECT_EQ(j.at("intervals").at(0).at("phase"), "warmup");
}

TEST(ReportJson, NoCatchUpIsNullAndReadsBackAsNone) {
  auto r = sample_run();
  r.catchup.reset();
  const auto j = to_json(r);
  EXPECT_TRUE(j.at("catchup").is_null());
  const auto back = from_json(j);
  ASSERT_TRUE(back) << back.error();
  EXPECT_FALSE(back->catchup);
}

TEST(ReportJson, ANumberThatIsNotFiniteIsWrittenAsNullAndReadAsNaN) {
  auto r = sample_run();
  r.test.produce_mib_per_s = std::nan("");
  const auto text = to_json(r).dump();
  EXPECT_NE(text.find("\"produce_mib_per_s\":null"), std::string::npos);
  const auto back = from_json(nlohmann::json::parse(text));
  ASSERT_TRUE(back) << back.error();
  EXPECT_TRUE(std::isnan(back->test.produce_mib_per_s));
}

TEST(ReportJson, ErrorsNameTheFirstBadField) {
  const auto good = to_json(sample_run());
  const auto error_of = [](const nlohmann::json& j) {
    const auto r = from_json(j);
    return r ? std::string("no error") : r.error();
  };
  auto j = good;
  j["intervals"][2]["produce_latency"].erase("p99_ms");
  EXPECT_EQ(error_of(j), "intervals[2].produce_latency.p99_ms is missing");
  j = good;
  j["test"]["acked"] = -1;
  EXPECT_EQ(error_of(j), "test.acked is not a non-negative integer");
  j = good;
  j["test"]["backlog"] = 1.5;
  EXPECT_EQ(error_of(j), "test.backlog is not an integer");
  j = good;
  j["workload"] = 7;
  EXPECT_EQ(error_of(j), "workload is not a string");
  j = good;
  j["parameters"]["topics"] = 1;
  EXPECT_EQ(error_of(j), "parameters.topics is not a string");
  j = good;
  j["intervals"] = nlohmann::json::object();
  EXPECT_EQ(error_of(j), "intervals is not an array");
  j = good;
  j["intervals"][0] = 3;
  EXPECT_EQ(error_of(j), "intervals[0] is not an object");
  j = good;
  j["version"] = 2;
  EXPECT_EQ(error_of(j), "version 2 is not one this silt-perf reads (1)");
  j = good;
  j["format"] = "omb";
  EXPECT_NE(error_of(j).find("not a silt-perf result"), std::string::npos);
  EXPECT_EQ(error_of(nlohmann::json::array()), "the document is not an object");
  j = good;
  j["a field of a later version"] = {1, 2};
  EXPECT_EQ(error_of(j), "no error");
}

// ---- HTML ----

// The <svg> of each chart, by data-chart.
std::map<std::string, std::string> charts_in(const std::string& html) {
  std::map<std::string, std::string> charts;
  const std::regex open(R"re(<svg class="chart" data-chart="([^"]*)")re");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), open); it != std::sregex_iterator();
       ++it) {
    const auto start = static_cast<size_t>(it->position());
    const auto end = html.find("</svg>", start);
    EXPECT_NE(end, std::string::npos);
    charts[(*it)[1]] = html.substr(start, end - start);
  }
  return charts;
}

struct drawn_series {
  size_t declared = 0;  // data-points
  size_t points = 0;    // coordinates in the path
  size_t subpaths = 0;  // M commands
  size_t dots = 0;      // circles
};

std::map<std::string, drawn_series> series_in(const std::string& svg) {
  std::map<std::string, drawn_series> out;
  const std::regex g(
      R"re(<g class="series" data-series="([^"]*)" data-points="(\d+)">(.*?)</g>)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), g); it != std::sregex_iterator();
       ++it) {
    drawn_series s;
    s.declared = std::stoul((*it)[2]);
    const std::string body = (*it)[3];
    std::smatch d;
    if (std::regex_search(body, d, std::regex(R"re(<path d="([^"]*)")re"))) {
      const std::string path = d[1];
      for (const char c : path) {
        if (c == 'M' || c == 'L') ++s.points;
        if (c == 'M') ++s.subpaths;
      }
    }
    for (size_t p = body.find("<circle"); p != std::string::npos; p = body.find("<circle", p + 1)) {
      ++s.dots;
    }
    out[(*it)[1]] = s;
  }
  return out;
}

size_t count_of(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + 1)) {
    ++n;
  }
  return n;
}

constexpr std::array<const char*, 5> chart_names{"throughput_mib", "throughput_msgs",
                                                 "produce_latency", "e2e_latency", "backlog"};

TEST(ReportHtml, OneSvgPerChartWithAPointPerInterval) {
  const auto r = sample_run();
  const auto html = to_html(r);
  EXPECT_EQ(count_of(html, "<svg"), chart_names.size());
  const auto charts = charts_in(html);
  ASSERT_EQ(charts.size(), chart_names.size());
  for (const auto& name : chart_names) ASSERT_TRUE(charts.contains(name)) << name;

  const auto mib = series_in(charts.at("throughput_mib"));
  ASSERT_EQ(mib.size(), 2U);
  for (const auto& [name, s] : mib) {
    EXPECT_EQ(s.points, 12U) << name;
    EXPECT_EQ(s.declared, 12U) << name;
    EXPECT_EQ(s.subpaths, 1U) << name;
  }
  EXPECT_EQ(series_in(charts.at("throughput_msgs")).size(), 2U);
  EXPECT_EQ(series_in(charts.at("backlog")).at("backlog").points, 12U);

  // Produce latency: none in the three catch-up intervals.
  const auto produce = series_in(charts.at("produce_latency"));
  ASSERT_EQ(produce.size(), 3U);
  for (const char* q : {"p50", "p99", "p99.9"}) {
    ASSERT_TRUE(produce.contains(q)) << q;
    EXPECT_EQ(produce.at(q).points, 9U) << q;
    EXPECT_EQ(produce.at(q).subpaths, 1U) << q;
  }
  // End-to-end latency: interval 5 has none, so each line breaks into two.
  const auto e2e = series_in(charts.at("e2e_latency"));
  for (const char* q : {"p50", "p99", "p99.9"}) {
    ASSERT_TRUE(e2e.contains(q)) << q;
    EXPECT_EQ(e2e.at(q).points, 11U) << q;
    EXPECT_EQ(e2e.at(q).subpaths, 2U) << q;
    EXPECT_EQ(e2e.at(q).dots, 0U) << q;
  }
}

TEST(ReportHtml, HasAxesLegendPhasesAndTables) {
  const auto html = to_html(sample_run());
  const auto charts = charts_in(html);
  for (const auto& [name, svg] : charts) {
    EXPECT_NE(svg.find("class=\"tick y\""), std::string::npos) << name;
    EXPECT_NE(svg.find("class=\"tick x\""), std::string::npos) << name;
    EXPECT_NE(svg.find("elapsed (m:ss)"), std::string::npos) << name;
    EXPECT_NE(svg.find("class=\"legend\""), std::string::npos) << name;
    EXPECT_NE(svg.find("class=\"band warmup\""), std::string::npos) << name;
    EXPECT_NE(svg.find("class=\"band catchup\""), std::string::npos) << name;
    EXPECT_NE(svg.find(">warm-up<"), std::string::npos) << name;
  }
  EXPECT_NE(charts.at("throughput_mib").find(">MiB/s<"), std::string::npos);
  EXPECT_NE(charts.at("produce_latency").find(">ms"), std::string::npos);
  EXPECT_NE(html.find("<td>8.125</td>"), std::string::npos);
  EXPECT_NE(html.find("<th>P99.9</th>"), std::string::npos);
  EXPECT_NE(html.find("record-size"), std::string::npos);
  EXPECT_NE(html.find("Catch-up phase"), std::string::npos);
  EXPECT_NE(html.find("Not enough in-sync replicas"), std::string::npos);
}

TEST(ReportHtml, EscapesEveryTextItShows) {
  auto r = sample_run();
  r.workload = "<script>alert('x')</script>";
  r.parameters["<img src=x>"] = "a\"b & <c>";
  r.warnings.push_back("</li><script>evil()</script>");
  r.broker = "host\"><svg onload=x>";
  const auto html = to_html(r);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(count_of(html, "<svg"), chart_names.size());
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("a&quot;b &amp; &lt;c&gt;"), std::string::npos);
  EXPECT_NE(html.find("host&quot;&gt;&lt;svg onload=x&gt;"), std::string::npos);
}

TEST(ReportHtml, FetchesNothing) {
  const auto html = to_html(sample_run());
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_NE(html.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
}

TEST(ReportHtml, AnEmptyRunDrawsEmptyChartsWithoutDividingByZero) {
  run_result r;
  r.tool_mode = "omb";
  const auto html = to_html(r);
  const auto charts = charts_in(html);
  ASSERT_EQ(charts.size(), chart_names.size());
  for (const auto& [name, svg] : charts) {
    EXPECT_NE(svg.find("data-empty=\"true\""), std::string::npos) << name;
    EXPECT_NE(svg.find(">no data<"), std::string::npos) << name;
    for (const auto& [series, s] : series_in(svg)) EXPECT_EQ(s.points, 0U) << name << series;
  }
  for (const char* bad : {"nan", "inf", "NaN"}) EXPECT_EQ(html.find(bad), std::string::npos) << bad;
}

TEST(ReportHtml, ASingleIntervalIsADotOnEveryChart) {
  run_result r;
  r.intervals.push_back(interval(0, "test", 100));
  r.intervals[0].duration_s = 0;  // even a zero-length one
  const auto html = to_html(r);
  for (const char* bad : {"nan", "inf"}) EXPECT_EQ(html.find(bad), std::string::npos) << bad;
  for (const auto& [name, svg] : charts_in(html)) {
    EXPECT_NE(svg.find("data-empty=\"false\""), std::string::npos) << name;
    for (const auto& [series, s] : series_in(svg)) {
      EXPECT_EQ(s.points, 1U) << name << " " << series;
      EXPECT_EQ(s.dots, 1U) << name << " " << series;
    }
  }
}

TEST(ReportHtml, AbsurdNumbersNeitherHangNorLeakIntoTheSvg) {
  run_result r;
  for (const double v : {std::nan(""), HUGE_VAL, -HUGE_VAL, 1e308, 1e-320, -5.0, 0.0}) {
    auto s = interval(r.intervals.size() * 10.0, "test", 100);
    s.produce_mib_per_s = v;
    s.consume_msgs_per_s = v;
    s.produce_latency.p50_ms = v;
    s.e2e_latency.p999_ms = v;
    r.intervals.push_back(s);
  }
  auto odd = interval(1e18, "test", 1);
  odd.duration_s = 0;
  r.intervals.push_back(odd);
  const auto html = to_html(r);
  EXPECT_EQ(charts_in(html).size(), chart_names.size());
  for (const char* bad : {"nan", "inf"}) EXPECT_EQ(html.find(bad), std::string::npos) << bad;
}

TEST(ReportHtml, LatenciesSpanningDecadesGetALogScale) {
  auto r = sample_run();
  r.intervals[4].produce_latency.p999_ms = 5000;
  const auto charts = charts_in(to_html(r));
  EXPECT_NE(charts.at("produce_latency").find("ms, log scale"), std::string::npos);
  EXPECT_EQ(charts.at("throughput_mib").find("log scale"), std::string::npos);
}

// ---- write_reports ----

std::string read_all(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(WriteReports, WritesBothFilesAndSkipsEmptyPaths) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "silt_perf_report_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto r = sample_run();
  ASSERT_TRUE(write_reports(r, (dir / "r.json").string(), (dir / "r.html").string()));
  const auto back = from_json(nlohmann::json::parse(read_all(dir / "r.json")));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(to_json(*back), to_json(r));
  EXPECT_EQ(read_all(dir / "r.html"), to_html(r));

  ASSERT_TRUE(write_reports(r, "", (dir / "only.html").string()));
  ASSERT_TRUE(write_reports(r, (dir / "only.json").string(), ""));
  EXPECT_TRUE(std::filesystem::exists(dir / "only.html"));
  EXPECT_TRUE(std::filesystem::exists(dir / "only.json"));
  EXPECT_TRUE(write_reports(r, "", ""));
  std::filesystem::remove_all(dir);
}

TEST(WriteReports, SaysWhichFileItCouldNotWrite) {
  const auto result = write_reports(sample_run(), "/nonexistent-dir/x/r.json", "");
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().find("/nonexistent-dir/x/r.json"), std::string::npos) << result.error();
}

// Not a check of its own: writes the sample report where SILT_PERF_SAMPLE_HTML says, for
// tests/check_html_report.py to open in a browser.
TEST(ReportSample, WritesTheSampleHtmlWhereAsked) {
  const char* path = std::getenv("SILT_PERF_SAMPLE_HTML");  // NOLINT(concurrency-mt-unsafe)
  if (path == nullptr || *path == '\0') GTEST_SKIP() << "SILT_PERF_SAMPLE_HTML is not set";
  auto r = sample_run();
  r.workload = "<script>document.title='pwned'</script> sample";
  const auto written = write_reports(r, "", path);
  ASSERT_TRUE(written) << written.error();
}

}  // namespace
}  // namespace silt::perf
