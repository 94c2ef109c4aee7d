#include "security/acl.h"

#include <array>

namespace silt::security {

acl_resource_type resource_type_from_code(int8_t code) {
  return code >= 0 && code <= 7 ? static_cast<acl_resource_type>(code) : acl_resource_type::unknown;
}

acl_pattern_type pattern_type_from_code(int8_t code) {
  return code >= 0 && code <= 4 ? static_cast<acl_pattern_type>(code) : acl_pattern_type::unknown;
}

acl_operation operation_from_code(int8_t code) {
  return code >= 0 && code <= 15 ? static_cast<acl_operation>(code) : acl_operation::unknown;
}

acl_permission_type permission_type_from_code(int8_t code) {
  return code >= 0 && code <= 3 ? static_cast<acl_permission_type>(code)
                                : acl_permission_type::unknown;
}

std::string_view to_string(acl_resource_type t) {
  switch (t) {
    case acl_resource_type::unknown:
      return "UNKNOWN";
    case acl_resource_type::any:
      return "ANY";
    case acl_resource_type::topic:
      return "TOPIC";
    case acl_resource_type::group:
      return "GROUP";
    case acl_resource_type::cluster:
      return "CLUSTER";
    case acl_resource_type::transactional_id:
      return "TRANSACTIONAL_ID";
    case acl_resource_type::delegation_token:
      return "DELEGATION_TOKEN";
    case acl_resource_type::user:
      return "USER";
  }
  return "UNKNOWN";
}

std::string_view to_string(acl_pattern_type t) {
  switch (t) {
    case acl_pattern_type::unknown:
      return "UNKNOWN";
    case acl_pattern_type::any:
      return "ANY";
    case acl_pattern_type::match:
      return "MATCH";
    case acl_pattern_type::literal:
      return "LITERAL";
    case acl_pattern_type::prefixed:
      return "PREFIXED";
  }
  return "UNKNOWN";
}

std::string_view to_string(acl_operation o) {
  switch (o) {
    case acl_operation::unknown:
      return "UNKNOWN";
    case acl_operation::any:
      return "ANY";
    case acl_operation::all:
      return "ALL";
    case acl_operation::read:
      return "READ";
    case acl_operation::write:
      return "WRITE";
    case acl_operation::create:
      return "CREATE";
    case acl_operation::delete_:
      return "DELETE";
    case acl_operation::alter:
      return "ALTER";
    case acl_operation::describe:
      return "DESCRIBE";
    case acl_operation::cluster_action:
      return "CLUSTER_ACTION";
    case acl_operation::describe_configs:
      return "DESCRIBE_CONFIGS";
    case acl_operation::alter_configs:
      return "ALTER_CONFIGS";
    case acl_operation::idempotent_write:
      return "IDEMPOTENT_WRITE";
    case acl_operation::create_tokens:
      return "CREATE_TOKENS";
    case acl_operation::describe_tokens:
      return "DESCRIBE_TOKENS";
    case acl_operation::two_phase_commit:
      return "TWO_PHASE_COMMIT";
  }
  return "UNKNOWN";
}

std::string_view to_string(acl_permission_type p) {
  switch (p) {
    case acl_permission_type::unknown:
      return "UNKNOWN";
    case acl_permission_type::any:
      return "ANY";
    case acl_permission_type::deny:
      return "DENY";
    case acl_permission_type::allow:
      return "ALLOW";
  }
  return "UNKNOWN";
}

std::optional<principal_parts> parse_principal(std::string_view text) {
  auto colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  return principal_parts{text.substr(0, colon), text.substr(colon + 1)};
}

bool acl_binding::is_unknown() const {
  return resource_type == acl_resource_type::unknown || pattern_type == acl_pattern_type::unknown ||
         operation == acl_operation::unknown || permission_type == acl_permission_type::unknown;
}

tl::expected<void, std::string> check_new_binding(const acl_binding& b) {
  // AclApis.handleCreateAcls, on the broker that received the request.
  if (b.resource_type == acl_resource_type::cluster && b.resource_name != cluster_resource_name) {
    return tl::unexpected("The only valid name for the CLUSTER resource is " +
                          std::string(cluster_resource_name));
  }
  if (b.resource_name.empty()) return tl::unexpected(std::string("Invalid empty resource name"));
  // AclControlManager.validateNewAcl, on the controller.
  if (b.resource_type == acl_resource_type::unknown || b.resource_type == acl_resource_type::any) {
    return tl::unexpected("Invalid resourceType " + std::string(to_string(b.resource_type)));
  }
  if (b.pattern_type != acl_pattern_type::literal && b.pattern_type != acl_pattern_type::prefixed) {
    return tl::unexpected("Invalid patternType " + std::string(to_string(b.pattern_type)));
  }
  if (b.operation == acl_operation::unknown || b.operation == acl_operation::any) {
    return tl::unexpected("Invalid operation " + std::string(to_string(b.operation)));
  }
  if (b.permission_type != acl_permission_type::allow &&
      b.permission_type != acl_permission_type::deny) {
    return tl::unexpected("Invalid permissionType " + std::string(to_string(b.permission_type)));
  }
  if (!parse_principal(b.principal)) {
    return tl::unexpected("Could not parse principal from `" + b.principal +
                          "` (no colon is present separating the principal type from the "
                          "principal name)");
  }
  return {};
}

bool acl_binding_filter::matches(const acl_binding& b) const {
  // ResourcePatternFilter.matches
  if (resource_type != acl_resource_type::any && resource_type != b.resource_type) return false;
  if (pattern_type != acl_pattern_type::any && pattern_type != acl_pattern_type::match &&
      pattern_type != b.pattern_type) {
    return false;
  }
  if (resource_name) {
    if (pattern_type == acl_pattern_type::any || pattern_type == b.pattern_type) {
      if (*resource_name != b.resource_name) return false;
    } else {
      // MATCH: the ACLs that apply to the resource named `resource_name`.
      switch (b.pattern_type) {
        case acl_pattern_type::literal:
          if (*resource_name != b.resource_name && b.resource_name != acl_wildcard) return false;
          break;
        case acl_pattern_type::prefixed:
          if (!std::string_view(*resource_name).starts_with(b.resource_name)) return false;
          break;
        default:
          // Kafka throws (an ACL of another pattern type cannot exist).
          return false;
      }
    }
  }
  // AccessControlEntryFilter.matches
  if (principal && *principal != b.principal) return false;
  if (host && *host != b.host) return false;
  if (operation != acl_operation::any && operation != b.operation) return false;
  return permission_type == acl_permission_type::any || permission_type == b.permission_type;
}

bool acl_binding_filter::is_unknown() const {
  return resource_type == acl_resource_type::unknown || pattern_type == acl_pattern_type::unknown ||
         operation == acl_operation::unknown || permission_type == acl_permission_type::unknown;
}

tl::expected<void, std::string> check_filter(const acl_binding_filter& f) {
  if (f.resource_type == acl_resource_type::unknown ||
      f.pattern_type == acl_pattern_type::unknown) {
    return tl::unexpected(std::string("Unknown patternFilter."));
  }
  if (f.operation == acl_operation::unknown || f.permission_type == acl_permission_type::unknown) {
    return tl::unexpected(std::string("Unknown entryFilter."));
  }
  return {};
}

std::span<const acl_operation> supported_operations(acl_resource_type t) {
  using op = acl_operation;
  static constexpr std::array topic = {
      op::read,    op::write, op::create,           op::describe,
      op::delete_, op::alter, op::describe_configs, op::alter_configs};
  static constexpr std::array group = {op::read, op::describe, op::delete_, op::describe_configs,
                                       op::alter_configs};
  static constexpr std::array cluster = {
      op::create,           op::cluster_action, op::describe_configs, op::alter_configs,
      op::idempotent_write, op::alter,          op::describe};
  static constexpr std::array transactional_id = {op::describe, op::write, op::two_phase_commit};
  static constexpr std::array delegation_token = {op::describe};
  static constexpr std::array user = {op::create_tokens, op::describe_tokens};
  switch (t) {
    case acl_resource_type::topic:
      return topic;
    case acl_resource_type::group:
      return group;
    case acl_resource_type::cluster:
      return cluster;
    case acl_resource_type::transactional_id:
      return transactional_id;
    case acl_resource_type::delegation_token:
      return delegation_token;
    case acl_resource_type::user:
      return user;
    case acl_resource_type::unknown:
    case acl_resource_type::any:
      return {};
  }
  return {};
}

}  // namespace silt::security
