#include "security/jaas.h"

#include <gtest/gtest.h>

namespace silt::security {
namespace {

TEST(Jaas, ReadsKafkasPlainLoginModuleEntry) {
  auto e = parse_jaas(
      "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
      "  username=\"admin\" password=\"admin-secret\"\n"
      "  user_admin=\"admin-secret\" user_alice=alice-secret;");
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->login_module, "org.apache.kafka.common.security.plain.PlainLoginModule");
  EXPECT_EQ(e->flag, "required");
  EXPECT_EQ(e->options.size(), 4U);
  EXPECT_EQ(e->options.at("user_admin"), "admin-secret");
  EXPECT_EQ(e->options.at("user_alice"), "alice-secret");
}

TEST(Jaas, QuotedValuesKeepSpacesSemicolonsAndEscapedQuotes) {
  auto e = parse_jaas(R"(M optional a="x y;z" b="say \"hi\"" c="";)");
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->options.at("a"), "x y;z");
  EXPECT_EQ(e->options.at("b"), "say \"hi\"");
  EXPECT_EQ(e->options.at("c"), "");
}

TEST(Jaas, EntryWithoutOptions) {
  auto e = parse_jaas("org.apache.kafka.common.security.scram.ScramLoginModule required;");
  ASSERT_TRUE(e) << e.error();
  EXPECT_TRUE(e->options.empty());
}

TEST(Jaas, ErrorsNameThePlaceAndNeverTheText) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "a login module class name"},
      {"M", "a control flag"},
      {"M always;", "a control flag"},
      {"M required user_a=\"secret-pw", "an unterminated quoted value"},
      {"M required user_a=\"secret-pw\"", "';' at the end"},
      {"M required user_a \"secret-pw\";", "'=' after an option name"},
      {"M required user_a=;", "a value"},
      {"M required; N required;", "one login module entry"},
  };
  for (const auto& [text, expected] : cases) {
    auto e = parse_jaas(text);
    ASSERT_FALSE(e) << text;
    EXPECT_NE(e.error().find(expected), std::string::npos) << text << ": " << e.error();
    EXPECT_EQ(e.error().find("secret-pw"), std::string::npos) << e.error();
  }
}

}  // namespace
}  // namespace silt::security
