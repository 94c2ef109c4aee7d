// OffsetForLeaderEpoch (key 23): the end offset of a leader epoch. Every partition has had one
// epoch (0) since it was created, so epoch 0 ends at the log end and older epochs do not exist.
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::offset_for_leader_epoch_response> handle_offset_for_leader_epoch(
    context& ctx, const net::request& /*raw*/,
    const protocol::offset_for_leader_epoch_request& req) {
  using protocol::error_code;
  protocol::offset_for_leader_epoch_response resp;
  for (const auto& t : req.topics) {
    auto& rt = resp.topics.emplace_back();
    rt.topic = t.topic;
    auto topic = ctx.topic(t.topic);
    for (const auto& p : t.partitions) {
      auto& rp = rt.partitions.emplace_back();
      rp.partition = p.partition;
      if (!topic || p.partition < 0 || p.partition >= topic->info->partitions()) {
        rp.error_code = static_cast<int16_t>(error_code::unknown_topic_or_partition);
        continue;
      }
      if (const auto e = check_leader_epoch(p.current_leader_epoch); e != error_code::none) {
        rp.error_code = static_cast<int16_t>(e);
        continue;
      }
      const auto offs = ctx.store.offsets(topic->info->streams[static_cast<size_t>(p.partition)]);
      if (p.leader_epoch > leader_epoch || p.leader_epoch < 0) {
        // Kafka answers an unknown epoch with UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET.
        rp.leader_epoch = -1;
        rp.end_offset = -1;
      } else {
        rp.leader_epoch = leader_epoch;
        rp.end_offset = offs.end_offset;
      }
    }
  }
  co_return resp;
}

}  // namespace silt::handlers
