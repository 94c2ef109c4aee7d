// CreatePartitions (key 37): not implemented yet; answers nothing useful.
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::create_partitions_response> handle_create_partitions(context& /*ctx*/, const net::request& /*raw*/,
    const protocol::create_partitions_request& /*req*/) {
  co_return protocol::create_partitions_response{};
}

}  // namespace silt::handlers
