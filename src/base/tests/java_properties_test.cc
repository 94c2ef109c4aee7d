#include "base/java_properties.h"

#include <gtest/gtest.h>

namespace silt::base {
namespace {

TEST(JavaProperties, ReadsWhatPropertiesLoadReads) {
  const auto p = parse_java_properties(
      "# comment\n"
      "! another\n"
      "\n"
      "bootstrap.servers=127.0.0.1:9092\n"
      "  acks : all\n"
      "linger.ms 10\n"
      "sasl.username = a\\\n"
      "    b\n"
      "key\\ with\\=odd = v\\tw\\u00e9\n"
      "empty=\r\n"
      "bad.escape=\\u12\r"
      "last=1\\\n");
  const std::vector<java_property> want = {{"bootstrap.servers", "127.0.0.1:9092", 4},
                                           {"acks", "all", 5},
                                           {"linger.ms", "10", 6},
                                           {"sasl.username", "ab", 7},
                                           {"key with=odd", "v\tw\xC3\xA9", 9},
                                           {"empty", "", 10},
                                           {"bad.escape", "u12", 11},
                                           {"last", "1", 12}};
  EXPECT_EQ(p, want);
}

TEST(JavaProperties, AKeyAloneHasAnEmptyValueAndCommentsCountOnlyAtALinesStart) {
  const auto p = parse_java_properties("lonely\nk = v # not a comment\n  # a comment\n");
  const std::vector<java_property> want = {{"lonely", "", 1}, {"k", "v # not a comment", 2}};
  EXPECT_EQ(p, want);
}

TEST(JavaProperties, EmptyTextHasNoEntries) {
  EXPECT_TRUE(parse_java_properties("").empty());
  EXPECT_TRUE(parse_java_properties("\n\n# only comments\n").empty());
}

}  // namespace
}  // namespace silt::base
