#include "security/authorizer.h"

#include <array>
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace silt::security {
namespace {

using op = acl_operation;
using perm = acl_permission_type;
using pat = acl_pattern_type;
using res = acl_resource_type;

acl_binding acl(res type, std::string name, pat pattern, std::string principal, op operation,
                perm p, std::string host = "*") {
  return {.resource_type = type,
          .resource_name = std::move(name),
          .pattern_type = pattern,
          .principal = std::move(principal),
          .host = std::move(host),
          .operation = operation,
          .permission_type = p};
}

acl_subject user(std::string_view name, std::string_view host = "127.0.0.1") {
  return {.principal_type = "User", .principal_name = name, .host = host};
}

authorizer_options supers(std::vector<std::string> users) {
  return {.super_users = std::move(users)};
}

// --- allow.everyone.if.no.acl.found and what "no ACL found" means ----------------------------

TEST(Authorizer, DeniesByDefaultWhenNoAclApplies) {
  authorizer a;
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::topic, "t"));
  EXPECT_FALSE(a.authorize(user("bob"), op::describe, res::cluster, "kafka-cluster"));
}

// StandardAuthorizerTest.testAllowEveryoneIfNoAclFoundConfigEnabled: an ACL on topic1 for
// someone else is enough to deny bob there, topic2 has none.
TEST(Authorizer, AllowEveryoneIfNoAclFoundAppliesOnlyToResourcesWithoutAcls) {
  authorizer a(
      {.super_users = {"User:alice", "User:chris"}, .allow_everyone_if_no_acl_found = true},
      {acl(res::topic, "topic1", pat::literal, "User:Alice", op::read, perm::allow)});
  EXPECT_FALSE(a.authorize(user("Bob"), op::read, res::topic, "topic1"));
  EXPECT_TRUE(a.authorize(user("Bob"), op::read, res::topic, "topic2"));
  // Principals compare exactly: User:Alice is not the super user User:alice.
  EXPECT_TRUE(a.authorize(user("Alice"), op::read, res::topic, "topic1"));
  EXPECT_FALSE(a.authorize(user("Alice"), op::write, res::topic, "topic1"));
  EXPECT_TRUE(a.authorize(user("alice"), op::write, res::topic, "topic1"));
}

TEST(Authorizer, AnyAclOnTheResourceCountsAsFoundWhateverItsPrincipalHostOrOperation) {
  authorizer_options everyone{.allow_everyone_if_no_acl_found = true};
  // Another host, another operation, a DENY for someone else: each one is "an ACL found".
  for (const auto& b :
       {acl(res::topic, "t", pat::literal, "User:bob", op::read, perm::allow, "10.0.0.9"),
        acl(res::topic, "t", pat::literal, "User:alice", op::write, perm::allow),
        acl(res::topic, "t", pat::literal, "User:carol", op::read, perm::deny),
        acl(res::topic, "*", pat::literal, "User:carol", op::read, perm::allow),
        acl(res::topic, "t", pat::prefixed, "User:carol", op::read, perm::allow)}) {
    authorizer a(everyone, {b});
    EXPECT_FALSE(a.authorize(user("alice"), op::read, res::topic, "t")) << b.resource_name;
  }
  // ACLs on other names or of another resource type do not count.
  authorizer a(everyone, {acl(res::topic, "u", pat::literal, "User:carol", op::read, perm::allow),
                          acl(res::topic, "tt", pat::prefixed, "User:carol", op::read, perm::allow),
                          acl(res::topic, "tx", pat::literal, "User:carol", op::read, perm::allow),
                          acl(res::group, "t", pat::literal, "User:carol", op::read, perm::allow),
                          acl(res::group, "*", pat::literal, "User:carol", op::read, perm::allow)});
  EXPECT_TRUE(a.authorize(user("alice"), op::read, res::topic, "t"));
  // A literal ACL whose name is a prefix of the resource name is not an ACL of it.
  EXPECT_TRUE(a.authorize(user("alice"), op::read, res::topic, "txy"));
}

TEST(Authorizer, AMatchingAllowStillAllowsWhenTheDefaultDenies) {
  authorizer a({}, {acl(res::topic, "t", pat::literal, "User:alice", op::read, perm::allow)});
  EXPECT_TRUE(a.authorize(user("alice"), op::read, res::topic, "t"));
  EXPECT_FALSE(a.authorize(user("alice"), op::read, res::topic, "u"));
}

// --- super.users ----------------------------------------------------------------------------

TEST(Authorizer, SuperUsersMayDoEverythingWhateverTheAcls) {
  authorizer a(
      supers({"User:admin"}),
      {acl(res::topic, "*", pat::literal, "User:*", op::all, perm::deny),
       acl(res::cluster, "kafka-cluster", pat::literal, "User:admin", op::all, perm::deny)});
  EXPECT_TRUE(a.authorize(user("admin"), op::write, res::topic, "t"));
  EXPECT_TRUE(a.authorize(user("admin"), op::alter, res::cluster, "kafka-cluster"));
  EXPECT_TRUE(a.authorize(user("admin"), op::read, res::group, "g"));
  EXPECT_FALSE(a.authorize(user("bob"), op::write, res::topic, "t"));
}

TEST(Authorizer, SuperUsersCompareTypeAndNameAsWritten) {
  authorizer a(supers({"User:admin", "Group:ops"}));
  acl_subject group_admin{.principal_type = "Group", .principal_name = "admin", .host = "h"};
  acl_subject group_ops{.principal_type = "Group", .principal_name = "ops", .host = "h"};
  acl_subject user_ops{.principal_type = "User", .principal_name = "ops", .host = "h"};
  EXPECT_FALSE(a.authorize(group_admin, op::read, res::topic, "t"));
  EXPECT_TRUE(a.authorize(group_ops, op::read, res::topic, "t"));
  EXPECT_FALSE(a.authorize(user_ops, op::read, res::topic, "t"));
  EXPECT_FALSE(a.authorize(user("Admin"), op::read, res::topic, "t"));
  EXPECT_FALSE(a.authorize(user("admin2"), op::read, res::topic, "t"));
  EXPECT_FALSE(a.authorize(user("admi"), op::read, res::topic, "t"));
}

// StandardAuthorizerTest.testGetConfiguredSuperUsers
TEST(ParseSuperUsers, SplitsOnSemicolonsTrimsAndSkipsEmptyEntries) {
  EXPECT_EQ(*parse_super_users(""), std::vector<std::string>{});
  EXPECT_EQ(*parse_super_users(" "), std::vector<std::string>{});
  EXPECT_EQ(*parse_super_users("User:bob;User:alice "),
            (std::vector<std::string>{"User:bob", "User:alice"}));
  EXPECT_EQ(*parse_super_users(";  User:bob  ;  User:alice ;;"),
            (std::vector<std::string>{"User:bob", "User:alice"}));
  EXPECT_EQ(*parse_super_users("User:bob;User:bob"), (std::vector<std::string>{"User:bob"}));
  // Only the ends are trimmed: "User: bob" keeps its space (and matches nobody).
  EXPECT_EQ(*parse_super_users("\tUser: bob\n"), (std::vector<std::string>{"User: bob"}));
  // The first entry without ':' is the error; ":alice" is a principal (of an empty type).
  EXPECT_EQ(parse_super_users("bob;:alice").error(),
            "expected a string in format principalType:principalName but got bob");
  EXPECT_EQ(*parse_super_users(":alice"), (std::vector<std::string>{":alice"}));
}

// --- DENY over ALLOW, ALL, implied operations -----------------------------------------------

// StandardAuthorizerTest.testFindResultImplication
TEST(Authorizer, AllowsOfReadWriteDeleteAlterImplyDescribe) {
  for (op granted : {op::describe, op::read, op::write, op::delete_, op::alter}) {
    authorizer a({}, {acl(res::topic, "foo_", pat::prefixed, "User:bob", granted, perm::allow)});
    EXPECT_TRUE(a.authorize(user("bob"), op::describe, res::topic, "foo_bar"))
        << to_string(granted);
  }
  for (op granted : {op::create, op::describe_configs, op::alter_configs, op::cluster_action,
                     op::idempotent_write}) {
    authorizer a({}, {acl(res::topic, "foo_", pat::prefixed, "User:bob", granted, perm::allow)});
    EXPECT_FALSE(a.authorize(user("bob"), op::describe, res::topic, "foo_bar"))
        << to_string(granted);
  }
}

TEST(Authorizer, AllowOfAlterConfigsImpliesDescribeConfigs) {
  for (op granted : {op::describe_configs, op::alter_configs}) {
    authorizer a({}, {acl(res::topic, "foo_", pat::prefixed, "User:bob", granted, perm::allow)});
    EXPECT_TRUE(a.authorize(user("bob"), op::describe_configs, res::topic, "foo_bar"));
  }
  authorizer a({},
               {acl(res::topic, "t", pat::literal, "User:bob", op::describe_configs, perm::allow)});
  EXPECT_FALSE(a.authorize(user("bob"), op::alter_configs, res::topic, "t"));
  // Nothing else is implied: WRITE does not give READ, ALTER not ALTER_CONFIGS.
  authorizer b({}, {acl(res::topic, "t", pat::literal, "User:bob", op::write, perm::allow),
                    acl(res::topic, "t", pat::literal, "User:bob", op::alter, perm::allow)});
  EXPECT_FALSE(b.authorize(user("bob"), op::read, res::topic, "t"));
  EXPECT_FALSE(b.authorize(user("bob"), op::alter_configs, res::topic, "t"));
  EXPECT_FALSE(b.authorize(user("bob"), op::describe_configs, res::topic, "t"));
}

TEST(Authorizer, DeniesImplyNothing) {
  // A DENY of READ leaves DESCRIBE to the ALLOW of READ (which implies it).
  authorizer a({}, {acl(res::topic, "t", pat::literal, "User:bob", op::read, perm::allow),
                    acl(res::topic, "t", pat::literal, "User:bob", op::read, perm::deny)});
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::topic, "t"));
  EXPECT_TRUE(a.authorize(user("bob"), op::describe, res::topic, "t"));
  // A DENY of ALTER_CONFIGS does not deny DESCRIBE_CONFIGS.
  authorizer b({}, {acl(res::topic, "t", pat::literal, "User:bob", op::all, perm::allow),
                    acl(res::topic, "t", pat::literal, "User:bob", op::alter_configs, perm::deny)});
  EXPECT_TRUE(b.authorize(user("bob"), op::describe_configs, res::topic, "t"));
  EXPECT_FALSE(b.authorize(user("bob"), op::alter_configs, res::topic, "t"));
  // A DENY of DESCRIBE denies DESCRIBE even where READ is allowed.
  authorizer c({}, {acl(res::topic, "t", pat::literal, "User:bob", op::read, perm::allow),
                    acl(res::topic, "t", pat::literal, "User:bob", op::describe, perm::deny)});
  EXPECT_TRUE(c.authorize(user("bob"), op::read, res::topic, "t"));
  EXPECT_FALSE(c.authorize(user("bob"), op::describe, res::topic, "t"));
}

// StandardAuthorizerTest.testDenyPrecedenceWithOperationAll
TEST(Authorizer, DenyOfAllDeniesEverythingWhateverTheAllows) {
  authorizer a(supers({"User:superman"}),
               {acl(res::topic, "foo", pat::literal, "User:alice", op::all, perm::deny),
                acl(res::topic, "foo", pat::prefixed, "User:alice", op::read, perm::allow),
                acl(res::topic, "foo", pat::literal, "User:*", op::all, perm::deny),
                acl(res::topic, "foo", pat::prefixed, "User:*", op::describe, perm::allow)});
  EXPECT_FALSE(a.authorize(user("alice"), op::write, res::topic, "foo"));
  EXPECT_FALSE(a.authorize(user("alice"), op::read, res::topic, "foo"));
  EXPECT_FALSE(a.authorize(user("alice"), op::describe, res::topic, "foo"));
  EXPECT_TRUE(a.authorize(user("alice"), op::read, res::topic, "foobar"));
  EXPECT_FALSE(a.authorize(user("bob"), op::describe, res::topic, "foo"));
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::topic, "foo"));
  EXPECT_FALSE(a.authorize(user("bob"), op::write, res::topic, "foo"));
  EXPECT_TRUE(a.authorize(user("bob"), op::describe, res::topic, "foobaz"));
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::topic, "foobaz"));
}

// StandardAuthorizerTest.testTopicAclWithOperationAll
TEST(Authorizer, AllowOfAllAllowsEveryOperation) {
  authorizer a(supers({"User:superman"}),
               {acl(res::topic, "foo", pat::literal, "User:*", op::all, perm::allow),
                acl(res::topic, "bar", pat::prefixed, "User:alice", op::all, perm::allow),
                acl(res::topic, "baz", pat::literal, "User:bob", op::all, perm::allow)});
  EXPECT_TRUE(a.authorize(user("alice"), op::write, res::topic, "foo"));
  EXPECT_TRUE(a.authorize(user("alice"), op::describe_configs, res::topic, "bar"));
  EXPECT_FALSE(a.authorize(user("alice"), op::describe, res::topic, "baz"));
  EXPECT_TRUE(a.authorize(user("bob"), op::write, res::topic, "foo"));
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::topic, "bar"));
  EXPECT_TRUE(a.authorize(user("bob"), op::describe, res::topic, "baz"));
  EXPECT_TRUE(a.authorize(user("malory"), op::describe, res::topic, "foo"));
  EXPECT_FALSE(a.authorize(user("malory"), op::write, res::topic, "bar"));
  EXPECT_FALSE(a.authorize(user("malory"), op::read, res::topic, "baz"));
}

TEST(Authorizer, DenyAnywhereAmongTheApplicableAclsWins) {
  // An ALLOW on the literal name against a DENY on "*", on a prefix, and the other way round.
  authorizer a({}, {acl(res::group, "g1", pat::literal, "User:bob", op::read, perm::allow),
                    acl(res::group, "*", pat::literal, "User:bob", op::read, perm::deny)});
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::group, "g1"));
  authorizer b({}, {acl(res::group, "g1", pat::literal, "User:bob", op::read, perm::allow),
                    acl(res::group, "g", pat::prefixed, "User:*", op::read, perm::deny)});
  EXPECT_FALSE(b.authorize(user("bob"), op::read, res::group, "g1"));
  authorizer c({}, {acl(res::group, "*", pat::literal, "User:*", op::read, perm::allow),
                    acl(res::group, "g1", pat::literal, "User:bob", op::read, perm::deny)});
  EXPECT_FALSE(c.authorize(user("bob"), op::read, res::group, "g1"));
  EXPECT_TRUE(c.authorize(user("bob"), op::read, res::group, "g2"));
  EXPECT_TRUE(c.authorize(user("alice"), op::read, res::group, "g1"));
}

// --- principals and hosts -------------------------------------------------------------------

// StandardAuthorizerTest.testFindResultPrincipalMatching
TEST(Authorizer, TheWildcardPrincipalMatchesEveryPrincipalOfEveryType) {
  authorizer a({}, {acl(res::group, "bar", pat::literal, "User:*", op::read, perm::allow)});
  EXPECT_TRUE(a.authorize(user("alice"), op::read, res::group, "bar"));
  EXPECT_TRUE(a.authorize(user("ANONYMOUS"), op::read, res::group, "bar"));
  acl_subject service{.principal_type = "Service", .principal_name = "x", .host = "h"};
  EXPECT_TRUE(a.authorize(service, op::read, res::group, "bar"));
  // Only User:* is a wildcard.
  authorizer b({}, {acl(res::group, "bar", pat::literal, "Service:*", op::read, perm::allow)});
  EXPECT_FALSE(b.authorize(service, op::read, res::group, "bar"));
  acl_subject star{.principal_type = "Service", .principal_name = "*", .host = "h"};
  EXPECT_TRUE(b.authorize(star, op::read, res::group, "bar"));
}

TEST(Authorizer, PrincipalsMatchByTypeAndName) {
  authorizer a({}, {acl(res::topic, "t", pat::literal, "User:alice", op::read, perm::allow),
                    acl(res::topic, "t", pat::literal, "Group:ops", op::write, perm::allow),
                    acl(res::topic, "t", pat::literal, "User:CN=a,O=b:c", op::alter, perm::allow)});
  EXPECT_TRUE(a.authorize(user("alice"), op::read, res::topic, "t"));
  EXPECT_FALSE(a.authorize(user("ops"), op::write, res::topic, "t"));
  acl_subject ops{.principal_type = "Group", .principal_name = "ops", .host = "h"};
  EXPECT_TRUE(a.authorize(ops, op::write, res::topic, "t"));
  acl_subject alice_group{.principal_type = "Group", .principal_name = "alice", .host = "h"};
  EXPECT_FALSE(a.authorize(alice_group, op::read, res::topic, "t"));
  EXPECT_TRUE(a.authorize(user("CN=a,O=b:c"), op::alter, res::topic, "t"));
}

// StandardAuthorizerTest.testHostAddressAclValidation
TEST(Authorizer, HostsMatchExactlyOrByWildcard) {
  const std::string local = "127.0.0.1";
  authorizer a(
      {}, {acl(res::topic, "foo", pat::literal, "User:alice", op::read, perm::deny, "192.168.1.1"),
           acl(res::topic, "foo", pat::literal, "User:alice", op::read, perm::allow, "*"),
           acl(res::topic, "bar", pat::literal, "User:bob", op::read, perm::allow, "192.168.1.2"),
           acl(res::topic, "bar", pat::literal, "User:*", op::describe, perm::allow, local)});
  struct expectation {
    const char* who;
    const char* host;
    bool read_foo, read_bar, describe_bar;
  };
  for (const auto& e : {expectation{"alice", "127.0.0.1", true, false, true},
                        expectation{"alice", "192.168.1.1", false, false, false},
                        expectation{"alice", "192.168.1.2", true, false, false},
                        expectation{"bob", "127.0.0.1", false, false, true},
                        expectation{"bob", "192.168.1.1", false, false, false},
                        expectation{"bob", "192.168.1.2", false, true, true}}) {
    auto who = user(e.who, e.host);
    EXPECT_EQ(a.authorize(who, op::read, res::topic, "foo"), e.read_foo) << e.who << e.host;
    EXPECT_EQ(a.authorize(who, op::read, res::topic, "bar"), e.read_bar) << e.who << e.host;
    EXPECT_EQ(a.authorize(who, op::describe, res::topic, "bar"), e.describe_bar) << e.who << e.host;
  }
}

TEST(Authorizer, HostsAreNotResolvedNorNormalised) {
  authorizer a({},
               {acl(res::topic, "t", pat::literal, "User:a", op::read, perm::allow, "::1"),
                acl(res::topic, "t", pat::literal, "User:a", op::write, perm::allow, "localhost")});
  EXPECT_FALSE(a.authorize(user("a", "0:0:0:0:0:0:0:1"), op::read, res::topic, "t"));
  EXPECT_FALSE(a.authorize(user("a", "127.0.0.1"), op::write, res::topic, "t"));
}

TEST(KafkaHostAddress, PrintsAddressesAsJavaDoes) {
  std::array<uint8_t, 4> v4 = {192, 168, 1, 10};
  EXPECT_EQ(kafka_host_address(v4), "192.168.1.10");
  std::array<uint8_t, 16> loopback{};
  loopback[15] = 1;
  EXPECT_EQ(kafka_host_address(loopback), "0:0:0:0:0:0:0:1");
  std::array<uint8_t, 16> mapped = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7};
  EXPECT_EQ(kafka_host_address(mapped), "10.0.0.7");
  std::array<uint8_t, 16> doc = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd};
  EXPECT_EQ(kafka_host_address(doc), "2001:db8:0:0:0:0:0:abcd");
  std::array<uint8_t, 16> link_local = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x1a, 0, 0, 0, 0, 0, 1};
  EXPECT_EQ(kafka_host_address(link_local, 3), "fe80:0:0:0:21a:0:0:1%3");
  EXPECT_EQ(kafka_host_address(link_local), "fe80:0:0:0:21a:0:0:1");
  // An IPv4-compatible (not mapped) address stays IPv6.
  std::array<uint8_t, 16> compatible = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 7};
  EXPECT_EQ(kafka_host_address(compatible), "0:0:0:0:0:0:a00:7");
}

// --- resource names: literal, wildcard, prefixed --------------------------------------------

// StandardAuthorizerTest.testPrefixAcls
TEST(Authorizer, PrefixedAclsApplyToEveryNameStartingWithTheirs) {
  authorizer a(supers({"User:superman"}),
               {acl(res::topic, "fooa", pat::prefixed, "User:alice", op::all, perm::allow),
                acl(res::topic, "foobar", pat::literal, "User:bob", op::all, perm::allow),
                acl(res::topic, "f", pat::prefixed, "User:bob", op::all, perm::allow)});
  EXPECT_TRUE(a.authorize(user("bob"), op::write, res::topic, "foobarr"));
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::topic, "goobar"));
  EXPECT_TRUE(a.authorize(user("bob"), op::read, res::topic, "fooa"));
  EXPECT_TRUE(a.authorize(user("alice"), op::describe, res::topic, "fooa"));
  EXPECT_FALSE(a.authorize(user("alice"), op::write, res::topic, "bar"));
  EXPECT_FALSE(a.authorize(user("alice"), op::read, res::topic, "baz"));
  // A prefix equal to the whole name applies; a literal name that is a prefix does not.
  EXPECT_TRUE(a.authorize(user("alice"), op::read, res::topic, "fooa"));
  EXPECT_FALSE(a.authorize(user("alice"), op::read, res::topic, "foo"));
}

// StandardAuthorizerTest.testAuthorizationWithManyAcls
TEST(Authorizer, FindsEveryApplicableAclAmongMany) {
  authorizer a(supers({"User:superman"}),
               {acl(res::topic, "green2", pat::literal, "User:*", op::read, perm::allow),
                acl(res::topic, "green", pat::prefixed, "User:bob", op::read, perm::allow),
                acl(res::topic, "betamax4", pat::literal, "User:bob", op::read, perm::allow),
                acl(res::topic, "betamax", pat::literal, "User:bob", op::read, perm::allow),
                acl(res::topic, "beta", pat::prefixed, "User:*", op::read, perm::allow),
                acl(res::topic, "alpha", pat::prefixed, "User:*", op::read, perm::allow),
                acl(res::topic, "alp", pat::prefixed, "User:bob", op::read, perm::deny),
                acl(res::group, "*", pat::literal, "User:bob", op::write, perm::allow),
                acl(res::group, "wheel", pat::literal, "User:*", op::write, perm::deny)});
  EXPECT_TRUE(a.authorize(user("bob"), op::read, res::topic, "green1"));
  EXPECT_FALSE(a.authorize(user("bob"), op::write, res::group, "wheel"));
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::topic, "alpha"));
  EXPECT_TRUE(a.authorize(user("bob"), op::write, res::group, "arbitrary"));
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::topic, "ala"));
  EXPECT_TRUE(a.authorize(user("alice"), op::read, res::topic, "alphabet"));
  EXPECT_TRUE(a.authorize(user("alice"), op::read, res::topic, "betamax4"));
  EXPECT_TRUE(a.authorize(user("bob"), op::read, res::topic, "betamax4"));
}

TEST(Authorizer, OnlyALiteralStarIsAWildcard) {
  authorizer a({}, {acl(res::group, "*", pat::prefixed, "User:bob", op::read, perm::allow),
                    acl(res::topic, "*", pat::literal, "User:bob", op::read, perm::allow)});
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::group, "g"));
  EXPECT_TRUE(a.authorize(user("bob"), op::read, res::group, "*g"));
  EXPECT_TRUE(a.authorize(user("bob"), op::read, res::group, "*"));
  EXPECT_TRUE(a.authorize(user("bob"), op::read, res::topic, "anything"));
  EXPECT_TRUE(a.authorize(user("bob"), op::read, res::topic, "*"));
  // A resource type's wildcard is its own.
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::transactional_id, "anything"));
}

TEST(Authorizer, ResourceNamesCompareBytewise) {
  authorizer a({}, {acl(res::topic, "Orders", pat::prefixed, "User:bob", op::read, perm::allow),
                    acl(res::group, "é", pat::prefixed, "User:bob", op::read, perm::allow)});
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::topic, "orders"));
  EXPECT_TRUE(a.authorize(user("bob"), op::read, res::topic, "Orders.eu"));
  EXPECT_TRUE(a.authorize(user("bob"), op::read, res::group, "été"));
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::group, "e"));
}

// Names that sort between a prefix and the resource name must not hide the prefix (the index
// walks back over them).
TEST(Authorizer, FindsPrefixesHiddenBehindNamesThatSortBetween) {
  authorizer a({}, {acl(res::topic, "f", pat::prefixed, "User:bob", op::read, perm::allow),
                    acl(res::topic, "fa", pat::prefixed, "User:bob", op::write, perm::allow),
                    acl(res::topic, "fb", pat::prefixed, "User:bob", op::read, perm::deny),
                    acl(res::topic, "foo", pat::prefixed, "User:bob", op::alter, perm::allow),
                    acl(res::topic, "foobaa", pat::prefixed, "User:bob", op::read, perm::deny),
                    acl(res::topic, "foobar", pat::prefixed, "User:bob", op::create, perm::allow),
                    acl(res::topic, "foobarz", pat::prefixed, "User:bob", op::read, perm::deny),
                    acl(res::topic, "gar", pat::prefixed, "User:bob", op::read, perm::deny)});
  auto bob = user("bob");
  EXPECT_TRUE(a.authorize(bob, op::read, res::topic, "foobar"));  // "f"
  EXPECT_TRUE(a.authorize(bob, op::alter, res::topic, "foobar"));
  EXPECT_TRUE(a.authorize(bob, op::create, res::topic, "foobar"));
  EXPECT_FALSE(a.authorize(bob, op::write, res::topic, "foobar"));
  EXPECT_FALSE(a.authorize(bob, op::read, res::topic, "foobarzz"));
  EXPECT_FALSE(a.authorize(bob, op::read, res::topic, "fbx"));
  EXPECT_TRUE(a.authorize(bob, op::read, res::topic, "fc"));
}

// A brute force reading of the rules, scanning every ACL, against the index, on random ACLs
// over a small alphabet (so that prefixes collide), as Kafka's StandardAuthorizerPropertyTest.
bool brute_force(const std::vector<acl_binding>& acls, const authorizer_options& options,
                 const acl_subject& who, op operation, res type, std::string_view name) {
  std::string who_text = std::string(who.principal_type) + ":" + std::string(who.principal_name);
  for (const auto& su : options.super_users) {
    if (su == who_text) return true;
  }
  bool applies = false;
  bool allowed = false;
  for (const auto& b : acls) {
    if (b.resource_type != type) continue;
    bool on_resource = b.pattern_type == pat::literal
                           ? (b.resource_name == name || b.resource_name == "*")
                           : name.starts_with(b.resource_name);
    if (!on_resource) continue;
    applies = true;
    if (b.principal != who_text && b.principal != "User:*") continue;
    if (b.host != "*" && b.host != who.host) continue;
    bool op_matches = b.operation == op::all || b.operation == operation;
    if (!op_matches && b.permission_type == perm::allow) {
      if (operation == op::describe) {
        op_matches = b.operation == op::read || b.operation == op::write ||
                     b.operation == op::delete_ || b.operation == op::alter;
      } else if (operation == op::describe_configs) {
        op_matches = b.operation == op::alter_configs;
      }
    }
    if (!op_matches) continue;
    if (b.permission_type == perm::deny) return false;
    allowed = true;
  }
  return allowed || (!applies && options.allow_everyone_if_no_acl_found);
}

TEST(Authorizer, AgreesWithAScanOfEveryAclOnRandomAcls) {
  std::mt19937 rng(20240607);
  auto pick = [&](auto const& choices) { return choices[rng() % choices.size()]; };
  auto random_name = [&](size_t max) {
    std::string s(1 + rng() % max, 'a');
    for (auto& c : s) c = static_cast<char>('a' + rng() % 3);
    return s;
  };
  const std::array principals = {"User:alice", "User:bob", "User:*", "Group:alice"};
  const std::array hosts = {"*", "10.0.0.1", "10.0.0.2"};
  const std::array ops = {op::all,     op::read,          op::write,           op::describe,
                          op::delete_, op::alter_configs, op::describe_configs};
  const std::array types = {res::topic, res::group};
  for (int round = 0; round < 200; ++round) {
    std::vector<acl_binding> acls;
    size_t n = rng() % 40;
    for (size_t i = 0; i < n; ++i) {
      bool wildcard = rng() % 10 == 0;
      acls.push_back(acl(pick(types), wildcard ? "*" : random_name(4),
                         rng() % 2 ? pat::literal : pat::prefixed, pick(principals), pick(ops),
                         rng() % 4 == 0 ? perm::deny : perm::allow, pick(hosts)));
    }
    authorizer_options options{.super_users = {"User:root"},
                               .allow_everyone_if_no_acl_found = rng() % 2 == 0};
    authorizer a(options, acls);
    auto snapshot = a.snapshot();
    for (int q = 0; q < 100; ++q) {
      acl_subject who{.principal_type = rng() % 5 == 0 ? "Group" : "User",
                      .principal_name = pick(std::array{"alice", "bob", "carol", "root"}),
                      .host = pick(std::array{"10.0.0.1", "10.0.0.2"})};
      op operation = pick(ops);
      if (operation == op::all) operation = op::read;
      res type = pick(types);
      std::string name = random_name(6);
      ASSERT_EQ(snapshot->authorize(who, operation, type, name),
                brute_force(acls, options, who, operation, type, name))
          << "round " << round << " " << who.principal_type << ":" << who.principal_name << "@"
          << who.host << " " << to_string(operation) << " " << to_string(type) << ":" << name;
    }
  }
}

// --- authorize_any (Kafka's authorizeByResourceType) ----------------------------------------

acl_subject u1h1() {
  return user("user1", "192.168.1.1");
}

// BaseAuthorizerTest.testAuthorizeByResourceTypeMultipleAddAndRemove
TEST(AuthorizeAny, FollowsAddsAndRemoves) {
  authorizer a;
  auto allow =
      acl(res::topic, "sb1", pat::literal, "User:user1", op::read, perm::allow, "192.168.1.1");
  auto deny =
      acl(res::topic, "sb1", pat::literal, "User:user1", op::read, perm::deny, "192.168.1.1");
  EXPECT_FALSE(a.snapshot()->authorize_any(u1h1(), op::read, res::topic));
  a.apply({&allow, 1}, {});
  EXPECT_TRUE(a.snapshot()->authorize_any(u1h1(), op::read, res::topic));
  a.apply({&deny, 1}, {});
  EXPECT_FALSE(a.snapshot()->authorize_any(u1h1(), op::read, res::topic));
  a.apply({}, {&deny, 1});
  EXPECT_TRUE(a.snapshot()->authorize_any(u1h1(), op::read, res::topic));
  a.apply({}, {&allow, 1});
  EXPECT_FALSE(a.snapshot()->authorize_any(u1h1(), op::read, res::topic));
}

// BaseAuthorizerTest.testAuthorizeByResourceTypeIsolationUnrelatedDenyWontDominateAllow
TEST(AuthorizeAny, UnrelatedDeniesDoNotDominate) {
  std::string r1 = "sb1-x";
  std::string r2 = "sb2-y";
  auto ace = [](const std::string& name, pat p, const char* who, const char* host, op o, perm pm,
                res t = res::topic) { return acl(t, name, p, who, o, pm, host); };
  authorizer a(
      {}, {ace(r1, pat::literal, "User:user1", "192.168.1.1", op::read, perm::deny),
           ace(r1, pat::literal, "User:user2", "192.168.1.1", op::read, perm::deny),
           ace(r1, pat::literal, "User:user1", "192.168.1.2", op::write, perm::deny),
           ace(r1, pat::literal, "User:user2", "192.168.1.2", op::read, perm::deny),
           ace(r1, pat::literal, "User:user1", "192.168.1.2", op::read, perm::allow),
           ace(r2, pat::literal, "User:user1", "192.168.1.2", op::read, perm::deny),
           ace("s", pat::prefixed, "User:user1", "192.168.1.2", op::read, perm::deny, res::group)});
  auto s = a.snapshot();
  EXPECT_FALSE(s->authorize_any(u1h1(), op::read, res::topic));
  EXPECT_FALSE(s->authorize_any(u1h1(), op::read, res::group));
  EXPECT_FALSE(s->authorize_any(u1h1(), op::read, res::transactional_id));
  EXPECT_FALSE(s->authorize_any(u1h1(), op::read, res::cluster));
  EXPECT_TRUE(s->authorize_any(user("user1", "192.168.1.2"), op::read, res::topic));
}

// BaseAuthorizerTest.testAuthorizeByResourceTypePrefixedResourceDenyDominate
TEST(AuthorizeAny, PrefixedDeniesDominateLongerAllows) {
  authorizer a;
  auto ace = [](const char* name, perm p) {
    return acl(res::group, name, pat::prefixed, "User:user1", op::read, p, "192.168.1.1");
  };
  auto step = [&](acl_binding b) {
    a.apply({&b, 1}, {});
    return a.snapshot()->authorize_any(u1h1(), op::read, res::group);
  };
  EXPECT_TRUE(step(ace("abcde", perm::allow)));
  EXPECT_FALSE(step(ace("abcd", perm::deny)));
  EXPECT_TRUE(step(ace("abc", perm::allow)));
  EXPECT_FALSE(step(ace("a", perm::deny)));
  EXPECT_FALSE(step(ace("ab", perm::allow)));
}

// BaseAuthorizerTest.testAuthorizeByResourceTypeWildcardResourceDenyDominate
TEST(AuthorizeAny, AWildcardDenyDominatesEverything) {
  authorizer a;
  auto ace = [](const char* name, pat p, perm pm) {
    return acl(res::group, name, p, "User:user1", op::write, pm, "192.168.1.1");
  };
  auto step = [&](acl_binding b) {
    a.apply({&b, 1}, {});
    return a.snapshot()->authorize_any(u1h1(), op::write, res::group);
  };
  EXPECT_TRUE(step(ace("hello", pat::prefixed, perm::allow)));
  EXPECT_FALSE(step(ace("*", pat::literal, perm::deny)));
  EXPECT_FALSE(step(ace("*", pat::literal, perm::allow)));
  EXPECT_FALSE(step(ace("aloha", pat::literal, perm::allow)));
}

// BaseAuthorizerTest.testAuthorizeByResourceTypeWithAllOperationAce
TEST(AuthorizeAny, CountsAllButNoImpliedOperation) {
  auto ace = [](op o, perm p) {
    return acl(res::topic, "sb1", pat::literal, "User:user1", o, p, "192.168.1.1");
  };
  authorizer a({}, {ace(op::write, perm::deny), ace(op::all, perm::allow)});
  EXPECT_TRUE(a.snapshot()->authorize_any(u1h1(), op::read, res::topic));
  a.apply(std::vector{ace(op::all, perm::deny)}, {});
  EXPECT_FALSE(a.snapshot()->authorize_any(u1h1(), op::read, res::topic));
  // Unlike authorize(), READ does not give DESCRIBE here.
  authorizer b({}, {ace(op::read, perm::allow)});
  EXPECT_TRUE(b.authorize(u1h1(), op::describe, res::topic, "sb1"));
  EXPECT_FALSE(b.snapshot()->authorize_any(u1h1(), op::describe, res::topic));
}

// BaseAuthorizerTest.testAuthorizeByResourceTypeWithAllHostAce
TEST(AuthorizeAny, HonoursHosts) {
  auto ace = [](const char* name, const char* host, perm p) {
    return acl(res::topic, name, pat::literal, "User:user1", op::read, p, host);
  };
  authorizer a;
  auto u1h2 = user("user1", "192.168.1.2");
  auto any = [&](const acl_subject& who) {
    return a.snapshot()->authorize_any(who, op::read, res::topic);
  };
  a.apply(std::vector{ace("sb1", "192.168.1.1", perm::allow)}, {});
  EXPECT_TRUE(any(u1h1()));
  a.apply(std::vector{ace("sb1", "*", perm::deny)}, {});
  EXPECT_FALSE(any(u1h1()));
  a.apply(std::vector{ace("sb2", "192.168.1.1", perm::deny)}, {});
  EXPECT_FALSE(any(u1h1()));
  EXPECT_FALSE(any(u1h2));
  a.apply(std::vector{ace("sb2", "*", perm::allow)}, {});
  EXPECT_TRUE(any(u1h2));
  EXPECT_FALSE(any(u1h1()));
  a.apply(std::vector{ace("sb2", "*", perm::deny)}, {});
  EXPECT_FALSE(any(u1h2));
}

// BaseAuthorizerTest.testAuthorizeByResourceTypeWithAllPrincipalAce
TEST(AuthorizeAny, HonoursTheWildcardPrincipal) {
  auto ace = [](const char* name, const char* who, perm p) {
    return acl(res::topic, name, pat::literal, who, op::read, p, "192.168.1.1");
  };
  authorizer a;
  auto u2h1 = user("user2", "192.168.1.1");
  auto any = [&](const acl_subject& who) {
    return a.snapshot()->authorize_any(who, op::read, res::topic);
  };
  a.apply(std::vector{ace("sb1", "User:user1", perm::allow)}, {});
  EXPECT_TRUE(any(u1h1()));
  a.apply(std::vector{ace("sb1", "User:*", perm::deny)}, {});
  EXPECT_FALSE(any(u1h1()));
  a.apply(std::vector{ace("sb2", "User:user1", perm::deny)}, {});
  EXPECT_FALSE(any(u1h1()));
  EXPECT_FALSE(any(u2h1));
  a.apply(std::vector{ace("sb2", "User:*", perm::allow)}, {});
  EXPECT_TRUE(any(u2h1));
  a.apply(std::vector{ace("sb2", "User:*", perm::deny)}, {});
  EXPECT_FALSE(any(u2h1));
}

// BaseAuthorizerTest.testAuthorizeByResourceTypeSuperUserHasAccess
TEST(AuthorizeAny, SuperUsersAlwaysMay) {
  std::vector<acl_binding> deny_all;
  for (res t : {res::topic, res::cluster, res::group, res::transactional_id}) {
    deny_all.push_back(acl(t, t == res::cluster ? "kafka-cluster" : "*", pat::literal, "User:*",
                           op::all, perm::deny));
  }
  authorizer a(supers({"User:superuser1", "User:superuser2"}), deny_all);
  for (res t : {res::topic, res::cluster, res::group, res::transactional_id}) {
    EXPECT_TRUE(a.snapshot()->authorize_any(user("superuser1", "192.0.4.4"), op::read, t));
    EXPECT_FALSE(a.snapshot()->authorize_any(user("bob", "192.0.4.4"), op::read, t));
  }
}

// The first step of Kafka's authorizeByResourceType asks about a resource named "hardcode".
TEST(AuthorizeAny, AllowsWhatAResourceNamedHardcodeAllows) {
  // With allow.everyone.if.no.acl.found and no ACL applying to "hardcode": anyone.
  authorizer a({.allow_everyone_if_no_acl_found = true},
               {acl(res::topic, "other", pat::literal, "User:bob", op::write, perm::deny)});
  EXPECT_TRUE(a.snapshot()->authorize_any(user("alice"), op::write, res::topic));
  // And with the operations implied in authorize(): an ALLOW of READ on "hardcode" (and only on
  // that name) gives DESCRIBE on some topic.
  authorizer b({},
               {acl(res::topic, "hardcode", pat::literal, "User:alice", op::read, perm::allow)});
  EXPECT_TRUE(b.snapshot()->authorize_any(user("alice"), op::describe, res::topic));
  authorizer c({},
               {acl(res::topic, "hardcodf", pat::literal, "User:alice", op::read, perm::allow)});
  EXPECT_FALSE(c.snapshot()->authorize_any(user("alice"), op::describe, res::topic));
}

// --- authorized_operations ------------------------------------------------------------------

TEST(AuthorizedOperations, SetsTheBitOfEachAllowedSupportedOperation) {
  authorizer a(supers({"User:admin"}),
               {acl(res::group, "g", pat::literal, "User:bob", op::read, perm::allow),
                acl(res::topic, "t", pat::literal, "User:bob", op::all, perm::allow),
                acl(res::topic, "t", pat::literal, "User:bob", op::delete_, perm::deny)});
  auto s = a.snapshot();
  // READ implies DESCRIBE.
  EXPECT_EQ(s->authorized_operations(user("bob"), res::group, "g"), (1 << 3) | (1 << 8));
  // Every TOPIC operation but DELETE: READ, WRITE, CREATE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
  // ALTER_CONFIGS.
  EXPECT_EQ(s->authorized_operations(user("bob"), res::topic, "t"),
            (1 << 3) | (1 << 4) | (1 << 5) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11));
  EXPECT_EQ(s->authorized_operations(user("alice"), res::topic, "t"), 0);
  // Every CLUSTER operation (ALL itself is never reported).
  EXPECT_EQ(s->authorized_operations(user("admin"), res::cluster, "kafka-cluster"),
            (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12));
}

// --- the ACL set: snapshots, changes, filters -----------------------------------------------

TEST(Authorizer, ASnapshotKeepsTheStateItWasTakenIn) {
  authorizer a;
  auto before = a.snapshot();
  auto b = acl(res::topic, "t", pat::literal, "User:bob", op::read, perm::allow);
  a.apply({&b, 1}, {});
  EXPECT_FALSE(before->authorize(user("bob"), op::read, res::topic, "t"));
  EXPECT_TRUE(a.snapshot()->authorize(user("bob"), op::read, res::topic, "t"));
  EXPECT_TRUE(before->bindings().empty());
  EXPECT_EQ(a.snapshot()->bindings().size(), 1U);
}

TEST(Authorizer, AppliesRemovalsThenAdditionsAndKeepsOneOfEachAcl) {
  auto b1 = acl(res::topic, "t", pat::literal, "User:bob", op::read, perm::allow);
  auto b2 = acl(res::topic, "t", pat::literal, "User:bob", op::write, perm::allow);
  authorizer a({}, {b1, b1});
  EXPECT_EQ(a.snapshot()->bindings().size(), 1U);
  a.apply(std::vector{b1, b2, b2}, {});
  EXPECT_EQ(a.snapshot()->bindings().size(), 2U);
  // Removed and added at once: kept.
  a.apply(std::vector{b1}, std::vector{b1});
  EXPECT_TRUE(a.authorize(user("bob"), op::read, res::topic, "t"));
  // Removing what is not there is nothing.
  auto b3 = acl(res::group, "g", pat::literal, "User:bob", op::read, perm::allow);
  a.apply({}, std::vector{b3, b2});
  EXPECT_EQ(a.snapshot()->bindings(), (std::set<acl_binding>{b1}));
  a.replace({b3});
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::topic, "t"));
  EXPECT_TRUE(a.authorize(user("bob"), op::read, res::group, "g"));
}

TEST(Authorizer, ConfigureKeepsTheAcls) {
  authorizer a({}, {acl(res::topic, "t", pat::literal, "User:bob", op::read, perm::allow)});
  EXPECT_FALSE(a.authorize(user("admin"), op::write, res::topic, "t"));
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::topic, "u"));
  a.configure({.super_users = {"User:admin"}, .allow_everyone_if_no_acl_found = true});
  EXPECT_TRUE(a.authorize(user("admin"), op::write, res::topic, "t"));
  EXPECT_TRUE(a.authorize(user("bob"), op::read, res::topic, "u"));
  EXPECT_TRUE(a.authorize(user("bob"), op::read, res::topic, "t"));
  EXPECT_FALSE(a.authorize(user("bob"), op::write, res::topic, "t"));
}

TEST(Authorizer, InvalidAclsAreListedButApplyToNothing) {
  authorizer a({.allow_everyone_if_no_acl_found = true},
               {acl(res::topic, "t", pat::literal, "bob", op::read, perm::deny),
                acl(res::topic, "", pat::prefixed, "User:*", op::all, perm::deny),
                acl(res::topic, "t", pat::match, "User:*", op::all, perm::deny)});
  EXPECT_EQ(a.snapshot()->bindings().size(), 3U);
  EXPECT_TRUE(a.authorize(user("bob"), op::read, res::topic, "t"));
}

// StandardAuthorizerTest.testListAcls
TEST(Authorizer, ListsTheAclsAFilterSelects) {
  auto foo_read = acl(res::topic, "foo_", pat::prefixed, "User:bob", op::read, perm::allow);
  auto foo_write = acl(res::topic, "foo_", pat::prefixed, "User:bob", op::write, perm::allow);
  auto bar_dc = acl(res::group, "bar", pat::literal, "User:*", op::describe_configs, perm::deny);
  auto bar_ac = acl(res::group, "bar", pat::literal, "User:*", op::alter_configs, perm::deny);
  authorizer a({}, {foo_read, foo_write, bar_dc, bar_ac});
  EXPECT_EQ(a.snapshot()->acls({}).size(), 4U);
  a.apply({}, {&foo_write, 1});
  EXPECT_EQ(a.snapshot()->acls({}).size(), 3U);
  EXPECT_EQ(a.snapshot()->acls({.resource_type = res::topic}), std::vector{foo_read});
  EXPECT_EQ(a.snapshot()->acls({.resource_type = res::group,
                                .resource_name = "bar",
                                .pattern_type = pat::match,
                                .operation = op::alter_configs}),
            std::vector{bar_ac});
  EXPECT_EQ(a.snapshot()->acls({.resource_name = "foo_bar", .pattern_type = pat::match}),
            std::vector{foo_read});
}

// Readers keep authorizing while a writer changes the ACLs; each snapshot is whole: an ACL
// pair added and removed together is seen both or neither.
// A check reads only the client's ACLs and User:*'s on each name that applies: among a thousand
// other principals' ACLs on the same names, those are found, a DENY first.
TEST(Authorizer, FindsTheClientsAclsAmongManyPrincipalsOnTheSameResource) {
  std::vector<acl_binding> acls;
  for (int i = 0; i < 1000; ++i) {
    const std::string other = "User:user-" + std::to_string(i);
    acls.push_back(acl(res::topic, "orders", pat::literal, other, op::write, perm::deny));
    acls.push_back(acl(res::topic, "ord", pat::prefixed, other, op::read, perm::allow));
  }
  acls.push_back(acl(res::topic, "orders", pat::literal, "User:alice", op::write, perm::allow));
  acls.push_back(acl(res::topic, "or", pat::prefixed, "User:bob", op::write, perm::allow));
  acls.push_back(acl(res::topic, "orders", pat::literal, "User:bob", op::read, perm::deny));
  acls.push_back(acl(res::topic, "o", pat::prefixed, "User:*", op::describe, perm::allow));
  authorizer a({}, acls);
  EXPECT_TRUE(a.authorize(user("alice"), op::write, res::topic, "orders"));
  EXPECT_FALSE(a.authorize(user("alice"), op::read, res::topic, "orders"));
  EXPECT_TRUE(a.authorize(user("bob"), op::write, res::topic, "orders"));
  EXPECT_FALSE(a.authorize(user("bob"), op::read, res::topic, "orders"));
  EXPECT_TRUE(a.authorize(user("carol"), op::describe, res::topic, "orders"));
  EXPECT_FALSE(a.authorize(user("user-7"), op::write, res::topic, "orders"));
  EXPECT_TRUE(a.authorize(user("user-7"), op::read, res::topic, "orders"));

  acls.push_back(acl(res::topic, "orders", pat::literal, "User:*", op::write, perm::deny));
  authorizer b({}, acls);
  EXPECT_FALSE(b.authorize(user("alice"), op::write, res::topic, "orders"));
  EXPECT_FALSE(b.authorize(user("bob"), op::write, res::topic, "orders"));
  EXPECT_TRUE(b.authorize(user("carol"), op::describe, res::topic, "orders"));
}

TEST(Authorizer, ReadersSeeWholeSnapshotsWhileAWriterChangesThem) {
  authorizer a;
  std::vector<acl_binding> pair = {
      acl(res::topic, "t", pat::literal, "User:bob", op::read, perm::allow),
      acl(res::group, "g", pat::literal, "User:bob", op::read, perm::allow)};
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::vector<std::thread> readers;
  readers.reserve(3);
  for (int i = 0; i < 3; ++i) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        auto s = a.snapshot();
        bool topic = s->authorize(user("bob"), op::read, res::topic, "t");
        bool group = s->authorize(user("bob"), op::read, res::group, "g");
        if (topic != group) torn.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 500; ++i) {
    a.apply(pair, {});
    a.apply({}, pair);
  }
  stop.store(true);
  for (auto& t : readers) t.join();
  EXPECT_EQ(torn.load(), 0);
}

}  // namespace
}  // namespace silt::security
