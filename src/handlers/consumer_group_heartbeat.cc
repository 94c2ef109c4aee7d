// ConsumerGroupHeartbeat (key 68): a member of a KIP-848 consumer group joins, heartbeats,
// acknowledges revocations and leaves; the broker computes the assignment
// (coordinator/consumer_group.h). Topics are named by id in assignments.
//
// ACLs, as Kafka's KafkaApis.handleConsumerGroupHeartbeat: GROUP:READ on the group (refused:
// GROUP_AUTHORIZATION_FAILED), then TOPIC:DESCRIBE on every name of subscribed_topic_names when
// the heartbeat carries some: one refused fails the heartbeat with TOPIC_AUTHORIZATION_FAILED,
// whether the topic exists or not, and nothing changes in the group. A regex subscription is not
// checked here: its matches leave out the topics the principal may not DESCRIBE (Kafka's
// GroupMetadataManager.refreshRegularExpressions), see described_topics.
#include <cstdint>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "coordinator/topic_regex.h"
#include "handlers/access.h"
#include "handlers/group_topics.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

// The topics as a group sees them under ACLs: what a regex subscription matches (all()) is only
// the topics the heartbeating principal may DESCRIBE. As in Kafka, the matches are kept per
// group and per regex and shared by every member subscribed with that regex: they are those of
// the member whose heartbeat computed them. They are computed again when the topics change (the
// version moves); unlike Kafka's, which also refreshes them every
// group.consumer.regex.refresh.interval.ms (10 minutes), an ACL change alone shows only with
// the next change of topics. The version is kept apart from group_topics' (top bit set) so that
// matches computed without the filter (by OffsetDelete, for a group whose patterns were not
// matched since a restart) are never taken for filtered ones.
class described_topics final : public coordinator::topic_lookup {
 public:
  described_topics(const group_topics& topics, const access& a) : topics_(topics), a_(a) {}
  [[nodiscard]] std::optional<coordinator::topic_meta> by_name(
      std::string_view name) const override {
    return topics_.by_name(name);
  }
  [[nodiscard]] std::optional<coordinator::topic_meta> by_id(
      const coordinator::topic_uuid& id) const override {
    return topics_.by_id(id);
  }
  [[nodiscard]] std::vector<coordinator::topic_meta> all() const override {
    auto out = topics_.all();
    std::erase_if(out, [&](const coordinator::topic_meta& t) {
      return !a_.topic(security::acl_operation::describe, t.name);
    });
    return out;
  }
  [[nodiscard]] uint64_t version() const override {
    return topics_.version() | (uint64_t{1} << 63);
  }

 private:
  const group_topics& topics_;
  const access& a_;
};

}  // namespace

asio::awaitable<protocol::consumer_group_heartbeat_response> handle_consumer_group_heartbeat(
    context& ctx, const net::request& raw, const protocol::consumer_group_heartbeat_request& req) {
  using protocol::error_code;
  protocol::consumer_group_heartbeat_response resp;
  const access a(ctx, raw);
  if (!a.group(security::acl_operation::read, req.group_id)) {
    resp.error_code = static_cast<int16_t>(error_code::group_authorization_failed);
    co_return resp;
  }
  if (a.enabled() && req.subscribed_topic_names) {
    for (const auto& name : *req.subscribed_topic_names) {
      if (!a.topic(security::acl_operation::describe, name)) {
        resp.error_code = static_cast<int16_t>(error_code::topic_authorization_failed);
        co_return resp;
      }
    }
  }
  if (req.group_id.empty()) {
    resp.error_code = static_cast<int16_t>(error_code::invalid_request);
    resp.error_message = "GroupId can't be empty.";
    co_return resp;
  }
  coordinator::consumer_heartbeat hb;
  hb.member_id = req.member_id;
  hb.member_epoch = req.member_epoch;
  hb.instance_id = req.instance_id;
  hb.rack_id = req.rack_id;
  hb.rebalance_timeout_ms = req.rebalance_timeout_ms;
  hb.subscribed_topic_names = req.subscribed_topic_names;
  hb.subscribed_topic_regex = req.subscribed_topic_regex;
  hb.server_assignor = req.server_assignor;
  if (req.topic_partitions) {
    coordinator::member_assignment owned;
    for (const auto& t : *req.topic_partitions) {
      owned[t.topic_id.bytes].insert(t.partitions.begin(), t.partitions.end());
    }
    hb.owned = std::move(owned);
  }
  hb.client_id = raw.header.header.client_id.value_or("");
  hb.client_host = client_host(raw);
  const group_topics topics(ctx);
  const described_topics described(topics, a);
  const coordinator::topic_lookup& lookup =
      a.enabled() ? static_cast<const coordinator::topic_lookup&>(described) : topics;
  // Patterns are matched against the topics off the network thread and without the
  // coordinator's lock, one matching at a time (coordinator/topic_regex.h).
  coordinator::regex_match_map matched;
  if (const auto patterns =
          ctx.groups().regexes_to_match(req.group_id, req.subscribed_topic_regex, lookup.version());
      !patterns.empty()) {
    const auto home = co_await asio::this_coro::executor;
    // (Bound to the strand: post(executor, use_awaitable) would resume on `home` again.)
    co_await asio::post(asio::bind_executor(ctx.groups().regex_executor(), asio::use_awaitable));
    matched = coordinator::match_topic_regexes(patterns, lookup);
    co_await asio::post(home, asio::use_awaitable);
  }
  auto r = ctx.groups().consumer_heartbeat(req.group_id, std::move(hb), lookup, std::move(matched));
  resp.error_code = static_cast<int16_t>(r.error);
  if (r.error != error_code::none) {
    if (!r.message.empty()) resp.error_message = std::move(r.message);
    co_return resp;
  }
  resp.member_id = std::move(r.member_id);
  resp.member_epoch = r.member_epoch;
  resp.heartbeat_interval_ms = r.heartbeat_interval_ms;
  if (r.assignment) {
    auto& a = resp.assignment.emplace();
    for (const auto& [topic, parts] : *r.assignment) {
      auto& tp = a.topic_partitions.emplace_back();
      tp.topic_id.bytes = topic;
      tp.partitions.assign(parts.begin(), parts.end());
    }
  }
  co_return resp;
}

}  // namespace silt::handlers
