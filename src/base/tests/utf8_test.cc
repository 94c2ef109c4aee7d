// What the metadata store may keep as text: well-formed UTF-8 without NUL.
#include "base/utf8.h"

#include <string>

#include <gtest/gtest.h>

namespace silt::base {
namespace {

TEST(StorableText, WellFormedUtf8IsAccepted) {
  EXPECT_TRUE(is_storable_text(""));
  EXPECT_TRUE(is_storable_text("group-1"));
  EXPECT_TRUE(is_storable_text("gr\xc3\xbc\xc3\x9f"));                     // two-byte forms
  EXPECT_TRUE(is_storable_text("\xe2\x82\xac"));                           // U+20AC
  EXPECT_TRUE(is_storable_text("\xf0\x9f\x98\x80 and \xf4\x8f\xbf\xbf"));  // U+1F600, U+10FFFF
}

TEST(StorableText, NulTruncationAndMalformedSequencesAreRefused) {
  EXPECT_FALSE(is_storable_text(std::string("a\0b", 3)));
  EXPECT_FALSE(is_storable_text("\xc3"));              // cut short
  EXPECT_FALSE(is_storable_text("\xe2\x82"));          // cut short
  EXPECT_FALSE(is_storable_text("\x80"));              // lone continuation byte
  EXPECT_FALSE(is_storable_text("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(is_storable_text("\xe0\x80\xaf"));      // overlong
  EXPECT_FALSE(is_storable_text("\xed\xa0\x80"));      // surrogate U+D800
  EXPECT_FALSE(is_storable_text("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_storable_text("\xff"));
  EXPECT_FALSE(is_storable_text("ok\xc3("));  // bad continuation
}

}  // namespace
}  // namespace silt::base
