// DeleteTopics (key 20): not implemented yet; answers nothing useful.
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::delete_topics_response> handle_delete_topics(context& /*ctx*/, const net::request& /*raw*/,
    const protocol::delete_topics_request& /*req*/) {
  co_return protocol::delete_topics_response{};
}

}  // namespace silt::handlers
