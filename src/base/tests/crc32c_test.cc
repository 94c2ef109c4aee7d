#include "base/crc32c.h"

#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace silt::base {
namespace {

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// A plain bitwise CRC32C (reflected polynomial 0x82F63B78) as the reference.
uint32_t reference_crc32c(std::span<const uint8_t> data) {
  uint32_t crc = ~0u;
  for (uint8_t b : data) {
    crc ^= b;
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST(Crc32c, MatchesTheStandardCheckValue) {
  EXPECT_EQ(crc32c(bytes_of("123456789")), 0xE3069283u);
  EXPECT_EQ(crc32c({}), 0u);
}

TEST(Crc32c, ContinuesAcrossChunks) {
  std::vector<uint8_t> data(10000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131 + 7);
  const uint32_t whole = crc32c(data);
  for (size_t cut : {0ul, 1ul, 63ul, 4096ul, 9999ul, 10000ul}) {
    std::span<const uint8_t> all(data);
    EXPECT_EQ(crc32c(all.subspan(cut), crc32c(all.first(cut))), whole) << "cut at " << cut;
  }
  EXPECT_EQ(whole, reference_crc32c(data));
}

}  // namespace
}  // namespace silt::base
