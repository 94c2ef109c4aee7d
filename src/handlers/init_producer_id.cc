// InitProducerId (key 22): a producer id for an idempotent producer, or a bumped epoch for
// one that asks (KIP-360). Transactional ids are refused until transactions exist.
//
// ACLs, as Kafka's KafkaApis.handleInitProducerIdRequest, before anything else: a transactional
// id needs TRANSACTIONAL_ID:WRITE on it (refused: TRANSACTIONAL_ID_AUTHORIZATION_FAILED; Kafka
// 4.1's v6 adds TWO_PHASE_COMMIT with enable_2pc, a version not served here); an idempotent
// producer needs CLUSTER:IDEMPOTENT_WRITE or else WRITE on at least one topic (KIP-679;
// refused: CLUSTER_AUTHORIZATION_FAILED). Produce then checks TOPIC:WRITE only.
#include "handlers/access.h"
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::init_producer_id_response> handle_init_producer_id(
    context& ctx, const net::request& raw, const protocol::init_producer_id_request& req) {
  using security::acl_operation;
  using security::acl_resource_type;
  protocol::init_producer_id_response resp;
  if (const access a(ctx, raw); a.enabled()) {
    protocol::error_code refused = protocol::error_code::none;
    if (req.transactional_id) {
      if (!a.allowed(acl_operation::write, acl_resource_type::transactional_id,
                     *req.transactional_id)) {
        refused = protocol::error_code::transactional_id_authorization_failed;
      }
    } else if (!a.cluster(acl_operation::idempotent_write) &&
               !a.any(acl_operation::write, acl_resource_type::topic)) {
      refused = protocol::error_code::cluster_authorization_failed;
    }
    if (refused != protocol::error_code::none) {
      resp.error_code = static_cast<int16_t>(refused);
      resp.producer_id = -1;
      resp.producer_epoch = -1;
      co_return resp;
    }
  }
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
