// CreatePartitions (key 37, v0-3): grows topics to a new partition count, checked as Kafka
// 4.1's controller does (ReplicationControlManager.createPartitions): unknown topics
// (UNKNOWN_TOPIC_OR_PARTITION), a count that is not an increase (INVALID_PARTITIONS), manual
// assignments that do not place each new partition on this broker alone
// (INVALID_REPLICA_ASSIGNMENT), a topic named twice (INVALID_REQUEST). With validate_only every
// check runs and nothing changes. The new partitions start empty, on new streams.
//
// ACLs, as Kafka's ControllerApis.createPartitions: TOPIC:ALTER on each topic, after the names
// given twice and before anything else (refused: TOPIC_AUTHORIZATION_FAILED with no message,
// whether the topic exists or not).
#include <set>

#include "handlers/access.h"
#include "handlers/admin_util.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using admin::api_error;
using admin::check_replicas;
using protocol::create_partitions_request;
using protocol::create_partitions_response;
using protocol::error_code;

api_error check(const context& ctx, const create_partitions_request::CreatePartitionsTopic& t,
                const metadata::topic_info& info) {
  const int32_t current = info.partitions();
  if (t.count == current) {
    return {error_code::invalid_partitions,
            "Topic already has " + std::to_string(current) + " partition(s)."};
  }
  if (t.count < current) {
    return {error_code::invalid_partitions,
            "The topic " + t.name + " currently has " + std::to_string(current) +
                " partition(s); " + std::to_string(t.count) + " would not be an increase."};
  }
  const int64_t additional = static_cast<int64_t>(t.count) - current;
  if (t.assignments) {
    if (static_cast<int64_t>(t.assignments->size()) != additional) {
      return {error_code::invalid_replica_assignment,
              "Attempted to add " + std::to_string(additional) +
                  " additional partition(s), but only " + std::to_string(t.assignments->size()) +
                  " assignment(s) were specified."};
    }
    for (const auto& a : *t.assignments) {
      if (auto e = check_replicas(ctx, a.broker_ids); !e.ok()) return e;
    }
  }
  if (additional > admin::max_records_per_operation) {
    return {error_code::policy_violation, "Unable to perform excessively large batch operation."};
  }
  return {};
}

create_partitions_response::CreatePartitionsTopicResult result(const std::string& name,
                                                               const api_error& e) {
  create_partitions_response::CreatePartitionsTopicResult r;
  r.name = name;
  r.error_code = e.code;
  r.error_message = e.ok() ? std::nullopt : e.message;
  return r;
}

}  // namespace

asio::awaitable<create_partitions_response> handle_create_partitions(
    context& ctx, const net::request& raw, const create_partitions_request& req) {
  const access a(ctx, raw);
  create_partitions_response resp;
  const int64_t since = ctx.registry.last_change();
  std::set<std::string> once;
  std::set<std::string> duplicates;
  for (const auto& t : req.topics) {
    if (!once.insert(t.name).second) duplicates.insert(t.name);
  }
  for (const auto& t : req.topics) {
    if (duplicates.contains(t.name)) continue;
    if (!a.topic(security::acl_operation::alter, t.name)) {
      resp.results.push_back(
          result(t.name, {error_code::topic_authorization_failed, std::nullopt}));
      continue;
    }
    auto info = ctx.registry.find(t.name);
    if (!info) {
      resp.results.push_back(
          result(t.name, admin::error_of(error_code::unknown_topic_or_partition)));
      continue;
    }
    if (auto e = check(ctx, t, *info); !e.ok()) {
      resp.results.push_back(result(t.name, e));
      continue;
    }
    if (!req.validate_only) {
      std::lock_guard lock(admin::topic_change_mutex());
      auto grown = ctx.registry.add_partitions(t.name, t.count);
      if (!grown) {
        // Deleted or grown meanwhile by another request.
        api_error e;
        switch (grown.error()) {
          case metadata::registry_error::not_found:
            e = admin::error_of(error_code::unknown_topic_or_partition);
            break;
          case metadata::registry_error::invalid:
            e = {error_code::invalid_partitions, "The topic " + t.name + " already has " +
                                                     std::to_string(t.count) +
                                                     " or more partition(s)."};
            break;
          default:
            e = {error_code::unknown_server_error, "Cannot store the partitions of " + t.name};
        }
        resp.results.push_back(result(t.name, e));
        continue;
      }
      ctx.take(std::vector<base::stream_id>((*grown)->streams.begin() + info->partitions(),
                                            (*grown)->streams.end()));
      ctx.refresh(*grown);
    }
    resp.results.push_back(result(t.name, {}));
  }
  for (const auto& name : duplicates) {
    resp.results.push_back(result(name, {error_code::invalid_request, "Duplicate topic name."}));
  }
  // Answered once every broker serves the new partitions.
  (void)co_await ctx.agree(since, admin::agreement_cap(req.timeout_ms));
  co_return resp;
}

}  // namespace silt::handlers
