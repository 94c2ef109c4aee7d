// DeleteRecords (key 21): moves partitions' log start offsets forward. -1 means the high
// watermark; an offset above it is OFFSET_OUT_OF_RANGE. Whole objects are freed later.
//
// ACLs, as Kafka's KafkaApis.handleDeleteRecordsRequest: TOPIC:DELETE on each topic (refused:
// TOPIC_AUTHORIZATION_FAILED on its partitions, low watermark -1, whether it exists or not).
#include "handlers/access.h"
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::delete_records_response> handle_delete_records(
    context& ctx, const net::request& raw, const protocol::delete_records_request& req) {
  using protocol::error_code;
  const access a(ctx, raw);
  protocol::delete_records_response resp;
  for (const auto& t : req.topics) {
    auto& rt = resp.topics.emplace_back();
    rt.name = t.name;
    const bool may_delete = a.topic(security::acl_operation::delete_, t.name);
    auto topic = ctx.topic(t.name);
    for (const auto& p : t.partitions) {
      auto& rp = rt.partitions.emplace_back();
      rp.partition_index = p.partition_index;
      rp.low_watermark = -1;
      if (!may_delete) {
        rp.error_code = static_cast<int16_t>(error_code::topic_authorization_failed);
        continue;
      }
      const auto found = stream_of(topic, p.partition_index);
      if (!found) {
        rp.error_code = static_cast<int16_t>(error_code::unknown_topic_or_partition);
        continue;
      }
      const base::stream_id stream = *found;
      const auto offs = ctx.store.offsets(stream);
      // -1 asks for the high watermark.
      const base::offset target = p.offset == -1 ? offs.end_offset : base::offset(p.offset);
      if (target < base::offset(0) || target > offs.end_offset) {
        rp.error_code = static_cast<int16_t>(error_code::offset_out_of_range);
        continue;
      }
      if (target > offs.start_offset) {
        if (auto r = ctx.store.trim(stream, target); !r) {
          rp.error_code = static_cast<int16_t>(error_code::kafka_storage_error);
          continue;
        }
      }
      rp.low_watermark = ctx.store.offsets(stream).start_offset.value();
    }
  }
  co_return resp;
}

}  // namespace silt::handlers
