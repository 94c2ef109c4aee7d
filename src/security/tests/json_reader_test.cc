// JSON from outside: depth-bounded, duplicate names refused, never an exception.
#include "security/json_reader.h"

#include <chrono>

#include <gtest/gtest.h>

namespace silt::security {
namespace {

TEST(JsonReader, ReadsADocument) {
  auto doc =
      read_json(R"({"a": [1, -2, 3.5, "x", true, null, {"b": {}}], "c": 18446744073709551615})", 8);
  ASSERT_TRUE(doc) << doc.error();
  EXPECT_EQ((*doc)["a"][1], -2);
  EXPECT_EQ((*doc)["a"][3], "x");
  EXPECT_TRUE((*doc)["a"][6]["b"].is_object());
  EXPECT_TRUE((*doc)["c"].is_number_unsigned());
  EXPECT_EQ(read_json("7", 1).value(), 7);
}

TEST(JsonReader, RefusesNestingBeyondTheBound) {
  EXPECT_TRUE(read_json("[[[[]]]]", 4));
  EXPECT_FALSE(read_json("[[[[[]]]]]", 4));
  EXPECT_TRUE(read_json(R"({"a":{"b":{"c":{}}}})", 4));
  EXPECT_FALSE(read_json(R"({"a":{"b":{"c":{"d":{}}}}})", 4));
}

TEST(JsonReader, DeepNestingIsRefusedQuicklyWithoutRecursion) {
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  const auto start = std::chrono::steady_clock::now();
  auto doc = read_json(deep, 32);
  ASSERT_FALSE(doc);
  EXPECT_NE(doc.error().find("deeper"), std::string::npos) << doc.error();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  // An unclosed one too.
  EXPECT_FALSE(read_json(std::string(1'000'000, '{'), 32));
}

TEST(JsonReader, RefusesDuplicateNames) {
  auto doc = read_json(R"({"alg":"RS256","alg":"none"})", 8);
  ASSERT_FALSE(doc);
  EXPECT_NE(doc.error().find("duplicate"), std::string::npos);
  EXPECT_FALSE(read_json(R"({"a":{"x":1,"x":1}})", 8));
  EXPECT_TRUE(read_json(R"({"a":{"x":1},"b":{"x":1}})", 8));  // the same name in two objects
}

TEST(JsonReader, RefusesWhatIsNotJson) {
  for (const char* bad : {"", "{", "{\"a\":}", "[1,]", "nul", "{'a':1}", "1 2", "[1e999]",
                          "\"\xff\"", "/* */ 1", "{\"a\":1}x"}) {
    EXPECT_FALSE(read_json(bad, 8)) << bad;
  }
}

TEST(JsonReader, ErrorsDoNotQuoteTheText) {
  auto doc = read_json(R"({"secret": "hunter2" oops})", 8);
  ASSERT_FALSE(doc);
  EXPECT_EQ(doc.error().find("hunter2"), std::string::npos) << doc.error();
  EXPECT_EQ(doc.error().find("oops"), std::string::npos) << doc.error();
}

}  // namespace
}  // namespace silt::security
