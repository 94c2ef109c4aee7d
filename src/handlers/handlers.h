// One function per Kafka API, each in its own file (handlers/<api>.cc), and the table of
// versions the broker honours. A handler gets the decoded request and returns the response;
// the dispatcher (handlers/dispatch.cc) decodes, dispatches and encodes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "handlers/context.h"
#include "net/server.h"
#include "protocol/generated/alter_client_quotas_request.h"
#include "protocol/generated/alter_client_quotas_response.h"
#include "protocol/generated/alter_configs_request.h"
#include "protocol/generated/alter_configs_response.h"
#include "protocol/generated/alter_partition_reassignments_request.h"
#include "protocol/generated/alter_partition_reassignments_response.h"
#include "protocol/generated/alter_user_scram_credentials_request.h"
#include "protocol/generated/alter_user_scram_credentials_response.h"
#include "protocol/generated/api_versions_request.h"
#include "protocol/generated/api_versions_response.h"
#include "protocol/generated/consumer_group_describe_request.h"
#include "protocol/generated/consumer_group_describe_response.h"
#include "protocol/generated/consumer_group_heartbeat_request.h"
#include "protocol/generated/consumer_group_heartbeat_response.h"
#include "protocol/generated/create_acls_request.h"
#include "protocol/generated/create_acls_response.h"
#include "protocol/generated/create_partitions_request.h"
#include "protocol/generated/create_partitions_response.h"
#include "protocol/generated/create_topics_request.h"
#include "protocol/generated/create_topics_response.h"
#include "protocol/generated/delete_acls_request.h"
#include "protocol/generated/delete_acls_response.h"
#include "protocol/generated/delete_groups_request.h"
#include "protocol/generated/delete_groups_response.h"
#include "protocol/generated/delete_records_request.h"
#include "protocol/generated/delete_records_response.h"
#include "protocol/generated/delete_topics_request.h"
#include "protocol/generated/delete_topics_response.h"
#include "protocol/generated/describe_acls_request.h"
#include "protocol/generated/describe_acls_response.h"
#include "protocol/generated/describe_client_quotas_request.h"
#include "protocol/generated/describe_client_quotas_response.h"
#include "protocol/generated/describe_cluster_request.h"
#include "protocol/generated/describe_cluster_response.h"
#include "protocol/generated/describe_configs_request.h"
#include "protocol/generated/describe_configs_response.h"
#include "protocol/generated/describe_groups_request.h"
#include "protocol/generated/describe_groups_response.h"
#include "protocol/generated/describe_topic_partitions_request.h"
#include "protocol/generated/describe_topic_partitions_response.h"
#include "protocol/generated/describe_user_scram_credentials_request.h"
#include "protocol/generated/describe_user_scram_credentials_response.h"
#include "protocol/generated/fetch_request.h"
#include "protocol/generated/fetch_response.h"
#include "protocol/generated/find_coordinator_request.h"
#include "protocol/generated/find_coordinator_response.h"
#include "protocol/generated/heartbeat_request.h"
#include "protocol/generated/heartbeat_response.h"
#include "protocol/generated/incremental_alter_configs_request.h"
#include "protocol/generated/incremental_alter_configs_response.h"
#include "protocol/generated/init_producer_id_request.h"
#include "protocol/generated/init_producer_id_response.h"
#include "protocol/generated/join_group_request.h"
#include "protocol/generated/join_group_response.h"
#include "protocol/generated/leave_group_request.h"
#include "protocol/generated/leave_group_response.h"
#include "protocol/generated/list_groups_request.h"
#include "protocol/generated/list_groups_response.h"
#include "protocol/generated/list_offsets_request.h"
#include "protocol/generated/list_offsets_response.h"
#include "protocol/generated/list_partition_reassignments_request.h"
#include "protocol/generated/list_partition_reassignments_response.h"
#include "protocol/generated/metadata_request.h"
#include "protocol/generated/metadata_response.h"
#include "protocol/generated/offset_commit_request.h"
#include "protocol/generated/offset_commit_response.h"
#include "protocol/generated/offset_delete_request.h"
#include "protocol/generated/offset_delete_response.h"
#include "protocol/generated/offset_fetch_request.h"
#include "protocol/generated/offset_fetch_response.h"
#include "protocol/generated/offset_for_leader_epoch_request.h"
#include "protocol/generated/offset_for_leader_epoch_response.h"
#include "protocol/generated/produce_request.h"
#include "protocol/generated/produce_response.h"
#include "protocol/generated/sasl_authenticate_request.h"
#include "protocol/generated/sasl_authenticate_response.h"
#include "protocol/generated/sasl_handshake_request.h"
#include "protocol/generated/sasl_handshake_response.h"
#include "protocol/generated/sync_group_request.h"
#include "protocol/generated/sync_group_response.h"
#include "protocol/types.h"

namespace silt::handlers {

namespace asio = boost::asio;

// The versions of one API the broker honours (and ApiVersions advertises).
struct api_range {
  int16_t key;
  int16_t min_version;
  int16_t max_version;
};
[[nodiscard]] std::span<const api_range> supported_apis();
[[nodiscard]] const api_range* find_supported(int16_t key);

// The offset a response field gives when there is none (Kafka's UNDEFINED_OFFSET): no record
// found, no end for an unknown epoch, no base offset for a failed produce.
inline constexpr int64_t no_offset = -1;

// The error for a request's current leader epoch (-1: the client does not say) against the
// partition's (its stream's epoch, bumped each time a broker takes it): newer than the
// broker's means the client knows of a leader the broker does not, older means fenced.
[[nodiscard]] inline protocol::error_code check_leader_epoch(int32_t current,
                                                             base::leader_epoch ours) {
  if (current < 0 || current == ours.value()) return protocol::error_code::none;
  return current > ours.value() ? protocol::error_code::unknown_leader_epoch
                                : protocol::error_code::fenced_leader_epoch;
}

// The error for a request to a partition whose stream has `offs`: NOT_LEADER_OR_FOLLOWER when
// another broker took it, else check_leader_epoch().
[[nodiscard]] inline protocol::error_code check_leader(const storage::stream_offsets& offs,
                                                       int32_t current_leader_epoch) {
  if (offs.fenced) return protocol::error_code::not_leader_or_follower;
  return check_leader_epoch(current_leader_epoch, offs.epoch);
}

// The stream of a request's partition (any int32 may come in a request), or none when the
// topic is unknown (null) or has no such partition.
template <typename TopicPtr>
[[nodiscard]] std::optional<base::stream_id> stream_of(const TopicPtr& topic, int32_t partition) {
  if (!topic) return std::nullopt;
  return topic->info->stream_of(base::partition_id(partition));
}

// A partition this broker leads at `leader_epoch`, its only replica and in-sync replica.
template <typename Partition>
[[nodiscard]] Partition led_here(const context& ctx, int32_t partition, int32_t leader_epoch) {
  Partition part;
  part.partition_index = partition;
  part.leader_id = ctx.node_id;
  part.leader_epoch = leader_epoch;
  part.replica_nodes = {ctx.node_id};
  part.isr_nodes = {ctx.node_id};
  return part;
}

// Partitions [first, end) of a topic as Metadata and DescribeTopicPartitions describe them:
// led by the broker owning each one's stream, at the stream's epoch; its replicas, all in
// sync, are the owner and, in each other rack, the broker that serves reads there (rack_view).
template <typename Partition>
[[nodiscard]] std::vector<Partition> describe_partitions(const context& ctx,
                                                         const metadata::topic_info& topic,
                                                         int32_t first, int32_t end) {
  std::vector<Partition> out;
  if (end > first) out.reserve(static_cast<size_t>(end - first));
  const rack_view racks(ctx);
  for (int32_t p = first; p < end; ++p) {
    const auto stream = *topic.stream_of(base::partition_id(p));
    const auto o = ctx.store.offsets(stream);
    const int32_t owner = o.fenced ? o.owner.value() : ctx.node_id;
    Partition part;
    part.partition_index = p;
    part.leader_epoch = o.epoch.value();
    // Another broker's partition has no leader while that broker is not live or stops (nor
    // while its creator has not taken it yet: no owner).
    if (owner != -1 && (owner == ctx.node_id || ctx.serving_member(owner))) {
      part.leader_id = owner;
      part.replica_nodes = racks.replicas(stream, owner);
      part.isr_nodes = part.replica_nodes;
    } else {
      part.leader_id = -1;
      part.replica_nodes = {owner};
      part.error_code = static_cast<int16_t>(protocol::error_code::leader_not_available);
    }
    out.push_back(std::move(part));
  }
  return out;
}

// KIP-951: a partition refused with NOT_LEADER_OR_FOLLOWER because another live broker owns
// its stream names that broker and its epoch (`leader`), and the response lists the broker's
// endpoint once (`endpoints`), as advertised on the request's `listener`, so that the client
// goes there without asking for metadata. Encoded from the versions that have the fields
// (Produce 10, Fetch 12 and 16).
template <typename Leader, typename Endpoint>
void point_to_leader(const context& ctx, std::string_view listener, base::stream_id stream,
                     Leader& leader, std::vector<Endpoint>& endpoints) {
  const auto o = ctx.store.offsets(stream);
  const int32_t owner = o.owner.value();
  if (!o.fenced || owner == -1 || owner == ctx.node_id) return;
  const auto m = ctx.serving_member(owner);
  if (!m) return;
  leader.leader_id = owner;
  leader.leader_epoch = o.epoch.value();
  for (const auto& e : endpoints) {
    if (e.node_id == owner) return;
  }
  Endpoint e;
  e.node_id = owner;
  const auto [host, port] = m->endpoint_for(listener);
  e.host = host;
  e.port = port;
  if (!m->rack.empty()) e.rack = m->rack;
  endpoints.push_back(std::move(e));
}

// A topic answered with an error and no partitions (Metadata, DescribeTopicPartitions).
template <typename Topic>
[[nodiscard]] Topic topic_error(std::optional<std::string> name, protocol::uuid id,
                                protocol::error_code e) {
  Topic out;
  out.name = std::move(name);
  out.topic_id = id;
  out.error_code = static_cast<int16_t>(e);
  return out;
}

// Response plus the memory its record views point into (Fetch).
template <typename Resp>
struct with_owners {
  Resp response;
  std::vector<std::shared_ptr<const void>> owners;
  // Time the handler waited with nothing to do (a fetch's long poll): not counted under
  // request_percentage.
  std::chrono::microseconds parked{0};
};

asio::awaitable<protocol::api_versions_response> handle_api_versions(
    context& ctx, const net::request& raw, const protocol::api_versions_request& req);
asio::awaitable<protocol::metadata_response> handle_metadata(context& ctx, const net::request& raw,
                                                             const protocol::metadata_request& req);
asio::awaitable<protocol::produce_response> handle_produce(context& ctx, net::request& raw,
                                                           protocol::produce_request& req);
asio::awaitable<with_owners<protocol::fetch_response>> handle_fetch(
    context& ctx, const net::request& raw, const protocol::fetch_request& req);
asio::awaitable<protocol::list_offsets_response> handle_list_offsets(
    context& ctx, const net::request& raw, const protocol::list_offsets_request& req);
asio::awaitable<protocol::init_producer_id_response> handle_init_producer_id(
    context& ctx, const net::request& raw, const protocol::init_producer_id_request& req);
asio::awaitable<protocol::offset_for_leader_epoch_response> handle_offset_for_leader_epoch(
    context& ctx, const net::request& raw, const protocol::offset_for_leader_epoch_request& req);
asio::awaitable<protocol::delete_records_response> handle_delete_records(
    context& ctx, const net::request& raw, const protocol::delete_records_request& req);
asio::awaitable<protocol::create_topics_response> handle_create_topics(
    context& ctx, const net::request& raw, const protocol::create_topics_request& req);
asio::awaitable<protocol::delete_topics_response> handle_delete_topics(
    context& ctx, const net::request& raw, const protocol::delete_topics_request& req);
asio::awaitable<protocol::create_partitions_response> handle_create_partitions(
    context& ctx, const net::request& raw, const protocol::create_partitions_request& req);
asio::awaitable<protocol::describe_configs_response> handle_describe_configs(
    context& ctx, const net::request& raw, const protocol::describe_configs_request& req);
asio::awaitable<protocol::alter_configs_response> handle_alter_configs(
    context& ctx, const net::request& raw, const protocol::alter_configs_request& req);
asio::awaitable<protocol::incremental_alter_configs_response> handle_incremental_alter_configs(
    context& ctx, const net::request& raw, const protocol::incremental_alter_configs_request& req);
asio::awaitable<protocol::alter_partition_reassignments_response>
handle_alter_partition_reassignments(context& ctx, const net::request& raw,
                                     const protocol::alter_partition_reassignments_request& req);
asio::awaitable<protocol::list_partition_reassignments_response>
handle_list_partition_reassignments(context& ctx, const net::request& raw,
                                    const protocol::list_partition_reassignments_request& req);
asio::awaitable<protocol::describe_cluster_response> handle_describe_cluster(
    context& ctx, const net::request& raw, const protocol::describe_cluster_request& req);
asio::awaitable<protocol::describe_topic_partitions_response> handle_describe_topic_partitions(
    context& ctx, const net::request& raw, const protocol::describe_topic_partitions_request& req);

// Users and their SCRAM credentials (the credential store, context::credentials()); quotas.
asio::awaitable<protocol::describe_user_scram_credentials_response>
handle_describe_user_scram_credentials(
    context& ctx, const net::request& raw,
    const protocol::describe_user_scram_credentials_request& req);
asio::awaitable<protocol::alter_user_scram_credentials_response>
handle_alter_user_scram_credentials(context& ctx, const net::request& raw,
                                    const protocol::alter_user_scram_credentials_request& req);
asio::awaitable<protocol::describe_client_quotas_response> handle_describe_client_quotas(
    context& ctx, const net::request& raw, const protocol::describe_client_quotas_request& req);
asio::awaitable<protocol::alter_client_quotas_response> handle_alter_client_quotas(
    context& ctx, const net::request& raw, const protocol::alter_client_quotas_request& req);

// The name of the listener a request came through (empty for one not read from a listener).
[[nodiscard]] inline std::string_view listener_of(const net::request& raw) {
  return raw.identity != nullptr ? std::string_view(raw.identity->listener) : std::string_view();
}

// Consumer groups (coordinator/): the client's host as DescribeGroups shows it ("/address").
[[nodiscard]] std::string client_host(const net::request& raw);
asio::awaitable<protocol::offset_commit_response> handle_offset_commit(
    context& ctx, const net::request& raw, const protocol::offset_commit_request& req);
asio::awaitable<protocol::offset_fetch_response> handle_offset_fetch(
    context& ctx, const net::request& raw, const protocol::offset_fetch_request& req);
asio::awaitable<protocol::find_coordinator_response> handle_find_coordinator(
    context& ctx, const net::request& raw, const protocol::find_coordinator_request& req);
asio::awaitable<protocol::join_group_response> handle_join_group(
    context& ctx, const net::request& raw, const protocol::join_group_request& req);
asio::awaitable<protocol::describe_acls_response> handle_describe_acls(
    context& ctx, const net::request& raw, const protocol::describe_acls_request& req);
asio::awaitable<protocol::create_acls_response> handle_create_acls(
    context& ctx, const net::request& raw, const protocol::create_acls_request& req);
asio::awaitable<protocol::delete_acls_response> handle_delete_acls(
    context& ctx, const net::request& raw, const protocol::delete_acls_request& req);
asio::awaitable<protocol::sasl_handshake_response> handle_sasl_handshake(
    context& ctx, const net::request& raw, const protocol::sasl_handshake_request& req);
asio::awaitable<protocol::sasl_authenticate_response> handle_sasl_authenticate(
    context& ctx, const net::request& raw, const protocol::sasl_authenticate_request& req);
asio::awaitable<protocol::heartbeat_response> handle_heartbeat(
    context& ctx, const net::request& raw, const protocol::heartbeat_request& req);
asio::awaitable<protocol::leave_group_response> handle_leave_group(
    context& ctx, const net::request& raw, const protocol::leave_group_request& req);
asio::awaitable<protocol::sync_group_response> handle_sync_group(
    context& ctx, const net::request& raw, const protocol::sync_group_request& req);
asio::awaitable<protocol::describe_groups_response> handle_describe_groups(
    context& ctx, const net::request& raw, const protocol::describe_groups_request& req);
asio::awaitable<protocol::list_groups_response> handle_list_groups(
    context& ctx, const net::request& raw, const protocol::list_groups_request& req);
asio::awaitable<protocol::delete_groups_response> handle_delete_groups(
    context& ctx, const net::request& raw, const protocol::delete_groups_request& req);
asio::awaitable<protocol::offset_delete_response> handle_offset_delete(
    context& ctx, const net::request& raw, const protocol::offset_delete_request& req);

asio::awaitable<protocol::consumer_group_heartbeat_response> handle_consumer_group_heartbeat(
    context& ctx, const net::request& raw, const protocol::consumer_group_heartbeat_request& req);
asio::awaitable<protocol::consumer_group_describe_response> handle_consumer_group_describe(
    context& ctx, const net::request& raw, const protocol::consumer_group_describe_request& req);

}  // namespace silt::handlers
