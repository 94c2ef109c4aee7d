// The authorizer: whether a principal may do an operation on a resource, under a set of ACLs
// (acl.h), super.users and allow.everyone.if.no.acl.found, with the semantics of Kafka's
// StandardAuthorizer (metadata/.../authorizer/StandardAuthorizerData.java, Kafka 4.1):
//
// 1. A super user (its "Type:name" is one of super.users) may do everything, whatever the ACLs.
// 2. The ACLs that apply to a resource are the LITERAL ACLs of its name, the LITERAL ACLs of
//    "*", and the PREFIXED ACLs whose name is a prefix of its name (of its resource type).
// 3. Of these, an ACL matches the request when its principal is the client's (type and name,
//    exactly) or "User:*" (every principal, of any type), its host is the client's address or
//    "*", and its operation is the one asked for, or ALL, or, for an ALLOW ACL only, one that
//    implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS implies
//    DESCRIBE_CONFIGS. (A DENY of READ does not deny DESCRIBE; a DENY of ALL denies everything.)
// 4. A matching DENY refuses, whatever matching ALLOWs there are; else a matching ALLOW allows.
// 5. Else, when no ACL at all applies to the resource (rule 2, whatever their principal, host,
//    operation or permission), allow.everyone.if.no.acl.found decides; when some ACL applies to
//    it but none matches, the request is refused.
//
// Threading: an authorizer is shared by every thread. Readers (the handlers, on the network
// threads) take a snapshot, an immutable acl_snapshot held by shared_ptr, and ask it; taking one
// copies a pointer under a mutex that nothing holds longer than a pointer swap, so it never
// waits for a writer to build the next snapshot. Writers (whatever loads and changes the ACLs)
// are serialised among themselves, build a whole new snapshot next to the current one and
// publish it; a request that took the previous one finishes with it. (Not an
// std::atomic<std::shared_ptr>: libstdc++ 12 guards it with a lock bit ThreadSanitizer does not
// see, and it would not spare readers more than this mutex does.)
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

#include "base/mutex.h"
#include "security/acl.h"

namespace silt::security {

// Who asks, as a request's connection knows it (net/principal.h: client_identity).
struct acl_subject {
  std::string_view principal_type;  // "User"
  std::string_view principal_name;  // "alice", "ANONYMOUS"
  // The client's address as Kafka prints it, which is what ACL hosts are compared with:
  // kafka_host_address of the peer's IP.
  std::string_view host;
};

// The text Kafka's authorizer compares ACL hosts with for a client at `address` (4 bytes for
// IPv4, 16 for IPv6, network order): Java's InetAddress.getHostAddress of the peer address.
// IPv4 is dotted decimal ("10.0.0.7"); an IPv4-mapped IPv6 address (a dual-stack socket's IPv4
// client, ::ffff:10.0.0.7) is its IPv4 address, as Java reads it; other IPv6 addresses are
// eight groups of lower-case hex without leading zeros and with no "::" compression
// ("0:0:0:0:0:0:0:1", "fe80:0:0:0:0:0:0:1"), followed by "%<scope_id>" when the scope id is
// not 0 (a link-local address). So an ACL for host "::1" or "localhost" never matches. Any
// other length of `address` is a programmer error.
[[nodiscard]] std::string kafka_host_address(std::span<const uint8_t> address,
                                             uint32_t scope_id = 0);

// The settings of authorization.
struct authorizer_options {
  // super.users: principals ("User:admin") allowed everything; compared with the client's
  // "Type:name" as written.
  std::vector<std::string> super_users;
  // allow.everyone.if.no.acl.found: what is answered for a resource no ACL applies to.
  bool allow_everyone_if_no_acl_found = false;
};

// super.users as Kafka reads it: entries separated by ';', each trimmed (of whitespace and
// control characters, as Java's String.trim), empty ones skipped; an entry without ':' is an
// error (Kafka's message says which). Duplicates are dropped.
[[nodiscard]] tl::expected<std::vector<std::string>, std::string> parse_super_users(
    std::string_view value);

// One immutable state of authorization: the settings and the ACLs, indexed. Thread-safe (it
// never changes). What a handler holds for the duration of a request, so that every check of
// the request sees the same ACLs.
class acl_snapshot {
 public:
  // `bindings` that check_new_binding refuses are kept (acls() lists them) but apply to nothing.
  acl_snapshot(authorizer_options options, std::set<acl_binding> bindings);

  // Whether `who` may do `operation` on the resource of type `type` named `name` (rules 1-5
  // above). `type` is a concrete type and `operation` a concrete operation (not ANY, UNKNOWN).
  // Cost: a few map lookups, plus one per PREFIXED ACL whose name is a prefix of `name` and per
  // character of `name` at worst, and a look at each ACL of `who` or User:* on the resource
  // names that apply; never a scan of the ACLs, nor of the other principals' on the resource.
  [[nodiscard]] bool authorize(const acl_subject& who, acl_operation operation,
                               acl_resource_type type, std::string_view name) const;

  // Whether `who` may do `operation` on at least one resource of type `type`, as Kafka's
  // Authorizer.authorizeByResourceType, which Kafka asks for an idempotent producer's
  // InitProducerId (WRITE on some TOPIC, failing IDEMPOTENT_WRITE on the CLUSTER): true for a
  // super user, or when authorize() allows a resource named "hardcode" (so also under
  // allow.everyone.if.no.acl.found when no ACL applies to that name); else true when one of
  // `who`'s ACLs of that type for `operation` or ALL (no implied operations here) allows a
  // LITERAL name that no DENY of that name nor PREFIXED DENY of a prefix of it denies, or a
  // PREFIXED name no PREFIXED DENY of a prefix of it (itself included) denies, or allows "*";
  // a DENY of "*" refuses at once. Scans the ACLs of `type`: for rare requests only.
  [[nodiscard]] bool authorize_any(const acl_subject& who, acl_operation operation,
                                   acl_resource_type type) const;

  // The operations of supported_operations(type) that authorize() allows on the resource,
  // as the bit field of the *_authorized_operations fields (bit n set for the operation of code
  // n): DescribeGroups, Metadata, DescribeCluster, ConsumerGroupDescribe,
  // DescribeTopicPartitions.
  [[nodiscard]] int32_t authorized_operations(const acl_subject& who, acl_resource_type type,
                                              std::string_view name) const;

  // The ACLs `filter` selects, in a stable order (DescribeAcls; DeleteAcls removes these).
  [[nodiscard]] std::vector<acl_binding> acls(const acl_binding_filter& filter) const;
  [[nodiscard]] const std::set<acl_binding>& bindings() const { return bindings_; }
  [[nodiscard]] const authorizer_options& options() const { return options_; }

 private:
  // An ACL as the index holds it, its resource left out (the index key says it).
  struct rule {
    std::string principal_type;
    std::string principal_name;
    std::string host;
    acl_operation operation;
    acl_permission_type permission_type;
  };
  // The ACLs of one resource name (and pattern type) by principal, type then name: a check
  // reads the client's and User:*'s, however many other principals the resource has ACLs for.
  using principal_key = std::pair<std::string, std::string>;
  struct principal_less {
    using is_transparent = void;
    using key_view = std::pair<std::string_view, std::string_view>;
    static key_view view(const principal_key& k) { return {k.first, k.second}; }
    static key_view view(const key_view& k) { return k; }
    bool operator()(const auto& a, const auto& b) const { return view(a) < view(b); }
  };
  using rules = std::map<principal_key, std::vector<rule>, principal_less>;
  // The ACLs of one resource type: LITERAL ones ("*" included) and PREFIXED ones by name.
  // Sorted maps: a PREFIXED lookup walks back from the name (see matching_prefixes).
  struct type_index {
    std::map<std::string, rules, std::less<>> literal;
    std::map<std::string, rules, std::less<>> prefixed;
  };

  [[nodiscard]] bool is_super_user(const acl_subject& who) const;
  [[nodiscard]] const type_index* index_of(acl_resource_type type) const;
  // Calls `visit` with the rules of every PREFIXED ACL whose name is a prefix of `name`; stops
  // when `visit` returns false.
  template <typename Visit>
  static void matching_prefixes(const type_index& index, std::string_view name, Visit&& visit);

  authorizer_options options_;
  std::set<acl_binding> bindings_;
  // By resource type code (topic = 2 ... user = 7); the others have no ACLs.
  std::array<type_index, 8> index_;
};

// The current authorization state and its changes. Thread-safe; see the file comment.
class authorizer {
 public:
  explicit authorizer(authorizer_options options = {}, std::vector<acl_binding> bindings = {});

  // The current state, for one request. Never waits for a writer to build a snapshot.
  [[nodiscard]] std::shared_ptr<const acl_snapshot> snapshot() const EXCLUDES(current_mu_) {
    base::lock_guard lock(current_mu_);
    return current_;
  }

  // Shorthands on the current snapshot, for a single check.
  [[nodiscard]] bool authorize(const acl_subject& who, acl_operation operation,
                               acl_resource_type type, std::string_view name) const {
    return snapshot()->authorize(who, operation, type, name);
  }

  // Replaces every ACL (a load from the store). Duplicates count once.
  void replace(std::vector<acl_binding> bindings) EXCLUDES(write_mu_);
  // Removes `removed` (those that are there), then adds `added` (those that are not), in one
  // new snapshot: CreateAcls and DeleteAcls once stored, or changes another broker made.
  void apply(std::span<const acl_binding> added, std::span<const acl_binding> removed)
      EXCLUDES(write_mu_);
  // New settings (super.users, allow.everyone.if.no.acl.found), the ACLs kept.
  void configure(authorizer_options options) EXCLUDES(write_mu_);

 private:
  // Makes `next` the current snapshot (the caller holds write_mu_); the previous one is
  // released after current_mu_, by whoever holds it last.
  void publish(std::shared_ptr<const acl_snapshot> next) REQUIRES(write_mu_) EXCLUDES(current_mu_);

  // Serialises writers: each builds on the snapshot the previous one published. Held while a
  // snapshot is built; readers never take it.
  base::mutex write_mu_;
  // Guards current_ for the time of a copy or a swap only.
  mutable base::mutex current_mu_;
  std::shared_ptr<const acl_snapshot> current_ GUARDED_BY(current_mu_);
};

}  // namespace silt::security
