// OffsetCommit (key 8): a group's consumed positions, durable in the metadata store (batched
// with other commits, coordinator/offset_writer.h) before the answer. Checked as Kafka does:
// the committer's member id and generation, each partition's topic, the metadata's size.
//
// ACLs, as Kafka's KafkaApis.handleOffsetCommitRequest: GROUP:READ on the group (refused:
// GROUP_AUTHORIZATION_FAILED on every partition, nothing committed), then TOPIC:READ on each
// topic (refused: TOPIC_AUTHORIZATION_FAILED on its partitions whether it exists or not; the
// other topics are committed).
#include "base/clock.h"
#include "base/utf8.h"
#include "handlers/access.h"
#include "handlers/group_reply.h"
#include "handlers/handlers.h"

namespace silt::handlers {

asio::awaitable<protocol::offset_commit_response> handle_offset_commit(
    context& ctx, const net::request& raw, const protocol::offset_commit_request& req) {
  using protocol::error_code;
  const int16_t version = raw.header.header.request_api_version;
  auto& groups = ctx.groups();
  const access a(ctx, raw);
  protocol::offset_commit_response resp;
  resp.topics.reserve(req.topics.size());
  if (!a.group(security::acl_operation::read, req.group_id)) {
    for (const auto& t : req.topics) {
      auto& rt = resp.topics.emplace_back();
      rt.name = t.name;
      for (const auto& p : t.partitions) {
        rt.partitions.push_back(
            {p.partition_index, static_cast<int16_t>(error_code::group_authorization_failed), {}});
      }
    }
    co_return resp;
  }
  std::vector<coordinator::commit_partition> offsets;
  // Where each partition's answer goes, and whether it waits for the commit.
  std::vector<std::pair<int16_t*, bool>> slots;
  const int64_t now = base::now_ms();
  const int64_t expire =
      version <= 4 && req.retention_time_ms >= 0 ? now + req.retention_time_ms : -1;
  for (const auto& t : req.topics) {
    auto& rt = resp.topics.emplace_back();
    rt.name = t.name;
    rt.partitions.resize(t.partitions.size());
    const auto topic = ctx.topic(t.name);
    const bool may_read = a.topic(security::acl_operation::read, t.name);
    for (size_t i = 0; i < t.partitions.size(); ++i) {
      const auto& p = t.partitions[i];
      auto& out = rt.partitions[i];
      out.partition_index = p.partition_index;
      error_code e = error_code::none;
      if (!may_read) {
        e = error_code::topic_authorization_failed;
      } else if (req.group_id.empty()) {
        e = error_code::invalid_group_id;
      } else if (!stream_of(topic, p.partition_index)) {
        e = error_code::unknown_topic_or_partition;
      } else if (p.committed_metadata &&
                 p.committed_metadata->size() >
                     static_cast<size_t>(groups.options().max_metadata_bytes)) {
        e = error_code::offset_metadata_too_large;
      } else if (p.committed_metadata && !base::is_storable_text(*p.committed_metadata)) {
        // Kafka keeps any string; Silt's store keeps text (Java clients send UTF-8).
        e = error_code::invalid_request;
      }
      out.error_code = static_cast<int16_t>(e);
      if (e != error_code::none) continue;
      offsets.push_back({t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                         p.committed_metadata.value_or(""), expire});
    }
  }
  if (offsets.empty()) co_return resp;
  group_reply<error_code> reply(co_await asio::this_coro::executor);
  groups.commit(req.group_id, req.member_id, req.group_instance_id,
                req.generation_id_or_member_epoch, std::move(offsets), reply.callback());
  // Kafka answers REQUEST_TIMED_OUT after offsets.commit.timeout.ms (the client retries); the
  // write may still land, as it may in Kafka.
  error_code e =
      (co_await reply.get_for(std::chrono::milliseconds(groups.options().commit_timeout_ms)))
          .value_or(error_code::request_timed_out);
  // A group that does not exist with a generation given: named so from v9 on, an illegal
  // generation before (as Kafka answers).
  if (e == error_code::group_id_not_found && version < 9) e = error_code::illegal_generation;
  for (auto& t : resp.topics) {
    for (auto& p : t.partitions) {
      if (p.error_code == 0) p.error_code = static_cast<int16_t>(e);
    }
  }
  co_return resp;
}

}  // namespace silt::handlers
