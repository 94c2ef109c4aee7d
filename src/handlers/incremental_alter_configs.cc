// IncrementalAlterConfigs (key 44): not implemented yet; answers nothing useful.
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::incremental_alter_configs_response> handle_incremental_alter_configs(context& /*ctx*/, const net::request& /*raw*/,
    const protocol::incremental_alter_configs_request& /*req*/) {
  co_return protocol::incremental_alter_configs_response{};
}

}  // namespace silt::handlers
