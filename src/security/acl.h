// Kafka's access control lists as data: the resource types, pattern types, operations and
// permissions with their wire codes, a binding (one ACL: who may or may not do what on which
// resources, from where) and a binding filter (what DescribeAcls and DeleteAcls select with),
// with Kafka's rules for matching a filter and for refusing a new ACL. Pure values and
// functions, no state; the authorizer (authorizer.h) is what applies ACLs to requests.
//
// Kafka's sources these follow: clients/.../common/acl/ (AclOperation, AclPermissionType,
// AclBinding, AclBindingFilter, AccessControlEntryFilter), clients/.../common/resource/
// (ResourceType, PatternType, ResourcePatternFilter), core/.../server/AclApis.scala and
// metadata/.../controller/AclControlManager.java (what CreateAcls refuses), Kafka 4.1.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace silt::security {

// The kinds of resources ACLs name, with Kafka's codes (ResourceType). `unknown` is what a code
// Kafka does not define reads as; `any` is for filters only.
enum class acl_resource_type : int8_t {
  unknown = 0,
  any = 1,
  topic = 2,
  group = 3,
  cluster = 4,
  transactional_id = 5,
  delegation_token = 6,
  user = 7,
};

// How an ACL's resource name applies (PatternType): `literal` names one resource (or all of
// them with the name "*"), `prefixed` every resource whose name starts with it. `any` and
// `match` are for filters only (see acl_binding_filter).
enum class acl_pattern_type : int8_t {
  unknown = 0,
  any = 1,
  match = 2,
  literal = 3,
  prefixed = 4,
};

// What an ACL allows or denies (AclOperation). `all` in an ACL stands for every operation;
// `any` is for filters only. two_phase_commit is Kafka 4.1's (KIP-939), on TRANSACTIONAL_ID.
enum class acl_operation : int8_t {
  unknown = 0,
  any = 1,
  all = 2,
  read = 3,
  write = 4,
  create = 5,
  delete_ = 6,  // Kafka's DELETE (`delete` is a C++ keyword)
  alter = 7,
  describe = 8,
  cluster_action = 9,
  describe_configs = 10,
  alter_configs = 11,
  idempotent_write = 12,
  create_tokens = 13,
  describe_tokens = 14,
  two_phase_commit = 15,
};

// AclPermissionType: `any` is for filters only.
enum class acl_permission_type : int8_t {
  unknown = 0,
  any = 1,
  deny = 2,
  allow = 3,
};

// The values of wire codes, as Kafka's fromCode: a code Kafka does not define is `unknown`.
[[nodiscard]] acl_resource_type resource_type_from_code(int8_t code);
[[nodiscard]] acl_pattern_type pattern_type_from_code(int8_t code);
[[nodiscard]] acl_operation operation_from_code(int8_t code);
[[nodiscard]] acl_permission_type permission_type_from_code(int8_t code);

// Kafka's names of the values ("TOPIC", "PREFIXED", "DESCRIBE_CONFIGS", "ALLOW"), as its
// messages and logs print them.
[[nodiscard]] std::string_view to_string(acl_resource_type t);
[[nodiscard]] std::string_view to_string(acl_pattern_type t);
[[nodiscard]] std::string_view to_string(acl_operation o);
[[nodiscard]] std::string_view to_string(acl_permission_type p);

// The one name of the CLUSTER resource.
inline constexpr std::string_view cluster_resource_name = "kafka-cluster";
// A literal resource name, or a host, that matches every one.
inline constexpr std::string_view acl_wildcard = "*";
// The principal of ACLs that apply to every principal (whatever its type).
inline constexpr std::string_view acl_wildcard_principal = "User:*";

// A principal as ACLs and super.users write it, "Type:name", split at the first ':' as Kafka
// does: "User:CN=a,O=b" is the User "CN=a,O=b", "User:a:b" the User "a:b". The views point into
// the parsed text.
struct principal_parts {
  std::string_view type;
  std::string_view name;
  bool operator==(const principal_parts&) const = default;
};

// The principal `text` names, or none when it has no ':' (Kafka refuses such ACLs and
// super.users entries). Either part may be empty, as in Kafka.
[[nodiscard]] std::optional<principal_parts> parse_principal(std::string_view text);

// One ACL: `principal` connecting from `host` is allowed (or denied) `operation` on the
// resources of `resource_type` that `resource_name` and `pattern_type` select. Two bindings
// that are equal field by field are the same ACL (Kafka keeps one).
struct acl_binding {
  acl_resource_type resource_type = acl_resource_type::unknown;
  std::string resource_name;
  acl_pattern_type pattern_type = acl_pattern_type::unknown;
  std::string principal;  // "User:alice", or acl_wildcard_principal
  std::string host;       // a client address as Kafka prints it (see authorizer.h), or "*"
  acl_operation operation = acl_operation::unknown;
  acl_permission_type permission_type = acl_permission_type::unknown;

  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  auto operator<=>(const acl_binding&) const = default;
  bool operator==(const acl_binding&) const = default;
  // Whether a field is `unknown` (Kafka's AclBinding.isUnknown).
  [[nodiscard]] bool is_unknown() const;
};

// Why CreateAcls refuses `b` (the client gets INVALID_REQUEST with this message), or nothing
// when it can be created: a CLUSTER resource named other than "kafka-cluster" or an empty name
// (AclApis, on the broker), then an unknown or `any` resource type, a pattern type other than
// LITERAL or PREFIXED, an unknown or `any` operation, a permission other than ALLOW or DENY, a
// principal without ':' (AclControlManager.validateNewAcl). Nothing else is checked, as in
// Kafka: a PREFIXED "*" is a valid ACL (it matches names that start with '*'), the principal
// type may be anything ("Group:x" is accepted, and only ever matches a principal of that type),
// the host is not parsed (an ACL for "localhost" or "::1" never matches: see authorizer.h).
// Note that a Kafka broker refuses some of these earlier and otherwise (see
// docs/acls-table.md, CreateAcls): an `unknown` value fails the request's parsing and closes
// the connection, an `any`/`match` value fails the whole request.
[[nodiscard]] tl::expected<void, std::string> check_new_binding(const acl_binding& b);

// What DescribeAcls and DeleteAcls select ACLs with. A field that is none (a null string on
// the wire) or `any` matches every value. Names, principals and hosts compare exactly: the
// principal filter "User:*" selects the ACLs of the wildcard principal, not every ACL, and no
// operation implies another here.
struct acl_binding_filter {
  acl_resource_type resource_type = acl_resource_type::any;
  std::optional<std::string> resource_name;
  // `any`: ACLs of every pattern type whose name is exactly `resource_name`;
  // `match`: every ACL that applies to the resource named `resource_name`: LITERAL ACLs of that
  //   name or of "*", PREFIXED ACLs whose name is a prefix of it;
  // `literal` or `prefixed`: ACLs of that pattern type and exactly that name.
  acl_pattern_type pattern_type = acl_pattern_type::any;
  std::optional<std::string> principal;
  std::optional<std::string> host;
  acl_operation operation = acl_operation::any;
  acl_permission_type permission_type = acl_permission_type::any;

  // Whether `b` is one the filter selects (AclBindingFilter.matches).
  [[nodiscard]] bool matches(const acl_binding& b) const;
  // Whether a field is `unknown` (Kafka's AclBindingFilter.isUnknown).
  [[nodiscard]] bool is_unknown() const;
};

// Why DeleteAcls refuses `f` (INVALID_REQUEST with this message), or nothing
// (AclControlManager.validateFilter: an unknown resource type, pattern type, operation or
// permission). Every other filter is valid, ANY everywhere included (it deletes every ACL).
[[nodiscard]] tl::expected<void, std::string> check_filter(const acl_binding_filter& f);

// The operations an ACL on a resource of type `t` is meaningful for, in Kafka's
// AclEntry.supportedOperations: what authorized_operations (authorizer.h) reports on. Empty for
// `unknown` and `any`.
[[nodiscard]] std::span<const acl_operation> supported_operations(acl_resource_type t);

}  // namespace silt::security
