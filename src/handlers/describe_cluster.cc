// DescribeCluster (key 60): not implemented yet; answers nothing useful.
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::describe_cluster_response> handle_describe_cluster(context& /*ctx*/, const net::request& /*raw*/,
    const protocol::describe_cluster_request& /*req*/) {
  co_return protocol::describe_cluster_response{};
}

}  // namespace silt::handlers
