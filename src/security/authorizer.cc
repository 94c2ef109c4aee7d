#include "security/authorizer.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <utility>

namespace silt::security {

namespace {

// The resource Kafka's authorizeByResourceType first asks about (Authorizer.java).
constexpr std::string_view by_type_probe_name = "hardcode";

[[maybe_unused]] bool is_concrete(acl_resource_type t) {
  return t != acl_resource_type::unknown && t != acl_resource_type::any;
}

[[maybe_unused]] bool is_concrete(acl_operation o) {
  return o != acl_operation::unknown && o != acl_operation::any;
}

// Java's String.trim: strips characters up to U+0020 from both ends.
std::string_view java_trim(std::string_view s) {
  while (!s.empty() && static_cast<unsigned char>(s.front()) <= ' ') s.remove_prefix(1);
  while (!s.empty() && static_cast<unsigned char>(s.back()) <= ' ') s.remove_suffix(1);
  return s;
}

size_t common_prefix_length(std::string_view a, std::string_view b) {
  auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<size_t>(ia - a.begin());
}

}  // namespace

std::string kafka_host_address(std::span<const uint8_t> address, uint32_t scope_id) {
  assert(address.size() == 4 || address.size() == 16);
  auto dotted = [](std::span<const uint8_t> a) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", a[0], a[1], a[2], a[3]);
    return std::string(buf);
  };
  if (address.size() == 4) return dotted(address);
  // Java turns an IPv4-mapped address (::ffff:a.b.c.d) into the IPv4 address it maps.
  static constexpr std::array<uint8_t, 12> mapped_prefix = {0, 0, 0, 0, 0,    0,
                                                            0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(mapped_prefix.begin(), mapped_prefix.end(), address.begin())) {
    return dotted(address.subspan(12));
  }
  std::string text;
  text.reserve(48);
  char buf[8];
  for (size_t i = 0; i < 8; ++i) {
    unsigned group = (static_cast<unsigned>(address[2 * i]) << 8) | address[2 * i + 1];
    std::snprintf(buf, sizeof buf, i == 0 ? "%x" : ":%x", group);
    text += buf;
  }
  if (scope_id != 0) text += "%" + std::to_string(scope_id);
  return text;
}

tl::expected<std::vector<std::string>, std::string> parse_super_users(std::string_view value) {
  std::vector<std::string> users;
  while (true) {
    auto semicolon = value.find(';');
    std::string_view entry = java_trim(value.substr(0, semicolon));
    if (!entry.empty()) {
      if (!parse_principal(entry)) {
        return tl::unexpected("expected a string in format principalType:principalName but got " +
                              std::string(entry));
      }
      if (std::find(users.begin(), users.end(), entry) == users.end()) users.emplace_back(entry);
    }
    if (semicolon == std::string_view::npos) break;
    value.remove_prefix(semicolon + 1);
  }
  return users;
}

acl_snapshot::acl_snapshot(authorizer_options options, std::set<acl_binding> bindings)
    : options_(std::move(options)), bindings_(std::move(bindings)) {
  for (const auto& b : bindings_) {
    if (!check_new_binding(b)) continue;
    auto principal = parse_principal(b.principal);
    auto& index = index_[static_cast<size_t>(b.resource_type)];
    auto& by_name = b.pattern_type == acl_pattern_type::literal ? index.literal : index.prefixed;
    by_name[b.resource_name][{std::string(principal->type), std::string(principal->name)}]
        .push_back(rule{
            .principal_type = std::string(principal->type),
            .principal_name = std::string(principal->name),
            .host = b.host,
            .operation = b.operation,
            .permission_type = b.permission_type,
        });
  }
}

bool acl_snapshot::is_super_user(const acl_subject& who) const {
  // Kafka compares the principal's toString(), "Type:name", with the configured entries.
  const size_t length = who.principal_type.size() + 1 + who.principal_name.size();
  return std::any_of(
      options_.super_users.begin(), options_.super_users.end(), [&](std::string_view su) {
        return su.size() == length && su.starts_with(who.principal_type) &&
               su[who.principal_type.size()] == ':' && su.ends_with(who.principal_name);
      });
}

const acl_snapshot::type_index* acl_snapshot::index_of(acl_resource_type type) const {
  assert(is_concrete(type));
  auto i = static_cast<size_t>(type);
  return i < index_.size() ? &index_[i] : nullptr;
}

template <typename Visit>
void acl_snapshot::matching_prefixes(const type_index& index, std::string_view name,
                                     Visit&& visit) {
  // Every PREFIXED name that is a prefix of `name` sorts at or before it. Take the greatest
  // name at or before `name`: if it is a prefix, it matches, and the other matches are prefixes
  // of it, shorter; if not, the other matches are no longer than what it shares with `name`
  // (anything longer that shares that much sorts after it or after `name`). Either way the
  // search goes on from a shorter prefix of `name`: at most one step per match or character.
  std::string_view rest = name;
  while (!rest.empty()) {
    auto it = index.prefixed.upper_bound(rest);
    if (it == index.prefixed.begin()) return;
    --it;
    std::string_view candidate = it->first;
    size_t shared = common_prefix_length(candidate, rest);
    if (shared == candidate.size()) {
      if (!visit(it->second)) return;
      if (candidate.empty()) return;
      rest = rest.substr(0, candidate.size() - 1);
    } else {
      rest = rest.substr(0, shared);
    }
  }
}

namespace {

enum class verdict : uint8_t { none, allowed, denied };

// What ACL rule `r` says about `operation` for `who`, resource aside
// (StandardAuthorizerData.findResult).
template <typename Rule>
verdict find_result(const Rule& r, const acl_subject& who, acl_operation operation) {
  bool principal_matches =
      (r.principal_type == who.principal_type && r.principal_name == who.principal_name) ||
      (r.principal_type == "User" && r.principal_name == acl_wildcard);
  if (!principal_matches) return verdict::none;
  if (r.host != acl_wildcard && r.host != who.host) return verdict::none;
  if (r.operation != acl_operation::all) {
    if (r.permission_type == acl_permission_type::allow) {
      // Only ALLOW ACLs imply operations.
      switch (operation) {
        case acl_operation::describe:
          if (r.operation != acl_operation::describe && r.operation != acl_operation::read &&
              r.operation != acl_operation::write && r.operation != acl_operation::delete_ &&
              r.operation != acl_operation::alter) {
            return verdict::none;
          }
          break;
        case acl_operation::describe_configs:
          if (r.operation != acl_operation::describe_configs &&
              r.operation != acl_operation::alter_configs) {
            return verdict::none;
          }
          break;
        default:
          if (r.operation != operation) return verdict::none;
          break;
      }
    } else if (r.operation != operation) {
      return verdict::none;
    }
  }
  return r.permission_type == acl_permission_type::allow ? verdict::allowed : verdict::denied;
}

}  // namespace

bool acl_snapshot::authorize(const acl_subject& who, acl_operation operation,
                             acl_resource_type type, std::string_view name) const {
  assert(is_concrete(operation));
  if (is_super_user(who)) return true;
  const type_index* index = index_of(type);
  if (index == nullptr) return options_.allow_everyone_if_no_acl_found;

  bool applies = false;  // some ACL applies to the resource, whoever it is for
  bool allowed = false;
  bool denied = false;
  // False (stop) once a DENY matches. Only the client's ACLs and User:*'s can match.
  auto check = [&](const rules& rs) {
    applies = true;
    for (const principal_less::key_view& principal :
         {principal_less::key_view{who.principal_type, who.principal_name},
          principal_less::key_view{"User", acl_wildcard}}) {
      const auto it = rs.find(principal);
      if (it == rs.end()) continue;
      for (const auto& r : it->second) {
        switch (find_result(r, who, operation)) {
          case verdict::denied:
            denied = true;
            return false;
          case verdict::allowed:
            allowed = true;
            break;
          case verdict::none:
            break;
        }
      }
    }
    return true;
  };
  if (auto it = index->literal.find(name); it != index->literal.end() && !check(it->second)) {
    return false;
  }
  matching_prefixes(*index, name, check);
  if (denied) return false;
  if (name != acl_wildcard) {
    if (auto it = index->literal.find(acl_wildcard);
        it != index->literal.end() && !check(it->second)) {
      return false;
    }
  }
  if (allowed) return true;
  return applies ? false : options_.allow_everyone_if_no_acl_found;
}

bool acl_snapshot::authorize_any(const acl_subject& who, acl_operation operation,
                                 acl_resource_type type) const {
  assert(is_concrete(operation));
  // A super user, and (surprisingly) whoever may do `operation` on "hardcode".
  if (authorize(who, operation, type, by_type_probe_name)) return true;
  const type_index* index = index_of(type);
  if (index == nullptr) return false;

  std::set<std::string_view, std::less<>> deny_literal;
  std::set<std::string_view, std::less<>> deny_prefixed;
  std::vector<std::string_view> allow_literal;
  std::vector<std::string_view> allow_prefixed;
  bool wildcard_allowed = false;
  auto matches = [&](const rule& r) {
    bool principal_matches =
        (r.principal_type == who.principal_type && r.principal_name == who.principal_name) ||
        (r.principal_type == "User" && r.principal_name == acl_wildcard);
    return principal_matches && (r.host == acl_wildcard || r.host == who.host) &&
           (r.operation == operation || r.operation == acl_operation::all);
  };
  for (const auto& [name, rs] : index->literal) {
    for (const auto& by_principal : rs) {
      for (const auto& r : by_principal.second) {
        if (!matches(r)) continue;
        if (r.permission_type == acl_permission_type::deny) {
          if (name == acl_wildcard) return false;
          deny_literal.insert(name);
        } else if (name == acl_wildcard) {
          wildcard_allowed = true;
        } else {
          allow_literal.push_back(name);
        }
      }
    }
  }
  for (const auto& [name, rs] : index->prefixed) {
    for (const auto& by_principal : rs) {
      for (const auto& r : by_principal.second) {
        if (!matches(r)) continue;
        if (r.permission_type == acl_permission_type::deny) {
          deny_prefixed.insert(name);
        } else {
          allow_prefixed.push_back(name);
        }
      }
    }
  }
  if (wildcard_allowed) return true;
  // Whether a PREFIXED DENY covers every name starting with `s`.
  auto dominated = [&](std::string_view s) {
    for (size_t n = 1; n <= s.size(); ++n) {
      if (deny_prefixed.contains(s.substr(0, n))) return true;
    }
    return false;
  };
  for (std::string_view name : allow_literal) {
    if (!deny_literal.contains(name) && !dominated(name)) return true;
  }
  return std::any_of(allow_prefixed.begin(), allow_prefixed.end(),
                     [&](std::string_view name) { return !dominated(name); });
}

int32_t acl_snapshot::authorized_operations(const acl_subject& who, acl_resource_type type,
                                            std::string_view name) const {
  uint32_t bits = 0;
  for (acl_operation op : supported_operations(type)) {
    if (authorize(who, op, type, name)) bits |= 1U << static_cast<unsigned>(op);
  }
  return static_cast<int32_t>(bits);
}

std::vector<acl_binding> acl_snapshot::acls(const acl_binding_filter& filter) const {
  std::vector<acl_binding> selected;
  for (const auto& b : bindings_) {
    if (filter.matches(b)) selected.push_back(b);
  }
  return selected;
}

authorizer::authorizer(authorizer_options options, std::vector<acl_binding> bindings)
    : current_(std::make_shared<const acl_snapshot>(
          std::move(options), std::set<acl_binding>(std::make_move_iterator(bindings.begin()),
                                                    std::make_move_iterator(bindings.end())))) {}

void authorizer::publish(std::shared_ptr<const acl_snapshot> next) {
  {
    base::lock_guard lock(current_mu_);
    current_.swap(next);
  }
  // `next` now holds the previous snapshot, freed here unless a request still uses it.
}

void authorizer::replace(std::vector<acl_binding> bindings) {
  std::set<acl_binding> all(std::make_move_iterator(bindings.begin()),
                            std::make_move_iterator(bindings.end()));
  base::lock_guard lock(write_mu_);
  auto options = snapshot()->options();
  publish(std::make_shared<const acl_snapshot>(std::move(options), std::move(all)));
}

void authorizer::apply(std::span<const acl_binding> added, std::span<const acl_binding> removed) {
  base::lock_guard lock(write_mu_);
  auto now = snapshot();
  std::set<acl_binding> all = now->bindings();
  for (const auto& b : removed) all.erase(b);
  all.insert(added.begin(), added.end());
  publish(std::make_shared<const acl_snapshot>(now->options(), std::move(all)));
}

void authorizer::configure(authorizer_options options) {
  base::lock_guard lock(write_mu_);
  auto now = snapshot();
  publish(std::make_shared<const acl_snapshot>(std::move(options), now->bindings()));
}

}  // namespace silt::security
