#include "storage/offset_map.h"

#include <string>

#include <gtest/gtest.h>

namespace silt::storage {
namespace {

std::span<const uint8_t> key(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(OffsetMap, KeepsTheLatestOffsetOfEachKey) {
  offset_map m(1 << 16);
  EXPECT_TRUE(m.put(key("a"), 1));
  EXPECT_TRUE(m.put(key("b"), 2));
  EXPECT_TRUE(m.put(key("a"), 3));
  EXPECT_TRUE(m.put(key(""), 4));  // an empty key is a key
  EXPECT_EQ(m.get(key("a")), 3);
  EXPECT_EQ(m.get(key("b")), 2);
  EXPECT_EQ(m.get(key("")), 4);
  EXPECT_EQ(m.get(key("c")), std::nullopt);
  EXPECT_EQ(m.size(), 3u);
  EXPECT_EQ(m.latest_offset(), 4);
  m.clear();
  EXPECT_EQ(m.get(key("a")), std::nullopt);
  EXPECT_EQ(m.size(), 0u);
}

// The map holds what its memory and load factor allow, refuses new keys beyond that and still
// takes later offsets of the keys it has.
TEST(OffsetMap, RefusesNewKeysWhenFull) {
  offset_map m(100 * offset_map::slot_bytes, 0.5);
  EXPECT_EQ(m.capacity(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(m.put(key("k" + std::to_string(i)), i));
  EXPECT_FALSE(m.put(key("another"), 100));
  EXPECT_EQ(m.get(key("another")), std::nullopt);
  EXPECT_TRUE(m.put(key("k7"), 200));
  EXPECT_EQ(m.get(key("k7")), 200);
  for (int i = 0; i < 50; ++i) {
    if (i != 7) {
      EXPECT_EQ(m.get(key("k" + std::to_string(i))), i);
    }
  }
}

}  // namespace
}  // namespace silt::storage
