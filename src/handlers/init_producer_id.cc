// InitProducerId (key 22): a producer id for an idempotent producer, or a bumped epoch for
// one that asks (KIP-360). Transactional ids are refused until transactions exist.
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::init_producer_id_response> handle_init_producer_id(
    context& ctx, const net::request& /*raw*/, const protocol::init_producer_id_request& req) {
  protocol::init_producer_id_response resp;
  if (req.transactional_id && !req.transactional_id->empty()) {
    resp.error_code =
        static_cast<int16_t>(protocol::error_code::transactional_id_authorization_failed);
    co_return resp;
  }
  auto r = ctx.producers.init_producer(base::producer_id(req.producer_id),
                                       base::producer_epoch(req.producer_epoch));
  if (!r) {
    resp.error_code = static_cast<int16_t>(r.error());
    co_return resp;
  }
  resp.producer_id = r->first.value();
  resp.producer_epoch = r->second.value();
  co_return resp;
}

}  // namespace silt::handlers
