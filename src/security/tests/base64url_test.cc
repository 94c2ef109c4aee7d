// Strict unpadded base64url, as JWS parts are written.
#include "security/base64url.h"

#include <gtest/gtest.h>

namespace silt::security {
namespace {

TEST(Base64url, RoundTripsEveryLength) {
  std::string bytes;
  for (int i = 0; i < 70; ++i) {
    EXPECT_EQ(base64url_decode(base64url_encode(bytes)), bytes) << i;
    bytes.push_back(static_cast<char>(i * 37 + 250));
  }
}

TEST(Base64url, UsesTheUrlSafeAlphabetWithoutPadding) {
  EXPECT_EQ(base64url_encode("\xfb\xff"), "-_8");
  EXPECT_EQ(base64url_decode("-_8"), "\xfb\xff");
  EXPECT_EQ(base64url_encode("{\"alg\":\"RS256\"}"), "eyJhbGciOiJSUzI1NiJ9");
}

TEST(Base64url, RefusesPaddingOtherAlphabetsAndBadLengths) {
  EXPECT_FALSE(base64url_decode("-_8="));    // padding
  EXPECT_FALSE(base64url_decode("+/8"));     // standard base64's alphabet
  EXPECT_FALSE(base64url_decode("abcde"));   // 4k+1 characters spell no bytes
  EXPECT_FALSE(base64url_decode("ab cd"));   // whitespace
  EXPECT_FALSE(base64url_decode("ab\ncd"));  // line breaks
  EXPECT_FALSE(base64url_decode(std::string_view("ab\0d", 4)));
}

TEST(Base64url, RefusesNonZeroPadBits) {
  // "QQ" is 'A'; "QR" spells the same byte with a pad bit set: a second spelling, refused.
  EXPECT_EQ(base64url_decode("QQ"), "A");
  EXPECT_FALSE(base64url_decode("QR"));
  EXPECT_EQ(base64url_decode("QUE"), "AA");
  EXPECT_FALSE(base64url_decode("QUF"));
}

TEST(Base64url, EmptyIsEmpty) {
  EXPECT_EQ(base64url_decode(""), "");
  EXPECT_EQ(base64url_encode(""), "");
}

}  // namespace
}  // namespace silt::security
