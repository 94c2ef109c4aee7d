// ApiVersions (key 18): the versions of every API the broker honours.
#include <algorithm>
#include <array>

#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

// Each range is what the handlers implement, within what the generated code knows.
// Produce starts at 0 because librdkafka looks for Produce v0 before it compresses; versions
// below 3 (message format v0/v1) are refused at request time with UNSUPPORTED_VERSION... by
// closing the connection, as Kafka 4 does. Fetch and Produce stop before the versions that
// name topics by id only (Produce 13, Fetch 13).
constexpr std::array<api_range, 40> apis = {{
    {0, 0, 11},  // Produce
    {1, 4, 12},  // Fetch
    {2, 1, 10},  // ListOffsets
    {3, 0, 12},  // Metadata
    {8, 2, 9},   // OffsetCommit
    {9, 1, 9},   // OffsetFetch
    {10, 0, 5},  // FindCoordinator
    {11, 0, 9},  // JoinGroup
    {12, 0, 4},  // Heartbeat
    {13, 0, 5},  // LeaveGroup
    {14, 0, 5},  // SyncGroup
    {15, 0, 5},  // DescribeGroups
    {16, 0, 5},  // ListGroups
    {17, 0, 1},  // SaslHandshake
    {18, 0, 4},  // ApiVersions
    {19, 2, 7},  // CreateTopics
    {20, 1, 6},  // DeleteTopics
    {21, 0, 2},  // DeleteRecords
    {22, 0, 5},  // InitProducerId
    {23, 2, 4},  // OffsetForLeaderEpoch
    {29, 0, 3},  // DescribeAcls
    {30, 0, 3},  // CreateAcls
    {31, 0, 3},  // DeleteAcls
    {32, 1, 4},  // DescribeConfigs
    {33, 0, 2},  // AlterConfigs
    {36, 0, 2},  // SaslAuthenticate
    {37, 0, 3},  // CreatePartitions
    {42, 0, 2},  // DeleteGroups
    {44, 0, 1},  // IncrementalAlterConfigs
    {45, 0, 0},  // AlterPartitionReassignments
    {46, 0, 0},  // ListPartitionReassignments
    {47, 0, 0},  // OffsetDelete
    {48, 0, 1},  // DescribeClientQuotas
    {49, 0, 1},  // AlterClientQuotas
    {50, 0, 0},  // DescribeUserScramCredentials
    {51, 0, 0},  // AlterUserScramCredentials
    {60, 0, 1},  // DescribeCluster
    {68, 0, 1},  // ConsumerGroupHeartbeat
    {69, 0, 0},  // ConsumerGroupDescribe
    {75, 0, 0},  // DescribeTopicPartitions
}};

}  // namespace

std::span<const api_range> supported_apis() {
  return apis;
}

const api_range* find_supported(int16_t key) {
  auto it =
      std::find_if(apis.begin(), apis.end(), [&](const api_range& a) { return a.key == key; });
  return it == apis.end() ? nullptr : &*it;
}

asio::awaitable<protocol::api_versions_response> handle_api_versions(
    context& /*ctx*/, const net::request& /*raw*/, const protocol::api_versions_request& /*req*/) {
  protocol::api_versions_response resp;
  resp.api_keys.reserve(apis.size());
  for (const auto& a : apis) resp.api_keys.push_back({a.key, a.min_version, a.max_version, {}});
  co_return resp;
}

}  // namespace silt::handlers
