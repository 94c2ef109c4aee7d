#include "handlers/fetch_sessions.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace silt::handlers {
namespace {

std::vector<session_key> order_of(const session_partitions& parts) {
  std::vector<session_key> out;
  for (const auto& [key, p] : parts) out.push_back(key);
  return out;
}

TEST(SessionPartitionsTest, KeepTheOrderTheyCameInAndAddNewOnesLast) {
  session_partitions parts;
  parts.upsert({"b", 1}).fetch_offset = base::offset(10);
  parts.upsert({"a", 0}).fetch_offset = base::offset(20);
  parts.upsert({"b", 0});
  // An update keeps the partition where it is.
  parts.upsert({"a", 0}).fetch_offset = base::offset(21);
  EXPECT_EQ(order_of(parts), (std::vector<session_key>{{"b", 1}, {"a", 0}, {"b", 0}}));
  ASSERT_NE(parts.find({"a", 0}), nullptr);
  EXPECT_EQ(parts.find({"a", 0})->fetch_offset, base::offset(21));
  EXPECT_EQ(parts.find({"c", 0}), nullptr);
  EXPECT_EQ(parts.size(), 3u);
}

TEST(SessionPartitionsTest, APartitionThatGaveRecordsIsReadLast) {
  session_partitions parts;
  for (int32_t p = 0; p < 4; ++p) parts.upsert({"t", p});
  parts.move_last({"t", 0});
  parts.move_last({"t", 2});
  EXPECT_EQ(order_of(parts), (std::vector<session_key>{{"t", 1}, {"t", 3}, {"t", 0}, {"t", 2}}));
  // The entry itself is kept.
  parts.find({"t", 0})->max_bytes = 7;
  parts.move_last({"t", 0});
  EXPECT_EQ(parts.find({"t", 0})->max_bytes, 7);
  parts.move_last({"t", 9});  // not in the session: nothing changes
  EXPECT_EQ(order_of(parts), (std::vector<session_key>{{"t", 1}, {"t", 3}, {"t", 2}, {"t", 0}}));
}

TEST(SessionPartitionsTest, AForgottenPartitionLeavesTheOrder) {
  session_partitions parts;
  for (int32_t p = 0; p < 3; ++p) parts.upsert({"t", p});
  parts.erase({"t", 1});
  parts.erase({"t", 5});
  EXPECT_EQ(order_of(parts), (std::vector<session_key>{{"t", 0}, {"t", 2}}));
  EXPECT_EQ(parts.find({"t", 1}), nullptr);
  // Coming back, it comes last.
  parts.upsert({"t", 1});
  EXPECT_EQ(order_of(parts), (std::vector<session_key>{{"t", 0}, {"t", 2}, {"t", 1}}));
  parts.erase({"t", 0});
  parts.erase({"t", 2});
  parts.erase({"t", 1});
  EXPECT_TRUE(parts.empty());
}

}  // namespace
}  // namespace silt::handlers
