// DeleteTopics (key 20, v1-6): deletes topics by name (v1-5 topic_names; v6 topics, each by name
// or by id), as Kafka 4.1's ControllerApis does: a name or id given twice is refused
// (INVALID_REQUEST), an unknown name gets UNKNOWN_TOPIC_OR_PARTITION and an unknown id
// UNKNOWN_TOPIC_ID; with delete.topic.enable=false every topic gets TOPIC_DELETION_DISABLED
// (INVALID_REQUEST before v3). A deleted topic is gone at once: its name can be reused and its
// data is freed. Results name the topic and (v6) its id.
//
// ACLs, as Kafka's ControllerApis.deleteTopics: CLUSTER:DELETE lets every topic be deleted,
// else each needs TOPIC:DELETE, and TOPIC:DESCRIBE decides what a refused one learns. By name:
// one the principal may not describe is TOPIC_AUTHORIZATION_FAILED whether it exists or not; one
// it may describe but not delete is UNKNOWN_TOPIC_OR_PARTITION when it does not exist,
// TOPIC_AUTHORIZATION_FAILED when it does. By id: an unknown id is UNKNOWN_TOPIC_ID; a topic the
// principal may not delete is TOPIC_AUTHORIZATION_FAILED, with its name only if it may describe
// it. Names and ids given twice are refused before the checks. With ACLs on, the results are
// shuffled, as Kafka does so that their positions do not tell absent topics from hidden ones.
#include <algorithm>
#include <random>
#include <set>

#include "base/memory.h"
#include "handlers/access.h"
#include "handlers/admin_util.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using admin::api_error;
using protocol::delete_topics_request;
using protocol::delete_topics_response;
using protocol::error_code;

delete_topics_response::DeletableTopicResult result(std::optional<std::string> name,
                                                    protocol::uuid id, const api_error& e) {
  delete_topics_response::DeletableTopicResult r;
  r.name = std::move(name);
  r.topic_id = id;
  r.error_code = e.code;
  r.error_message = e.ok() ? std::nullopt : e.message;
  return r;
}

}  // namespace

asio::awaitable<delete_topics_response> handle_delete_topics(context& ctx, const net::request& raw,
                                                             const delete_topics_request& req) {
  using security::acl_operation;
  const int16_t version = raw.header.header.request_api_version;
  const access a(ctx, raw);
  const bool cluster_delete = a.cluster(acl_operation::delete_);
  auto describable = [&](const std::string& name) {
    return cluster_delete || a.topic(acl_operation::describe, name);
  };
  auto deletable = [&](const std::string& name) {
    return cluster_delete || a.topic(acl_operation::delete_, name);
  };
  delete_topics_response resp;
  const int64_t since = ctx.registry.last_change();
  // v6 names topics in `topics` (a zero id means by name); earlier versions in topic_names.
  std::vector<delete_topics_request::DeleteTopicState> asked;
  if (version >= 6) {
    asked = req.topics;
  } else {
    for (const auto& n : req.topic_names) asked.push_back({n, {}, {}});
  }

  if (!ctx.config.delete_topic_enable) {
    const api_error e = version < 3
                            ? api_error{error_code::invalid_request, "Topic deletion is disabled."}
                            : admin::error_of(error_code::topic_deletion_disabled);
    for (const auto& t : asked) resp.responses.push_back(result(t.name, t.topic_id, e));
    co_return resp;
  }

  // Sort out the names and ids given, refusing those given twice.
  std::vector<std::string> names;  // in request order, each once
  std::set<std::string> seen_names, dup_names;
  std::vector<protocol::uuid> ids;
  std::set<metadata::topic_id> seen_ids, dup_ids;
  for (const auto& t : asked) {
    if (!t.name) {
      if (t.topic_id.is_zero()) {
        resp.responses.push_back(
            result(std::nullopt, {},
                   {error_code::invalid_request, "Neither topic name nor id were specified."}));
      } else if (seen_ids.insert(t.topic_id.bytes).second) {
        ids.push_back(t.topic_id);
      } else {
        dup_ids.insert(t.topic_id.bytes);
      }
    } else if (!t.topic_id.is_zero()) {
      resp.responses.push_back(result(
          t.name, t.topic_id,
          {error_code::invalid_request, "You may not specify both topic name and topic id."}));
    } else if (seen_names.insert(*t.name).second) {
      names.push_back(*t.name);
    } else {
      dup_names.insert(*t.name);
    }
  }
  for (const auto& n : dup_names) {
    resp.responses.push_back(result(n, {}, {error_code::invalid_request, "Duplicate topic name."}));
  }
  for (const auto& id : dup_ids) {
    resp.responses.push_back(result(std::nullopt, admin::to_uuid(id),
                                    {error_code::invalid_request, "Duplicate topic id."}));
  }

  // Resolve ids to names. A name that maps to an id also given refuses both (one result).
  struct target {
    std::string name;
    protocol::uuid id;  // zero when asked by name
  };
  std::vector<target> to_delete;
  for (const auto& id : ids) {
    if (dup_ids.contains(id.bytes)) continue;
    auto info = ctx.registry.find(id.bytes);
    if (!info) {
      resp.responses.push_back(
          result(std::nullopt, id, admin::error_of(error_code::unknown_topic_id)));
      continue;
    }
    if (!deletable(info->name)) {
      resp.responses.push_back(
          result(describable(info->name) ? std::optional(info->name) : std::nullopt, id,
                 admin::error_of(error_code::topic_authorization_failed)));
      continue;
    }
    to_delete.push_back({info->name, id});
  }
  for (const auto& n : names) {
    if (dup_names.contains(n)) continue;
    if (!describable(n)) {
      resp.responses.push_back(
          result(n, {}, admin::error_of(error_code::topic_authorization_failed)));
      continue;
    }
    if (!deletable(n)) {
      // Known to the principal, which may learn whether it exists.
      resp.responses.push_back(
          result(n, {},
                 admin::error_of(ctx.registry.find(n) ? error_code::topic_authorization_failed
                                                      : error_code::unknown_topic_or_partition)));
      continue;
    }
    auto same = std::find_if(to_delete.begin(), to_delete.end(),
                             [&](const target& t) { return t.name == n; });
    if (same != to_delete.end()) {
      resp.responses.push_back(result(n, same->id,
                                      {error_code::invalid_request,
                                       "The provided topic name maps to an ID that was already "
                                       "supplied."}));
      to_delete.erase(same);
      continue;
    }
    to_delete.push_back({n, {}});
  }

  for (const auto& t : to_delete) {
    const bool by_id = !t.id.is_zero();
    metadata::topic_ptr deleted;
    const auto e = admin::delete_topic(ctx, t.name, deleted);
    if (!e.ok()) {
      // Deleted meanwhile by another request: unknown, in the terms it was asked in.
      if (by_id && e.code == static_cast<int16_t>(error_code::unknown_topic_or_partition)) {
        resp.responses.push_back(
            result(std::nullopt, t.id, admin::error_of(error_code::unknown_topic_id)));
      } else {
        resp.responses.push_back(result(by_id ? std::nullopt : std::optional(t.name), t.id, e));
      }
      continue;
    }
    // Groups forget their offsets of it, as Kafka's coordinator does on a topic's deletion.
    ctx.groups().forget_topic(t.name);
    resp.responses.push_back(result(t.name, admin::to_uuid(deleted->id), {}));
  }
  if (a.enabled()) {
    static thread_local std::mt19937_64 rng(std::random_device{}());
    std::shuffle(resp.responses.begin(), resp.responses.end(), rng);
  }
  // What the deleted topics' partitions held in memory goes back to the system.
  if (!to_delete.empty()) base::release_free_memory();
  // Answered once no broker serves the deleted topics any more.
  (void)co_await ctx.agree(since, admin::agreement_cap(req.timeout_ms));
  co_return resp;
}

}  // namespace silt::handlers
