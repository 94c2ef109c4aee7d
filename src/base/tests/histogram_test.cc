#include "base/histogram.h"

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
}

}  // namespace
}  // namespace silt::base
