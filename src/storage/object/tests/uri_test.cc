#include "storage/object/uri.h"

#include <gtest/gtest.h>

namespace silt::storage {
namespace {

TEST(Uri, EncodeKeepsOnlyUnreservedCharacters) {
  EXPECT_EQ(uri::encode("AZaz09-._~"), "AZaz09-._~");
  EXPECT_EQ(uri::encode("a b+c=d/e"), "a%20b%2Bc%3Dd%2Fe");
  EXPECT_EQ(uri::encode("a b/c", /*keep_slash=*/true), "a%20b/c");
  EXPECT_EQ(uri::encode("\xc3\xa9"), "%C3%A9") << "UTF-8 bytes, upper-case hex";
}

TEST(Uri, DecodeReversesEncode) {
  const std::string all = [] {
    std::string s;
    for (int c = 0; c < 256; ++c) s += static_cast<char>(c);
    return s;
  }();
  EXPECT_EQ(uri::decode(uri::encode(all)).value(), all);
  EXPECT_EQ(uri::decode("a+b").value(), "a+b");
  EXPECT_EQ(uri::decode("a+b%2B", /*plus_is_space=*/true).value(), "a b+");
}

TEST(Uri, DecodeRejectsMalformedEscapes) {
  EXPECT_FALSE(uri::decode("%"));
  EXPECT_FALSE(uri::decode("%2"));
  EXPECT_FALSE(uri::decode("a%zz"));
  EXPECT_TRUE(uri::decode("%2f"));
}

TEST(Uri, ParseQuerySplitsAndDecodes) {
  auto q = uri::parse_query("a=1&flag&&secret=x%2By+z&empty=");
  ASSERT_TRUE(q);
  EXPECT_EQ(*q, (std::vector<std::pair<std::string, std::string>>{
                    {"a", "1"}, {"flag", ""}, {"secret", "x+y+z"}, {"empty", ""}}));
  EXPECT_FALSE(uri::parse_query("a=%G0"));
  EXPECT_TRUE(uri::parse_query("")->empty());
}

TEST(Uri, CanonicalQuerySortsEncodesAndAlwaysHasEquals) {
  EXPECT_EQ(uri::canonical_query({{"uploads", ""}}), "uploads=");
  EXPECT_EQ(uri::canonical_query({{"prefix", "a b/"}, {"list-type", "2"}, {"max-keys", "10"}}),
            "list-type=2&max-keys=10&prefix=a%20b%2F");
  EXPECT_EQ(uri::canonical_query({}), "");
}

}  // namespace
}  // namespace silt::storage
