// Metadata (key 3): brokers (the live members of the cluster), the controller (this one: the Java
// admin client sends admin requests to it) and topics, auto-creating requested topics when allowed.
// The groups' internal topic __consumer_offsets is listed, marked internal, once groups are in use.
//
// ACLs, as Kafka's KafkaApis.handleTopicMetadataRequest: TOPIC:DESCRIBE on each topic, before
// looking at whether it exists. Of all topics, those refused are left out; a named one refused is
// answered TOPIC_AUTHORIZATION_FAILED with its name and a zero id (asked by id: a null name and
// its id, ids not being secret; an unknown id is UNKNOWN_TOPIC_ID before any check).
// Auto-creating a topic needs CLUSTER:CREATE or else TOPIC:CREATE on it (refused:
// TOPIC_AUTHORIZATION_FAILED), on top of DESCRIBE. The authorized operations (v8+, when asked)
// are those of every topic the DESCRIBE check let through, and of the cluster (v8-10) with
// CLUSTER:DESCRIBE (0 without).
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "base/log.h"
#include "handlers/access.h"
#include "handlers/admin_util.h"
#include "handlers/handlers.h"
#include "handlers/offsets_topic.h"

namespace silt::handlers {

namespace {

using protocol::error_code;
using protocol::metadata_response;
using response_topic = metadata_response::MetadataResponseTopic;

response_topic describe(const context& ctx, const topic_entry& t) {
  response_topic out;
  out.name = t.info->name;
  out.topic_id = admin::to_uuid(t.info->id);
  out.partitions = describe_partitions<metadata_response::MetadataResponsePartition>(
      ctx, *t.info, 0, t.info->partitions());
  return out;
}

response_topic describe_offsets_topic(const context& ctx) {
  response_topic out;
  out.name = std::string(offsets_topic_name);
  out.is_internal = true;
  out.topic_id = offsets_topic_id(ctx);
  out.partitions = describe_offsets_partitions<metadata_response::MetadataResponsePartition>(
      ctx, 0, offsets_topic_partitions(ctx));
  return out;
}

// Kafka's Topic.isInternal, for a topic refused its creation (__consumer_offsets is always
// answered, never created).
bool internal_name(std::string_view name) {
  return name == "__transaction_state" || name == "__share_group_state";
}

}  // namespace

asio::awaitable<metadata_response> handle_metadata(context& ctx, const net::request& raw,
                                                   const protocol::metadata_request& req) {
  using security::acl_operation;
  using security::acl_resource_type;
  const int16_t version = raw.header.header.request_api_version;
  const access a(ctx, raw);
  metadata_response resp;
  resp.brokers = ctx.brokers_as<metadata_response::MetadataResponseBroker>(listener_of(raw));
  resp.cluster_id = ctx.cluster_id;
  resp.controller_id = ctx.node_id;
  if (version >= 8 && version <= 10 && req.include_cluster_authorized_operations) {
    resp.cluster_authorized_operations =
        a.cluster(acl_operation::describe)
            ? a.operations(acl_resource_type::cluster, kClusterResource)
            : 0;
  }
  const bool topic_operations = version >= 8 && req.include_topic_authorized_operations;
  // A topic the DESCRIBE check let through, answered as it is.
  auto answer = [&](response_topic out) {
    if (topic_operations) {
      out.topic_authorized_operations = a.operations(acl_resource_type::topic, *out.name);
    }
    resp.topics.push_back(std::move(out));
  };
  // v0 has no null topics: an empty list means all topics. From v1 on, null means all.
  const bool all = !req.topics || (version == 0 && req.topics->empty());
  if (all) {
    for (const auto& t : ctx.topics()) {
      if (a.topic(acl_operation::describe, t->info->name)) answer(describe(ctx, *t));
    }
    if (ctx.groups().offsets_topic_exists() &&
        a.topic(acl_operation::describe, offsets_topic_name)) {
      answer(describe_offsets_topic(ctx));
    }
    co_return resp;
  }
  // Auto-creation: v4+ carries the client's wish; earlier versions always allow it.
  const bool may_create =
      ctx.config.auto_create_topics_enable && (version < 4 || req.allow_auto_topic_creation);
  // CLUSTER:CREATE lets every topic be created; asked once, when a creation comes up.
  std::optional<bool> cluster_create;
  for (const auto& rt : *req.topics) {
    topic_entry_ptr t;
    // By id when one is given without a name (the Java client sends an empty name with it).
    const bool by_id = !rt.topic_id.is_zero() && (!rt.name || rt.name->empty());
    if (by_id && !(rt.topic_id == offsets_topic_id(ctx) && ctx.groups().offsets_topic_exists())) {
      t = ctx.topic(rt.topic_id.bytes);
      if (!t) {
        resp.topics.push_back(
            topic_error<response_topic>(std::nullopt, rt.topic_id, error_code::unknown_topic_id));
        continue;
      }
    } else if (!by_id && !rt.name) {
      resp.topics.push_back(
          topic_error<response_topic>(std::nullopt, {}, error_code::invalid_request));
      continue;
    }
    const std::string_view name = t       ? std::string_view(t->info->name)
                                  : by_id ? offsets_topic_name
                                          : *rt.name;
    if (!a.topic(acl_operation::describe, name)) {
      resp.topics.push_back(
          by_id ? topic_error<response_topic>(std::nullopt, rt.topic_id,
                                              error_code::topic_authorization_failed)
                : topic_error<response_topic>(rt.name, {}, error_code::topic_authorization_failed));
      continue;
    }
    if (!t && name == offsets_topic_name) {
      // Asked for by name, Kafka creates it.
      ctx.groups().note_offsets_topic();
      answer(describe_offsets_topic(ctx));
      continue;
    }
    if (!by_id) t = ctx.topic(*rt.name);
    if (!t && may_create) {
      if (a.enabled()) {
        if (!cluster_create) cluster_create = a.cluster(acl_operation::create);
        if (!*cluster_create && !a.topic(acl_operation::create, *rt.name)) {
          auto refused =
              topic_error<response_topic>(rt.name, {}, error_code::topic_authorization_failed);
          refused.is_internal = internal_name(*rt.name);
          resp.topics.push_back(std::move(refused));
          continue;
        }
      }
      if (!metadata::check_topic_name(*rt.name).empty()) {
        answer(topic_error<response_topic>(rt.name, {}, error_code::invalid_topic_exception));
        continue;
      }
      // A registry transaction: on the blocking pool, not the network thread.
      auto created = co_await asio::co_spawn(
          ctx.blocking,
          [&ctx, &name = *rt.name]()
              -> asio::awaitable<tl::expected<topic_entry_ptr, config::config_error>> {
            const int64_t since = ctx.registry.last_change();
            auto created = ctx.create_topic(name, ctx.config.num_partitions, {});
            // Answered once every broker serves it, as CreateTopics is.
            (void)co_await ctx.agree(since);
            co_return created;
          },
          asio::use_awaitable);
      if (created) {
        t = *created;
      } else {
        t = ctx.topic(*rt.name);  // created by a concurrent request
        if (!t &&
            created.error().error_code != static_cast<int16_t>(error_code::topic_already_exists)) {
          SILT_LOG(warn, "silt: auto-creating topic %s failed: %s", rt.name->c_str(),
                   created.error().message.c_str());
        }
      }
    }
    if (!t) {
      answer(topic_error<response_topic>(rt.name, {}, error_code::unknown_topic_or_partition));
      continue;
    }
    answer(describe(ctx, *t));
  }
  co_return resp;
}

}  // namespace silt::handlers
