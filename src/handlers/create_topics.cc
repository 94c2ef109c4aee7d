// CreateTopics (key 19): not implemented yet; answers nothing useful.
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::create_topics_response> handle_create_topics(context& /*ctx*/, const net::request& /*raw*/,
    const protocol::create_topics_request& /*req*/) {
  co_return protocol::create_topics_response{};
}

}  // namespace silt::handlers
