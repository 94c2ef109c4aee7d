#include "base/histogram.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace silt::base {
namespace {

TEST(Histogram, BucketsAreExactBelowSixteenThenWithinAnEighth) {
  for (uint64_t v = 0; v < 16; ++v) EXPECT_EQ(histogram::bucket_limit(histogram::bucket_of(v)), v);
  for (uint64_t v : {16ULL, 17ULL, 100ULL, 1000ULL, 123456ULL, 1ULL << 40, (1ULL << 40) + 12345}) {
    const auto limit = histogram::bucket_limit(histogram::bucket_of(v));
    EXPECT_GE(limit, v) << v;
    EXPECT_LE(static_cast<double>(limit), static_cast<double>(v) * 1.125) << v;
  }
  // Buckets are ordered and contiguous: each starts right after the previous one's limit.
  for (size_t i = 1; i < histogram::buckets; ++i) {
    EXPECT_EQ(histogram::bucket_of(histogram::bucket_limit(i - 1) + 1), i) << i;
  }
  EXPECT_EQ(histogram::bucket_of(UINT64_MAX), histogram::buckets - 1);
  EXPECT_EQ(histogram::bucket_limit(histogram::buckets - 1), UINT64_MAX);
}

TEST(Histogram, QuantilesOfAKnownDistribution) {
  histogram h;
  EXPECT_EQ(h.snapshot().quantile(0.99), 0U);
  for (uint64_t v = 1; v <= 1000; ++v) h.record(v);
  const auto s = h.snapshot();
  EXPECT_EQ(s.count(), 1000U);
  EXPECT_EQ(s.sum(), 500500U);
  EXPECT_GE(s.quantile(0.5), 500U);
  EXPECT_LE(s.quantile(0.5), 563U);
  EXPECT_GE(s.quantile(0.99), 990U);
  EXPECT_LE(s.quantile(0.99), 1114U);
  EXPECT_GE(s.quantile(1.0), 1000U);
  EXPECT_LE(s.quantile(1.0), 1125U);
}

TEST(Histogram, AnIntervalIsTheDifferenceOfTwoSnapshots) {
  histogram h;
  for (int i = 0; i < 100; ++i) h.record(5000);
  const auto first = h.snapshot();
  for (int i = 0; i < 10; ++i) h.record(3);
  const auto interval = h.snapshot().since(first);
  EXPECT_EQ(interval.count(), 10U);
  EXPECT_EQ(interval.sum(), 30U);
  EXPECT_EQ(interval.quantile(1.0), 3U);
}

TEST(Histogram, ConcurrentRecordsAreAllCounted) {
  histogram h;
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h] {
      for (uint64_t i = 0; i < 100000; ++i) h.record(i % 2000);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(h.snapshot().count(), 400000U);
  EXPECT_EQ(h.snapshot().max(), 1999U);
  EXPECT_EQ(h.snapshot().min(), 0U);
}

// The layout properties, for both precisions.
template <typename H>
void expect_buckets_contiguous_and_narrow() {
  for (uint64_t v = 0; v < H::exact_below; ++v) {
    EXPECT_EQ(H::bucket_first(H::bucket_of(v)), v);
    EXPECT_EQ(H::bucket_limit(H::bucket_of(v)), v);
  }
  EXPECT_EQ(H::bucket_first(0), 0U);
  for (size_t i = 1; i < H::buckets; ++i) {
    ASSERT_EQ(H::bucket_first(i), H::bucket_limit(i - 1) + 1) << i;
    ASSERT_EQ(H::bucket_of(H::bucket_first(i)), i) << i;
    ASSERT_EQ(H::bucket_of(H::bucket_limit(i)), i) << i;
    // Above the exact ones, each bucket is at most 1/sub_buckets as wide as its smallest value.
    if (i < H::exact_below) continue;
    const auto width = static_cast<double>(H::bucket_limit(i) - H::bucket_first(i)) + 1;
    ASSERT_LE(width, static_cast<double>(H::bucket_first(i)) / H::sub_buckets) << i;
  }
  EXPECT_EQ(H::bucket_of(UINT64_MAX), H::buckets - 1);
  EXPECT_EQ(H::bucket_limit(H::buckets - 1), UINT64_MAX);
}

TEST(Histogram, BucketsOfBothPrecisionsAreContiguousAndNarrow) {
  expect_buckets_contiguous_and_narrow<histogram>();
  expect_buckets_contiguous_and_narrow<precise_histogram>();
  static_assert(histogram::buckets == 496);
  static_assert(precise_histogram::exact_below == 256);
  static_assert(precise_histogram::buckets == 256 + 128 * 56);
}

// The nearest-rank q-quantile of sorted values, q given in thousandths, in integer arithmetic
// so that the reference does not share the histogram's floating-point rounding.
uint64_t exact_quantile(const std::vector<uint64_t>& sorted, uint64_t q_permille) {
  const uint64_t n = sorted.size();
  const uint64_t rank = std::max<uint64_t>(1, (q_permille * n + 999) / 1000);
  return sorted[rank - 1];
}

// Records `values` into a histogram of type H and checks every quantile against the exact
// one: never below, at most 1/sub_buckets above (exact below exact_below), the maximum exact.
template <typename H>
void expect_quantiles_within_bound(std::vector<uint64_t> values, const char* name) {
  SCOPED_TRACE(name);
  auto h = std::make_unique<H>();
  for (const auto v : values) h->record(v);
  const auto s = h->snapshot();
  std::sort(values.begin(), values.end());
  ASSERT_EQ(s.count(), values.size());
  EXPECT_EQ(s.max(), values.back());
  EXPECT_EQ(s.min(), values.front());
  EXPECT_EQ(s.quantile(1.0), values.back());
  const double bound = 1.0 / static_cast<double>(H::sub_buckets);
  for (const uint64_t permille : {0U, 1U, 100U, 250U, 500U, 750U, 900U, 950U, 990U, 999U, 1000U}) {
    const uint64_t exact = exact_quantile(values, permille);
    const uint64_t got = s.quantile(static_cast<double>(permille) / 1000.0);
    EXPECT_GE(got, exact) << "q=" << permille << "/1000";
    if (exact < H::exact_below) {
      EXPECT_EQ(got, exact) << "q=" << permille << "/1000";
    } else {
      const double error = static_cast<double>(got - exact) / static_cast<double>(exact);
      EXPECT_LT(error, bound) << "q=" << permille << "/1000 exact " << exact << " got " << got;
    }
  }
}

// Latencies in microseconds from the distributions a benchmark meets.
std::vector<std::vector<uint64_t>> sample_sets(std::vector<const char*>& names) {
  std::mt19937_64 rng(42);
  constexpr int n = 200000;
  std::vector<std::vector<uint64_t>> sets;
  std::uniform_int_distribution<uint64_t> uniform(1, 100000);
  std::lognormal_distribution<double> lognormal(std::log(5000.0), 1.0);
  std::normal_distribution<double> fast(1000.0, 100.0);
  std::normal_distribution<double> slow(200000.0, 20000.0);
  std::uniform_real_distribution<double> exponent(0.0, std::log(60e6));
  std::bernoulli_distribution coin(0.1);
  auto positive = [](double x) { return static_cast<uint64_t>(std::max(1.0, x)); };

  names.push_back("uniform 1 us .. 100 ms");
  auto& u = sets.emplace_back();
  for (int i = 0; i < n; ++i) u.push_back(uniform(rng));
  names.push_back("log-normal around 5 ms");
  auto& l = sets.emplace_back();
  for (int i = 0; i < n; ++i) l.push_back(positive(lognormal(rng)));
  names.push_back("bimodal 1 ms and 200 ms");
  auto& b = sets.emplace_back();
  for (int i = 0; i < n; ++i) b.push_back(positive(coin(rng) ? slow(rng) : fast(rng)));
  names.push_back("log-uniform 1 us .. 60 s");
  auto& w = sets.emplace_back();
  for (int i = 0; i < n; ++i) w.push_back(positive(std::exp(exponent(rng))));
  w.push_back(1);
  w.push_back(60000000);
  return sets;
}

TEST(Histogram, QuantilesAreWithinAnEighthOfTheExactOnes) {
  std::vector<const char*> names;
  const auto sets = sample_sets(names);
  for (size_t i = 0; i < sets.size(); ++i)
    expect_quantiles_within_bound<histogram>(sets[i], names[i]);
}

TEST(PreciseHistogram, QuantilesAreWithinOnePercentOfTheExactOnes) {
  std::vector<const char*> names;
  const auto sets = sample_sets(names);
  for (size_t i = 0; i < sets.size(); ++i) {
    expect_quantiles_within_bound<precise_histogram>(sets[i], names[i]);
  }
}

TEST(PreciseHistogram, SmallValuesAreExact) {
  auto h = std::make_unique<precise_histogram>();
  for (uint64_t v = 0; v < 200; ++v) h->record(v);
  const auto s = h->snapshot();
  EXPECT_EQ(s.quantile(0.5), 99U);
  EXPECT_EQ(s.quantile(0.0), 0U);
  EXPECT_EQ(s.min(), 0U);
  EXPECT_EQ(s.max(), 199U);
}

TEST(PreciseHistogram, AnEmptySnapshotIsAllZero) {
  auto h = std::make_unique<precise_histogram>();
  const auto s = h->snapshot();
  EXPECT_EQ(s.count(), 0U);
  EXPECT_EQ(s.max(), 0U);
  EXPECT_EQ(s.min(), 0U);
  EXPECT_EQ(s.quantile(0.5), 0U);
  EXPECT_EQ(s.since(s).max(), 0U);
  EXPECT_EQ(s.percentiles_ms(), "p50=0.0 p99=0.0 max=0.0");
}

TEST(PreciseHistogram, TheMaximumIsExactNotItsBucketLimit) {
  auto h = std::make_unique<precise_histogram>();
  h->record(1000);
  h->record(123457);
  const auto s = h->snapshot();
  EXPECT_NE(precise_histogram::bucket_limit(precise_histogram::bucket_of(123457)), 123457U);
  EXPECT_EQ(s.max(), 123457U);
  EXPECT_EQ(s.quantile(1.0), 123457U);
  EXPECT_EQ(s.quantile(0.99), 123457U);
  EXPECT_EQ(s.percentiles_ms(), "p50=1.0 p99=123.5 max=123.5");
}

TEST(PreciseHistogram, MergedThreadHistogramsEqualOneHistogramOfEverything) {
  constexpr int threads = 4;
  std::vector<std::unique_ptr<precise_histogram>> per_thread;
  auto all = std::make_unique<precise_histogram>();
  std::vector<std::thread> workers;
  per_thread.reserve(threads);
  workers.reserve(threads);
  for (int t = 0; t < threads; ++t) per_thread.push_back(std::make_unique<precise_histogram>());
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::lognormal_distribution<double> d(std::log(2000.0 * (t + 1)), 1.0);
      for (int i = 0; i < 50000; ++i) {
        const auto v = static_cast<uint64_t>(d(rng));
        per_thread[t]->record(v);
        all->record(v);
      }
    });
  }
  for (auto& w : workers) w.join();

  precise_histogram_snapshot merged;
  for (const auto& h : per_thread) merged += h->snapshot();
  const auto expected = all->snapshot();
  EXPECT_EQ(merged.count(), expected.count());
  EXPECT_EQ(merged.sum(), expected.sum());
  EXPECT_EQ(merged.max(), expected.max());
  EXPECT_EQ(merged.min(), expected.min());
  for (const double q : {0.0, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    EXPECT_EQ(merged.quantile(q), expected.quantile(q)) << q;
  }
}

TEST(PreciseHistogram, MergingAnEmptySnapshotChangesNothing) {
  auto h = std::make_unique<precise_histogram>();
  h->record(700);
  h->record(9000);
  auto s = h->snapshot();
  s.merge(precise_histogram_snapshot{});
  EXPECT_EQ(s.count(), 2U);
  EXPECT_EQ(s.min(), 700U);
  EXPECT_EQ(s.max(), 9000U);
  precise_histogram_snapshot empty;
  empty.merge(h->snapshot());
  EXPECT_EQ(empty.min(), 700U);
  EXPECT_EQ(empty.max(), 9000U);
}

TEST(PreciseHistogram, AnIntervalThatRaisedTheMaximumKnowsItExactly) {
  auto h = std::make_unique<precise_histogram>();
  for (uint64_t v = 1000; v < 2000; ++v) h->record(v);
  const auto first = h->snapshot();
  h->record(50000);
  h->record(123457);
  const auto interval = h->snapshot().since(first);
  EXPECT_EQ(interval.count(), 2U);
  EXPECT_EQ(interval.sum(), 173457U);
  EXPECT_EQ(interval.max(), 123457U);
  EXPECT_EQ(interval.quantile(1.0), 123457U);
  // The interval's minimum did not lower the histogram's: a bound from its lowest bucket.
  EXPECT_LE(interval.min(), 50000U);
  EXPECT_GE(static_cast<double>(interval.min()), 50000 * (1 - 1.0 / 128));
  EXPECT_LE(interval.quantile(0.5), 50000 * (1 + 1.0 / 128));
  EXPECT_GE(interval.quantile(0.5), 50000U);
}

TEST(PreciseHistogram, AnIntervalBelowTheMaximumBoundsItsOwnWithinTheBucket) {
  auto h = std::make_unique<precise_histogram>();
  h->record(1000000);
  const auto first = h->snapshot();
  for (uint64_t v = 3000; v <= 12345; ++v) h->record(v);
  const auto second = h->snapshot();
  const auto interval = second.since(first);
  EXPECT_EQ(interval.count(), 12345U - 3000U + 1);
  // Not the histogram's maximum, which lies before the interval...
  EXPECT_EQ(second.max(), 1000000U);
  // ...but the limit of the bucket holding the interval's largest value.
  EXPECT_GE(interval.max(), 12345U);
  EXPECT_LT(static_cast<double>(interval.max()), 12345 * (1 + 1.0 / 128));
  EXPECT_EQ(interval.quantile(1.0), interval.max());
  EXPECT_EQ(interval.min(), 3000U);  // exact: the interval lowered the minimum
  // The interval's own quantiles, within the bound.
  EXPECT_GE(interval.quantile(0.5), 7672U);
  EXPECT_LT(static_cast<double>(interval.quantile(0.5)), 7672 * (1 + 1.0 / 128));
  // A quiet interval is empty.
  const auto quiet = h->snapshot().since(second);
  EXPECT_EQ(quiet.count(), 0U);
  EXPECT_EQ(quiet.max(), 0U);
  EXPECT_EQ(quiet.quantile(0.99), 0U);
}

}  // namespace
}  // namespace silt::base
