// SaslHandshake (key 17) and SaslAuthenticate (key 36) as the handlers see them: on a
// PLAINTEXT or SSL listener, or from a client of a SASL listener that authenticated and cannot
// re-authenticate. The SASL exchange itself runs in the connection (net/sasl_session.h); what
// reaches the handlers is out of place and answered as Kafka's KafkaApis answers it.
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::sasl_handshake_response> handle_sasl_handshake(
    context& /*ctx*/, const net::request& /*raw*/,
    const protocol::sasl_handshake_request& /*req*/) {
  protocol::sasl_handshake_response resp;
  resp.error_code = static_cast<int16_t>(protocol::error_code::illegal_sasl_state);
  co_return resp;
}

asio::awaitable<protocol::sasl_authenticate_response> handle_sasl_authenticate(
    context& /*ctx*/, const net::request& /*raw*/,
    const protocol::sasl_authenticate_request& /*req*/) {
  protocol::sasl_authenticate_response resp;
  resp.error_code = static_cast<int16_t>(protocol::error_code::illegal_sasl_state);
  resp.error_message = "SaslAuthenticate request received after successful authentication";
  co_return resp;
}

}  // namespace silt::handlers
