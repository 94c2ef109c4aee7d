// DescribeCluster (key 60, v0-1): the cluster id, this broker as the only broker and as the
// controller (the Java admin client sends controller-bound requests to it), as Kafka 4.1's
// AuthHelper.computeDescribeClusterResponse: a request for another endpoint type than brokers
// (1) is refused (v0 INVALID_REQUEST; v1 UNSUPPORTED_ENDPOINT_TYPE or MISMATCHED_ENDPOINT_TYPE).
// The cluster authorized operations, when asked: those the principal has on the cluster if it
// may DESCRIBE it, 0 if not (every one of them without ACLs).
#include "handlers/access.h"
#include "handlers/admin_util.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using protocol::describe_cluster_response;
using protocol::error_code;

constexpr int8_t endpoint_brokers = 1;
constexpr int8_t endpoint_controllers = 2;

}  // namespace

asio::awaitable<describe_cluster_response> handle_describe_cluster(
    context& ctx, const net::request& raw, const protocol::describe_cluster_request& req) {
  const int16_t version = raw.header.header.request_api_version;
  describe_cluster_response resp;
  // v0 has no endpoint_type: the decoder leaves the default (brokers).
  if (req.endpoint_type != endpoint_brokers) {
    const bool known = req.endpoint_type == endpoint_controllers;
    resp.error_code = static_cast<int16_t>(version == 0 ? error_code::invalid_request
                                           : known      ? error_code::mismatched_endpoint_type
                                                        : error_code::unsupported_endpoint_type);
    resp.error_message =
        known ? "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
                "type CONTROLLER"
              : "Unsupported endpoint type " + std::to_string(req.endpoint_type);
    co_return resp;
  }
  resp.endpoint_type = endpoint_brokers;
  resp.cluster_id = ctx.cluster_id;
  resp.controller_id = ctx.node_id;
  resp.brokers = ctx.brokers_as<describe_cluster_response::DescribeClusterBroker>(listener_of(raw));
  if (req.include_cluster_authorized_operations) {
    const access a(ctx, raw);
    resp.cluster_authorized_operations =
        a.cluster(security::acl_operation::describe)
            ? a.operations(security::acl_resource_type::cluster, kClusterResource)
            : 0;
  }
  co_return resp;
}

}  // namespace silt::handlers
