// ssl.principal.mapping.rules as Kafka documents and tests them (SslPrincipalMapperTest).
#include "net/principal_mapper.h"

#include <gtest/gtest.h>

namespace silt::net {
namespace {

std::optional<std::string> map(const std::string& rules, const std::string& subject) {
  auto m = principal_mapper::parse(rules);
  EXPECT_TRUE(m) << m.error();
  if (!m) return std::nullopt;
  return m->map(subject);
}

TEST(PrincipalMapper, DefaultKeepsTheSubject) {
  EXPECT_EQ(map("DEFAULT", "CN=client,OU=eng,O=Silt,C=US"), "CN=client,OU=eng,O=Silt,C=US");
}

TEST(PrincipalMapper, KafkaDocumentedExamples) {
  const std::string rules =
      "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
      "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
      "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
      "DEFAULT";
  EXPECT_EQ(map(rules, "CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"),
            "serviceuser");
  EXPECT_EQ(map(rules, "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"),
            "adminuser@admin");
  EXPECT_EQ(map(rules, "CN=kafka1"), "kafka1");
  EXPECT_EQ(map(rules, "OU=Unknown"), "OU=Unknown");  // DEFAULT
}

TEST(PrincipalMapper, UpperCaseAndSpacesAroundRules) {
  EXPECT_EQ(map(" RULE:^CN=(.*?),.*$/$1/U , DEFAULT ", "CN=client,OU=eng"), "CLIENT");
}

TEST(PrincipalMapper, NoRuleMatchingIsNoPrincipal) {
  EXPECT_EQ(map("RULE:^CN=(.*)$/$1/", "OU=eng,CN=x"), std::nullopt);
}

TEST(PrincipalMapper, ReplacementEscapesAndMissingGroups) {
  // `$2` with one group is literal (Kafka's escapeLiteralBackReferences), `\\$` a dollar.
  EXPECT_EQ(map("RULE:^CN=(.*)$/$1-$2/", "CN=a"), "a-$2");
  EXPECT_EQ(map("RULE:^CN=(.*)$/\\$$1/", "CN=a"), "$a");
  // An escaped slash in the pattern.
  EXPECT_EQ(map("RULE:^CN=a\\/(.*)$/$1/", "CN=a/b"), "b");
}

TEST(PrincipalMapper, InvalidRulesAreNamed) {
  EXPECT_FALSE(principal_mapper::parse("RULE:^CN=(.*)$/$1"));
  EXPECT_FALSE(principal_mapper::parse("KERBEROS"));
  EXPECT_FALSE(principal_mapper::parse("RULE:(/x/"));
  EXPECT_NE(principal_mapper::parse("DEFAULT,oops").error().find("oops"), std::string::npos);
}

TEST(PrincipalMapper, PatternsRunInLinearTime) {
  // Catastrophic for a backtracking engine; RE2 answers at once.
  const std::string subject = "CN=" + std::string(5000, 'a') + "!";
  EXPECT_EQ(map("RULE:^CN=(a|aa)+$/x/", subject), std::nullopt);
}

}  // namespace
}  // namespace silt::net
