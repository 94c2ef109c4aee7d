#include "cluster/follower.h"

#include <algorithm>
#include <thread>
#include <utility>

#include <boost/asio/post.hpp>

#include "base/log.h"
#include "base/memory.h"

namespace silt::cluster {

namespace asio = boost::asio;

follower::follower(follower_options options, storage::stream_store& store,
                   metadata::topic_registry& registry, membership& members,
                   coordinator::group_coordinator& groups, follower_hooks hooks)
    : options_(options),
      store_(store),
      registry_(registry),
      members_(members),
      groups_(groups),
      hooks_(std::move(hooks)) {}

void follower::close() {
  closed_ = true;
}

void follower::join() {
  moves_.join();
}

void follower::follow() {
  follow_topics();
  follow_owners();
}

void follower::follow_topics() {
  auto changes = registry_.refresh();
  if (!changes) return;  // the next round tries again

  // (forget() leaves a topic created again under the name.)
  for (const auto& t : changes->removed) {
    hooks_.forget_topic(t);
    // The groups coordinated here forget its offsets too (the deleting broker removed them from
    // the store).
    groups_.forget_topic(t->name, false);
  }
  if (!changes->removed.empty()) base::release_free_memory();
  std::vector<base::stream_id> fresh;
  fresh.swap(unsettled_);
  for (const auto& t : changes->changed) {
    const auto before = hooks_.served_topic(t->name);
    for (const base::stream_id s : t->streams) {
      const bool known =
          before && before->id == t->id &&
          std::find(before->streams.begin(), before->streams.end(), s) != before->streams.end();
      if (!known) fresh.push_back(s);
    }
  }
  if (!fresh.empty()) {
    auto unsettled = store_.learn(fresh);
    if (!unsettled) {
      unsettled_ = std::move(fresh);  // all of them again next round
    } else {
      unsettled_ = std::move(*unsettled);
    }
  }
  for (const auto& t : changes->changed) hooks_.refresh_topic(t);
  // Every change up to changes->version is served here now, unless a new stream is not yet
  // taken by the broker that created it (served by nobody: Metadata would answer
  // LEADER_NOT_AVAILABLE for it). That is a moment, between the creation's transaction and its
  // take; a stream left untaken by a creator that failed is waited for at most a session
  // timeout, so that admin calls do not wait on it for ever.
  const auto now = std::chrono::steady_clock::now();
  if (unsettled_.empty()) {
    unsettled_since_.reset();
  } else if (!unsettled_since_) {
    unsettled_since_ = now;
  }
  if (!unsettled_since_ || now - *unsettled_since_ >= options_.session_timeout) {
    members_.report_topics_applied(changes->version);
  }
}

void follower::follow_owners() {
  // New owners and epochs of other brokers' streams (a restart, a take, a handover).
  // Producer state of a stream another broker served is read again on its next use (dropped
  // before the stream takes appends here).
  auto adopted = store_.refresh_owners(false, [this](const std::vector<base::stream_id>& coming) {
    for (const base::stream_id s : coming) hooks_.forget_producer_state(s);
  });
  if (!adopted) return;
  if (!adopted->empty()) {
    SILT_LOG(info, "silt: cluster: took over %zu partition(s) handed to node %d", adopted->size(),
             options_.self.value());
  }
  const base::node_id self = options_.self;
  std::vector<base::stream_id> takes;
  std::map<base::stream_id, base::node_id> to;  // released to other brokers
  for (const auto& m : store_.moves()) {
    if (m.target == self) {
      takes.push_back(m.stream_id);
    } else {
      to[m.stream_id] = m.target;
    }
  }
  if (!takes.empty()) {
    // Producer state is read again on first use (another broker may have served these).
    for (const base::stream_id s : takes) hooks_.forget_producer_state(s);
    if (auto r = store_.take(takes); !r) {
      SILT_LOG(warn, "silt: cluster: cannot take %zu partition(s) placed here: %s", takes.size(),
               std::string(storage::stream_error_name(r.error())).c_str());
    }
  }
  if (to.empty() || !members_.can_acknowledge()) return;
  // One release at a time: what it leaves is seen again by a later round.
  if (releasing_.exchange(true)) return;
  asio::post(moves_, [this, to = std::move(to)] {
    if (!closed_) {
      auto handed = release(to);
      if (!handed) {
        SILT_LOG(warn, "silt: cluster: cannot hand over %zu partition(s) yet: %s", to.size(),
                 std::string(storage::stream_error_name(handed.error())).c_str());
      } else if (*handed > 0) {
        SILT_LOG(info, "silt: cluster: handed %zu partition(s) to other brokers", *handed);
      }
    }
    releasing_.store(false);
  });
}

tl::expected<size_t, storage::stream_error> follower::release(
    const std::map<base::stream_id, base::node_id>& to) {
  std::vector<base::stream_id> streams;
  streams.reserve(to.size());
  for (const auto& [s, node] : to) streams.push_back(s);
  // Appends stop, the WAL's data of these streams is uploaded and committed; then their
  // producer state is stored, and each is handed over at its next epoch.
  auto ready = store_.prepare_release(streams, std::chrono::seconds(5));
  if (!ready) return tl::make_unexpected(ready.error());
  if (ready->empty()) return size_t{0};
  if (auto r = hooks_.snapshot_producer_state(); !r) SILT_LOG(info, "silt: %s", r.error().c_str());
  size_t handed = 0;
  for (const base::stream_id s : *ready) {
    if (store_.handover(s, to.at(s))) {
      hooks_.forget_producer_state(s);
      ++handed;
    }
  }
  // Clients waiting on this broker learn of the new leader at once.
  hooks_.wake_waiters();
  return handed;
}

void follower::take_over(const std::vector<metadata::wal_takeover>& takeovers) {
  if (taking_over_.exchange(true)) return;  // one run at a time; the next round tries again
  std::vector<storage::stream_store::dead_wal> from;
  from.reserve(takeovers.size());
  for (const auto& t : takeovers) from.push_back({t.node, t.wal_location});
  asio::post(moves_, [this, from = std::move(from)] {
    if (!closed_) {
      // Producer state is read again before the streams take appends: the snapshot and the
      // batches after it, those the dead WAL held included.
      auto taken = store_.take_over(from, std::chrono::seconds(10),
                                    [this](const std::vector<base::stream_id>& coming) {
                                      for (const base::stream_id s : coming)
                                        hooks_.forget_producer_state(s);
                                    });
      if (taken) {
        hooks_.wake_waiters();
        takeover_failures_ = 0;
      } else if (takeover_failures_++ % 20 == 0) {
        SILT_LOG(warn, "silt: cluster: taking over a dead broker's WAL failed: %s",
                 taken.error().c_str());
      }
    }
    taking_over_.store(false);
  });
}

void follower::follow_shards(const std::vector<metadata::shard_state>& shards) {
  const base::node_id self = options_.self;
  std::map<int32_t, base::leader_epoch> held;
  for (const auto& [shard, epoch] : groups_.held()) held.emplace(shard, epoch);
  std::vector<int32_t> routes(static_cast<size_t>(std::max(options_.shards, 1)), -1);
  std::vector<int32_t> take;
  std::vector<int32_t> drop;
  const bool may_take = !closed_ && members_.can_acknowledge();
  for (const auto& s : shards) {
    if (s.shard < 0 || static_cast<size_t>(s.shard) >= routes.size()) continue;
    // Clients are sent where the shard is placed (its target takes it within a round).
    const base::node_id at = s.target != base::node_id(-1) ? s.target : s.owner;
    routes[static_cast<size_t>(s.shard)] = at.value();
    const auto h = held.find(s.shard);
    if (h != held.end()) {
      // Taken by another broker meanwhile, or placed elsewhere: its groups are not this one's.
      // (A lease that lapsed for a moment drops nothing: writes are refused meanwhile, and the
      // controller places the shards elsewhere if the lapse lasts.)
      if (s.owner != self || s.epoch != h->second || s.target != self || closed_) {
        drop.push_back(s.shard);
      }
    } else if (s.target == self && may_take) {
      take.push_back(s.shard);
    }
  }
  groups_.set_routes(std::move(routes));
  // Another broker's groups make __consumer_offsets exist here too.
  groups_.note_offsets_topic_if_used();
  if (!drop.empty()) {
    groups_.drop_shards(drop);
    SILT_LOG(info, "silt: cluster: no longer coordinating %zu group shard(s)", drop.size());
  }
  if (!take.empty()) {
    if (auto r = groups_.take_shards(take); !r) {
      SILT_LOG(warn, "silt: cluster: cannot take %zu group coordinator shard(s): %s", take.size(),
               r.error().c_str());
    } else {
      SILT_LOG(info, "silt: cluster: coordinating %zu more group shard(s)", take.size());
    }
  }
}

void follower::hand_over_owned() {
  const base::node_id self = options_.self;
  (void)store_.refresh_owners(false, [this](const std::vector<base::stream_id>& coming) {
    for (const base::stream_id s : coming) hooks_.forget_producer_state(s);
  });
  std::vector<base::node_id> others;
  for (const auto& b : *members_.brokers()) {
    if (b.info.node != self && !b.draining) others.push_back(b.info.node);
  }
  if (others.empty()) return;
  // Another broker takes the controller role; others take the group coordinator's shards (a
  // draining broker's are placed elsewhere).
  if (controller_) controller_->stop();
  groups_.deactivate();
  // Round-robin over the others.
  std::map<base::stream_id, base::node_id> to;
  for (const auto& t : registry_.all()) {
    for (const base::stream_id s : t->streams) {
      const auto o = store_.offsets(s);
      if (o.owner == self && !o.fenced) to[s] = others[to.size() % others.size()];
    }
  }
  if (to.empty()) return;
  // After the release under way, if any (bounded: a release waits at most 5 s for uploads).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (releasing_.exchange(true) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto handed = release(to);
  releasing_.store(false);
  if (!handed) {
    SILT_LOG(warn, "silt: cluster: cannot hand the partitions over before stopping: %s",
             std::string(storage::stream_error_name(handed.error())).c_str());
    return;
  }
  SILT_LOG(info,
           "silt: cluster: handed %zu of %zu partition(s) to %zu other broker(s) before "
           "stopping",
           *handed, to.size(), others.size());
}

}  // namespace silt::cluster
