// Fetch and ListOffsets of __consumer_offsets, from the coordinator's view of the shards it
// holds (coordinator/offsets_log.h).
#include "handlers/offsets_topic.h"

namespace silt::handlers {

namespace {

using protocol::error_code;

// The error of a partition this broker does not serve, or none.
error_code not_served(const context& ctx, int32_t partition) {
  if (partition < 0 || partition >= offsets_topic_partitions(ctx)) {
    return error_code::unknown_topic_or_partition;
  }
  return ctx.groups().offsets_topic_log().offsets(partition) ? error_code::none
                                                             : error_code::not_leader_or_follower;
}

}  // namespace

offsets_topic_read read_offsets_topic(const context& ctx, int32_t partition, int64_t offset,
                                      size_t max_bytes) {
  offsets_topic_read out;
  if (const auto e = not_served(ctx, partition); e != error_code::none) {
    out.error = e;
    return out;
  }
  auto r = ctx.groups().offsets_topic_log().read(partition, offset, max_bytes);
  if (!r) {
    out.error = r.error() == coordinator::offsets_log::read_error::out_of_range
                    ? error_code::offset_out_of_range
                    : error_code::not_leader_or_follower;
    if (const auto b = ctx.groups().offsets_topic_log().offsets(partition)) {
      out.high_watermark = b->end;
      out.log_start_offset = b->start;
    }
    return out;
  }
  out.high_watermark = r->at.end;
  out.log_start_offset = r->at.start;
  out.batch = std::move(r->batch);
  return out;
}

offsets_topic_offset list_offsets_topic(const context& ctx, int32_t partition, int64_t timestamp) {
  offsets_topic_offset out;
  if (const auto e = not_served(ctx, partition); e != error_code::none) {
    out.error = e;
    return out;
  }
  const auto& log = ctx.groups().offsets_topic_log();
  const auto b = log.offsets(partition);
  if (!b) {
    out.error = error_code::not_leader_or_follower;
    return out;
  }
  out.leader_epoch = 0;  // as Metadata shows the topic's partitions
  switch (timestamp) {
    case -1:
      out.offset = b->end;
      return out;
    case -2:
    case -4:
      out.offset = b->start;
      return out;
    case -5:
      out.leader_epoch = -1;
      return out;
    default:
      break;
  }
  if (timestamp < -5) {
    out.error = error_code::invalid_request;
    return out;
  }
  const auto f = log.offset_for_time(partition, timestamp);
  if (!f) {
    out.error = error_code::not_leader_or_follower;
    return out;
  }
  out.offset = f->offset;
  out.timestamp = f->timestamp;
  if (f->offset < 0) out.leader_epoch = -1;
  return out;
}

}  // namespace silt::handlers
