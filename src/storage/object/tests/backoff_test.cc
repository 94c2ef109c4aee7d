#include "storage/object/backoff.h"

#include <set>

#include <gtest/gtest.h>

namespace silt::storage {
namespace {

using std::chrono::milliseconds;

TEST(Backoff, CapDoublesFromTheBaseUpToTheMaximum) {
  backoff b({.max_attempts = 10, .base_delay = milliseconds(50), .max_delay = milliseconds(1000)},
            1);
  EXPECT_EQ(b.cap(0), milliseconds(50));
  EXPECT_EQ(b.cap(1), milliseconds(100));
  EXPECT_EQ(b.cap(4), milliseconds(800));
  EXPECT_EQ(b.cap(5), milliseconds(1000));
  EXPECT_EQ(b.cap(63), milliseconds(1000));
  EXPECT_EQ(b.cap(1000), milliseconds(1000)) << "no overflow for large retry numbers";
}

TEST(Backoff, DelaysAreJitteredOverTheWholeRange) {
  backoff b({.max_attempts = 10, .base_delay = milliseconds(100), .max_delay = milliseconds(100)},
            7);
  std::set<int64_t> seen;
  int64_t low = 1000;
  int64_t high = 0;
  for (int i = 0; i < 1000; ++i) {
    const auto d = b.delay(3).count();
    ASSERT_GE(d, 0);
    ASSERT_LE(d, 100);
    seen.insert(d);
    low = std::min(low, d);
    high = std::max(high, d);
  }
  EXPECT_GT(seen.size(), 50u) << "full jitter, not a fixed delay";
  EXPECT_LT(low, 10);
  EXPECT_GT(high, 90);
}

TEST(Backoff, TheSameSeedGivesTheSameDelays) {
  const retry_policy p{
      .max_attempts = 5, .base_delay = milliseconds(10), .max_delay = milliseconds(10000)};
  backoff a(p, 99);
  backoff b(p, 99);
  backoff c(p, 100);
  std::vector<milliseconds> da, db, dc;
  for (uint32_t i = 0; i < 8; ++i) {
    da.push_back(a.delay(i));
    db.push_back(b.delay(i));
    dc.push_back(c.delay(i));
  }
  EXPECT_EQ(da, db);
  EXPECT_NE(da, dc);
}

TEST(Backoff, ZeroBaseMeansNoWait) {
  backoff b({.max_attempts = 3, .base_delay = milliseconds(0), .max_delay = milliseconds(100)}, 3);
  EXPECT_EQ(b.delay(0), milliseconds(0));
  EXPECT_EQ(b.delay(5), milliseconds(0));
}

}  // namespace
}  // namespace silt::storage
