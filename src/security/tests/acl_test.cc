#include "security/acl.h"

#include <algorithm>
#include <string>

#include <gtest/gtest.h>

namespace silt::security {
namespace {

using op = acl_operation;
using perm = acl_permission_type;
using pat = acl_pattern_type;
using res = acl_resource_type;

acl_binding binding(res type, std::string name, pat pattern, std::string principal = "User:alice",
                    std::string host = "*", op operation = op::read, perm p = perm::allow) {
  return {.resource_type = type,
          .resource_name = std::move(name),
          .pattern_type = pattern,
          .principal = std::move(principal),
          .host = std::move(host),
          .operation = operation,
          .permission_type = p};
}

TEST(AclCodes, AreKafkasAndUnknownCodesReadAsUnknown) {
  EXPECT_EQ(resource_type_from_code(2), res::topic);
  EXPECT_EQ(resource_type_from_code(3), res::group);
  EXPECT_EQ(resource_type_from_code(4), res::cluster);
  EXPECT_EQ(resource_type_from_code(5), res::transactional_id);
  EXPECT_EQ(resource_type_from_code(6), res::delegation_token);
  EXPECT_EQ(resource_type_from_code(7), res::user);
  EXPECT_EQ(resource_type_from_code(8), res::unknown);
  EXPECT_EQ(resource_type_from_code(-1), res::unknown);
  EXPECT_EQ(pattern_type_from_code(2), pat::match);
  EXPECT_EQ(pattern_type_from_code(3), pat::literal);
  EXPECT_EQ(pattern_type_from_code(4), pat::prefixed);
  EXPECT_EQ(pattern_type_from_code(5), pat::unknown);
  EXPECT_EQ(operation_from_code(6), op::delete_);
  EXPECT_EQ(operation_from_code(12), op::idempotent_write);
  EXPECT_EQ(operation_from_code(14), op::describe_tokens);
  EXPECT_EQ(operation_from_code(15), op::two_phase_commit);
  EXPECT_EQ(operation_from_code(16), op::unknown);
  EXPECT_EQ(operation_from_code(-128), op::unknown);
  EXPECT_EQ(permission_type_from_code(2), perm::deny);
  EXPECT_EQ(permission_type_from_code(3), perm::allow);
  EXPECT_EQ(permission_type_from_code(4), perm::unknown);
}

TEST(AclCodes, PrintAsKafkaNamesThem) {
  EXPECT_EQ(to_string(res::transactional_id), "TRANSACTIONAL_ID");
  EXPECT_EQ(to_string(pat::prefixed), "PREFIXED");
  EXPECT_EQ(to_string(op::delete_), "DELETE");
  EXPECT_EQ(to_string(op::describe_configs), "DESCRIBE_CONFIGS");
  EXPECT_EQ(to_string(perm::any), "ANY");
}

TEST(ParsePrincipal, SplitsAtTheFirstColon) {
  EXPECT_EQ(parse_principal("User:alice"), (principal_parts{"User", "alice"}));
  EXPECT_EQ(parse_principal("User:a:b"), (principal_parts{"User", "a:b"}));
  EXPECT_EQ(parse_principal("User:CN=x,O=y"), (principal_parts{"User", "CN=x,O=y"}));
  EXPECT_EQ(parse_principal("User:"), (principal_parts{"User", ""}));
  EXPECT_EQ(parse_principal(":alice"), (principal_parts{"", "alice"}));
  EXPECT_FALSE(parse_principal("alice"));
  EXPECT_FALSE(parse_principal(""));
}

TEST(CheckNewBinding, AcceptsLiteralAndPrefixedAcls) {
  EXPECT_TRUE(check_new_binding(binding(res::topic, "orders", pat::literal)));
  EXPECT_TRUE(check_new_binding(binding(res::topic, "*", pat::literal)));
  EXPECT_TRUE(check_new_binding(binding(res::group, "app-", pat::prefixed)));
  EXPECT_TRUE(check_new_binding(binding(res::cluster, "kafka-cluster", pat::literal, "User:*",
                                        "10.0.0.1", op::idempotent_write, perm::deny)));
  for (op o : {op::all, op::read, op::write, op::create, op::delete_, op::alter, op::describe,
               op::cluster_action, op::describe_configs, op::alter_configs, op::idempotent_write,
               op::create_tokens, op::describe_tokens, op::two_phase_commit}) {
    EXPECT_TRUE(check_new_binding(binding(res::topic, "t", pat::literal, "User:a", "*", o)))
        << to_string(o);
  }
}

// What Kafka does not check: it is all accepted, and the authorizer makes sense of it.
TEST(CheckNewBinding, AcceptsWhatKafkaDoesNotCheck) {
  // A PREFIXED "*" matches the names starting with '*', it is no wildcard.
  EXPECT_TRUE(check_new_binding(binding(res::group, "*", pat::prefixed)));
  // The CLUSTER name rule holds for PREFIXED too, so this is the only PREFIXED CLUSTER ACL.
  EXPECT_TRUE(check_new_binding(binding(res::cluster, "kafka-cluster", pat::prefixed)));
  EXPECT_TRUE(check_new_binding(binding(res::topic, "t", pat::literal, "Group:ops")));
  EXPECT_TRUE(check_new_binding(binding(res::topic, "t", pat::literal, "User:")));
  EXPECT_TRUE(check_new_binding(binding(res::topic, "t", pat::literal, ":x")));
  EXPECT_TRUE(check_new_binding(binding(res::topic, "t", pat::literal, "User:a", "localhost")));
  EXPECT_TRUE(check_new_binding(binding(res::topic, "t", pat::literal, "User:a", "")));
  // An operation a resource type has no use for.
  EXPECT_TRUE(check_new_binding(
      binding(res::topic, "t", pat::literal, "User:a", "*", op::idempotent_write)));
}

TEST(CheckNewBinding, RefusesAClusterResourceNamedOtherwise) {
  auto r = check_new_binding(binding(res::cluster, "my-cluster", pat::literal));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), "The only valid name for the CLUSTER resource is kafka-cluster");
  EXPECT_FALSE(check_new_binding(binding(res::cluster, "kafka", pat::prefixed)));
  EXPECT_FALSE(check_new_binding(binding(res::cluster, "*", pat::literal)));
}

TEST(CheckNewBinding, RefusesAnEmptyName) {
  auto r = check_new_binding(binding(res::topic, "", pat::literal));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), "Invalid empty resource name");
  // The CLUSTER rule comes first, as the broker checks it first.
  EXPECT_EQ(check_new_binding(binding(res::cluster, "", pat::literal)).error(),
            "The only valid name for the CLUSTER resource is kafka-cluster");
}

TEST(CheckNewBinding, RefusesFilterOnlyAndUnknownValues) {
  EXPECT_EQ(check_new_binding(binding(res::any, "t", pat::literal)).error(),
            "Invalid resourceType ANY");
  EXPECT_EQ(check_new_binding(binding(res::unknown, "t", pat::literal)).error(),
            "Invalid resourceType UNKNOWN");
  EXPECT_EQ(check_new_binding(binding(res::topic, "t", pat::match)).error(),
            "Invalid patternType MATCH");
  EXPECT_EQ(check_new_binding(binding(res::topic, "t", pat::any)).error(),
            "Invalid patternType ANY");
  EXPECT_EQ(check_new_binding(binding(res::topic, "t", pat::unknown)).error(),
            "Invalid patternType UNKNOWN");
  EXPECT_EQ(
      check_new_binding(binding(res::topic, "t", pat::literal, "User:a", "*", op::any)).error(),
      "Invalid operation ANY");
  EXPECT_EQ(
      check_new_binding(binding(res::topic, "t", pat::literal, "User:a", "*", op::unknown)).error(),
      "Invalid operation UNKNOWN");
  EXPECT_EQ(
      check_new_binding(binding(res::topic, "t", pat::literal, "User:a", "*", op::read, perm::any))
          .error(),
      "Invalid permissionType ANY");
  EXPECT_EQ(check_new_binding(
                binding(res::topic, "t", pat::literal, "User:a", "*", op::read, perm::unknown))
                .error(),
            "Invalid permissionType UNKNOWN");
}

TEST(CheckNewBinding, RefusesAPrincipalWithoutColon) {
  auto r = check_new_binding(binding(res::topic, "t", pat::literal, "alice"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(),
            "Could not parse principal from `alice` (no colon is present separating the "
            "principal type from the principal name)");
  EXPECT_FALSE(check_new_binding(binding(res::topic, "t", pat::literal, "")));
}

TEST(AclBinding, IsUnknownWhenAFieldIs) {
  EXPECT_FALSE(binding(res::topic, "t", pat::literal).is_unknown());
  EXPECT_FALSE(binding(res::any, "t", pat::any).is_unknown());
  EXPECT_TRUE(binding(res::unknown, "t", pat::literal).is_unknown());
  EXPECT_TRUE(binding(res::topic, "t", pat::unknown).is_unknown());
  EXPECT_TRUE(binding(res::topic, "t", pat::literal, "User:a", "*", op::unknown).is_unknown());
  EXPECT_TRUE(
      binding(res::topic, "t", pat::literal, "User:a", "*", op::read, perm::unknown).is_unknown());
}

TEST(AclBindingFilter, AnyMatchesEveryAcl) {
  acl_binding_filter any;
  EXPECT_TRUE(any.matches(binding(res::topic, "t", pat::literal)));
  EXPECT_TRUE(any.matches(
      binding(res::group, "g", pat::prefixed, "User:*", "1.2.3.4", op::all, perm::deny)));
  EXPECT_TRUE(any.matches(binding(res::cluster, "kafka-cluster", pat::literal)));
}

TEST(AclBindingFilter, ResourceTypeMustBeEqualUnlessAny) {
  acl_binding_filter f{.resource_type = res::group};
  EXPECT_TRUE(f.matches(binding(res::group, "g", pat::literal)));
  EXPECT_FALSE(f.matches(binding(res::topic, "g", pat::literal)));
}

TEST(AclBindingFilter, PatternAnyMatchesExactNamesOfEveryPatternType) {
  acl_binding_filter f{.resource_type = res::topic, .resource_name = "foo"};
  EXPECT_TRUE(f.matches(binding(res::topic, "foo", pat::literal)));
  EXPECT_TRUE(f.matches(binding(res::topic, "foo", pat::prefixed)));
  EXPECT_FALSE(f.matches(binding(res::topic, "*", pat::literal)));
  EXPECT_FALSE(f.matches(binding(res::topic, "f", pat::prefixed)));
  EXPECT_FALSE(f.matches(binding(res::topic, "foobar", pat::literal)));
}

TEST(AclBindingFilter, LiteralOrPrefixedMatchesThatPatternTypeAndNameExactly) {
  acl_binding_filter literal{.resource_name = "foo", .pattern_type = pat::literal};
  EXPECT_TRUE(literal.matches(binding(res::topic, "foo", pat::literal)));
  EXPECT_FALSE(literal.matches(binding(res::topic, "foo", pat::prefixed)));
  EXPECT_FALSE(literal.matches(binding(res::topic, "*", pat::literal)));
  acl_binding_filter prefixed{.resource_name = "foo", .pattern_type = pat::prefixed};
  EXPECT_TRUE(prefixed.matches(binding(res::topic, "foo", pat::prefixed)));
  EXPECT_FALSE(prefixed.matches(binding(res::topic, "fo", pat::prefixed)));
  EXPECT_FALSE(prefixed.matches(binding(res::topic, "foo", pat::literal)));
  // Without a name, every ACL of the pattern type.
  acl_binding_filter all_prefixed{.pattern_type = pat::prefixed};
  EXPECT_TRUE(all_prefixed.matches(binding(res::group, "x", pat::prefixed)));
  EXPECT_FALSE(all_prefixed.matches(binding(res::group, "x", pat::literal)));
}

TEST(AclBindingFilter, MatchSelectsEveryAclThatAppliesToTheName) {
  acl_binding_filter f{
      .resource_type = res::topic, .resource_name = "foobar", .pattern_type = pat::match};
  EXPECT_TRUE(f.matches(binding(res::topic, "foobar", pat::literal)));
  EXPECT_TRUE(f.matches(binding(res::topic, "*", pat::literal)));
  EXPECT_TRUE(f.matches(binding(res::topic, "foo", pat::prefixed)));
  EXPECT_TRUE(f.matches(binding(res::topic, "foobar", pat::prefixed)));
  EXPECT_FALSE(f.matches(binding(res::topic, "foo", pat::literal)));
  EXPECT_FALSE(f.matches(binding(res::topic, "foobarbaz", pat::prefixed)));
  EXPECT_FALSE(f.matches(binding(res::topic, "*", pat::prefixed)));
  EXPECT_FALSE(f.matches(binding(res::group, "foobar", pat::literal)));
  // Without a name, MATCH is ANY.
  acl_binding_filter unnamed{.pattern_type = pat::match};
  EXPECT_TRUE(unnamed.matches(binding(res::topic, "x", pat::prefixed)));
}

TEST(AclBindingFilter, EntryFieldsCompareExactly) {
  auto acl = binding(res::topic, "t", pat::literal, "User:*", "*", op::read, perm::allow);
  EXPECT_TRUE(acl_binding_filter{.principal = "User:*"}.matches(acl));
  EXPECT_FALSE(acl_binding_filter{.principal = "User:alice"}.matches(acl));
  EXPECT_TRUE(acl_binding_filter{.host = "*"}.matches(acl));
  EXPECT_FALSE(acl_binding_filter{.host = "10.0.0.1"}.matches(acl));
  EXPECT_TRUE(acl_binding_filter{.operation = op::read}.matches(acl));
  // No implied operations, and ALL is only the ACLs of ALL.
  EXPECT_FALSE(acl_binding_filter{.operation = op::describe}.matches(acl));
  EXPECT_FALSE(acl_binding_filter{.operation = op::all}.matches(acl));
  EXPECT_TRUE(acl_binding_filter{.permission_type = perm::allow}.matches(acl));
  EXPECT_FALSE(acl_binding_filter{.permission_type = perm::deny}.matches(acl));
  auto alice = binding(res::topic, "t", pat::literal, "User:alice");
  EXPECT_FALSE(acl_binding_filter{.principal = "User:*"}.matches(alice));
}

TEST(CheckFilter, RefusesUnknownValuesOnly) {
  EXPECT_TRUE(check_filter(acl_binding_filter{}));
  EXPECT_TRUE(check_filter(acl_binding_filter{.pattern_type = pat::match}));
  EXPECT_EQ(check_filter(acl_binding_filter{.resource_type = res::unknown}).error(),
            "Unknown patternFilter.");
  EXPECT_EQ(check_filter(acl_binding_filter{.pattern_type = pat::unknown}).error(),
            "Unknown patternFilter.");
  EXPECT_EQ(check_filter(acl_binding_filter{.operation = op::unknown}).error(),
            "Unknown entryFilter.");
  EXPECT_EQ(check_filter(acl_binding_filter{.permission_type = perm::unknown}).error(),
            "Unknown entryFilter.");
  EXPECT_TRUE(acl_binding_filter{.operation = op::unknown}.is_unknown());
  EXPECT_FALSE(acl_binding_filter{}.is_unknown());
}

TEST(SupportedOperations, AreKafkasPerResourceType) {
  auto has = [](res t, op o) {
    auto ops = supported_operations(t);
    return std::find(ops.begin(), ops.end(), o) != ops.end();
  };
  EXPECT_EQ(supported_operations(res::topic).size(), 8U);
  EXPECT_TRUE(has(res::topic, op::alter_configs));
  EXPECT_FALSE(has(res::topic, op::all));
  EXPECT_EQ(supported_operations(res::group).size(), 5U);
  EXPECT_FALSE(has(res::group, op::write));
  EXPECT_EQ(supported_operations(res::cluster).size(), 7U);
  EXPECT_TRUE(has(res::cluster, op::idempotent_write));
  EXPECT_FALSE(has(res::cluster, op::read));
  EXPECT_EQ(supported_operations(res::transactional_id).size(), 3U);
  EXPECT_EQ(supported_operations(res::delegation_token).size(), 1U);
  EXPECT_EQ(supported_operations(res::user).size(), 2U);
  EXPECT_TRUE(supported_operations(res::any).empty());
}

}  // namespace
}  // namespace silt::security
