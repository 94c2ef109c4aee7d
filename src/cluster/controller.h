// The controller: one broker at a time places the cluster's streams (partitions) on the live
// brokers. Every broker runs a controller thread; each round it claims or renews the controller
// lease in the metadata store (broker_registry::claim_controller(), a row in the database's
// clock), and only the holder places. Placement writes targets (stream_catalog::assign(), refused
// unless the lease is still held at its epoch): the owner of a stream whose target is another
// broker hands it over (stream_store::prepare_release() and handover()), and a stream no broker
// owns is taken by its target. So the controller never moves data; it says where streams go.
//
// Placement (plan_placement()): a stream nobody owns, or whose target is no longer live, goes to
// the live broker with the fewest streams; then, while one broker has at least two more streams
// than another, one of its streams is moved to the one with the fewest, at most max_moves per
// round. A stream whose owner is not live stays where it is: what that broker's WAL holds of it
// is not in the object store yet. Then by load, once counts are even: each broker reports the
// bytes per second its busiest streams took in (membership's load reports), and every
// balance_interval the controller moves one stream from the busiest broker to the least busy
// one, swapping a lighter stream back when counts must stay even, choosing the pair that
// brings the two closest, when they differ by at least min_load_imbalance bytes/s and a tenth
// of the busiest broker's load, and only if the pair closes a fifth of the gap or more (loads
// are measured, and lag: small gains are not worth a move).
//
// Failover: a stream whose owner is not live stays where it is until a live broker has taken
// over the owner's WAL. The controller gives each such dead broker's WAL to itself (a row of
// broker_registry::place_takeovers(), written only once that broker's lease has lapsed), and so
// the takeovers of a holder that died meanwhile. Every broker's controller thread hands the
// takeovers it holds to `on_takeover` each round until they end (stream_store::take_over():
// the holder takes the streams, appends what the dead WAL holds beyond their committed ends to
// its own, and ends the takeover); the streams are then the holder's, and placement spreads
// them like any others.
//
// Coordinator shards (plan_shards()): the controller places the group coordinator's shards on
// the live brokers too, by count: a shard not placed, or placed on a broker that is no longer
// live (or stops), goes to the live broker with the fewest; then shards move from the broker
// with the most to the one with the fewest while they differ by two or more. Every broker's
// controller thread reads the shards' owners and targets each round and hands them to
// `on_shards`: the broker takes the shards placed on it and drops the others (see
// coordinator/coordinator.h). A shard's groups are fenced by its epoch, so two brokers holding
// one shard for a round cannot both write to it.
//
// Thread-safe; no call blocks on the database except stop() (joins the thread).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

#include "base/ids.h"
#include "base/mutex.h"
#include "cluster/membership.h"
#include "metadata/broker_registry.h"
#include "metadata/group_store.h"
#include "metadata/stream_catalog.h"

namespace silt::cluster {

// Streams' ingest in bytes per second, as their brokers reported it (streams not listed: 0).
using load_map = std::unordered_map<base::stream_id, uint64_t>;

// The targets that place `streams` on the `live` brokers (see above); empty when nothing is to
// move. With `loads`, a step of balancing by load when the counts are even (at least
// `min_imbalance` bytes/s between the busiest and the least busy broker). Deterministic: the
// same input gives the same plan.
[[nodiscard]] std::vector<metadata::stream_target> plan_placement(
    const std::vector<base::node_id>& live,
    const std::vector<std::pair<base::stream_id, metadata::stream_state>>& streams,
    size_t max_moves, const load_map& loads = {}, uint64_t min_imbalance = 0);

// The targets that place coordinator shards 0 to `count` - 1 on the `live` brokers (see above),
// given the shards as stored: only the targets that change. Deterministic.
[[nodiscard]] std::vector<metadata::shard_target> plan_shards(
    const std::vector<base::node_id>& live, const std::vector<metadata::shard_state>& shards,
    int32_t count);

// The loads the live brokers in `brokers` reported, by stream (the highest where two report one
// stream: a stream that just moved is in the old owner's last report and the new one's next).
[[nodiscard]] load_map reported_loads(const std::vector<metadata::broker_record>& brokers);

struct controller_options {
  base::node_id self{-1};
  std::chrono::milliseconds interval{500};  // between rounds
  std::chrono::milliseconds lease{3000};    // the controller lease, renewed every round
  size_t max_moves = 256;                   // streams moved by one round of balancing
  // Balancing by load: at most one step this often, and only between brokers whose loads
  // differ by this many bytes/s or more.
  std::chrono::milliseconds balance_interval{10000};
  uint64_t min_load_imbalance = uint64_t{1} << 20;
  // Called on the controller thread when this broker becomes the controller (true) or stops
  // being it (false); a false return to `true` (the role could not be taken up) makes the next
  // round call it again.
  std::function<bool(bool)> on_change;
  // Called on the controller thread each round while this broker holds takeovers of dead
  // brokers' WALs, with those takeovers (keep it short: run them elsewhere).
  std::function<void(const std::vector<metadata::wal_takeover>&)> on_takeover;
  // The group coordinator's shards (offsets.topic.num.partitions; 0: none placed), and what is
  // called on the controller thread each round with every shard as stored, after the round's
  // placement.
  int32_t shards = 0;
  std::function<void(const std::vector<metadata::shard_state>&)> on_shards;
};

class controller {
 public:
  // Runs a first round (so that a broker that is the controller knows it before it serves),
  // then starts the controller thread; `members` must outlive it.
  [[nodiscard]] static tl::expected<std::unique_ptr<controller>, std::string> start(
      std::shared_ptr<metadata::sql::database> db, membership& members, controller_options options);
  ~controller();
  controller(const controller&) = delete;
  controller& operator=(const controller&) = delete;

  // Whether this broker held the controller lease at its last round.
  [[nodiscard]] bool active() const { return active_.load(std::memory_order_acquire); }
  // The node holding the controller lease as of the last round (-1: none).
  [[nodiscard]] base::node_id holder() const {
    return base::node_id(holder_.load(std::memory_order_acquire));
  }
  // Targets written since start.
  [[nodiscard]] uint64_t placed() const { return placed_.load(std::memory_order_relaxed); }
  // Streams moved to balance load since start.
  [[nodiscard]] uint64_t balanced() const { return balanced_.load(std::memory_order_relaxed); }
  // Takeovers of dead brokers' WALs this controller started or gave to itself since start.
  [[nodiscard]] uint64_t takeovers_placed() const {
    return takeovers_placed_.load(std::memory_order_relaxed);
  }
  // Stops the thread and gives the role up (on_change(false), then the lease).
  void stop();

 private:
  controller(std::unique_ptr<metadata::broker_registry> registry,
             std::unique_ptr<metadata::stream_catalog> catalog,
             std::unique_ptr<metadata::group_store> shards, membership& members,
             controller_options options);
  void run();
  void round();
  // The active controller's placement of streams (all of round() but the shards' following).
  void place();
  // The active controller's placement of coordinator shards on `live`.
  void place_shards(const std::vector<base::node_id>& live);
  // The active controller's part of failover: takeovers for dead owners and for takeovers
  // whose holder died, given to this broker. False when the round should stop here.
  [[nodiscard]] bool place_takeovers(
      const std::vector<metadata::broker_record>& registered,
      const std::vector<base::node_id>& live,
      const std::vector<std::pair<base::stream_id, metadata::stream_state>>& states,
      const std::vector<metadata::wal_takeover>& under_way);
  // Hands this broker's takeovers to on_takeover.
  void run_takeovers(const std::vector<metadata::wal_takeover>& under_way);

  std::unique_ptr<metadata::broker_registry> registry_;
  std::unique_ptr<metadata::stream_catalog> catalog_;
  std::unique_ptr<metadata::group_store> shards_;
  membership& members_;
  const controller_options options_;
  std::atomic<bool> active_{false};
  std::atomic<int32_t> holder_{-1};
  std::atomic<uint64_t> placed_{0};
  std::atomic<uint64_t> takeovers_placed_{0};
  std::atomic<uint64_t> balanced_{0};
  // When the last balancing by load was due (controller thread only).
  std::chrono::steady_clock::time_point last_balance_ = std::chrono::steady_clock::now();
  // What the last placement was made from (controller thread only): a round whose ownership
  // version and live brokers are the same has nothing new to place.
  int64_t epoch_ = -1;
  int64_t seen_version_ = -1;
  std::vector<base::node_id> seen_live_;
  mutable base::mutex mu_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace silt::cluster
