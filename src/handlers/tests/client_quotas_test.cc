// Client quotas as Kafka's ClientQuotaManager applies them: the eight levels of user, client id
// and defaults, the windowed rate (quota.window.num windows of quota.window.size.seconds), and
// the throttle time of a client over its quota.
#include "handlers/client_quotas.h"

#include <gtest/gtest.h>

namespace silt::handlers {
namespace {

using metadata::quota_entity;
using part = metadata::quota_entity_part;

// The parts of an entity: the default, a name, absent.
part D() {
  return part::default_name();
}
part N(const char* n) {
  return part::named(n);
}
part A() {
  return {};
}

// Each level in Kafka's order, with the quota it sets: the lower levels are found only once the
// ones above are gone.
TEST(QuotaResolution, EightLevelsInKafkasOrder) {
  std::map<quota_entity, double> q{
      {{N("u"), N("c")}, 1}, {{N("u"), D()}, 2}, {{N("u"), A()}, 3}, {{D(), N("c")}, 4},
      {{D(), D()}, 5},       {{D(), A()}, 6},    {{A(), N("c")}, 7}, {{A(), D()}, 8},
  };
  const std::vector<quota_resolution> want{
      {"u", "c", 1}, {"u", "c", 2}, {"u", "", 3}, {"u", "c", 4},
      {"u", "c", 5}, {"u", "", 6},  {"", "c", 7}, {"", "c", 8},
  };
  for (const auto& w : want) {
    EXPECT_EQ(resolve_quota(q, "u", "c"), w) << *w.limit;
    // The level just found goes (its value names it).
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (it->second == *w.limit) {
        q.erase(it);
        break;
      }
    }
  }
  EXPECT_EQ(resolve_quota(q, "u", "c"), (quota_resolution{"", "c", std::nullopt}));
}

TEST(QuotaResolution, OthersNamesDoNotApply) {
  const std::map<quota_entity, double> q{
      {{N("bob"), A()}, 10}, {{A(), N("other")}, 20}, {{N("u"), N("other")}, 30}};
  EXPECT_FALSE(resolve_quota(q, "u", "c").limit);
  EXPECT_EQ(resolve_quota(q, "bob", "c"), (quota_resolution{"bob", "", 10}));
  EXPECT_EQ(resolve_quota(q, "x", "other"), (quota_resolution{"", "other", 20}));
}

TEST(QuotaResolution, DefaultsGiveEachClientItsOwnRate) {
  const std::map<quota_entity, double> q{{{A(), D()}, 100}};
  EXPECT_EQ(resolve_quota(q, "u", "c1"), (quota_resolution{"", "c1", 100}));
  EXPECT_EQ(resolve_quota(q, "u", "c2"), (quota_resolution{"", "c2", 100}));
  // An empty client id under a client default is measured for nobody, as in Kafka.
  EXPECT_FALSE(resolve_quota(q, "u", "").limit);
}

TEST(WindowedRate, FirstBurstIsMeasuredOverAtLeastAllButOneWindow) {
  windowed_rate r(11, 1000);
  r.record(1000, 0);
  // 10 whole windows assumed: 1000 bytes over 10 s.
  EXPECT_DOUBLE_EQ(r.measure(0), 100.0);
  // Half a window later: the elapsed half plus 10 whole windows.
  EXPECT_EQ(r.window_size_ms(500), 10500);
  r.record(1000, 500);
  EXPECT_DOUBLE_EQ(r.measure(500), 2000 / 10.5);
}

TEST(WindowedRate, OldWindowsAreForgotten) {
  windowed_rate r(11, 1000);
  for (int64_t t = 0; t < 20000; t += 100) r.record(100, t);  // 1000 per second
  // A steady rate is measured as itself once the windows are full.
  EXPECT_NEAR(r.measure(19999), 1000.0, 110.0);
  // 11 windows later nothing recorded is left.
  EXPECT_DOUBLE_EQ(r.measure(19999 + 11000), 0.0);
}

TEST(ClientQuotas, NothingIsMeasuredWithoutQuotas) {
  client_quotas q;
  EXPECT_FALSE(q.enabled(quota_type::produce));
  EXPECT_EQ(q.record(quota_type::produce, "u", "c", 1e9, 0), 0);
  EXPECT_EQ(q.rates(), 0U);
}

TEST(ClientQuotas, ThrottleTimeBringsTheRateBackToTheQuota) {
  client_quotas q;
  q.replace({{{A(), N("c")}, {{"producer_byte_rate", 1000}}}});
  EXPECT_TRUE(q.enabled(quota_type::produce));
  EXPECT_FALSE(q.enabled(quota_type::fetch));
  // 10 s of quota at once is within it...
  EXPECT_EQ(q.record(quota_type::produce, "u", "c", 10000, 0), 0);
  // ... 10 s more is twice the quota over the 10 s window: 10 s of throttle.
  EXPECT_EQ(q.record(quota_type::produce, "u", "c", 10000, 0), 10000);
  // Another client id has no quota; the fetch quota type is apart.
  EXPECT_EQ(q.record(quota_type::produce, "u", "other", 1e9, 0), 0);
  EXPECT_EQ(q.record(quota_type::fetch, "u", "c", 1e9, 0), 0);
  EXPECT_EQ(q.stats(quota_type::produce).throttled, 1U);
  EXPECT_EQ(q.stats(quota_type::produce).throttle_ms, 10000U);
  EXPECT_EQ(*q.max_in_window(quota_type::produce, "u", "c"), 10000.0);
}

TEST(ClientQuotas, RequestPercentageThrottleIsAtMostOneWindow) {
  client_quotas q;
  q.replace({{{N("u"), A()}, {{"request_percentage", 1}}}});
  // 500% of a thread over 10 s: far over 1%, throttled one window.
  EXPECT_EQ(q.record(quota_type::request, "u", "c", 5000, 0), 1000);
}

TEST(ClientQuotas, RemovedQuotasStopApplying) {
  client_quotas q;
  q.replace({{{A(), D()}, {{"consumer_byte_rate", 1}}}});
  EXPECT_GT(q.record(quota_type::fetch, "u", "c", 1000, 0), 0);
  q.replace({});
  EXPECT_FALSE(q.enabled(quota_type::fetch));
  EXPECT_EQ(q.record(quota_type::fetch, "u", "c", 1000, 0), 0);
}

}  // namespace
}  // namespace silt::handlers
