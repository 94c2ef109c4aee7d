#include "cluster/controller.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "base/log.h"
#include "base/sched.h"

namespace silt::cluster {

namespace {

using clock = std::chrono::steady_clock;

base::node_id nobody() {
  return base::node_id(-1);
}

}  // namespace

namespace {

// One step of balancing by load (see controller.h): appends to `out` the move from the busiest
// live broker to the least busy one, and the lighter stream swapped back when counts must stay
// even; nothing when the loads are close or no pair closes enough of the gap.
void balance_load(const std::map<base::node_id, size_t>& count,
                  std::map<base::node_id, std::vector<base::stream_id>>& movable,
                  const std::map<base::node_id, uint64_t>& load, const load_map& loads,
                  uint64_t min_imbalance, std::vector<metadata::stream_target>& out) {
  if (load.size() < 2) return;
  auto by_load = [](const auto& a, const auto& b) { return a.second < b.second; };
  const auto [hi, hi_load] = *std::max_element(load.begin(), load.end(), by_load);
  const auto [lo, lo_load] = *std::min_element(load.begin(), load.end(), by_load);
  const uint64_t gap = hi_load - lo_load;
  if (gap < std::max<uint64_t>(min_imbalance, 1) || gap * 10 < hi_load) return;
  auto rate = [&](base::stream_id id) {
    const auto it = loads.find(id);
    return it == loads.end() ? uint64_t{0} : it->second;
  };
  // What the least busy broker could give back: its loaded streams and one idle one.
  std::vector<std::pair<base::stream_id, uint64_t>> back;
  bool idle_one = false;
  for (const base::stream_id id : movable[lo]) {
    const uint64_t r = rate(id);
    if (r > 0) {
      back.emplace_back(id, r);
    } else if (!idle_one) {
      back.emplace_back(id, 0);
      idle_one = true;
    }
  }
  // A move alone keeps the counts within one only if the busiest broker has more streams.
  const bool move_alone = count.at(hi) > count.at(lo);
  auto distance = [gap](uint64_t moved) {  // |the gap after moving `moved` bytes/s over|
    const int64_t after = static_cast<int64_t>(gap) - 2 * static_cast<int64_t>(moved);
    return static_cast<uint64_t>(after < 0 ? -after : after);
  };
  uint64_t best = gap;
  std::optional<std::pair<base::stream_id, std::optional<base::stream_id>>> pick;
  for (const base::stream_id h : movable[hi]) {
    const uint64_t r = rate(h);
    if (r == 0) continue;
    if (move_alone && distance(r) < best) {
      best = distance(r);
      pick = {h, std::nullopt};
    }
    for (const auto& [c, rc] : back) {
      if (rc >= r) continue;
      if (distance(r - rc) < best) {
        best = distance(r - rc);
        pick = {h, c};
      }
    }
  }
  if (!pick || best * 5 > gap * 4) return;  // closes less than a fifth of the gap
  out.push_back({pick->first, lo});
  if (pick->second) out.push_back({*pick->second, hi});
}

}  // namespace

std::vector<metadata::stream_target> plan_placement(
    const std::vector<base::node_id>& live,
    const std::vector<std::pair<base::stream_id, metadata::stream_state>>& streams,
    size_t max_moves, const load_map& loads, uint64_t min_imbalance) {
  std::vector<metadata::stream_target> out;
  if (live.empty()) return out;
  const std::set<base::node_id> alive(live.begin(), live.end());
  // Streams each live broker has or is to get, and those that may move (owned there, no target);
  // the load of what each has or is to get.
  std::map<base::node_id, size_t> count;
  std::map<base::node_id, std::vector<base::stream_id>> movable;
  std::map<base::node_id, uint64_t> load;
  for (const base::node_id n : live) {
    count[n] = 0;
    load[n] = 0;
  }
  auto rate = [&](base::stream_id id) {
    const auto it = loads.find(id);
    return it == loads.end() ? uint64_t{0} : it->second;
  };
  std::vector<base::stream_id> homeless;
  for (const auto& [id, s] : streams) {
    const bool owner_live = alive.contains(s.owner);
    if (s.target != nobody() && s.target == s.owner) {
      out.push_back({id, nobody()});  // already there
      ++count[s.owner];
      load[s.owner] += rate(id);
      movable[s.owner].push_back(id);
    } else if (s.target != nobody() && alive.contains(s.target)) {
      ++count[s.target];
      load[s.target] += rate(id);
    } else if (s.owner == nobody() || (owner_live && s.target != nobody())) {
      homeless.push_back(id);  // never taken, or its target is gone
    } else if (owner_live) {
      ++count[s.owner];
      load[s.owner] += rate(id);
      movable[s.owner].push_back(id);
    }
    // Owned by a broker that is not live, and not nobody's: its data may wait in that broker's
    // WAL, so it stays until that broker is back.
  }
  auto least = [&] {
    return std::min_element(count.begin(), count.end(),
                            [](const auto& a, const auto& b) { return a.second < b.second; })
        ->first;
  };
  bool moved = false;
  for (const base::stream_id id : homeless) {
    const base::node_id to = least();
    out.push_back({id, to});
    ++count[to];
    moved = true;
  }
  for (size_t moves = 0; moves < max_moves; ++moves) {
    const auto most =
        std::max_element(count.begin(), count.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    const base::node_id to = least();
    if (most->second < count[to] + 2) break;
    auto& candidates = movable[most->first];
    if (candidates.empty()) break;  // its streams are all on their way already
    const base::stream_id id = candidates.back();
    candidates.pop_back();
    out.push_back({id, to});
    --most->second;
    ++count[to];
    moved = true;
  }
  if (!moved && !loads.empty()) balance_load(count, movable, load, loads, min_imbalance, out);
  // A stream listed twice (already there, then moved) keeps its last target.
  std::map<base::stream_id, base::node_id> last;
  for (const auto& t : out) last[t.stream_id] = t.target;
  out.clear();
  for (const auto& [id, to] : last) out.push_back({id, to});
  return out;
}

std::vector<metadata::shard_target> plan_shards(const std::vector<base::node_id>& live,
                                                const std::vector<metadata::shard_state>& shards,
                                                int32_t count) {
  std::vector<metadata::shard_target> out;
  if (live.empty() || count <= 0) return out;
  std::map<base::node_id, std::vector<int32_t>> on;  // shards placed on each live broker
  for (const base::node_id n : live) on[n];
  std::vector<base::node_id> target(static_cast<size_t>(count), nobody());
  for (const auto& s : shards) {
    if (s.shard >= 0 && s.shard < count) target[static_cast<size_t>(s.shard)] = s.target;
  }
  std::vector<int32_t> homeless;
  for (int32_t s = 0; s < count; ++s) {
    const auto it = on.find(target[static_cast<size_t>(s)]);
    if (it == on.end()) {
      homeless.push_back(s);
    } else {
      it->second.push_back(s);
    }
  }
  auto least = [&] {
    return std::min_element(
               on.begin(), on.end(),
               [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); })
        ->first;
  };
  for (const int32_t s : homeless) {
    const base::node_id to = least();
    on[to].push_back(s);
    out.push_back({s, to});
  }
  for (;;) {
    const auto most = std::max_element(on.begin(), on.end(), [](const auto& a, const auto& b) {
      return a.second.size() < b.second.size();
    });
    const base::node_id to = least();
    if (most->second.size() < on[to].size() + 2) break;
    const int32_t s = most->second.back();
    most->second.pop_back();
    on[to].push_back(s);
    out.push_back({s, to});
  }
  std::map<int32_t, base::node_id> last;  // a shard placed, then moved: its last target
  for (const auto& t : out) last[t.shard] = t.target;
  out.clear();
  for (const auto& [s, to] : last) out.push_back({s, to});
  return out;
}

load_map reported_loads(const std::vector<metadata::broker_record>& brokers) {
  load_map out;
  for (const auto& b : brokers) {
    if (!b.live()) continue;
    for (const auto& l : b.loads) {
      auto& r = out[l.stream];
      r = std::max(r, l.bytes_per_s);
    }
  }
  return out;
}

controller::controller(std::unique_ptr<metadata::broker_registry> registry,
                       std::unique_ptr<metadata::stream_catalog> catalog,
                       std::unique_ptr<metadata::group_store> shards, membership& members,
                       controller_options options)
    : registry_(std::move(registry)),
      catalog_(std::move(catalog)),
      shards_(std::move(shards)),
      members_(members),
      options_(std::move(options)) {}

controller::~controller() {
  stop();
}

tl::expected<std::unique_ptr<controller>, std::string> controller::start(
    std::shared_ptr<metadata::sql::database> db, membership& members, controller_options options) {
  auto registry = metadata::broker_registry::open(db);
  if (!registry) return tl::make_unexpected(registry.error());
  auto catalog = metadata::stream_catalog::open(db);
  if (!catalog) return tl::make_unexpected(catalog.error());
  auto shards = metadata::group_store::open(std::move(db), options.self);
  if (!shards) return tl::make_unexpected(shards.error());
  std::unique_ptr<controller> c(new controller(std::move(*registry), std::move(*catalog),
                                               std::move(*shards), members, std::move(options)));
  c->round();
  c->thread_ = std::thread([p = c.get()] {
    base::set_thread_name("silt-controller");
    p->run();
  });
  return c;
}

void controller::run() {
  auto next = clock::now() + options_.interval;
  for (;;) {
    {
      base::unique_lock lock(mu_);
      while (!stopping_ && clock::now() < next) lock.wait_until(wake_, next);
      if (stopping_) return;
    }
    next = clock::now() + options_.interval;
    round();
  }
}

void controller::run_takeovers(const std::vector<metadata::wal_takeover>& under_way) {
  std::vector<metadata::wal_takeover> mine;
  for (const auto& t : under_way) {
    if (t.holder == options_.self) mine.push_back(t);
  }
  if (!mine.empty() && options_.on_takeover) options_.on_takeover(mine);
}

bool controller::place_takeovers(
    const std::vector<metadata::broker_record>& registered, const std::vector<base::node_id>& live,
    const std::vector<std::pair<base::stream_id, metadata::stream_state>>& states,
    const std::vector<metadata::wal_takeover>& under_way) {
  const std::set<base::node_id> alive(live.begin(), live.end());
  std::set<base::node_id> held;
  std::vector<metadata::wal_takeover> rows;
  for (const auto& t : under_way) {
    held.insert(t.node);
    if (!alive.contains(t.holder)) rows.push_back({t.node, options_.self, {}});
  }
  std::set<base::node_id> dead;
  for (const auto& [id, s] : states) {
    if (s.owner != nobody() && !alive.contains(s.owner) && !held.contains(s.owner)) {
      dead.insert(s.owner);
    }
  }
  if (!dead.empty()) {
    // A dead node id whose WAL a live broker uses (the same broker under a new node id) needs
    // no takeover: that broker replayed the WAL and took the streams when it started.
    std::set<std::pair<std::string, std::string>> live_wals;
    for (const auto& b : registered) {
      if (alive.contains(b.info.node)) live_wals.emplace(b.info.machine, b.info.wal_location);
    }
    for (const auto& b : registered) {
      if (dead.contains(b.info.node) &&
          !live_wals.contains({b.info.machine, b.info.wal_location})) {
        rows.push_back({b.info.node, options_.self, {}});
      }
    }
  }
  if (rows.empty()) return true;
  auto written = registry_->place_takeovers(options_.self, epoch_, rows);
  if (!written) {
    SILT_LOG(warn, "silt: cluster: starting %zu WAL takeover(s) failed: %s", rows.size(),
             std::string(metadata::membership_error_name(written.error())).c_str());
    return false;
  }
  if (*written > 0) {
    takeovers_placed_.fetch_add(*written, std::memory_order_relaxed);
    std::string nodes;
    for (const auto& r : rows)
      nodes += (nodes.empty() ? "" : ", ") + std::to_string(r.node.value());
    SILT_LOG(info, "silt: cluster: taking over the WAL of dead node(s) %s", nodes.c_str());
    // This broker holds them now: it starts at once, not a round later.
    if (auto now = registry_->takeovers()) run_takeovers(*now);
  }
  return true;
}

void controller::round() {
  place();
  if (options_.shards <= 0 || !options_.on_shards) return;
  // Every broker follows the shards' placement, the controller's own just written included.
  if (auto rows = shards_->shard_states()) options_.on_shards(*rows);
}

void controller::place_shards(const std::vector<base::node_id>& live) {
  if (options_.shards <= 0) return;
  auto rows = shards_->shard_states();
  if (!rows) return;
  const auto targets = plan_shards(live, *rows, options_.shards);
  if (targets.empty()) return;
  if (auto r = shards_->place(targets, options_.self, epoch_); !r) {
    SILT_LOG(warn, "silt: cluster: placing %zu coordinator shard(s) failed", targets.size());
    return;
  }
  SILT_LOG(info, "silt: cluster: placed %zu coordinator shard(s) on %zu live broker(s)",
           targets.size(), live.size());
}

void controller::place() {
  // Takeovers under way, read by every broker: a holder runs its own until they end.
  auto under_way = registry_->takeovers();
  auto claim = registry_->claim_controller(options_.self, members_.broker_epoch(), options_.lease);
  if (!claim) {
    if (active_.exchange(false, std::memory_order_acq_rel)) {
      SILT_LOG(info, "silt: cluster: node %d is no longer the controller", options_.self.value());
      if (options_.on_change) (void)options_.on_change(false);
    }
    if (auto h = registry_->controller()) holder_.store(h->value(), std::memory_order_release);
    if (under_way) run_takeovers(*under_way);
    return;
  }
  holder_.store(options_.self.value(), std::memory_order_release);
  const bool was = active_.exchange(true, std::memory_order_acq_rel);
  if (!was || *claim != epoch_) {
    // Held again at a new epoch: another node may have held the role in between.
    if (was && options_.on_change) (void)options_.on_change(false);
    SILT_LOG(info, "silt: cluster: node %d is the controller (controller epoch %lld)",
             options_.self.value(), static_cast<long long>(*claim));
    epoch_ = *claim;
    seen_version_ = -1;  // place everything afresh
    if (options_.on_change && !options_.on_change(true)) {
      active_.store(false, std::memory_order_release);  // the next round tries again
      return;
    }
  }
  // Liveness as the database has it now (not the membership's list, up to a heartbeat old):
  // a dead broker's WAL is taken over as soon as its lease lapsed.
  auto registered = registry_->brokers();
  if (!registered || !under_way) return;
  // Live brokers get streams; one stopping cleanly gets none (it hands its own over), and
  // its streams are not taken over.
  std::vector<base::node_id> live;
  std::vector<base::node_id> alive;
  for (const auto& b : *registered) {
    if (!b.live()) continue;
    alive.push_back(b.info.node);
    if (!b.draining) live.push_back(b.info.node);
  }
  place_shards(live);
  const std::set<base::node_id> alive_set(alive.begin(), alive.end());
  bool orphaned = false;  // a takeover whose holder died
  for (const auto& t : *under_way) orphaned = orphaned || !alive_set.contains(t.holder);
  run_takeovers(*under_way);
  auto version = catalog_->ownership_version();
  if (!version) return;
  const bool balance_due = clock::now() - last_balance_ >= options_.balance_interval;
  if (*version == seen_version_ && live == seen_live_ && !orphaned && !balance_due) return;
  auto states = catalog_->stream_states();
  if (!states) return;
  if (!place_takeovers(*registered, alive, *states, *under_way)) return;
  auto targets = plan_placement(live, *states, options_.max_moves);
  size_t for_load = 0;
  if (balance_due) {
    last_balance_ = clock::now();
    const bool moves = std::any_of(targets.begin(), targets.end(),
                                   [](const auto& t) { return t.target != nobody(); });
    if (!moves) {
      auto by_load = plan_placement(live, *states, options_.max_moves, reported_loads(*registered),
                                    options_.min_load_imbalance);
      for (const auto& t : by_load) for_load += t.target != nobody() ? 1 : 0;
      if (for_load > 0) targets = std::move(by_load);
    }
  }
  if (!targets.empty()) {
    if (auto r = catalog_->assign(targets, metadata::controller_lease{options_.self, epoch_}); !r) {
      SILT_LOG(warn, "silt: cluster: placing %zu stream(s) failed: %s", targets.size(),
               std::string(metadata::catalog_error_name(r.error())).c_str());
      return;
    }
    placed_.fetch_add(targets.size(), std::memory_order_relaxed);
    size_t moved = 0;
    for (const auto& t : targets) moved += t.target != nobody() ? 1 : 0;
    if (for_load > 0) {
      balanced_.fetch_add(for_load, std::memory_order_relaxed);
      SILT_LOG(info, "silt: cluster: moving %zu stream(s) to balance the brokers' load", for_load);
    } else {
      SILT_LOG(info, "silt: cluster: placed %zu stream(s) on %zu live broker(s)", moved,
               live.size());
    }
    // The version moved with the assignment: the next round reads again and finds it settled.
    return;
  }
  seen_version_ = *version;
  seen_live_ = std::move(live);
}

void controller::stop() {
  {
    base::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (active_.exchange(false)) {
    if (options_.on_change) (void)options_.on_change(false);
    registry_->release_controller(options_.self, epoch_);
  }
}

}  // namespace silt::cluster
