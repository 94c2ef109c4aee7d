// AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46), as Kafka's
// kafka-reassign-partitions tool and Admin.alterPartitionReassignments use them.
//
// A partition has one replica, its owner (data lives in the object store). A reassignment names
// the partition's new replica list; its first broker becomes the target owner: the current owner
// stops appending, uploads what its WAL holds of the partition, commits it and hands the
// partition over at the next leader epoch, and the target serves it from there (no data is
// copied). Other brokers in the list are accepted and ignored. A null list cancels a
// reassignment that has not completed (NO_REASSIGNMENT_IN_PROGRESS when there is none). Any
// broker takes the request: the target is written to the metadata store, where the owner finds
// it within a tenth of a second.
//
// ACLs, as Kafka's ControllerApis: AlterPartitionReassignments needs CLUSTER:ALTER (refused:
// CLUSTER_AUTHORIZATION_FAILED as the request's error and every partition's),
// ListPartitionReassignments CLUSTER:DESCRIBE (refused: CLUSTER_AUTHORIZATION_FAILED, the
// partitions asked echoed without reassignments), before anything else.
#include <set>

#include "handlers/access.h"
#include "handlers/admin_util.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using protocol::error_code;

template <typename Out>
void set(Out& out, error_code e, std::string message = {}) {
  out.error_code = static_cast<int16_t>(e);
  out.error_message = message.empty() ? std::nullopt : std::optional<std::string>(message);
}

}  // namespace

asio::awaitable<protocol::alter_partition_reassignments_response>
handle_alter_partition_reassignments(context& ctx, const net::request& raw,
                                     const protocol::alter_partition_reassignments_request& req) {
  protocol::alter_partition_reassignments_response resp;
  resp.error_message.reset();
  if (!access(ctx, raw).cluster(security::acl_operation::alter)) {
    const auto e = error_code::cluster_authorization_failed;
    const auto message = admin::default_message(e);
    set(resp, e, message);
    for (const auto& t : req.topics) {
      auto& rt = resp.responses.emplace_back();
      rt.name = t.name;
      for (const auto& p : t.partitions) {
        auto& rp = rt.partitions.emplace_back();
        rp.partition_index = p.partition_index;
        set(rp, e, message);
      }
    }
    co_return resp;
  }
  std::map<base::stream_id, base::node_id> pending;
  for (const auto& [id, s] : ctx.store.targets()) pending[id] = s.target;
  std::vector<metadata::stream_target> targets;
  // Each partition's answer, filled once the targets are written.
  std::vector<
      protocol::alter_partition_reassignments_response_types::ReassignablePartitionResponse*>
      accepted;
  resp.responses.reserve(req.topics.size());
  for (const auto& t : req.topics) {
    auto& rt = resp.responses.emplace_back();
    rt.name = t.name;
    const auto topic = ctx.topic(t.name);
    rt.partitions.reserve(t.partitions.size());
    for (const auto& p : t.partitions) {
      auto& rp = rt.partitions.emplace_back();
      rp.partition_index = p.partition_index;
      set(rp, error_code::none);
      const auto stream = stream_of(topic, p.partition_index);
      if (!stream) {
        set(rp, error_code::unknown_topic_or_partition,
            "The partition " + t.name + "-" + std::to_string(p.partition_index) +
                " does not exist.");
        continue;
      }
      if (!p.replicas) {
        if (!pending.contains(*stream)) {
          set(rp, error_code::no_reassignment_in_progress,
              "No ongoing reassignment for partition " + t.name + "-" +
                  std::to_string(p.partition_index) + ".");
          continue;
        }
        targets.push_back({*stream, base::node_id(-1)});
        accepted.push_back(&rp);
        continue;
      }
      const auto& replicas = *p.replicas;
      const std::set<int32_t> distinct(replicas.begin(), replicas.end());
      if (replicas.empty() || distinct.size() != replicas.size()) {
        set(rp, error_code::invalid_replica_assignment,
            replicas.empty() ? "The replica list is empty." : "The replica list has duplicates.");
        continue;
      }
      bool all_live = true;
      for (const int32_t r : replicas) all_live = all_live && ctx.live(r);
      if (!all_live) {
        set(rp, error_code::invalid_replica_assignment,
            "The proposed replica assignment names a broker that is not live.");
        continue;
      }
      const base::node_id to(replicas.front());
      const auto offs = ctx.store.offsets(*stream);
      // Already there: a pending move elsewhere is cancelled, else nothing to do.
      if (to == offs.owner && !pending.contains(*stream)) continue;
      targets.push_back({*stream, to == offs.owner ? base::node_id(-1) : to});
      accepted.push_back(&rp);
    }
  }
  if (!targets.empty()) {
    if (auto r = ctx.store.assign(targets); !r) {
      for (auto* rp : accepted) {
        set(*rp, error_code::kafka_storage_error, "The metadata store could not be written.");
      }
    }
  }
  co_return resp;
}

asio::awaitable<protocol::list_partition_reassignments_response>
handle_list_partition_reassignments(context& ctx, const net::request& raw,
                                    const protocol::list_partition_reassignments_request& req) {
  protocol::list_partition_reassignments_response resp;
  resp.error_message.reset();
  if (!access(ctx, raw).cluster(security::acl_operation::describe)) {
    const auto e = error_code::cluster_authorization_failed;
    set(resp, e, admin::default_message(e));
    if (req.topics) {
      for (const auto& t : *req.topics) {
        auto& out = resp.topics.emplace_back();
        out.name = t.name;
        for (const int32_t index : t.partition_indexes) {
          out.partitions.emplace_back().partition_index = index;
        }
      }
    }
    co_return resp;
  }
  std::map<base::stream_id, metadata::stream_state> pending;
  for (const auto& [id, s] : ctx.store.targets()) pending[id] = s;
  // Only the partitions asked for (all, for a null list).
  std::map<std::string, std::set<int32_t>> wanted;
  if (req.topics) {
    for (const auto& t : *req.topics) {
      wanted[t.name].insert(t.partition_indexes.begin(), t.partition_indexes.end());
    }
  }
  for (const auto& info : ctx.registry.all()) {
    if (req.topics && !wanted.contains(info->name)) continue;
    protocol::list_partition_reassignments_response_types::OngoingTopicReassignment out;
    out.name = info->name;
    for (size_t i = 0; i < info->streams.size(); ++i) {
      const auto it = pending.find(info->streams[i]);
      if (it == pending.end()) continue;
      const auto index = static_cast<int32_t>(i);
      if (req.topics && !wanted[info->name].contains(index)) continue;
      auto& p = out.partitions.emplace_back();
      p.partition_index = index;
      const int32_t owner = it->second.owner.value();
      const int32_t target = it->second.target.value();
      if (owner >= 0) p.replicas.push_back(owner);
      p.replicas.push_back(target);
      p.adding_replicas.push_back(target);
      if (owner >= 0) p.removing_replicas.push_back(owner);
    }
    if (!out.partitions.empty()) resp.topics.push_back(std::move(out));
  }
  co_return resp;
}

}  // namespace silt::handlers
