// DescribeConfigs (key 32): not implemented yet; answers nothing useful.
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::describe_configs_response> handle_describe_configs(context& /*ctx*/, const net::request& /*raw*/,
    const protocol::describe_configs_request& /*req*/) {
  co_return protocol::describe_configs_response{};
}

}  // namespace silt::handlers
