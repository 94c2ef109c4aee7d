// What a request's principal may do: the checks of Kafka's KafkaApis (docs/acls-table.md), from
// one snapshot of the ACLs taken when the request's handling starts, so that every check of the
// request sees the same ACLs. Without an authorizer (authorizer.class.name empty) everything is
// allowed, as in Kafka.
#pragma once

#include <memory>
#include <string_view>

#include "handlers/context.h"
#include "net/server.h"
#include "security/authorizer.h"

namespace silt::handlers {

// The resource name Kafka gives the cluster.
inline constexpr std::string_view kClusterResource = "kafka-cluster";

class access {
 public:
  access(const context& ctx, const net::request& raw)
      : snapshot_(ctx.authorizer ? ctx.authorizer->snapshot() : nullptr) {
    if (raw.identity != nullptr) {
      who_ = {.principal_type = raw.identity->who.type,
              .principal_name = raw.identity->who.name,
              .host = raw.identity->host};
    }
  }

  // Whether ACLs are on.
  [[nodiscard]] bool enabled() const { return snapshot_ != nullptr; }

  [[nodiscard]] bool allowed(security::acl_operation op, security::acl_resource_type type,
                             std::string_view name) const {
    return !snapshot_ || snapshot_->authorize(who_, op, type, name);
  }
  [[nodiscard]] bool topic(security::acl_operation op, std::string_view name) const {
    return allowed(op, security::acl_resource_type::topic, name);
  }
  [[nodiscard]] bool group(security::acl_operation op, std::string_view name) const {
    return allowed(op, security::acl_resource_type::group, name);
  }
  [[nodiscard]] bool cluster(security::acl_operation op) const {
    return allowed(op, security::acl_resource_type::cluster, kClusterResource);
  }
  // Kafka's authorizeByResourceType: `op` on at least one resource of `type`.
  [[nodiscard]] bool any(security::acl_operation op, security::acl_resource_type type) const {
    return !snapshot_ || snapshot_->authorize_any(who_, op, type);
  }
  // The *_authorized_operations bit field of a resource.
  [[nodiscard]] int32_t operations(security::acl_resource_type type, std::string_view name) const;

 private:
  std::shared_ptr<const security::acl_snapshot> snapshot_;
  security::acl_subject who_{.principal_type = "User", .principal_name = "ANONYMOUS", .host = ""};
};

}  // namespace silt::handlers
