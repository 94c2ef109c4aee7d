// The follower: how this broker follows the cluster that shares its metadata store. Each round
// of the follow loop (follow()) takes in the topic changes other brokers made and reports up to
// which one it did, then follows ownership: it adopts the streams handed to this broker, takes
// those placed on it that nobody owns, and hands over those placed elsewhere. Each round of the
// controller thread gives it the takeovers of dead brokers' WALs this broker holds
// (take_over()) and the group coordinator's shards (follow_shards()). At a clean shutdown,
// hand_over_owned() hands every partition this broker owns to the other live brokers.
//
// Owned by the broker (app/node.h): created once the stream store, the topic registry, the
// membership and the group coordinator are open, closed (close(), then join()) before the
// stream store closes. What it needs of the request path's state (the handlers' context and
// producer state, which this component cannot depend on) comes in as callbacks
// (follower_hooks).
//
// Threads: follow() and follow_topics() run on the follow loop's thread (and on the opening
// thread before it starts), one at a time; unsettled_ and unsettled_since_ are theirs.
// take_over() and follow_shards() run on the controller thread, hand_over_owned() on the thread
// that stops the broker. Releases and takeovers run on `moves_`: one of each at a time
// (releasing_, taking_over_); takeover_failures_ is the takeover run's.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/thread_pool.hpp>
#include <tl/expected.hpp>

#include "base/ids.h"
#include "cluster/controller.h"
#include "cluster/membership.h"
#include "coordinator/coordinator.h"
#include "metadata/broker_registry.h"
#include "metadata/group_store.h"
#include "metadata/topic_registry.h"
#include "storage/stream_store.h"

namespace silt::cluster {

struct follower_options {
  base::node_id self{-1};
  // How long a stream a topic's creator has not taken yet holds up the report of the topic
  // changes taken in (broker.session.timeout.ms).
  std::chrono::milliseconds session_timeout{3000};
  // The group coordinator's shards (offsets.topic.num.partitions).
  int32_t shards = 50;
};

// What the follower needs of the request path (handlers::context and producer_state), set by
// the broker's wiring. Each is called from the follower's threads and must be thread-safe.
struct follower_hooks {
  // A deleted topic is forgotten.
  std::function<void(const metadata::topic_ptr&)> forget_topic;
  // A created or changed topic (its registry snapshot) is taken into use.
  std::function<void(const metadata::topic_ptr&)> refresh_topic;
  // The topic of that name as requests are served it now (null: none).
  std::function<metadata::topic_ptr(std::string_view)> served_topic;
  // The stream's producer state is dropped, and read again on the stream's next use.
  std::function<void(base::stream_id)> forget_producer_state;
  // Stores the producer state of every stream touched since the last snapshot.
  std::function<tl::expected<void, std::string>()> snapshot_producer_state;
  // Wakes every client waiting on this broker (fetch long polls, produces waiting for room).
  std::function<void()> wake_waiters;
};

class follower {
 public:
  follower(follower_options options, storage::stream_store& store,
           metadata::topic_registry& registry, membership& members,
           coordinator::group_coordinator& groups, follower_hooks hooks);
  follower(const follower&) = delete;
  follower& operator=(const follower&) = delete;

  // The controller, once started (hand_over_owned() stops it; none before).
  void set_controller(controller* c) { controller_ = c; }

  // Takes in the topic changes other brokers made, then follows ownership: one round of the
  // follow loop.
  void follow();
  // The first half: takes in the topic changes, then reports to the broker registry up to
  // which change it did, so that admin calls on other brokers answer once this one serves
  // their changes (handlers::context::agree()).
  void follow_topics();
  // Runs the takeovers of dead brokers' WALs this broker holds (stream_store::take_over()) on
  // `moves_`, one run at a time; called by the controller thread each round.
  void take_over(const std::vector<metadata::wal_takeover>& takeovers);
  // Takes the coordinator shards placed on this broker and drops those placed elsewhere or
  // taken by another broker; notes where each is coordinated (controller thread, each round).
  void follow_shards(const std::vector<metadata::shard_state>& shards);
  // The broker is draining (its membership drained): the handovers of every partition it owns
  // to the other live brokers, round-robin, after giving up the controller role and the group
  // coordinator's shards. Blocking (uploads, the metadata store); not on a network thread.
  void hand_over_owned();

  // The broker is closing: from now on no shard is taken (those held are dropped at the next
  // round) and no release or takeover begins.
  void close();
  // Waits for the releases and takeovers under way (their uploads fail fast once the object
  // store's calls are cancelled). After close(), before the stream store closes.
  void join();

 private:
  // The second half of follow(): takes in streams handed to this broker, takes streams placed
  // on it that nobody owns, and starts handing over those placed elsewhere (on `moves_`,
  // unless a release runs).
  void follow_owners();
  // Hands each stream of `to` to its node: prepare_release(), producer state stored, then
  // handover(). Returns how many were handed over.
  tl::expected<size_t, storage::stream_error> release(
      const std::map<base::stream_id, base::node_id>& to);

  const follower_options options_;
  storage::stream_store& store_;
  metadata::topic_registry& registry_;
  membership& members_;
  coordinator::group_coordinator& groups_;
  const follower_hooks hooks_;
  controller* controller_ = nullptr;
  std::vector<base::stream_id> unsettled_;  // learned streams not taken yet (follow_topics())
  // Since when unsettled_ has not been empty (follow_topics()).
  std::optional<std::chrono::steady_clock::time_point> unsettled_since_;
  std::atomic<bool> taking_over_{false};
  std::atomic<bool> releasing_{false};  // a release runs (follow_owners(), hand_over_owned())
  uint64_t takeover_failures_ = 0;      // in a row (the takeover run only)
  std::atomic<bool> closed_{false};
  // Releases and takeovers run here, one of each at a time, so that neither holds the follow
  // loop up (a release waits for uploads, a takeover reads a whole WAL). Last: its threads end
  // before the state they use goes.
  boost::asio::thread_pool moves_{2};
};

}  // namespace silt::cluster
