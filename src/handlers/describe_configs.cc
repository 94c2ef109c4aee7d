// DescribeConfigs (key 32, v1-4): the configs of topics (every topic config with its effective
// value and source) and of this broker (its settings, all read-only), as Kafka 4.1's
// ConfigHelper describes them. configuration_keys null or empty asks for all; otherwise only
// those named (unknown names are left out). A sensitive config (a broker setting that can carry
// a secret: the store URIs) is answered as Kafka answers a PASSWORD config, to every client:
// value null, is_sensitive, its synonyms without value. Synonyms (v1+) only when asked,
// documentation (v3+) only when asked, config_type from v3 (the encoder leaves out what a
// version lacks).
// Errors per resource: an unknown topic (UNKNOWN_TOPIC_OR_PARTITION), an invalid topic name
// (INVALID_TOPIC_EXCEPTION), a broker name that is not this node's id (INVALID_REQUEST; empty
// means the cluster-wide dynamic defaults, of which Silt has none), BROKER_LOGGER and other
// resource types (INVALID_REQUEST: Silt has no runtime-adjustable loggers). A resource of a type
// Kafka does not know fails the whole request, as in Kafka: every result INVALID_REQUEST.
//
// ACLs, as Kafka's ConfigHelper.handleDescribeConfigsRequest: BROKER, BROKER_LOGGER and
// CLIENT_METRICS resources need CLUSTER:DESCRIBE_CONFIGS, a TOPIC TOPIC:DESCRIBE_CONFIGS on its
// name (before its name is checked or looked up), a GROUP GROUP:DESCRIBE_CONFIGS (ALTER_CONFIGS
// implies DESCRIBE_CONFIGS). The refused ones are answered after the others:
// CLUSTER_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED or GROUP_AUTHORIZATION_FAILED with
// Kafka's default message and no configs.
#include <algorithm>
#include <map>
#include <string>

#include "handlers/access.h"
#include "handlers/admin_util.h"
#include "handlers/handlers.h"
#include "handlers/offsets_topic.h"

namespace silt::handlers {

namespace {

using admin::api_error;
using protocol::describe_configs_request;
using protocol::describe_configs_response;
using protocol::error_code;

bool wanted(const describe_configs_request::DescribeConfigsResource& r, const std::string& name) {
  if (!r.configuration_keys || r.configuration_keys->empty()) return true;
  return std::find(r.configuration_keys->begin(), r.configuration_keys->end(), name) !=
         r.configuration_keys->end();
}

describe_configs_response::DescribeConfigsResourceResult to_result(const config::config_entry& e,
                                                                   bool read_only, bool synonyms,
                                                                   bool documentation) {
  describe_configs_response::DescribeConfigsResourceResult r;
  r.name = e.name;
  r.value = e.sensitive ? std::nullopt : e.value;
  r.read_only = read_only;
  r.is_default = e.is_default;
  r.config_source = static_cast<int8_t>(e.source);
  r.is_sensitive = e.sensitive;
  if (synonyms) {
    for (const auto& s : e.synonyms) {
      r.synonyms.push_back(
          {s.name, e.sensitive ? std::nullopt : s.value, static_cast<int8_t>(s.source), {}});
    }
  }
  r.config_type = static_cast<int8_t>(e.type);
  if (documentation) {
    r.documentation = e.documentation;
  } else {
    r.documentation = std::nullopt;
  }
  return r;
}

describe_configs_response::DescribeConfigsResult describe(
    const context& ctx, const describe_configs_request::DescribeConfigsResource& res, bool synonyms,
    bool documentation) {
  describe_configs_response::DescribeConfigsResult out;
  out.resource_type = res.resource_type;
  out.resource_name = res.resource_name;
  out.error_message = std::nullopt;
  auto fail = [&out](const api_error& e) {
    out.error_code = e.code;
    out.error_message = e.message;
    out.configs.clear();
    return out;
  };
  switch (res.resource_type) {
    case admin::resource_topic: {
      if (auto why = metadata::check_topic_name(res.resource_name); !why.empty()) {
        return fail({error_code::invalid_topic_exception, why});
      }
      if (res.resource_name == offsets_topic_name && ctx.groups().offsets_topic_exists()) {
        // The groups' internal topic, with the overrides Kafka creates it with.
        static const std::map<std::string, std::string> offsets_topic_configs{
            {"cleanup.policy", "compact"},
            {"compression.type", "producer"},
            {"segment.bytes", "104857600"}};
        for (const auto& e : config::describe_topic_configs(ctx.config, offsets_topic_configs)) {
          if (wanted(res, e.name))
            out.configs.push_back(to_result(e, false, synonyms, documentation));
        }
        return out;
      }
      auto t = ctx.topic(res.resource_name);
      if (!t) {
        // Kafka sends no message here.
        out.error_code = static_cast<int16_t>(error_code::unknown_topic_or_partition);
        return out;
      }
      for (const auto& e : config::describe_topic_configs(ctx.config, t->info->configs)) {
        if (wanted(res, e.name))
          out.configs.push_back(to_result(e, false, synonyms, documentation));
      }
      return out;
    }
    case admin::resource_broker: {
      if (auto e = admin::check_broker_name(ctx, res.resource_name, true); !e.ok()) {
        return fail({error_code::invalid_request,
                     "Unexpected broker id, expected " + std::to_string(ctx.node_id) +
                         " or empty string, but received " + res.resource_name});
      }
      // Empty: the cluster-wide dynamic defaults; Silt's settings are all static, so none.
      if (res.resource_name.empty()) return out;
      for (const auto& e : config::describe_broker_configs(ctx.config)) {
        if (wanted(res, e.name)) {
          out.configs.push_back(to_result(e, e.read_only, synonyms, documentation));
        }
      }
      return out;
    }
    case admin::resource_broker_logger:
      return fail({error_code::invalid_request,
                   "Unsupported resource type: BROKER_LOGGER (Silt has no adjustable loggers)"});
    default:
      return fail({error_code::invalid_request,
                   "Unsupported resource type: " + admin::resource_type_name(res.resource_type)});
  }
}

// The error a resource refused by `a` is answered with, or none when it may be described.
error_code authorize(const access& a, const describe_configs_request::DescribeConfigsResource& r) {
  using security::acl_operation;
  switch (r.resource_type) {
    case admin::resource_topic:
      return a.topic(acl_operation::describe_configs, r.resource_name)
                 ? error_code::none
                 : error_code::topic_authorization_failed;
    case admin::resource_group:
      return a.group(acl_operation::describe_configs, r.resource_name)
                 ? error_code::none
                 : error_code::group_authorization_failed;
    default:  // BROKER, BROKER_LOGGER, CLIENT_METRICS
      return a.cluster(acl_operation::describe_configs) ? error_code::none
                                                        : error_code::cluster_authorization_failed;
  }
}

}  // namespace

asio::awaitable<describe_configs_response> handle_describe_configs(
    context& ctx, const net::request& raw, const describe_configs_request& req) {
  const int16_t version = raw.header.header.request_api_version;
  // v0 has no include_synonyms: no synonyms; v1-2 no include_documentation.
  const bool synonyms = version >= 1 && req.include_synonyms;
  const bool documentation = version >= 3 && req.include_documentation;
  describe_configs_response resp;
  resp.results.reserve(req.resources.size());
  const bool known_types =
      std::all_of(req.resources.begin(), req.resources.end(), [](const auto& r) {
        return r.resource_type == admin::resource_topic ||
               r.resource_type == admin::resource_broker ||
               r.resource_type == admin::resource_broker_logger ||
               r.resource_type == admin::resource_client_metrics ||
               r.resource_type == admin::resource_group;
      });
  if (!known_types) {
    for (const auto& r : req.resources) {
      auto& out = resp.results.emplace_back();
      out.resource_type = r.resource_type;
      out.resource_name = r.resource_name;
      out.error_code = static_cast<int16_t>(error_code::invalid_request);
      out.error_message = admin::default_message(error_code::invalid_request);
    }
    co_return resp;
  }
  const access a(ctx, raw);
  // The refused resources and their errors, answered last.
  std::vector<std::pair<const describe_configs_request::DescribeConfigsResource*, error_code>>
      refused;
  for (const auto& r : req.resources) {
    if (const auto e = authorize(a, r); e != error_code::none) {
      refused.emplace_back(&r, e);
      continue;
    }
    resp.results.push_back(describe(ctx, r, synonyms, documentation));
  }
  for (const auto& [r, e] : refused) {
    auto& out = resp.results.emplace_back();
    out.resource_type = r->resource_type;
    out.resource_name = r->resource_name;
    out.error_code = static_cast<int16_t>(e);
    out.error_message = admin::default_message(e);
  }
  co_return resp;
}

}  // namespace silt::handlers
