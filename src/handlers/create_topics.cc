// CreateTopics (key 19, v2-7): creates topics with their partition count and config overrides,
// checked as Kafka 4.1's controller checks them (ControllerApis, ReplicationControlManager):
// names (INVALID_TOPIC_EXCEPTION), names given twice (INVALID_REQUEST), existing topics
// (TOPIC_ALREADY_EXISTS), null config values and configs (INVALID_CONFIG), then the partition
// count (INVALID_PARTITIONS) and replication factor or manual assignment, which must fit the one
// broker there is (INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT). With validate_only
// every check runs and nothing is created. Success results carry (v5+) the partition count,
// replication factor 1 and the effective configs, and (v7) the topic id.
//
// ACLs, as Kafka's ControllerApis.createTopics: CLUSTER:CREATE lets every topic be created, else
// each needs TOPIC:CREATE; a refused topic is TOPIC_AUTHORIZATION_FAILED "Authorization failed."
// before anything else is checked of it (its name, whether it exists), validate_only or not.
// Names given twice and __cluster_metadata are refused before the check. A created topic's
// configs, partition count and replication factor are answered only with TOPIC:DESCRIBE_CONFIGS
// on it (CLUSTER:CREATE does not give it): otherwise topic_config_error_code is
// TOPIC_AUTHORIZATION_FAILED, with no configs and -1 for the counts.
#include <set>

#include "handlers/access.h"
#include "handlers/admin_util.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using admin::api_error;
using admin::check_replicas;
using protocol::create_topics_request;
using protocol::create_topics_response;
using protocol::error_code;

// Why a topic cannot be placed on this broker; on success `partitions` is the count to create.
api_error check_placement(const context& ctx, const create_topics_request::CreatableTopic& t,
                          int32_t& partitions) {
  if (!t.assignments.empty()) {
    if (t.replication_factor != -1) {
      return {error_code::invalid_request,
              "A manual partition assignment was specified, but replication factor was not set "
              "to -1."};
    }
    if (t.num_partitions != -1) {
      return {error_code::invalid_request,
              "A manual partition assignment was specified, but numPartitions was not set to -1."};
    }
    std::set<int32_t> seen;
    for (const auto& a : t.assignments) {
      if (!seen.insert(a.partition_index).second) {
        return {error_code::invalid_replica_assignment,
                "Found multiple manual partition assignments for partition " +
                    std::to_string(a.partition_index)};
      }
      if (auto e = check_replicas(ctx, a.broker_ids); !e.ok()) return e;
    }
    const auto n = static_cast<int32_t>(seen.size());
    if (*seen.begin() != 0 || *seen.rbegin() != n - 1) {
      return {error_code::invalid_replica_assignment,
              "partitions should be a consecutive 0-based integer sequence"};
    }
    partitions = n;
    return {};
  }
  if (t.replication_factor < -1 || t.replication_factor == 0) {
    return {error_code::invalid_replication_factor,
            "Replication factor must be larger than 0, or -1 to use the default value."};
  }
  if (t.num_partitions < -1 || t.num_partitions == 0) {
    return {error_code::invalid_partitions,
            "Number of partitions was set to an invalid non-positive value."};
  }
  const int32_t rf =
      t.replication_factor == -1 ? ctx.config.default_replication_factor : t.replication_factor;
  if (rf != 1) {
    const auto n = std::to_string(rf);
    return {error_code::invalid_replication_factor,
            "Unable to replicate the partition " + n +
                " time(s): The target replication factor of " + n +
                " cannot be reached because only 1 broker(s) are registered."};
  }
  partitions = t.num_partitions == -1 ? ctx.config.num_partitions : t.num_partitions;
  return {};
}

create_topics_response::CreatableTopicResult error_result(const std::string& name,
                                                          const api_error& e) {
  create_topics_response::CreatableTopicResult r;
  r.name = name;
  r.error_code = e.code;
  r.error_message = e.message;
  return r;
}

}  // namespace

asio::awaitable<create_topics_response> handle_create_topics(context& ctx, const net::request& raw,
                                                             const create_topics_request& req) {
  using security::acl_operation;
  const access a(ctx, raw);
  const bool cluster_create = a.cluster(acl_operation::create);
  create_topics_response resp;
  const int64_t since = ctx.registry.last_change();
  // Names given more than once are refused, once each, after the others (as ControllerApis).
  std::set<std::string> once;
  std::set<std::string> duplicates;
  for (const auto& t : req.topics) {
    if (!once.insert(t.name).second) duplicates.insert(t.name);
  }
  for (const auto& t : req.topics) {
    if (duplicates.contains(t.name)) continue;
    if (t.name == "__cluster_metadata") {
      resp.topics.push_back(
          error_result(t.name, {error_code::invalid_request,
                                "Creation of internal topic __cluster_metadata is prohibited."}));
      continue;
    }
    if (!cluster_create && !a.topic(acl_operation::create, t.name)) {
      resp.topics.push_back(
          error_result(t.name, {error_code::topic_authorization_failed, "Authorization failed."}));
      continue;
    }
    if (auto e = admin::check_new_topic_name(ctx, t.name); !e.ok()) {
      resp.topics.push_back(error_result(t.name, e));
      continue;
    }
    if (t.name == "__consumer_offsets") {
      // The groups' internal topic is the coordinator's (coordinator.h), there from its first
      // use on.
      ctx.groups().note_offsets_topic();
      resp.topics.push_back(error_result(
          t.name, {error_code::topic_already_exists, "Topic '" + t.name + "' already exists."}));
      continue;
    }
    if (ctx.registry.find(t.name)) {
      resp.topics.push_back(error_result(
          t.name, {error_code::topic_already_exists, "Topic '" + t.name + "' already exists."}));
      continue;
    }
    // Configs: a null value is refused; a key given twice takes its last value.
    std::map<std::string, std::string> configs;
    std::string nulls;
    for (const auto& c : t.configs) {
      if (!c.value) {
        nulls += (nulls.empty() ? "" : ",") + c.name;
      } else {
        configs[c.name] = *c.value;
      }
    }
    if (!nulls.empty()) {
      resp.topics.push_back(error_result(
          t.name,
          {error_code::invalid_config, "Null value not supported for topic configs: " + nulls}));
      continue;
    }
    if (auto v = config::validate_topic_configs(configs); !v) {
      resp.topics.push_back(error_result(t.name, {v.error().error_code, v.error().message}));
      continue;
    }
    int32_t partitions = 0;
    if (auto e = check_placement(ctx, t, partitions); !e.ok()) {
      resp.topics.push_back(error_result(t.name, e));
      continue;
    }
    if (partitions + static_cast<int64_t>(configs.size()) + 1 > admin::max_records_per_operation) {
      resp.topics.push_back(error_result(
          t.name,
          {error_code::policy_violation, "Unable to perform excessively large batch operation."}));
      continue;
    }
    create_topics_response::CreatableTopicResult r;
    r.name = t.name;
    r.error_message = std::nullopt;
    if (!req.validate_only) {
      auto created = ctx.create_topic(t.name, partitions, configs);
      if (!created) {
        resp.topics.push_back(
            error_result(t.name, {created.error().error_code, created.error().message}));
        continue;
      }
      r.topic_id = admin::to_uuid((*created)->info->id);
    }
    // What was (or would be) created: the encoder writes these fields from v5 (topic_id v7).
    r.configs.emplace();
    if (!a.topic(acl_operation::describe_configs, t.name)) {
      r.topic_config_error_code = static_cast<int16_t>(error_code::topic_authorization_failed);
      resp.topics.push_back(std::move(r));
      continue;
    }
    r.num_partitions = partitions;
    r.replication_factor = 1;
    for (const auto& e : config::describe_topic_configs(ctx.config, configs)) {
      create_topics_response::CreatableTopicConfigs c;
      c.name = e.name;
      c.value = e.sensitive ? std::nullopt : e.value;
      c.read_only = e.read_only;
      c.config_source = static_cast<int8_t>(e.source);
      c.is_sensitive = e.sensitive;
      r.configs->push_back(std::move(c));
    }
    resp.topics.push_back(std::move(r));
  }
  for (const auto& name : duplicates) {
    resp.topics.push_back(
        error_result(name, {error_code::invalid_request, "Duplicate topic name."}));
  }
  // Answered once every broker serves the new topics.
  (void)co_await ctx.agree(since, admin::agreement_cap(req.timeout_ms));
  co_return resp;
}

}  // namespace silt::handlers
