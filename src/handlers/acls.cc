// DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31): the ACLs of
// `kafka-acls.sh`, as Kafka's AclApis and AclControlManager answer them (docs/acls-table.md):
// CLUSTER DESCRIBE to read them, CLUSTER ALTER to change them, SECURITY_DISABLED without an
// authorizer. Changes are written to the metadata store (the acls table) in one transaction
// and then to this broker's authorizer; the other brokers take them in from the store.
#include <map>
#include <set>
#include <tuple>

#include "base/log.h"
#include "handlers/access.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using protocol::error_code;
using security::acl_binding;
using security::acl_binding_filter;
using security::acl_operation;
using security::acl_pattern_type;
using security::acl_permission_type;
using security::acl_resource_type;

constexpr const char* kNoAuthorizer = "No Authorizer is configured on the broker";

int16_t code(error_code e) {
  return static_cast<int16_t>(e);
}

template <typename Filter>
acl_binding_filter filter_of(const Filter& f) {
  acl_binding_filter out;
  out.resource_type = security::resource_type_from_code(f.resource_type_filter);
  out.resource_name = f.resource_name_filter;
  out.pattern_type = security::pattern_type_from_code(f.pattern_type_filter);
  out.principal = f.principal_filter;
  out.host = f.host_filter;
  out.operation = security::operation_from_code(f.operation);
  out.permission_type = security::permission_type_from_code(f.permission_type);
  return out;
}

bool is_filter_value(acl_resource_type t) {
  return t == acl_resource_type::any;
}
bool is_filter_value(acl_pattern_type t) {
  return t == acl_pattern_type::any || t == acl_pattern_type::match;
}
bool is_filter_value(acl_operation o) {
  return o == acl_operation::any;
}
bool is_filter_value(acl_permission_type p) {
  return p == acl_permission_type::any;
}

// Stores a change and applies it to this broker's authorizer. The error is for the client.
tl::expected<void, std::string> store(context& ctx, const std::vector<acl_binding>& added,
                                      const std::vector<acl_binding>& removed) {
  if (ctx.acl_store == nullptr) {
    ctx.authorizer->apply(added, removed);
    return {};
  }
  if (auto ok = ctx.acl_store->alter(added, removed, *ctx.authorizer); !ok) {
    SILT_LOG(warn, "silt: %s", ok.error().c_str());
    return tl::make_unexpected(std::string("The ACLs could not be stored; try again"));
  }
  return {};
}

}  // namespace

asio::awaitable<protocol::describe_acls_response> handle_describe_acls(
    context& ctx, const net::request& raw, const protocol::describe_acls_request& req) {
  protocol::describe_acls_response resp;
  const access a(ctx, raw);
  if (!a.enabled()) {
    resp.error_code = code(error_code::security_disabled);
    resp.error_message = kNoAuthorizer;
    co_return resp;
  }
  if (!a.cluster(acl_operation::describe)) {
    resp.error_code = code(error_code::cluster_authorization_failed);
    resp.error_message.reset();
    co_return resp;
  }
  const auto filter = filter_of(req);
  if (filter.is_unknown()) {
    resp.error_code = code(error_code::invalid_request);
    resp.error_message = "The filter holds an unknown value";
    co_return resp;
  }
  // By resource, in the order of the resource's fields, as Kafka groups them.
  std::map<std::tuple<int8_t, std::string, int8_t>,
           std::vector<protocol::describe_acls_response::AclDescription>>
      by_resource;
  for (auto& b : ctx.authorizer->snapshot()->acls(filter)) {
    auto& acls = by_resource[{static_cast<int8_t>(b.resource_type), b.resource_name,
                              static_cast<int8_t>(b.pattern_type)}];
    protocol::describe_acls_response::AclDescription d;
    d.principal = std::move(b.principal);
    d.host = std::move(b.host);
    d.operation = static_cast<int8_t>(b.operation);
    d.permission_type = static_cast<int8_t>(b.permission_type);
    acls.push_back(std::move(d));
  }
  for (auto& [key, acls] : by_resource) {
    protocol::describe_acls_response::DescribeAclsResource r;
    r.resource_type = std::get<0>(key);
    r.resource_name = std::get<1>(key);
    r.pattern_type = std::get<2>(key);
    r.acls = std::move(acls);
    resp.resources.push_back(std::move(r));
  }
  co_return resp;
}

asio::awaitable<protocol::create_acls_response> handle_create_acls(
    context& ctx, const net::request& raw, const protocol::create_acls_request& req) {
  protocol::create_acls_response resp;
  resp.results.resize(req.creations.size());
  const access a(ctx, raw);
  auto all = [&resp](error_code e, const std::optional<std::string>& message) {
    for (auto& r : resp.results) {
      r.error_code = code(e);
      r.error_message = message;
    }
  };
  if (!a.enabled()) {
    all(error_code::security_disabled, kNoAuthorizer);
    co_return resp;
  }
  if (!a.cluster(acl_operation::alter)) {
    all(error_code::cluster_authorization_failed, std::nullopt);
    co_return resp;
  }
  std::vector<acl_binding> bindings;
  bindings.reserve(req.creations.size());
  for (const auto& c : req.creations) {
    acl_binding b;
    b.resource_type = security::resource_type_from_code(c.resource_type);
    b.resource_name = c.resource_name;
    b.pattern_type = security::pattern_type_from_code(c.resource_pattern_type);
    b.principal = c.principal;
    b.host = c.host;
    b.operation = security::operation_from_code(c.operation);
    b.permission_type = security::permission_type_from_code(c.permission_type);
    // Kafka builds every binding of the request before it checks any: a filter's value (ANY,
    // MATCH) fails them all.
    if (is_filter_value(b.resource_type) || is_filter_value(b.pattern_type) ||
        is_filter_value(b.operation) || is_filter_value(b.permission_type)) {
      all(error_code::unknown_server_error, std::nullopt);
      co_return resp;
    }
    bindings.push_back(std::move(b));
  }
  std::vector<acl_binding> valid;
  std::vector<size_t> valid_at;
  for (size_t i = 0; i < bindings.size(); ++i) {
    if (auto ok = security::check_new_binding(bindings[i]); !ok) {
      resp.results[i].error_code = code(error_code::invalid_request);
      resp.results[i].error_message = ok.error();
      continue;
    }
    valid.push_back(bindings[i]);
    valid_at.push_back(i);
  }
  if (!valid.empty()) {
    if (auto ok = store(ctx, valid, {}); !ok) {
      for (const size_t i : valid_at) {
        resp.results[i].error_code = code(error_code::unknown_server_error);
        resp.results[i].error_message = ok.error();
      }
    }
  }
  co_return resp;
}

asio::awaitable<protocol::delete_acls_response> handle_delete_acls(
    context& ctx, const net::request& raw, const protocol::delete_acls_request& req) {
  protocol::delete_acls_response resp;
  resp.filter_results.resize(req.filters.size());
  const access a(ctx, raw);
  auto all = [&resp](error_code e, const std::optional<std::string>& message) {
    for (auto& r : resp.filter_results) {
      r.error_code = code(e);
      r.error_message = message;
    }
  };
  if (!a.enabled()) {
    all(error_code::security_disabled, kNoAuthorizer);
    co_return resp;
  }
  if (!a.cluster(acl_operation::alter)) {
    all(error_code::cluster_authorization_failed, std::nullopt);
    co_return resp;
  }
  // The filters match what the store holds, ACLs made through other brokers a moment ago
  // included (as Kafka's controller matches them), not only what this broker last followed.
  if (ctx.acl_store != nullptr) {
    if (auto ok = ctx.acl_store->follow(*ctx.authorizer); !ok) {
      SILT_LOG(warn, "silt: %s", ok.error().c_str());
      all(error_code::unknown_server_error, "The ACLs could not be read; try again");
      co_return resp;
    }
  }
  const auto snapshot = ctx.authorizer->snapshot();
  std::set<acl_binding> removed;
  std::vector<std::vector<acl_binding>> matched(req.filters.size());
  for (size_t i = 0; i < req.filters.size(); ++i) {
    const auto f = filter_of(req.filters[i]);
    if (auto ok = security::check_filter(f); !ok) {
      resp.filter_results[i].error_code = code(error_code::invalid_request);
      resp.filter_results[i].error_message = ok.error();
      continue;
    }
    matched[i] = snapshot->acls(f);
    removed.insert(matched[i].begin(), matched[i].end());
  }
  if (!removed.empty()) {
    if (auto ok = store(ctx, {}, {removed.begin(), removed.end()}); !ok) {
      for (size_t i = 0; i < matched.size(); ++i) {
        if (matched[i].empty()) continue;
        resp.filter_results[i].error_code = code(error_code::unknown_server_error);
        resp.filter_results[i].error_message = ok.error();
        matched[i].clear();
      }
    }
  }
  for (size_t i = 0; i < matched.size(); ++i) {
    for (auto& b : matched[i]) {
      protocol::delete_acls_response::DeleteAclsMatchingAcl m;
      m.error_message.reset();
      m.resource_type = static_cast<int8_t>(b.resource_type);
      m.resource_name = std::move(b.resource_name);
      m.pattern_type = static_cast<int8_t>(b.pattern_type);
      m.principal = std::move(b.principal);
      m.host = std::move(b.host);
      m.operation = static_cast<int8_t>(b.operation);
      m.permission_type = static_cast<int8_t>(b.permission_type);
      resp.filter_results[i].matching_acls.push_back(std::move(m));
    }
  }
  co_return resp;
}

}  // namespace silt::handlers
