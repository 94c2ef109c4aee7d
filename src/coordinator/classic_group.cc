#include "coordinator/classic_group.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>

#include "coordinator/record_codec.h"
#include "protocol/generated/consumer_protocol_subscription.h"
#include "protocol/reader.h"
#include "protocol/writer.h"

namespace silt::coordinator {

namespace {

// What new_member_id() puts after the prefix: a dash and a UUID.
constexpr size_t member_id_suffix_bytes = 37;

const std::string& member_id_prefix(const join_request& req) {
  return req.group_instance_id ? *req.group_instance_id : req.client_id;
}

// A member id as Kafka makes them: a static member's instance id (a dynamic one's client id), a
// dash and a random UUID. Clients' assignors order members by these ids (range gives the first
// partitions to the first), so the prefix decides who gets what as it does on Kafka.
std::string new_member_id(const join_request& req) {
  const std::string& prefix = member_id_prefix(req);
  static thread_local std::mt19937_64 rng(std::random_device{}());
  const uint64_t hi = rng();
  const uint64_t lo = rng();
  char uuid[37];
  std::snprintf(uuid, sizeof uuid, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffull));
  return prefix + "-" + uuid;
}

}  // namespace

std::string_view state_name(group_state s) {
  switch (s) {
    case group_state::empty:
      return "Empty";
    case group_state::preparing_rebalance:
      return "PreparingRebalance";
    case group_state::completing_rebalance:
      return "CompletingRebalance";
    case group_state::stable:
      return "Stable";
    case group_state::dead:
      return "Dead";
  }
  return "Dead";
}

classic_group::classic_group(std::string id, int64_t now) : id_(std::move(id)), state_since_(now) {}

std::vector<member_summary> classic_group::members() const {
  std::vector<member_summary> out;
  out.reserve(members_.size());
  for (const auto& [id, m] : members_) {
    member_summary s{m.id, m.instance_id, m.client_id, m.client_host, {}, {}};
    if (state_ == group_state::stable) {
      if (const auto* md = metadata_of(m)) s.metadata = *md;
      s.assignment = m.assignment;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<std::set<std::string>> classic_group::subscribed_topics() const {
  if (protocol_type_ != "consumer" || state_ != group_state::stable) return std::nullopt;
  std::set<std::string> topics;
  for (const auto& [id, m] : members_) {
    const auto* md = metadata_of(m);
    if (md == nullptr) continue;
    protocol::reader r(*md);
    const int16_t version = r.int16();
    protocol::consumer_protocol_subscription sub;
    // Newer versions than this broker knows keep the fields it knows at the front.
    sub.decode(r, std::min<int16_t>(std::max<int16_t>(version, 0),
                                    protocol::consumer_protocol_subscription::max_version));
    if (!r.ok()) return std::nullopt;  // unreadable: treat as subscribed to everything unknown
    topics.insert(sub.topics.begin(), sub.topics.end());
  }
  return topics;
}

const std::vector<uint8_t>* classic_group::metadata_of(const member& m) const {
  if (!protocol_) return nullptr;
  for (const auto& p : m.protocols) {
    if (p.name == *protocol_) return &p.metadata;
  }
  return nullptr;
}

void classic_group::set_state(group_state s, int64_t now) {
  state_ = s;
  state_since_ = now;
  if (s == group_state::stable || s == group_state::empty) dirty_ = true;
}

namespace {

constexpr int8_t classic_record = 1;  // docs/formats/metadata.md: consumer_groups.data kinds

}  // namespace

std::vector<uint8_t> classic_group::encode() const {
  protocol::writer w;
  w.int8(classic_record);
  w.int32(generation_);
  w.int64(state_since_);
  const bool stable = state_ == group_state::stable;
  w.string(protocol_type_, true);
  put_optional(w, stable ? protocol_ : std::nullopt);
  w.string(stable ? leader_ : std::string(), true);
  w.array_length(stable ? members_.size() : 0, true);
  if (stable) {
    for (const auto& [id, m] : members_) {
      w.string(m.id, true);
      put_optional(w, m.instance_id);
      w.string(m.client_id, true);
      w.string(m.client_host, true);
      w.int32(m.session_timeout_ms);
      w.int32(m.rebalance_timeout_ms);
      w.array_length(m.protocols.size(), true);
      for (const auto& p : m.protocols) {
        w.string(p.name, true);
        w.bytes(p.metadata, true);
      }
      w.bytes(m.assignment, true);
    }
  }
  return std::move(w.buffer());
}

std::unique_ptr<classic_group> classic_group::decode(std::string id, std::span<const uint8_t> data,
                                                     int64_t now) {
  protocol::reader r(data);
  if (r.int8() != classic_record || !r.ok()) return nullptr;
  auto g = std::make_unique<classic_group>(std::move(id), now);
  g->generation_ = r.int32();
  g->state_since_ = r.int64();
  g->protocol_type_ = r.string(true);
  g->protocol_ = r.nullable_string(true, true);
  g->leader_ = r.string(true);
  const int32_t n = r.array_length(true, 4);
  for (int32_t i = 0; i < n && r.ok(); ++i) {
    member m;
    m.id = r.string(true);
    m.instance_id = r.nullable_string(true, true);
    m.client_id = r.string(true);
    m.client_host = r.string(true);
    m.session_timeout_ms = r.int32();
    m.rebalance_timeout_ms = r.int32();
    const int32_t protocols = r.array_length(true, 2);
    for (int32_t k = 0; k < protocols && r.ok(); ++k) {
      member_protocol p;
      p.name = r.string(true);
      p.metadata = r.bytes(true);
      m.protocols.push_back(std::move(p));
    }
    m.assignment = r.bytes(true);
    m.session_deadline = now + m.session_timeout_ms;
    if (m.instance_id) g->static_members_[*m.instance_id] = m.id;
    g->members_.emplace(m.id, std::move(m));
  }
  r.expect_end();
  if (!r.ok() || g->generation_ < 0) return nullptr;
  const bool stable = !g->members_.empty();
  if (stable && (!g->protocol_ || !g->members_.contains(g->leader_))) return nullptr;
  g->state_ = stable ? group_state::stable : group_state::empty;
  return g;
}

error_code classic_group::check_member(const std::string& member_id,
                                       const std::optional<std::string>& instance_id) const {
  if (instance_id) {
    auto it = static_members_.find(*instance_id);
    if (it == static_members_.end()) return error_code::unknown_member_id;
    if (it->second != member_id) return error_code::fenced_instance_id;
  }
  if (!members_.contains(member_id)) return error_code::unknown_member_id;
  return error_code::none;
}

bool classic_group::supports(const join_request& req) const {
  if (members_.empty()) return !req.protocol_type.empty() && !req.protocols.empty();
  if (req.protocol_type != protocol_type_) return false;
  // Some protocol of the request that every member supports.
  return std::any_of(req.protocols.begin(), req.protocols.end(), [&](const member_protocol& p) {
    return std::all_of(members_.begin(), members_.end(), [&](const auto& entry) {
      const auto& ps = entry.second.protocols;
      return std::any_of(ps.begin(), ps.end(), [&](const auto& q) { return q.name == p.name; });
    });
  });
}

void classic_group::join(join_request req, const group_limits& limits, int64_t now,
                         join_callback done) {
  if (state_ == group_state::dead) {
    done({.error = error_code::coordinator_not_available});
    return;
  }
  if (req.session_timeout_ms < limits.min_session_timeout_ms ||
      req.session_timeout_ms > limits.max_session_timeout_ms) {
    done({.error = error_code::invalid_session_timeout, .member_id = req.member_id});
    return;
  }
  if (req.rebalance_timeout_ms <= 0) req.rebalance_timeout_ms = req.session_timeout_ms;
  if (!supports(req)) {
    done({.error = error_code::inconsistent_group_protocol, .member_id = req.member_id});
    return;
  }
  if (req.member_id.empty()) {
    join_new_member(std::move(req), limits, now, std::move(done));
  } else {
    join_known_member(std::move(req), limits, now, std::move(done));
  }
}

void classic_group::join_new_member(join_request req, const group_limits& limits, int64_t now,
                                    join_callback done) {
  if (member_id_prefix(req).size() + member_id_suffix_bytes > protocol::max_string_bytes) {
    // Its member id would be longer than a string of the protocol may be: Kafka fails such a
    // join with UNKNOWN_SERVER_ERROR (client ids past 32,730 bytes, instance ids too).
    done({.error = error_code::unknown_server_error});
    return;
  }
  if (req.group_instance_id && static_members_.contains(*req.group_instance_id)) {
    replace_static_member(std::move(req), now, std::move(done));
    return;
  }
  if (members_.size() >= static_cast<size_t>(std::max(limits.max_size, 0))) {
    done({.error = error_code::group_max_size_reached});
    return;
  }
  std::string id = new_member_id(req);
  if (!req.group_instance_id && req.require_known_member_id) {
    // The member rejoins with this id; until then it holds up the rebalance (as a member that
    // has not joined) for at most its session timeout.
    pending_members_[id] = now + req.session_timeout_ms;
    done({.error = error_code::member_id_required, .member_id = std::move(id)});
    return;
  }
  add_member(std::move(req), id, limits, now, std::move(done));
}

void classic_group::join_known_member(join_request req, const group_limits& limits, int64_t now,
                                      join_callback done) {
  if (auto it = pending_members_.find(req.member_id); it != pending_members_.end()) {
    pending_members_.erase(it);
    const std::string id = req.member_id;
    add_member(std::move(req), id, limits, now, std::move(done));
    return;
  }
  if (const error_code e = check_member(req.member_id, req.group_instance_id);
      e != error_code::none) {
    done({.error = e, .member_id = req.member_id});
    return;
  }
  member& m = members_.at(req.member_id);
  switch (state_) {
    case group_state::preparing_rebalance:
      update_member(m, req, std::move(done));
      maybe_complete_join(now);
      return;
    case group_state::completing_rebalance:
      if (m.protocols == req.protocols) {
        // It missed the answer to its join: the same one again.
        done(join_response(m));
        return;
      }
      update_member(m, req, std::move(done));
      prepare_rebalance(&limits, now);
      return;
    case group_state::stable:
      if (m.id == leader_ || m.protocols != req.protocols) {
        update_member(m, req, std::move(done));
        prepare_rebalance(&limits, now);
        return;
      }
      m.session_deadline = now + m.session_timeout_ms;
      done(join_response(m));
      return;
    case group_state::empty:
    case group_state::dead:
      break;
  }
  done({.error = error_code::unknown_member_id, .member_id = req.member_id});
}

void classic_group::replace_static_member(join_request req, int64_t now, join_callback done) {
  const std::string old_id = static_members_.at(*req.group_instance_id);
  const std::string leader_before = leader_;
  auto node = members_.extract(old_id);
  member& m = node.mapped();
  // The instance restarted: whatever its old incarnation waits for is over.
  if (m.awaiting_join) {
    std::exchange(m.awaiting_join,
                  nullptr)({.error = error_code::fenced_instance_id, .member_id = old_id});
  }
  if (m.awaiting_sync) {
    std::exchange(m.awaiting_sync, nullptr)({.error = error_code::fenced_instance_id});
  }
  const std::string id = new_member_id(req);
  m.id = id;
  node.key() = id;
  members_.insert(std::move(node));
  member& moved = members_.at(id);
  static_members_[*req.group_instance_id] = id;
  if (leader_ == old_id) leader_ = id;
  // The member keeps the client id and host it first joined with, as on Kafka.
  moved.session_timeout_ms = req.session_timeout_ms;
  moved.rebalance_timeout_ms = req.rebalance_timeout_ms;
  moved.session_deadline = now + req.session_timeout_ms;
  switch (state_) {
    case group_state::stable: {
      const bool same = moved.protocols == req.protocols;
      moved.protocols = std::move(req.protocols);
      if (same || (protocol_ && select_protocol() == *protocol_)) {
        // Back within its session and the group's protocol stays: its old assignment is still
        // valid, no rebalance (KIP-345); its SyncGroup gets it. A leader that can skip the
        // assignment is told it leads, with the members (KIP-814); an older client is told
        // the leader as it was, so that it runs no assignment (a Stable group would not use
        // one).
        dirty_ = true;  // the instance's new member id is what a restart must know
        join_result r = join_response(moved);
        if (req.supports_skip_assignment) {
          r.skip_assignment = id == leader_;
        } else {
          r.leader = leader_before;
          r.members.clear();
        }
        done(std::move(r));
        return;
      }
      moved.awaiting_join = std::move(done);
      prepare_rebalance(nullptr, now);
      return;
    }
    case group_state::completing_rebalance:
      moved.protocols = std::move(req.protocols);
      moved.awaiting_join = std::move(done);
      prepare_rebalance(nullptr, now);
      return;
    case group_state::preparing_rebalance:
      moved.protocols = std::move(req.protocols);
      moved.awaiting_join = std::move(done);
      maybe_complete_join(now);
      return;
    case group_state::empty:
    case group_state::dead:
      break;
  }
  done({.error = error_code::unknown_member_id, .member_id = id});
}

void classic_group::add_member(join_request req, const std::string& member_id,
                               const group_limits& limits, int64_t now, join_callback done) {
  if (members_.empty()) protocol_type_ = req.protocol_type;
  member m;
  m.id = member_id;
  m.instance_id = req.group_instance_id;
  m.client_id = std::move(req.client_id);
  m.client_host = std::move(req.client_host);
  m.session_timeout_ms = req.session_timeout_ms;
  m.rebalance_timeout_ms = req.rebalance_timeout_ms;
  m.protocols = std::move(req.protocols);
  m.awaiting_join = std::move(done);
  m.is_new = true;
  m.session_deadline = now + new_member_join_ms;
  if (m.instance_id) static_members_[*m.instance_id] = member_id;
  members_.emplace(member_id, std::move(m));
  if (leader_.empty()) leader_ = member_id;
  if (state_ == group_state::preparing_rebalance) {
    new_member_added_ = true;
    maybe_complete_join(now);
  } else {
    prepare_rebalance(&limits, now);
  }
}

void classic_group::update_member(member& m, join_request& req, join_callback done) {
  m.protocols = std::move(req.protocols);
  m.session_timeout_ms = req.session_timeout_ms;
  m.rebalance_timeout_ms = req.rebalance_timeout_ms;
  m.client_id = std::move(req.client_id);
  m.client_host = std::move(req.client_host);
  if (m.awaiting_join) {
    // A second join while the first waits: the first is over.
    std::exchange(m.awaiting_join,
                  nullptr)({.error = error_code::rebalance_in_progress, .member_id = m.id});
  }
  m.awaiting_join = std::move(done);
}

int32_t classic_group::max_rebalance_timeout() const {
  int32_t t = 0;
  for (const auto& [id, m] : members_) t = std::max(t, m.rebalance_timeout_ms);
  return t;
}

void classic_group::fail_pending_syncs(error_code e) {
  for (auto& [id, m] : members_) {
    m.assignment.clear();
    if (m.awaiting_sync) std::exchange(m.awaiting_sync, nullptr)({.error = e});
  }
}

void classic_group::prepare_rebalance(const group_limits* limits, int64_t now) {
  if (state_ == group_state::completing_rebalance) {
    fail_pending_syncs(error_code::rebalance_in_progress);
  }
  const bool from_empty = state_ == group_state::empty;
  set_state(group_state::preparing_rebalance, now);
  sync_deadline_ = 0;
  for (auto& [id, m] : members_) m.pending_sync = false;
  const int64_t delay = limits != nullptr ? limits->initial_rebalance_delay_ms : 0;
  if (from_empty && delay > 0) {
    // The first members of a new (or emptied) group come in a burst: wait for the others
    // before assigning, a delay that grows with each member who joins, up to the rebalance
    // timeout (Kafka's InitialDelayedJoin).
    initial_delay_ = true;
    new_member_added_ = false;
    initial_delay_ms_ = delay;
    initial_delay_limit_ = now + max_rebalance_timeout();
    join_deadline_ = std::min(now + delay, initial_delay_limit_);
    return;
  }
  initial_delay_ = false;
  join_deadline_ = now + max_rebalance_timeout();
  maybe_complete_join(now);
}

void classic_group::maybe_complete_join(int64_t now) {
  if (state_ != group_state::preparing_rebalance || initial_delay_) return;
  if (!pending_members_.empty()) return;
  const bool all = std::all_of(members_.begin(), members_.end(),
                               [](const auto& entry) { return bool(entry.second.awaiting_join); });
  if (all) complete_join(now);
}

std::string classic_group::select_protocol() const {
  // Each member votes for the first of its protocols that every member supports; the most
  // votes win, the first such protocol in the leader's order on a tie.
  std::vector<std::string> candidates;
  for (const auto& p : members_.begin()->second.protocols) {
    const bool everyone = std::all_of(members_.begin(), members_.end(), [&](const auto& entry) {
      const auto& ps = entry.second.protocols;
      return std::any_of(ps.begin(), ps.end(), [&](const auto& q) { return q.name == p.name; });
    });
    if (everyone) candidates.push_back(p.name);
  }
  std::map<std::string, int> votes;
  for (const auto& [id, m] : members_) {
    for (const auto& p : m.protocols) {
      if (std::find(candidates.begin(), candidates.end(), p.name) != candidates.end()) {
        ++votes[p.name];
        break;
      }
    }
  }
  std::string best;
  int most = -1;
  const member* leader = members_.contains(leader_) ? &members_.at(leader_) : nullptr;
  const auto& order = leader != nullptr ? leader->protocols : members_.begin()->second.protocols;
  for (const auto& p : order) {
    auto it = votes.find(p.name);
    if (it != votes.end() && it->second > most) {
      most = it->second;
      best = p.name;
    }
  }
  return best;
}

join_result classic_group::join_response(const member& m) const {
  join_result r;
  r.generation_id = generation_;
  r.protocol_type = protocol_type_;
  r.protocol_name = protocol_;
  r.leader = leader_;
  r.member_id = m.id;
  if (m.id == leader_) {
    for (const auto& [id, other] : members_) {
      const auto* md = metadata_of(other);
      r.members.push_back(
          {other.id, other.instance_id, md != nullptr ? *md : std::vector<uint8_t>{}});
    }
  }
  return r;
}

void classic_group::complete_join(int64_t now) {
  // Dynamic members that did not rejoin in time are gone; static ones keep their place until
  // their session lapses.
  for (auto it = members_.begin(); it != members_.end();) {
    if (!it->second.awaiting_join && !it->second.instance_id) {
      it = members_.erase(it);
    } else {
      ++it;
    }
  }
  if (!members_.contains(leader_)) leader_.clear();
  if (leader_.empty() || !members_.at(leader_).awaiting_join) {
    // The leader must be a member that gets this answer, to assign the partitions.
    const auto joined = std::find_if(members_.begin(), members_.end(), [](const auto& entry) {
      return bool(entry.second.awaiting_join);
    });
    if (joined == members_.end() && !members_.empty()) {
      // Only static members that have not rejoined are left: no one could assign. Wait
      // another rebalance timeout, for them to rejoin or their sessions to lapse.
      join_deadline_ = now + max_rebalance_timeout();
      initial_delay_ = false;
      return;
    }
    if (joined != members_.end()) leader_ = joined->first;
  }
  ++generation_;
  initial_delay_ = false;
  if (members_.empty()) {
    protocol_.reset();
    leader_.clear();
    set_state(group_state::empty, now);
    return;
  }
  protocol_ = select_protocol();
  set_state(group_state::completing_rebalance, now);
  for (auto& [id, m] : members_) {
    m.pending_sync = true;
    m.is_new = false;
    m.session_deadline = now + m.session_timeout_ms;
    if (m.awaiting_join) std::exchange(m.awaiting_join, nullptr)(join_response(m));
  }
  sync_deadline_ = now + max_rebalance_timeout();
}

void classic_group::sync(const std::string& member_id,
                         const std::optional<std::string>& instance_id, int32_t generation,
                         const std::optional<std::string>& protocol_type,
                         const std::optional<std::string>& protocol_name,
                         std::map<std::string, std::vector<uint8_t>> assignments, int64_t now,
                         sync_callback done) {
  if (state_ == group_state::dead) {
    done({.error = error_code::coordinator_not_available});
    return;
  }
  if (const error_code e = check_member(member_id, instance_id); e != error_code::none) {
    done({.error = e});
    return;
  }
  if (generation != generation_) {
    done({.error = error_code::illegal_generation});
    return;
  }
  if ((protocol_type && *protocol_type != protocol_type_) ||
      (protocol_name && protocol_name != protocol_)) {
    done({.error = error_code::inconsistent_group_protocol});
    return;
  }
  member& m = members_.at(member_id);
  m.session_deadline = now + m.session_timeout_ms;
  switch (state_) {
    case group_state::empty:
      done({.error = error_code::unknown_member_id});
      return;
    case group_state::preparing_rebalance:
      done({.error = error_code::rebalance_in_progress});
      return;
    case group_state::completing_rebalance: {
      m.pending_sync = false;
      if (m.awaiting_sync) {
        std::exchange(m.awaiting_sync, nullptr)({.error = error_code::rebalance_in_progress});
      }
      m.awaiting_sync = std::move(done);
      if (member_id != leader_) return;
      // The leader's assignment: every member gets its part (none for a member it left out).
      for (auto& [id, other] : members_) {
        auto it = assignments.find(id);
        other.assignment = it != assignments.end() ? std::move(it->second) : std::vector<uint8_t>{};
      }
      set_state(group_state::stable, now);
      for (auto& [id, other] : members_) {
        if (other.awaiting_sync) {
          std::exchange(other.awaiting_sync,
                        nullptr)({error_code::none, protocol_type_, protocol_, other.assignment});
        }
      }
      return;
    }
    case group_state::stable:
      m.pending_sync = false;
      done({error_code::none, protocol_type_, protocol_, m.assignment});
      return;
    case group_state::dead:
      break;
  }
  done({.error = error_code::coordinator_not_available});
}

error_code classic_group::heartbeat(const std::string& member_id,
                                    const std::optional<std::string>& instance_id,
                                    int32_t generation, int64_t now) {
  if (state_ == group_state::dead) return error_code::coordinator_not_available;
  if (const error_code e = check_member(member_id, instance_id); e != error_code::none) return e;
  if (generation != generation_) return error_code::illegal_generation;
  member& m = members_.at(member_id);
  switch (state_) {
    case group_state::empty:
      return error_code::unknown_member_id;
    case group_state::preparing_rebalance:
      m.session_deadline = now + m.session_timeout_ms;
      return error_code::rebalance_in_progress;
    case group_state::completing_rebalance:
    case group_state::stable:
      m.session_deadline = now + m.session_timeout_ms;
      return error_code::none;
    case group_state::dead:
      break;
  }
  return error_code::coordinator_not_available;
}

error_code classic_group::leave(const std::string& member_id,
                                const std::optional<std::string>& instance_id, int64_t now) {
  if (state_ == group_state::dead) return error_code::coordinator_not_available;
  if (member_id.empty()) {
    if (!instance_id) return error_code::unknown_member_id;
    auto it = static_members_.find(*instance_id);
    if (it == static_members_.end()) return error_code::unknown_member_id;
    remove_member(std::string(it->second), now);
    return error_code::none;
  }
  if (pending_members_.erase(member_id) > 0) {
    maybe_complete_join(now);
    return error_code::none;
  }
  if (const error_code e = check_member(member_id, instance_id); e != error_code::none) return e;
  remove_member(member_id, now);
  return error_code::none;
}

void classic_group::remove_member(const std::string& member_id, int64_t now) {
  auto node = members_.extract(member_id);
  member& m = node.mapped();
  if (m.awaiting_join) {
    std::exchange(m.awaiting_join,
                  nullptr)({.error = error_code::unknown_member_id, .member_id = member_id});
  }
  if (m.awaiting_sync) {
    std::exchange(m.awaiting_sync, nullptr)({.error = error_code::unknown_member_id});
  }
  if (m.instance_id) {
    auto it = static_members_.find(*m.instance_id);
    if (it != static_members_.end() && it->second == member_id) static_members_.erase(it);
  }
  if (leader_ == member_id) leader_ = members_.empty() ? std::string() : members_.begin()->first;
  switch (state_) {
    case group_state::stable:
    case group_state::completing_rebalance:
      prepare_rebalance(nullptr, now);
      break;
    case group_state::preparing_rebalance:
      maybe_complete_join(now);
      break;
    case group_state::empty:
    case group_state::dead:
      break;
  }
}

error_code classic_group::check_commit(const std::string& member_id,
                                       const std::optional<std::string>& instance_id,
                                       int32_t generation) const {
  if (state_ == group_state::dead) return error_code::coordinator_not_available;
  if (generation < 0 && member_id.empty() && state_ == group_state::empty) return error_code::none;
  if (const error_code e = check_member(member_id, instance_id); e != error_code::none) return e;
  if (generation != generation_) return error_code::illegal_generation;
  // Members commit what they consumed before rejoining while others join (KIP-429); only the
  // moment between join and sync has no valid generation to commit under.
  if (state_ == group_state::completing_rebalance) return error_code::rebalance_in_progress;
  return error_code::none;
}

void classic_group::committed(const std::string& member_id, int64_t now) {
  if (state_ != group_state::stable && state_ != group_state::preparing_rebalance) return;
  auto it = members_.find(member_id);
  if (it != members_.end() && !it->second.is_new) {
    it->second.session_deadline = now + it->second.session_timeout_ms;
  }
}

bool classic_group::expired(const member& m, int64_t now) const {
  // A member waiting for its join or sync answer is alive, unless new (its join may lapse).
  if (!m.is_new && (m.awaiting_join || m.awaiting_sync)) return false;
  return m.session_deadline <= now;
}

void classic_group::tick(int64_t now) {
  bool pending_lapsed = false;
  for (auto it = pending_members_.begin(); it != pending_members_.end();) {
    if (it->second <= now) {
      it = pending_members_.erase(it);
      pending_lapsed = true;
    } else {
      ++it;
    }
  }
  std::vector<std::string> lapsed_sessions;
  for (const auto& [id, m] : members_) {
    if (expired(m, now)) lapsed_sessions.push_back(id);
  }
  for (const auto& id : lapsed_sessions) {
    if (members_.contains(id)) remove_member(id, now);
  }
  if (pending_lapsed) maybe_complete_join(now);
  if (state_ == group_state::preparing_rebalance && now >= join_deadline_) {
    if (initial_delay_ && new_member_added_ && now < initial_delay_limit_) {
      new_member_added_ = false;
      join_deadline_ = std::min(now + initial_delay_ms_, initial_delay_limit_);
    } else {
      complete_join(now);
    }
  }
  if ((state_ == group_state::completing_rebalance || state_ == group_state::stable) &&
      sync_deadline_ != 0) {
    const bool waiting = std::any_of(members_.begin(), members_.end(),
                                     [](const auto& entry) { return entry.second.pending_sync; });
    if (!waiting) {
      sync_deadline_ = 0;
    } else if (now >= sync_deadline_) {
      sync_deadline_ = 0;
      // Members that never synced within the rebalance timeout leave; the rest rebalance.
      std::vector<std::string> lapsed;
      for (const auto& [id, m] : members_) {
        if (m.pending_sync) lapsed.push_back(id);
      }
      for (const auto& id : lapsed) {
        auto node = members_.extract(id);
        member& m = node.mapped();
        if (m.awaiting_sync) {
          std::exchange(m.awaiting_sync, nullptr)({.error = error_code::unknown_member_id});
        }
        if (m.instance_id) static_members_.erase(*m.instance_id);
        if (leader_ == id) leader_ = members_.empty() ? std::string() : members_.begin()->first;
      }
      prepare_rebalance(nullptr, now);
    }
  }
}

std::optional<int64_t> classic_group::next_deadline() const {
  std::optional<int64_t> next;
  auto take = [&](int64_t t) { next = next ? std::min(*next, t) : t; };
  for (const auto& [id, at] : pending_members_) take(at);
  for (const auto& [id, m] : members_) {
    if (m.is_new || (!m.awaiting_join && !m.awaiting_sync)) take(m.session_deadline);
  }
  if (state_ == group_state::preparing_rebalance) take(join_deadline_);
  if (sync_deadline_ != 0) take(sync_deadline_);
  return next;
}

void classic_group::close(error_code e, int64_t now) {
  for (auto& [id, m] : members_) {
    if (m.awaiting_join) std::exchange(m.awaiting_join, nullptr)({.error = e, .member_id = id});
    if (m.awaiting_sync) std::exchange(m.awaiting_sync, nullptr)({.error = e});
  }
  members_.clear();
  static_members_.clear();
  pending_members_.clear();
  leader_.clear();
  set_state(group_state::dead, now);
}

}  // namespace silt::coordinator
