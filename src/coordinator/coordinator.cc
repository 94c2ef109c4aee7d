#include "coordinator/coordinator.h"

#include <cstdio>
#include <exception>
#include <set>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "base/clock.h"
#include "base/log.h"
#include "base/utf8.h"

namespace silt::coordinator {

bool storable_group_id(std::string_view group_id) {
  return group_id.size() <= max_group_id_bytes && base::is_storable_text(group_id);
}

namespace asio = boost::asio;

namespace {

// How often the loop looks whether a group's deadline has passed: the precision of session,
// rebalance and initial-delay timeouts.
constexpr std::chrono::milliseconds tick_period{100};

}  // namespace

int32_t shard_of(std::string_view group_id, int32_t shards) {
  int32_t h = 0;
  for (const char c : group_id) {
    h = static_cast<int32_t>(static_cast<uint32_t>(h) * 31u + static_cast<uint8_t>(c));
  }
  const int32_t abs = h == INT32_MIN ? 0 : (h < 0 ? -h : h);
  return abs % std::max(shards, 1);
}

group_coordinator::group_coordinator(const coordinator_options& options,
                                     metadata::group_store& store,
                                     boost::asio::any_io_executor blocking)
    : options_(options),
      store_(store),
      matching_(blocking),
      log_(options.shards),
      writer_(store, std::move(blocking),
              [this](const metadata::shard_write& w) { log_.apply(w, base::now_ms()); }),
      held_(static_cast<size_t>(std::max(options.shards, 1))),
      routes_(static_cast<size_t>(std::max(options.shards, 1)), -1) {}

group_coordinator::~group_coordinator() {
  try {
    close();
  } catch (const std::exception& e) {
    SILT_LOG(warn, "silt: closing the group coordinator failed: %s", e.what());
  }
}

tl::expected<std::unique_ptr<group_coordinator>, std::string> group_coordinator::open(
    const coordinator_options& options, metadata::group_store& store,
    boost::asio::any_io_executor blocking, bool active) {
  std::unique_ptr<group_coordinator> c(new group_coordinator(options, store, std::move(blocking)));
  if (active) {
    if (auto r = c->activate(); !r) return tl::make_unexpected(r.error());
  }
  return c;
}

tl::expected<void, std::string> group_coordinator::activate() {
  std::vector<int32_t> shards(static_cast<size_t>(std::max(options_.shards, 1)));
  for (size_t i = 0; i < shards.size(); ++i) shards[i] = static_cast<int32_t>(i);
  return take_shards(shards);
}

tl::expected<void, std::string> group_coordinator::take_shards(const std::vector<int32_t>& shards) {
  if (shards.empty()) return {};
  for (const int32_t s : shards) {
    if (s < 0 || s >= std::max(options_.shards, 1)) {
      return tl::make_unexpected("no group coordinator shard " + std::to_string(s));
    }
  }
  auto epochs = store_.take(shards);
  if (!epochs) return tl::make_unexpected(std::string("cannot take the group coordinator shards"));
  auto loaded = store_.load(shards);
  if (!loaded) return tl::make_unexpected(std::string("cannot load the consumer groups' offsets"));
  if (!loaded->offsets.empty() || !loaded->groups.empty()) note_offsets_topic();
  const int64_t now = base::now_ms();
  auto snapshot = split_by_shard(shards, *loaded);
  std::map<std::string, group_entry, std::less<>> taken;
  for (auto& g : loaded->groups) {
    group_entry e;
    if (!g.data.empty() && g.data[0] == 1) {
      e.group = classic_group::decode(g.group, g.data, now);
    } else if (!g.data.empty() && g.data[0] == 2) {
      e.consumer =
          consumer_group::decode(g.group, g.data, options_.consumer.session_timeout_ms, now);
    }
    if (!e.group && !e.consumer) {
      SILT_LOG(warn, "silt: group %s: its stored state cannot be read; it starts afresh",
               g.group.c_str());
      continue;
    }
    taken.emplace(g.group, std::move(e));
  }
  std::set<std::string> recorded;
  for (const auto& [id, e] : taken) recorded.insert(id);
  for (auto& o : loaded->offsets) {
    auto& e = taken[o.key.group];
    if (!recorded.contains(o.key.group)) {
      // A group known by its offsets only: Empty, and as its becoming empty was not kept, its
      // latest commit stands for that moment (offsets expire from there).
      if (!e.group || o.commit_ms > e.group->state_since()) {
        e.group = std::make_unique<classic_group>(o.key.group, o.commit_ms);
      }
    }
    e.offsets[{o.key.topic, o.key.partition}] = {o.offset, o.leader_epoch, std::move(o.metadata),
                                                 o.commit_ms, o.expire_ms};
  }
  base::lock_guard lock(mu_);
  const std::set<int32_t> now_held(shards.begin(), shards.end());
  // What was left of these shards here (held before at an older epoch) gives way to the store's.
  forget_groups_of(now_held, now);
  for (size_t i = 0; i < shards.size(); ++i) {
    held_[static_cast<size_t>(shards[i])] = (*epochs)[i];
  }
  // The offsets topic's view of these shards starts from what was loaded (before any write at
  // the new epoch, which needs the shard held).
  for (size_t i = 0; i < shards.size(); ++i) {
    log_.load(shards[i], (*epochs)[i], snapshot[shards[i]], now);
  }
  for (auto& [id, e] : taken) {
    note_deadline(e);
    groups_.insert_or_assign(id, std::move(e));
  }
  return {};
}

std::map<int32_t, metadata::group_store::loaded> group_coordinator::split_by_shard(
    const std::vector<int32_t>& shards, const metadata::group_store::loaded& state) const {
  std::map<int32_t, metadata::group_store::loaded> out;
  for (const int32_t s : shards) out[s];
  for (const auto& g : state.groups) out[shard(g.group)].groups.push_back(g);
  for (const auto& o : state.offsets) out[shard(o.key.group)].offsets.push_back(o);
  return out;
}

void group_coordinator::drop_shards(const std::vector<int32_t>& shards) {
  base::lock_guard lock(mu_);
  std::set<int32_t> dropped;
  for (const int32_t s : shards) {
    if (s < 0 || static_cast<size_t>(s) >= held_.size() || !held_[static_cast<size_t>(s)]) continue;
    held_[static_cast<size_t>(s)].reset();
    log_.drop(s);
    dropped.insert(s);
  }
  if (!dropped.empty()) forget_groups_of(dropped, base::now_ms());
}

void group_coordinator::forget_groups_of(const std::set<int32_t>& shards, int64_t now) {
  for (auto it = groups_.begin(); it != groups_.end();) {
    if (!shards.contains(shard(it->first))) {
      ++it;
      continue;
    }
    if (it->second.group) it->second.group->close(error_code::not_coordinator, now);
    for (auto& r : std::exchange(it->second.awaiting, {})) r(error_code::not_coordinator);
    it = groups_.erase(it);
  }
}

void group_coordinator::deactivate() {
  std::vector<int32_t> all;
  for (const auto& [s, epoch] : held()) all.push_back(s);
  drop_shards(all);
}

std::vector<std::pair<int32_t, base::leader_epoch>> group_coordinator::held() const {
  std::vector<std::pair<int32_t, base::leader_epoch>> out;
  base::lock_guard lock(mu_);
  for (size_t s = 0; s < held_.size(); ++s) {
    if (held_[s]) out.emplace_back(static_cast<int32_t>(s), *held_[s]);
  }
  return out;
}

void group_coordinator::set_routes(std::vector<int32_t> nodes) {
  nodes.resize(static_cast<size_t>(std::max(options_.shards, 1)), -1);
  base::lock_guard lock(mu_);
  routes_ = std::move(nodes);
}

bool group_coordinator::serves(std::string_view group_id) const {
  base::lock_guard lock(mu_);
  return holds(group_id);
}

void group_coordinator::note_offsets_topic_if_used() {
  if (offsets_topic_exists()) return;
  if (auto used = store_.in_use(); used && *used) note_offsets_topic();
}

int32_t group_coordinator::shard_node(int32_t shard, int32_t self) const {
  base::lock_guard lock(mu_);
  if (shard < 0 || static_cast<size_t>(shard) >= routes_.size()) return -1;
  if (serving_epoch(shard)) return self;
  // Placed here but not taken yet: nowhere for now.
  const int32_t at = routes_.at(static_cast<size_t>(shard));
  return at == self ? -1 : at;
}

bool group_coordinator::holds(std::string_view group_id) const {
  return serving_epoch(shard(group_id)).has_value();
}

std::optional<base::leader_epoch> group_coordinator::serving_epoch(int32_t shard) const {
  if (closed_.load(std::memory_order_acquire)) return std::nullopt;
  return epoch_of(shard);
}

void group_coordinator::start(const boost::asio::any_io_executor& executor) {
  timer_ = std::make_unique<asio::steady_timer>(executor);
  next_expiry_check_ = base::now_ms() + options_.retention_check_interval_ms;
  asio::co_spawn(
      executor,
      [this]() -> asio::awaitable<void> {
        for (;;) {
          timer_->expires_after(tick_period);
          boost::system::error_code ec;
          co_await timer_->async_wait(asio::redirect_error(asio::use_awaitable, ec));
          if (closed_) co_return;
          tick(base::now_ms());
        }
      },
      asio::detached);
}

void group_coordinator::close() {
  if (closed_.exchange(true)) return;
  if (timer_) asio::post(timer_->get_executor(), [t = timer_.get()] { t->cancel(); });
  base::lock_guard lock(mu_);
  const int64_t now = base::now_ms();
  for (auto& [id, e] : groups_) {
    if (e.group) e.group->close(error_code::not_coordinator, now);
  }
}

std::optional<base::leader_epoch> group_coordinator::epoch_of(int32_t shard) const {
  return held_.at(static_cast<size_t>(shard));
}

void group_coordinator::note_deadline(const group_entry& e) {
  const auto d = e.group ? e.group->next_deadline() : e.consumer->next_deadline();
  if (d) next_deadline_ = std::min(next_deadline_, *d);
}

void group_coordinator::persist(const std::string& group_id, group_entry& e) {
  const bool dirty = e.group ? e.group->take_dirty() : e.consumer->take_dirty();
  if (!dirty || (e.group && e.group->state() == group_state::dead)) {
    if (e.awaiting.empty()) return;
    if (e.last_write) {
      // Nothing new to write, but what they show may still be on its way to the store.
      std::move(e.awaiting.begin(), e.awaiting.end(), std::back_inserter(*e.last_write));
      e.awaiting.clear();
    } else {
      for (auto& r : std::exchange(e.awaiting, {})) r(error_code::none);
    }
    return;
  }
  const int32_t shard = shard_of(group_id, options_.shards);
  const auto epoch = epoch_of(shard);
  if (!epoch) {
    // Not held here any more: the answers waiting for the record cannot be given.
    for (auto& r : std::exchange(e.awaiting, {})) r(error_code::not_coordinator);
    return;
  }
  metadata::shard_write w;
  w.shard = shard;
  w.epoch = *epoch;
  w.groups.push_back({group_id, e.group ? e.group->encode() : e.consumer->encode()});
  auto after = std::make_shared<std::vector<reply>>(std::exchange(e.awaiting, {}));
  e.last_write = after;
  writer_.write(std::move(w), [this, group_id, after](error_code ec) {
    std::vector<reply> replies;
    {
      base::lock_guard lock(mu_);
      auto it = groups_.find(group_id);
      if (it != groups_.end() && it->second.last_write == after) it->second.last_write.reset();
      replies = std::exchange(*after, {});
    }
    for (auto& r : replies) r(ec);
  });
}

void group_coordinator::await_persist(const std::string& group_id, reply r) {
  auto it = groups_.find(group_id);
  if (it == groups_.end()) {
    r(error_code::none);
    return;
  }
  it->second.awaiting.push_back(std::move(r));
}

sync_callback group_coordinator::durable(const std::string& group_id, sync_callback done) {
  return [this, group_id, done = std::move(done)](sync_result res) mutable {
    if (res.error != error_code::none) {
      done(std::move(res));
      return;
    }
    await_persist(group_id, [done = std::move(done), res = std::move(res)](error_code ec) mutable {
      // As Kafka: a failed write of the group's record fails the answer, and the members
      // look for the coordinator again.
      if (ec != error_code::none) res = {.error = error_code::coordinator_not_available};
      done(std::move(res));
    });
  };
}

join_callback group_coordinator::durable(const std::string& group_id, join_callback done) {
  return [this, group_id, done = std::move(done)](join_result res) mutable {
    if (res.error != error_code::none) {
      done(std::move(res));
      return;
    }
    await_persist(group_id, [done = std::move(done), res = std::move(res)](error_code ec) mutable {
      if (ec != error_code::none) {
        res = {.error = error_code::coordinator_not_available, .member_id = res.member_id};
      }
      done(std::move(res));
    });
  };
}

bool group_coordinator::is_empty(const group_entry& e) {
  return e.group ? e.group->state() == group_state::empty : e.consumer->size() == 0;
}

int64_t group_coordinator::empty_since(const group_entry& e) {
  return e.group ? e.group->state_since() : e.consumer->empty_since();
}

void group_coordinator::join(const std::string& group_id, join_request req, join_callback done) {
  const int64_t now = base::now_ms();
  base::lock_guard lock(mu_);
  if (!holds(group_id)) {
    done({.error = error_code::not_coordinator});
    return;
  }
  if (!storable_group_id(group_id)) {
    done({.error = error_code::invalid_group_id, .member_id = req.member_id});
    return;
  }
  auto it = groups_.find(group_id);
  if (it == groups_.end()) {
    // A member id names a member of a group that exists.
    if (!req.member_id.empty()) {
      done({.error = error_code::unknown_member_id, .member_id = req.member_id});
      return;
    }
    it = groups_.emplace(group_id, group_entry{}).first;
    it->second.group = std::make_unique<classic_group>(group_id, now);
  } else if (it->second.consumer) {
    if (it->second.consumer->size() > 0) {
      done({.error = error_code::inconsistent_group_protocol, .member_id = req.member_id});
      return;
    }
    // An empty consumer group goes back to the classic protocol, with its offsets.
    it->second.consumer.reset();
    it->second.group = std::make_unique<classic_group>(group_id, now);
  }
  classic_group& g = *it->second.group;
  // A static member that takes its place back under a new id is answered once that id is
  // durable (its record names the member); other joins change nothing kept.
  if (req.group_instance_id) done = durable(group_id, std::move(done));
  g.join(std::move(req), options_.limits, now, std::move(done));
  note_deadline(it->second);
  persist(group_id, it->second);
}

void group_coordinator::sync(const std::string& group_id, const std::string& member_id,
                             const std::optional<std::string>& instance_id, int32_t generation,
                             const std::optional<std::string>& protocol_type,
                             const std::optional<std::string>& protocol_name,
                             std::map<std::string, std::vector<uint8_t>> assignments,
                             sync_callback done) {
  const int64_t now = base::now_ms();
  base::lock_guard lock(mu_);
  if (!holds(group_id)) {
    done({.error = error_code::not_coordinator});
    return;
  }
  auto it = groups_.find(group_id);
  if (it == groups_.end() || !it->second.group) {
    done({.error = error_code::unknown_member_id});
    return;
  }
  classic_group& g = *it->second.group;
  g.sync(member_id, instance_id, generation, protocol_type, protocol_name, std::move(assignments),
         now, durable(group_id, std::move(done)));
  note_deadline(it->second);
  persist(group_id, it->second);
}

error_code group_coordinator::heartbeat(const std::string& group_id, const std::string& member_id,
                                        const std::optional<std::string>& instance_id,
                                        int32_t generation) {
  const int64_t now = base::now_ms();
  base::lock_guard lock(mu_);
  if (!holds(group_id)) return error_code::not_coordinator;
  auto it = groups_.find(group_id);
  if (it == groups_.end() || !it->second.group) return error_code::unknown_member_id;
  const error_code e = it->second.group->heartbeat(member_id, instance_id, generation, now);
  note_deadline(it->second);
  persist(group_id, it->second);
  return e;
}

error_code group_coordinator::leave(const std::string& group_id, const std::string& member_id,
                                    const std::optional<std::string>& instance_id) {
  const int64_t now = base::now_ms();
  base::lock_guard lock(mu_);
  if (!holds(group_id)) return error_code::not_coordinator;
  auto it = groups_.find(group_id);
  if (it == groups_.end() || !it->second.group) return error_code::unknown_member_id;
  const error_code e = it->second.group->leave(member_id, instance_id, now);
  note_deadline(it->second);
  persist(group_id, it->second);
  return e;
}

void group_coordinator::commit(const std::string& group_id, const std::string& member_id,
                               const std::optional<std::string>& instance_id, int32_t generation,
                               std::vector<commit_partition> offsets, done_callback done) {
  const int64_t now = base::now_ms();
  const int32_t shard = shard_of(group_id, options_.shards);
  metadata::shard_write w;
  w.shard = shard;
  {
    base::lock_guard lock(mu_);
    const auto epoch = serving_epoch(shard);
    if (!epoch) {
      done(error_code::not_coordinator);
      return;
    }
    // Group ids and metadata go into the store's text columns.
    if (!storable_group_id(group_id)) {
      done(error_code::invalid_group_id);
      return;
    }
    w.epoch = *epoch;
    auto it = groups_.find(group_id);
    if (it == groups_.end()) {
      // Without a group, only a committer outside group management (generation -1) may
      // commit; the group then exists, Empty, to hold its offsets.
      if (generation >= 0) {
        done(error_code::group_id_not_found);
        return;
      }
      it = groups_.emplace(group_id, group_entry{}).first;
      it->second.group = std::make_unique<classic_group>(group_id, now);
    } else {
      const error_code e = it->second.group
                               ? it->second.group->check_commit(member_id, instance_id, generation)
                               : it->second.consumer->check_commit(member_id, generation);
      if (e != error_code::none) {
        done(e);
        return;
      }
      if (it->second.group) it->second.group->committed(member_id, now);
    }
  }
  w.offsets.reserve(offsets.size());
  for (auto& o : offsets) {
    w.offsets.push_back(
        {{group_id, o.topic, o.partition}, o.offset, o.leader_epoch, o.metadata, now, o.expire_ms});
  }
  const base::leader_epoch epoch = w.epoch;
  writer_.write(std::move(w), [this, group_id, shard, epoch, offsets = std::move(offsets), now,
                               done = std::move(done)](error_code e) mutable {
    {
      base::lock_guard lock(mu_);
      // The shard may have been dropped meanwhile (the write landed before another node took
      // it): its groups are that node's now.
      if (e == error_code::none && epoch_of(shard) == epoch) {
        auto& entry = groups_[group_id];
        if (!entry.group && !entry.consumer) {
          entry.group = std::make_unique<classic_group>(group_id, now);
        }
        for (auto& o : offsets) {
          entry.offsets[{std::move(o.topic), o.partition}] = {
              o.offset, o.leader_epoch, std::move(o.metadata), now, o.expire_ms};
        }
      }
    }
    done(e);
  });
}

std::vector<metadata::committed_offset> group_coordinator::fetch(
    const std::string& group_id, const std::vector<topic_partitions>* topics) const {
  std::vector<metadata::committed_offset> out;
  base::lock_guard lock(mu_);
  auto it = groups_.find(group_id);
  if (it == groups_.end()) return out;
  const auto& offsets = it->second.offsets;
  auto add = [&](const std::pair<std::string, int32_t>& key, const offset_value& v) {
    out.push_back({{group_id, key.first, key.second},
                   v.offset,
                   v.leader_epoch,
                   v.metadata,
                   v.commit_ms,
                   v.expire_ms});
  };
  if (topics == nullptr) {
    for (const auto& [key, v] : offsets) add(key, v);
    return out;
  }
  for (const auto& t : *topics) {
    for (const int32_t p : t.partitions) {
      auto o = offsets.find({t.topic, p});
      if (o != offsets.end()) add(o->first, o->second);
    }
  }
  return out;
}

void group_coordinator::delete_offsets(
    const std::string& group_id, const std::vector<topic_partitions>& topics,
    const topic_lookup& lookup, std::function<void(error_code, std::set<std::string>)> done) {
  const int32_t shard = shard_of(group_id, options_.shards);
  metadata::shard_write w;
  w.shard = shard;
  std::set<std::string> refused;
  {
    base::lock_guard lock(mu_);
    const auto epoch = serving_epoch(shard);
    if (!epoch) {
      done(error_code::not_coordinator, {});
      return;
    }
    w.epoch = *epoch;
    auto it = groups_.find(group_id);
    if (it == groups_.end() ||
        (it->second.group && it->second.group->state() == group_state::dead)) {
      done(error_code::group_id_not_found, {});
      return;
    }
    if (it->second.consumer) {
      if (it->second.consumer->size() > 0) {
        const auto subscribed = it->second.consumer->subscribed_topics(lookup);
        for (const auto& t : topics) {
          if (subscribed.contains(t.topic)) refused.insert(t.topic);
        }
      }
    } else if (const classic_group& g = *it->second.group; g.state() != group_state::empty) {
      if (g.protocol_type() != "consumer") {
        done(error_code::non_empty_group, {});
        return;
      }
      // A consumer group may lose the offsets of topics it no longer subscribes to; while it
      // rebalances, what it subscribes to is unknown and every topic counts as subscribed.
      const auto subscribed = g.subscribed_topics();
      for (const auto& t : topics) {
        if (!subscribed || subscribed->contains(t.topic)) refused.insert(t.topic);
      }
    }
    for (const auto& t : topics) {
      if (refused.contains(t.topic)) continue;
      for (const int32_t p : t.partitions) w.deleted_offsets.push_back({group_id, t.topic, p});
    }
  }
  auto keys = w.deleted_offsets;
  writer_.write(std::move(w), [this, group_id, keys = std::move(keys), refused,
                               done = std::move(done)](error_code e) mutable {
    if (e == error_code::none) {
      base::lock_guard lock(mu_);
      auto it = groups_.find(group_id);
      if (it != groups_.end()) {
        for (const auto& k : keys) it->second.offsets.erase({k.topic, k.partition});
      }
    }
    done(e, std::move(refused));
  });
}

void group_coordinator::delete_group(const std::string& group_id, done_callback done) {
  const int32_t shard = shard_of(group_id, options_.shards);
  metadata::shard_write w;
  w.shard = shard;
  w.deleted_groups.push_back(group_id);
  {
    base::lock_guard lock(mu_);
    const auto epoch = serving_epoch(shard);
    if (!epoch) {
      done(error_code::not_coordinator);
      return;
    }
    w.epoch = *epoch;
    auto it = groups_.find(group_id);
    if (it == groups_.end() ||
        (it->second.group && it->second.group->state() == group_state::dead)) {
      done(error_code::group_id_not_found);
      return;
    }
    if (!is_empty(it->second)) {
      done(error_code::non_empty_group);
      return;
    }
    if (it->second.consumer) {
      // Deleted as a classic group is: Dead meanwhile.
      it->second.consumer.reset();
      it->second.group = std::make_unique<classic_group>(group_id, base::now_ms());
    }
    // Dead until the deletion is durable: joins meanwhile are told to retry.
    it->second.group->close(error_code::coordinator_not_available, base::now_ms());
  }
  writer_.write(std::move(w), [this, group_id, done = std::move(done)](error_code e) {
    {
      base::lock_guard lock(mu_);
      auto it = groups_.find(group_id);
      if (it != groups_.end() && it->second.group &&
          it->second.group->state() == group_state::dead) {
        if (e == error_code::none) {
          groups_.erase(it);
        } else {
          // Not deleted: the group stays, Empty, with its offsets.
          it->second.group = std::make_unique<classic_group>(group_id, base::now_ms());
        }
      }
    }
    done(e);
  });
}

void group_coordinator::forget_topic(const std::string& topic, bool in_store) {
  // A failure (logged by the store) leaves the rows: after a restart a new topic of that name
  // would show them, as offsets out of its range, which consumers reset.
  if (in_store) (void)store_.forget_topic(topic);
  log_.forget_topic(topic, base::now_ms());
  base::lock_guard lock(mu_);
  for (auto& [id, e] : groups_) {
    for (auto it = e.offsets.begin(); it != e.offsets.end();) {
      if (it->first.first == topic) {
        it = e.offsets.erase(it);
      } else {
        ++it;
      }
    }
  }
}

std::vector<std::string> group_coordinator::regexes_to_match(
    const std::string& group_id, const std::optional<std::string>& regex, uint64_t version) const {
  base::lock_guard lock(mu_);
  if (!holds(group_id) || !storable_group_id(group_id)) return {};
  auto it = groups_.find(group_id);
  if (it != groups_.end() && it->second.consumer) {
    return it->second.consumer->regexes_to_match(regex, version);
  }
  // A group to be made: only the heartbeat's own pattern.
  if (matchable_topic_regex(regex)) return {*regex};
  return {};
}

consumer_heartbeat_result group_coordinator::consumer_heartbeat(const std::string& group_id,
                                                                coordinator::consumer_heartbeat req,
                                                                const topic_lookup& topics,
                                                                regex_match_map matched) {
  const int64_t now = base::now_ms();
  base::lock_guard lock(mu_);
  if (!holds(group_id)) return {.error = error_code::not_coordinator};
  if (!storable_group_id(group_id)) {
    return {.error = error_code::invalid_group_id,
            .message = "the group id is not text of at most " + std::to_string(max_group_id_bytes) +
                       " bytes"};
  }
  auto it = groups_.find(group_id);
  if (it == groups_.end()) {
    if (req.member_epoch != 0) {
      return {.error = error_code::unknown_member_id,
              .message = "group " + group_id + " does not exist",
              .member_id = req.member_id};
    }
    it = groups_.emplace(group_id, group_entry{}).first;
    it->second.consumer = std::make_unique<consumer_group>(group_id, now);
  } else if (it->second.group) {
    if (it->second.group->state() != group_state::empty || req.member_epoch != 0) {
      return {.error = error_code::group_id_not_found,
              .message = "Group " + group_id + " is not a consumer group."};
    }
    // An Empty classic group becomes a consumer group, with its offsets (as Kafka upgrades it).
    it->second.group.reset();
    it->second.consumer = std::make_unique<consumer_group>(group_id, now);
  }
  it->second.consumer->add_regex_matches(std::move(matched));
  auto r = it->second.consumer->heartbeat(std::move(req), options_.consumer, topics, now);
  note_deadline(it->second);
  persist(group_id, it->second);
  return r;
}

tl::expected<consumer_group_description, error_code> group_coordinator::describe_consumer(
    const std::string& group_id) const {
  base::lock_guard lock(mu_);
  if (!holds(group_id)) return tl::make_unexpected(error_code::not_coordinator);
  auto it = groups_.find(group_id);
  if (it == groups_.end() || !it->second.consumer) {
    return tl::make_unexpected(error_code::group_id_not_found);
  }
  const consumer_group& g = *it->second.consumer;
  return consumer_group_description{group_id,          state_name(g.state()),
                                    g.group_epoch(),   g.assignment_epoch(),
                                    g.assignor_name(), g.members()};
}

std::optional<group_description> group_coordinator::describe(const std::string& group_id) const {
  base::lock_guard lock(mu_);
  auto it = groups_.find(group_id);
  // A consumer group is not a classic group: DescribeGroups shows it as Kafka shows a group it
  // does not have (ConsumerGroupDescribe describes it).
  if (it == groups_.end() || !it->second.group) return std::nullopt;
  const classic_group& g = *it->second.group;
  group_description d;
  d.group_id = group_id;
  d.state = g.state();
  d.protocol_type = g.protocol_type();
  if (g.state() == group_state::stable && g.protocol_name()) d.protocol = *g.protocol_name();
  d.members = g.members();
  return d;
}

std::vector<group_listing> group_coordinator::list() const {
  std::vector<group_listing> out;
  base::lock_guard lock(mu_);
  out.reserve(groups_.size());
  for (const auto& [id, e] : groups_) {
    if (e.consumer) {
      out.push_back({id, "consumer", state_name(e.consumer->state()), "consumer"});
      continue;
    }
    if (e.group->state() == group_state::dead) continue;
    out.push_back({id, e.group->protocol_type(), state_name(e.group->state()), "classic"});
  }
  return out;
}

void group_coordinator::tick(int64_t now) {
  if (closed_.load(std::memory_order_acquire)) return;
  {
    base::lock_guard lock(mu_);
    if (now >= next_deadline_) {
      next_deadline_ = INT64_MAX;
      for (auto& [id, e] : groups_) {
        if (e.group) {
          e.group->tick(now);
        } else {
          e.consumer->tick(now);
        }
        note_deadline(e);
        persist(id, e);
      }
    }
  }
  if (now >= next_expiry_check_) {
    next_expiry_check_ = now + options_.retention_check_interval_ms;
    expire_offsets(now);
  }
}

void group_coordinator::expire_offsets(int64_t now) {
  std::map<int32_t, metadata::shard_write> writes;
  {
    base::lock_guard lock(mu_);
    for (auto it = groups_.begin(); it != groups_.end();) {
      auto& [id, e] = *it;
      if (e.group && e.group->state() == group_state::dead) {
        ++it;
        continue;
      }
      const bool empty = is_empty(e);
      for (auto o = e.offsets.begin(); o != e.offsets.end();) {
        // An explicit expiry (OffsetCommit v1) holds whatever the group does; otherwise the
        // offsets of an Empty group expire a retention after it became empty (or after their
        // commit, if later).
        const bool expired = o->second.expire_ms >= 0
                                 ? now >= o->second.expire_ms
                                 : empty && now - std::max(empty_since(e), o->second.commit_ms) >=
                                                options_.offsets_retention_ms;
        if (!expired) {
          ++o;
          continue;
        }
        const int32_t shard = shard_of(id, options_.shards);
        auto& w = writes[shard];
        w.shard = shard;
        // (Every group here is of a shard held here; -1 would be fenced.)
        w.epoch = epoch_of(shard).value_or(base::leader_epoch(-1));
        w.deleted_offsets.push_back({id, o->first.first, o->first.second});
        o = e.offsets.erase(o);
      }
      if (empty && e.offsets.empty()) {
        if (e.group) e.group->close(error_code::coordinator_not_available, now);
        // Its record goes too.
        const int32_t shard = shard_of(id, options_.shards);
        auto& w = writes[shard];
        w.shard = shard;
        w.epoch = epoch_of(shard).value_or(base::leader_epoch(-1));
        w.deleted_groups.push_back(id);
        it = groups_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [shard, w] : writes) writer_.write(std::move(w), [](error_code) {});
}

}  // namespace silt::coordinator
