// What every request handler works with: the broker's configuration, its storage, its topics,
// the producer and fetch state and the users' credentials, owned by the broker (app/node.h) for
// its lifetime.
// Thread-safe: handlers of many connections use it at once.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <tl/expected.hpp>

#include "base/ids.h"
#include "base/log.h"
#include "base/mutex.h"
#include "cluster/controller.h"
#include "cluster/membership.h"
#include "config/config.h"
#include "config/topic_config.h"
#include "coordinator/coordinator.h"
#include "handlers/client_quotas.h"
#include "handlers/data_waiters.h"
#include "handlers/fetch_sessions.h"
#include "handlers/produce_order.h"
#include "handlers/producer_state.h"
#include "metadata/acl_store.h"
#include "metadata/credential_store.h"
#include "metadata/quota_store.h"
#include "metadata/topic_registry.h"
#include "security/authorizer.h"
#include "storage/stream_store.h"

namespace silt::handlers {

// A topic's traffic through this broker since it started, for the metrics endpoint (Kafka's
// BrokerTopicMetrics). Relaxed atomics: counted by every request that touches the topic.
struct topic_counters {
  std::atomic<uint64_t> bytes_in{0};     // record batches appended
  std::atomic<uint64_t> messages_in{0};  // records appended
  std::atomic<uint64_t> bytes_out{0};    // record batches fetched
  std::atomic<uint64_t> produce_requests{0};
};

// A topic as the request path sees it: the registry's snapshot and its effective config, and
// its counters (the same object for as long as the topic lives, across config changes).
struct topic_entry {
  metadata::topic_ptr info;
  config::topic_config cfg;
  std::shared_ptr<topic_counters> counters;
};
using topic_entry_ptr = std::shared_ptr<const topic_entry>;

class context {
 public:
  context(const config::broker_config& config, std::string cluster_id, storage::stream_store& store,
          metadata::topic_registry& registry, producer_state& producers,
          boost::asio::thread_pool& blocking);

  [[nodiscard]] topic_entry_ptr topic(std::string_view name) const;
  [[nodiscard]] topic_entry_ptr topic(const metadata::topic_id& id) const;
  [[nodiscard]] std::vector<topic_entry_ptr> topics() const;

  // Creates a topic (config overrides validated here) and applies its retention. Creations
  // run one at a time: a request that finds the name taken finds the topic served here too
  // (two Metadata requests auto-creating one topic, the second answered while the first still
  // took the streams, would otherwise not see it). On the blocking pool.
  [[nodiscard]] tl::expected<topic_entry_ptr, config::config_error> create_topic(
      const std::string& name, int32_t partitions,
      const std::map<std::string, std::string>& configs);
  // Takes a changed registry snapshot (configs, partitions) into use.
  topic_entry_ptr refresh(const metadata::topic_ptr& info);
  // Forgets a deleted topic.
  void forget(const metadata::topic_ptr& info);
  // Takes streams for this broker at their next epoch (catalog I/O: blocking pool only).
  void take(const std::vector<base::stream_id>& streams);

  // Once an admin call changed topics, it answers when every broker serves them so: waits
  // until every other live broker reported (cluster::membership::report_topics_applied) that
  // it took in this broker's topic changes made after `since` (a registry.last_change() read
  // before them), checking every 20 ms, at most `cap` and at most a session timeout and a
  // heartbeat (a broker that died meanwhile is no longer live by then). Returns at once when
  // nothing changed since `since`, or outside a cluster. True when every one took them in.
  // Reads the broker registry: on the blocking pool only.
  [[nodiscard]] boost::asio::awaitable<bool> agree(
      int64_t since, std::chrono::milliseconds cap = std::chrono::milliseconds::max());

  const config::broker_config& config;
  const std::string cluster_id;
  const int32_t node_id;
  const std::string advertised_host;  // the first advertised listener's (advertised_for())
  const int32_t advertised_port;
  storage::stream_store& store;
  metadata::topic_registry& registry;
  producer_state& producers;
  boost::asio::thread_pool& blocking;  // for calls that may block (cold reads)
  data_waiters waiters;
  fetch_sessions sessions;
  produce_order order;  // a connection's produces append in arrival order
  std::atomic<bool> stopping{false};
  // Stopping cleanly: consumers reading here partitions other brokers own are sent to the
  // owner (librdkafka 2.0, Debian bookworm's, leaves a preferred read replica only for a
  // redirect, not when it stops answering).
  std::atomic<bool> leaving{false};
  // ACLs (authorizer.class.name set), set by the broker before it serves; null: no
  // authorization, every request allowed (see access.h).
  std::shared_ptr<security::authorizer> authorizer;
  // Where ACL changes last (null in tests: the authorizer alone), set with the authorizer.
  metadata::acl_store* acl_store = nullptr;
  // Client quotas as the request path applies them (client_quotas.h), and where their changes
  // last (null in tests: memory only), set by the broker before it serves.
  client_quotas quotas;
  metadata::quota_store* quota_store = nullptr;

  // This broker's cluster membership, set by the broker before it serves (null in tests).
  void set_membership(const cluster::membership* m) { membership_ = m; }
  // Whether this broker may acknowledge writes: its membership lease holds.
  [[nodiscard]] bool can_acknowledge() const {
    return membership_ == nullptr || membership_->can_acknowledge();
  }
  // A live member's registration (none for a node that is not live).
  [[nodiscard]] std::optional<metadata::broker_info> member(int32_t node) const {
    const auto list = membership_ != nullptr ? membership_->brokers() : nullptr;
    if (!list) return std::nullopt;
    for (const auto& b : *list) {
      if (b.info.node.value() == node) return b.info;
    }
    return std::nullopt;
  }
  // Whether `node` is a live member of the cluster (this broker always is).
  [[nodiscard]] bool live(int32_t node) const { return node == node_id || member(node); }
  // A live member's registration if it is not stopping: the brokers clients are sent to as a
  // partition's leader or a group's coordinator. A stopping broker hands its partitions and
  // groups over; naming it would send clients to a broker about to close, and a client told
  // of a leader that moves away and back can lose track of it (librdkafka 2.0 then keeps
  // producing to the broker that left).
  [[nodiscard]] std::optional<metadata::broker_info> serving_member(int32_t node) const {
    const auto list = membership_ != nullptr ? membership_->brokers() : nullptr;
    if (!list) return std::nullopt;
    for (const auto& b : *list) {
      if (b.info.node.value() == node) {
        return b.draining ? std::nullopt : std::optional<metadata::broker_info>(b.info);
      }
    }
    return std::nullopt;
  }
  // The live brokers as of the last heartbeat (null outside a cluster).
  [[nodiscard]] std::shared_ptr<const cluster::broker_list> members() const {
    return membership_ != nullptr ? membership_->brokers() : nullptr;
  }
  // Whether `node` is among those and not stopping (this broker always is).
  [[nodiscard]] bool heard_lately(int32_t node) const {
    if (node == node_id) return true;
    const auto list = recently_heard();
    return list && std::any_of(list->begin(), list->end(), [&](const auto& b) {
             return b.info.node.value() == node && !b.draining;
           });
  }
  // Those heard from lately (cluster::membership::recently_heard(); null outside a cluster or
  // when this broker's list is late).
  [[nodiscard]] std::shared_ptr<const cluster::broker_list> recently_heard() const {
    return membership_ != nullptr ? membership_->recently_heard() : nullptr;
  }
  // Where a client that came through `listener` reaches this broker: that listener's advertised
  // endpoint, as Kafka advertises brokers per listener (the first advertised listener for a
  // name that has none, or an empty one: requests not read from a listener).
  [[nodiscard]] const config::endpoint& advertised_for(std::string_view listener) const {
    for (const auto& e : config.advertised_listeners) {
      if (e.listener_name == listener) return e;
    }
    return default_advertised_;
  }
  // The live brokers, this one always among them, as a response's broker entries
  // ({id, host, port, rack} and the tagged fields), this one as advertised on `listener`.
  // Other brokers are listed with the endpoint they registered for that listener (their first
  // one when they have none of that name).
  template <typename Broker>
  [[nodiscard]] std::vector<Broker> brokers_as(std::string_view listener = {}) const {
    std::vector<Broker> out;
    const auto& self = advertised_for(listener);
    const auto list = membership_ != nullptr ? membership_->brokers() : nullptr;
    if (!list) {
      out.push_back({node_id, self.host, self.port, rack_of(config.broker_rack), {}});
      return out;
    }
    out.reserve(list->size());
    for (const auto& b : *list) {
      if (b.info.node.value() == node_id) {
        out.push_back({node_id, self.host, self.port, rack_of(b.info.rack), {}});
        continue;
      }
      const auto [host, port] = b.info.endpoint_for(listener);
      out.push_back({b.info.node.value(), std::string(host), port, rack_of(b.info.rack), {}});
    }
    return out;
  }

  // Whether consumers are sent to brokers of their rack (replica.selector.class, KIP-392).
  [[nodiscard]] bool reads_near_client() const {
    return config.replica_selector_class == config::rack_aware_selector;
  }
  // Reads near the client, counted since start: fetches of partitions sent to a
  // broker of the client's rack, and partition reads served for partitions another broker
  // owns (with their bytes).
  std::atomic<uint64_t> sent_to_rack{0};
  std::atomic<uint64_t> read_for_owner{0};
  std::atomic<uint64_t> read_for_owner_bytes{0};

  // The group coordinator, set by the broker before it serves (null in tests without groups).
  [[nodiscard]] coordinator::group_coordinator& groups() const { return *groups_; }
  void set_groups(coordinator::group_coordinator* groups) { groups_ = groups; }
  // The users' SCRAM credentials, set by the broker before it serves (null in tests without
  // them).
  [[nodiscard]] metadata::credential_store& credentials() const { return *credentials_; }
  void set_credentials(metadata::credential_store* credentials) { credentials_ = credentials; }
  // The broker coordinating `group_id` now: this one while it holds the group's shard, else
  // where the shard is placed as last seen (-1: none known).
  [[nodiscard]] int32_t coordinator_node(std::string_view group_id) const {
    return groups_ != nullptr ? groups_->coordinator_of(group_id, node_id) : -1;
  }

 private:
  static std::optional<std::string> rack_of(const std::string& rack) {
    return rack.empty() ? std::nullopt : std::optional<std::string>(rack);
  }

  coordinator::group_coordinator* groups_ = nullptr;
  metadata::credential_store* credentials_ = nullptr;
  const cluster::membership* membership_ = nullptr;
  const config::endpoint default_advertised_ = config::advertised_endpoint(config);
  base::log_limiter late_agreement_log_{std::chrono::seconds(10)};
  base::mutex create_mu_;  // held through create_topic()
  mutable base::mutex mu_;
  // Ordered with a transparent comparator: the request path looks names up without copying.
  std::map<std::string, topic_entry_ptr, std::less<>> by_name_ GUARDED_BY(mu_);
};

// The live brokers by rack heard from lately, as reads near the client (KIP-392) choose them
// (none but this one while its own list of brokers is late). Any broker can
// serve what is committed of any partition from the object store; in each rack one broker is
// chosen per partition (its stream id modulo the rack's brokers, so that a rack's partitions
// spread over its brokers), and it is listed as a replica of the partition. Unless
// replica.selector.class asks for it, outside a cluster, or without racks, every partition
// has its owner as only replica.
class rack_view {
 public:
  explicit rack_view(const context& ctx);
  // The broker of `rack` serving reads of `stream` for clients there: -1 when the rack is
  // empty or unknown, or `owner` is in it (the owner serves them).
  [[nodiscard]] int32_t reader(base::stream_id stream, std::string_view rack, int32_t owner) const;
  // The owner first, then the reader of each other rack (Metadata's replicas).
  [[nodiscard]] std::vector<int32_t> replicas(base::stream_id stream, int32_t owner) const;

 private:
  [[nodiscard]] const std::string* rack_of(int32_t node) const;

  std::map<std::string, std::vector<int32_t>, std::less<>> by_rack_;  // ids in order
  std::map<int32_t, std::string> racks_;
};

}  // namespace silt::handlers
