#include "base/prometheus.h"

#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace silt::base {
namespace {

TEST(PrometheusWriter, CounterAndGaugeFamiliesHaveHelpTypeAndLabelledSamples) {
  prometheus_writer w;
  const std::pair<std::string_view, std::string_view> topic[] = {{"topic", "orders"}};
  w.family("kafka_bytes_in_total", prometheus_writer::type::counter, "Bytes in.");
  w.sample("kafka_bytes_in_total", topic, 1234);
  w.family("silt_open_connections", prometheus_writer::type::gauge, "Open\nconnections.");
  w.sample("silt_open_connections", 2.5);
  EXPECT_EQ(w.text(),
            "# HELP kafka_bytes_in_total Bytes in.\n"
            "# TYPE kafka_bytes_in_total counter\n"
            "kafka_bytes_in_total{topic=\"orders\"} 1234\n"
            "# HELP silt_open_connections Open\\nconnections.\n"
            "# TYPE silt_open_connections gauge\n"
            "silt_open_connections 2.5\n");
}

TEST(PrometheusWriter, LabelValuesAreEscaped) {
  EXPECT_EQ(prometheus_escape("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  prometheus_writer w;
  const std::pair<std::string_view, std::string_view> l[] = {{"topic", "x\"y"}, {"p", "1"}};
  w.family("g", prometheus_writer::type::gauge, "h");
  w.sample("g", l, 0);
  EXPECT_NE(w.text().find("g{topic=\"x\\\"y\",p=\"1\"} 0\n"), std::string::npos) << w.text();
}

// Buckets are cumulative, +Inf equals the count, the sum is in seconds; a value counts under
// the first bound its histogram bucket lies wholly under.
TEST(PrometheusWriter, HistogramBucketsAreCumulativeInSeconds) {
  base::histogram h;
  h.record(90);        // bucket [88, 95]: under 100 us
  h.record(100);       // bucket [96, 103]: straddles 100 us, counted under 250 us
  h.record(2000);      // 2 ms
  h.record(20000000);  // 20 s: above every bound
  prometheus_writer w;
  w.family("lat_seconds", prometheus_writer::type::histogram, "Latency.");
  w.histogram("lat_seconds", {}, h.snapshot());
  const std::string& t = w.text();
  EXPECT_NE(t.find("lat_seconds_bucket{le=\"0.0001\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_bucket{le=\"0.00025\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_bucket{le=\"0.001\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_bucket{le=\"0.0025\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_bucket{le=\"10\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_count 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_sum 20.00219\n"), std::string::npos) << t;
}

TEST(Histogram, CountAtMostCountsWholeBucketsUpToTheValue) {
  base::histogram h;
  for (uint64_t v : {1, 5, 15, 16, 17, 1000}) h.record(v);
  const auto s = h.snapshot();
  EXPECT_EQ(s.count_at_most(0), 0U);
  EXPECT_EQ(s.count_at_most(15), 3U);  // exact below 16
  EXPECT_EQ(s.count_at_most(16), 3U);  // 16 and 17 share a bucket: both count from 17 on
  EXPECT_EQ(s.count_at_most(17), 5U);
  EXPECT_EQ(s.count_at_most(1000), 5U);
  EXPECT_EQ(s.count_at_most(1023), 6U);
}

}  // namespace
}  // namespace silt::base
