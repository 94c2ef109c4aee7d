// AlterConfigs (key 33): not implemented yet; answers nothing useful.
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::alter_configs_response> handle_alter_configs(context& /*ctx*/, const net::request& /*raw*/,
    const protocol::alter_configs_request& /*req*/) {
  co_return protocol::alter_configs_response{};
}

}  // namespace silt::handlers
