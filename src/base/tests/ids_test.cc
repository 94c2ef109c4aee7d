#include "base/ids.h"

#include <sstream>
#include <type_traits>
#include <unordered_set>

#include <gtest/gtest.h>

namespace silt::base {
namespace {

// The point of the types: none is made from a bare integer or from another id by accident.
static_assert(!std::is_convertible_v<uint64_t, stream_id>);
static_assert(!std::is_convertible_v<stream_id, uint64_t>);
static_assert(!std::is_convertible_v<stream_id, object_id>);
static_assert(!std::is_convertible_v<int64_t, offset>);
static_assert(!std::is_convertible_v<leader_epoch, producer_epoch>);
static_assert(!std::is_convertible_v<int32_t, node_id>);
static_assert(sizeof(stream_id) == sizeof(uint64_t) && sizeof(offset) == sizeof(int64_t));

TEST(Ids, CompareHashAndPrintByValue) {
  EXPECT_LT(stream_id(1), stream_id(2));
  EXPECT_EQ(stream_id(7), stream_id(7));
  EXPECT_NE(node_id(1), node_id(-1));
  std::unordered_set<stream_id> ids{stream_id(1), stream_id(2), stream_id(1)};
  EXPECT_EQ(ids.size(), 2u);
  std::ostringstream out;
  out << stream_id(42) << ' ' << leader_epoch(3) << ' ' << offset(-1);
  EXPECT_EQ(out.str(), "42 3 -1");
}

TEST(Ids, EpochsMoveForward) {
  EXPECT_EQ(leader_epoch(4).next(), leader_epoch(5));
  EXPECT_EQ(producer_epoch(0).next().value(), 1);
  EXPECT_GT(leader_epoch(0).next(), leader_epoch(0));
}

TEST(Ids, OffsetsMoveByCountsAndTheirDistanceIsACount) {
  offset o(10);
  EXPECT_EQ(o + 5, offset(15));
  EXPECT_EQ(o - 3, offset(7));
  EXPECT_EQ(offset(15) - o, 5);
  o += 2;
  EXPECT_EQ(o.value(), 12);
}

}  // namespace
}  // namespace silt::base
