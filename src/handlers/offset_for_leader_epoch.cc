// OffsetForLeaderEpoch (key 23): the end offset of a leader epoch. A partition's epochs are its
// stream's, each recorded in the metadata store with the offset it began at when a broker took
// the stream; an epoch ends where the next one begins, the current one at the log end. Reads
// the metadata store: runs on the blocking pool.
//
// ACLs, as Kafka's KafkaApis.handleOffsetForLeaderEpochRequest: CLUSTER:CLUSTER_ACTION (a
// follower) allows every topic, else each needs TOPIC:DESCRIBE; a refused topic's partitions are
// answered TOPIC_AUTHORIZATION_FAILED, after the other topics.
#include "handlers/access.h"
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::offset_for_leader_epoch_response> handle_offset_for_leader_epoch(
    context& ctx, const net::request& raw, const protocol::offset_for_leader_epoch_request& req) {
  using protocol::error_code;
  const access a(ctx, raw);
  const bool every_topic = a.cluster(security::acl_operation::cluster_action);
  protocol::offset_for_leader_epoch_response resp;
  // The topics refused, answered last.
  std::vector<const protocol::offset_for_leader_epoch_request::OffsetForLeaderTopic*> refused;
  for (const auto& t : req.topics) {
    if (!every_topic && !a.topic(security::acl_operation::describe, t.topic)) {
      refused.push_back(&t);
      continue;
    }
    auto& rt = resp.topics.emplace_back();
    rt.topic = t.topic;
    auto topic = ctx.topic(t.topic);
    for (const auto& p : t.partitions) {
      auto& rp = rt.partitions.emplace_back();
      rp.partition = p.partition;
      const auto found = stream_of(topic, p.partition);
      if (!found) {
        rp.error_code = static_cast<int16_t>(error_code::unknown_topic_or_partition);
        continue;
      }
      const base::stream_id stream = *found;
      const auto offs = ctx.store.offsets(stream);
      if (const auto e = check_leader(offs, p.current_leader_epoch); e != error_code::none) {
        rp.error_code = static_cast<int16_t>(e);
        continue;
      }
      // Kafka answers an unknown epoch with UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET.
      rp.leader_epoch = -1;
      rp.end_offset = no_offset;
      if (p.leader_epoch < 0) continue;
      const base::leader_epoch asked(p.leader_epoch);
      if (asked > offs.epoch) continue;
      if (asked == offs.epoch) {
        rp.leader_epoch = offs.epoch.value();
        rp.end_offset = offs.end_offset.value();
        continue;
      }
      auto epochs = ctx.store.epochs(stream);
      if (!epochs) {
        rp.error_code = static_cast<int16_t>(error_code::kafka_storage_error);
        continue;
      }
      // The requested epoch ends where the first later one begins; the answer names the
      // latest epoch at or below it (the requested one if it is older than every epoch known).
      const metadata::epoch_start* floor = nullptr;
      const metadata::epoch_start* higher = nullptr;
      for (const auto& e : *epochs) {
        if (e.epoch <= asked) floor = &e;
        if (e.epoch > asked && higher == nullptr) higher = &e;
      }
      if (higher == nullptr) {
        rp.leader_epoch = offs.epoch.value();
        rp.end_offset = offs.end_offset.value();
      } else {
        rp.leader_epoch = (floor != nullptr ? floor->epoch : asked).value();
        rp.end_offset = higher->start_offset.value();
      }
    }
  }
  for (const auto* t : refused) {
    auto& rt = resp.topics.emplace_back();
    rt.topic = t->topic;
    for (const auto& p : t->partitions) {
      auto& rp = rt.partitions.emplace_back();
      rp.partition = p.partition;
      rp.error_code = static_cast<int16_t>(error_code::topic_authorization_failed);
    }
  }
  co_return resp;
}

}  // namespace silt::handlers
