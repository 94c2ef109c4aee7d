#include "coordinator/consumer_group.h"

#include <algorithm>
#include <memory>
#include <random>

#include "coordinator/record_codec.h"
#include "protocol/reader.h"
#include "protocol/writer.h"

namespace silt::coordinator {

namespace {

constexpr std::string_view default_assignor = "uniform";

using partition_key = std::pair<topic_uuid, int32_t>;

bool empty(const member_assignment& a) {
  return std::all_of(a.begin(), a.end(), [](const auto& e) { return e.second.empty(); });
}

// Empty topic entries dropped, so that equal assignments compare equal.
member_assignment normalized(member_assignment a) {
  for (auto it = a.begin(); it != a.end();) {
    it = it->second.empty() ? a.erase(it) : std::next(it);
  }
  return a;
}

member_assignment intersect(const member_assignment& a, const member_assignment& b) {
  member_assignment out;
  for (const auto& [topic, parts] : a) {
    auto it = b.find(topic);
    if (it == b.end()) continue;
    std::set<int32_t> both;
    std::set_intersection(parts.begin(), parts.end(), it->second.begin(), it->second.end(),
                          std::inserter(both, both.end()));
    if (!both.empty()) out[topic] = std::move(both);
  }
  return out;
}

member_assignment minus(const member_assignment& a, const member_assignment& b) {
  member_assignment out;
  for (const auto& [topic, parts] : a) {
    auto it = b.find(topic);
    std::set<int32_t> left;
    if (it == b.end()) {
      left = parts;
    } else {
      std::set_difference(parts.begin(), parts.end(), it->second.begin(), it->second.end(),
                          std::inserter(left, left.end()));
    }
    if (!left.empty()) out[topic] = std::move(left);
  }
  return out;
}

bool subset(const member_assignment& a, const member_assignment& b) {
  return empty(minus(a, b));
}

// A member id as Kafka's clients make them (KIP-1082): a random UUID in URL-safe base64.
std::string new_member_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  for (int i = 0; i < 22; ++i) out += alphabet[rng() % 64];
  return out;
}

}  // namespace

std::string_view state_name(consumer_group_state s) {
  switch (s) {
    case consumer_group_state::empty:
      return "Empty";
    case consumer_group_state::assigning:
      return "Assigning";
    case consumer_group_state::reconciling:
      return "Reconciling";
    case consumer_group_state::stable:
      return "Stable";
  }
  return "Empty";
}

consumer_group::consumer_group(std::string id, int64_t now)
    : id_(std::move(id)), empty_since_(now) {}

consumer_group_state consumer_group::state() const {
  if (members_.empty()) return consumer_group_state::empty;
  if (group_epoch_ > target_epoch_) return consumer_group_state::assigning;
  const bool settled = std::all_of(members_.begin(), members_.end(), [&](const auto& e) {
    return e.second.epoch == target_epoch_ && e.second.state == member_state::stable;
  });
  return settled ? consumer_group_state::stable : consumer_group_state::reconciling;
}

std::string consumer_group::assignor_name() const {
  // The first member's choice, in member id order; Kafka's default when nobody chose.
  for (const auto& [id, m] : members_) {
    if (m.server_assignor) return *m.server_assignor;
  }
  return std::string(default_assignor);
}

std::vector<consumer_member_summary> consumer_group::members() const {
  std::vector<consumer_member_summary> out;
  out.reserve(members_.size());
  for (const auto& [id, m] : members_) {
    auto t = target_.find(id);
    out.push_back({m.id, m.instance_id, m.rack_id, m.epoch, m.client_id, m.client_host,
                   m.subscribed_names, m.regex, normalized(m.assigned),
                   t != target_.end() ? normalized(t->second) : member_assignment{}});
  }
  return out;
}

std::vector<std::string> consumer_group::regexes_to_match(
    const std::optional<std::string>& incoming, uint64_t version) const {
  std::vector<std::string> out;
  auto add = [&](const std::string& pattern) {
    auto it = regex_cache_.find(pattern);
    if (it != regex_cache_.end() && it->second.version == version) return;
    if (std::find(out.begin(), out.end(), pattern) == out.end()) out.push_back(pattern);
  };
  if (matchable_topic_regex(incoming)) add(*incoming);
  for (const auto& [id, m] : members_) {
    if (m.regex) add(*m.regex);
  }
  return out;
}

void consumer_group::add_regex_matches(regex_match_map matches) {
  while (!matches.empty()) {
    auto node = matches.extract(matches.begin());
    auto it = regex_cache_.find(node.key());
    if (it == regex_cache_.end()) {
      regex_cache_.insert(std::move(node));
    } else if (node.mapped().ids || !node.mapped().error.empty()) {
      it->second = std::move(node.mapped());
    } else {
      // Not finished within its budget: what it matched before stands, not tried again until
      // the topics change.
      it->second.version = node.mapped().version;
    }
  }
}

const regex_matches& consumer_group::matches_of(const std::string& pattern,
                                                const topic_lookup& topics) const {
  auto it = regex_cache_.find(pattern);
  if (it == regex_cache_.end()) {
    // Not matched before the call: only when the group was loaded again between the
    // coordinator's look at what to match and the heartbeat, or for OffsetDelete before any
    // heartbeat since a restart. Matched here, within the same budget.
    it = regex_cache_.emplace(pattern, match_topic_regexes({pattern}, topics).at(pattern)).first;
  }
  return it->second;
}

std::set<topic_uuid> consumer_group::subscribed_ids(const member& m,
                                                    const topic_lookup& topics) const {
  std::set<topic_uuid> out;
  for (const auto& name : m.subscribed_names) {
    if (auto t = topics.by_name(name)) out.insert(t->id);
  }
  if (m.regex) {
    // As last matched: a pattern is matched again (outside the coordinator's lock) before the
    // heartbeats that follow a change of the topics.
    if (const auto& ids = matches_of(*m.regex, topics).ids) out.insert(ids->begin(), ids->end());
  }
  return out;
}

std::set<std::string> consumer_group::subscribed_topics(const topic_lookup& topics) const {
  std::set<std::string> out;
  for (const auto& [id, m] : members_) {
    for (const auto& t : subscribed_ids(m, topics)) {
      if (auto meta = topics.by_id(t)) out.insert(meta->name);
    }
  }
  return out;
}

error_code consumer_group::check_commit(const std::string& member_id, int32_t member_epoch) const {
  if (member_id.empty() && member_epoch < 0) {
    return members_.empty() ? error_code::none : error_code::unknown_member_id;
  }
  auto it = members_.find(member_id);
  if (it == members_.end()) return error_code::unknown_member_id;
  if (member_epoch != it->second.epoch) return error_code::stale_member_epoch;
  return error_code::none;
}

void consumer_group::refresh_metadata(const topic_lookup& topics) {
  // Patterns no member uses any more are forgotten.
  std::erase_if(regex_cache_, [&](const auto& entry) {
    return std::none_of(members_.begin(), members_.end(),
                        [&](const auto& m) { return m.second.regex == entry.first; });
  });
  std::map<topic_uuid, int32_t> now;
  for (const auto& [id, m] : members_) {
    for (const auto& t : subscribed_ids(m, topics)) {
      if (auto meta = topics.by_id(t)) now[t] = meta->partitions;
    }
  }
  if (now != subscribed_partitions_) {
    subscribed_partitions_ = std::move(now);
    if (subscribed_partitions_known_) ++group_epoch_;
  }
  subscribed_partitions_known_ = true;
}

void consumer_group::compute_target(const topic_lookup& topics) {
  std::vector<assignor_member> input;
  input.reserve(members_.size());
  for (const auto& [id, m] : members_) {
    assignor_member a;
    a.member_id = id;
    a.instance_id = m.instance_id;
    a.rack = m.rack_id;
    a.subscribed = subscribed_ids(m, topics);
    auto t = target_.find(id);
    if (t != target_.end()) a.current = t->second;
    input.push_back(std::move(a));
  }
  assignor_fn fn = find_assignor(assignor_name());
  if (fn == nullptr) fn = find_assignor(default_assignor);
  target_ = fn(input, subscribed_partitions_);
  target_epoch_ = group_epoch_;
}

void consumer_group::advance(member& m, int64_t now) {
  const member_assignment target = [&] {
    auto it = target_.find(m.id);
    return it != target_.end() ? it->second : member_assignment{};
  }();
  const member_assignment revoke = minus(m.assigned, target);
  if (!empty(revoke)) {
    // First the member lets go of what others get; it keeps its epoch meanwhile.
    m.assigned = intersect(m.assigned, target);
    m.pending_revocation = revoke;
    m.state = member_state::unrevoked;
    m.revocation_deadline = now + m.rebalance_timeout_ms;
    return;
  }
  // Partitions of the target that another member still holds (assigned or being revoked).
  member_assignment held;
  const member_assignment wanted = minus(target, m.assigned);
  if (!empty(wanted)) {
    for (const auto& [id, other] : members_) {
      if (id == m.id) continue;
      for (const auto* a : {&other.assigned, &other.pending_revocation}) {
        for (const auto& [topic, parts] : intersect(*a, wanted)) {
          held[topic].insert(parts.begin(), parts.end());
        }
      }
    }
  }
  m.assigned = normalized(minus(target, held));
  if (m.epoch != target_epoch_) {
    m.previous_epoch = m.epoch;
    m.epoch = target_epoch_;
  }
  m.state = empty(held) ? member_state::stable : member_state::unreleased;
}

void consumer_group::reconcile(member& m, const std::optional<member_assignment>& owned,
                               int64_t now) {
  switch (m.state) {
    case member_state::unrevoked:
      // Done once the member says it holds none of what it was to revoke.
      if (owned && empty(intersect(*owned, m.pending_revocation))) {
        m.pending_revocation.clear();
        advance(m, now);
      }
      return;
    case member_state::unreleased:
      advance(m, now);
      return;
    case member_state::stable:
      if (m.epoch != target_epoch_) advance(m, now);
      return;
  }
}

consumer_heartbeat_result consumer_group::answer(member& m, const consumer_limits& limits) {
  consumer_heartbeat_result r;
  r.member_id = m.id;
  r.member_epoch = m.epoch;
  r.heartbeat_interval_ms = limits.heartbeat_interval_ms;
  const member_assignment now = normalized(m.assigned);
  if (!m.last_sent || *m.last_sent != now) {
    r.assignment = now;
    m.last_sent = now;
  }
  return r;
}

consumer_heartbeat_result consumer_group::join(consumer_heartbeat& req,
                                               const consumer_limits& limits) {
  if (!req.subscribed_topic_names && !req.subscribed_topic_regex) {
    return {.error = error_code::invalid_request,
            .message =
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first "
                "request."};
  }
  if (!req.owned) {
    return {.error = error_code::invalid_request,
            .message = "TopicPartitions must be set in first request."};
  }
  if (req.rebalance_timeout_ms == -1) {
    return {.error = error_code::invalid_request,
            .message = "RebalanceTimeoutMs must be provided in first request."};
  }
  if (req.member_id.empty()) req.member_id = new_member_id();
  if (req.instance_id) {
    // A static member back under a new member id takes over its old place (assignment, epoch
    // and subscriptions), if that one left: no rebalance.
    for (auto it = members_.begin(); it != members_.end(); ++it) {
      if (it->second.instance_id != req.instance_id || it->first == req.member_id) continue;
      if (!it->second.left_static) {
        return {.error = error_code::unreleased_instance_id,
                .message = "instance id " + *req.instance_id + " is used by another member"};
      }
      auto node = members_.extract(it);
      auto t = target_.extract(node.key());
      node.key() = req.member_id;
      node.mapped().id = req.member_id;
      node.mapped().last_sent.reset();
      members_.insert(std::move(node));
      if (!t.empty()) {
        t.key() = req.member_id;
        target_.insert(std::move(t));
      }
      return {};
    }
  }
  if (auto it = members_.find(req.member_id); it != members_.end()) {
    // Rejoining under the same id (after it was fenced): a new membership.
    members_.erase(it);
    ++group_epoch_;
  }
  if (members_.size() >= static_cast<size_t>(std::max(limits.max_size, 0))) {
    return {.error = error_code::group_max_size_reached};
  }
  member m;
  m.id = req.member_id;
  m.instance_id = req.instance_id;
  ++group_epoch_;
  members_.emplace(m.id, std::move(m));
  return {};
}

consumer_heartbeat_result consumer_group::heartbeat(consumer_heartbeat req,
                                                    const consumer_limits& limits,
                                                    const topic_lookup& topics, int64_t now) {
  const int32_t epoch_before = group_epoch_;
  if (req.server_assignor && find_assignor(*req.server_assignor) == nullptr) {
    return {.error = error_code::unsupported_assignor,
            .message = "ServerAssignor " + *req.server_assignor +
                       " is not supported. "
                       "Supported assignors: uniform, range."};
  }
  if (req.subscribed_topic_regex) {
    if (req.subscribed_topic_regex->size() > max_topic_regex_bytes) {
      return {.error = error_code::invalid_regular_expression,
              .message = "SubscribedTopicRegex is longer than " +
                         std::to_string(max_topic_regex_bytes) + " bytes."};
    }
    if (!req.subscribed_topic_regex->empty()) {
      const regex_matches& m = matches_of(*req.subscribed_topic_regex, topics);
      if (!m.error.empty()) {
        return {.error = error_code::invalid_regular_expression,
                .message = "SubscribedTopicRegex " + *req.subscribed_topic_regex +
                           " is not a valid regular expression: " + m.error};
      }
      if (!m.ids) {
        return {.error = error_code::invalid_regular_expression,
                .message = "SubscribedTopicRegex " + *req.subscribed_topic_regex +
                           " could not be matched against the topics within " +
                           std::to_string(topic_regex_cpu_budget.count()) + " ms."};
      }
    }
  }
  if (req.member_epoch == 0) {
    auto joined = join(req, limits);
    if (joined.error != error_code::none) return joined;
  } else if (req.member_epoch == -1 || req.member_epoch == -2) {
    auto it = members_.find(req.member_id);
    if (it == members_.end()) {
      return {.error = error_code::unknown_member_id, .member_id = req.member_id};
    }
    if (req.member_epoch == -2 && it->second.instance_id) {
      // Back soon (a restart): its partitions stay its own until the session runs out.
      it->second.left_static = true;
      it->second.session_deadline = now + limits.session_timeout_ms;
    } else {
      remove_member(req.member_id, now);
    }
    return {.member_id = req.member_id,
            .member_epoch = req.member_epoch,
            .heartbeat_interval_ms = limits.heartbeat_interval_ms};
  } else {
    auto it = members_.find(req.member_id);
    if (it == members_.end()) {
      return {.error = error_code::unknown_member_id,
              .message = "Member " + req.member_id + " is not a member of group " + id_ + ".",
              .member_id = req.member_id};
    }
    const member& m = it->second;
    if (req.member_epoch > m.epoch ||
        (req.member_epoch < m.epoch &&
         (req.member_epoch != m.previous_epoch || !req.owned || !subset(*req.owned, m.assigned)))) {
      return {.error = error_code::fenced_member_epoch,
              .message = "The consumer group member has a smaller member epoch (" +
                         std::to_string(req.member_epoch) +
                         ") than the one known by the group "
                         "coordinator (" +
                         std::to_string(m.epoch) + ").",
              .member_id = req.member_id};
    }
  }
  member& m = members_.at(req.member_id);
  const int32_t member_epoch_before = req.member_epoch == 0 ? -1 : m.epoch;
  m.left_static = false;
  m.client_id = std::move(req.client_id);
  m.client_host = std::move(req.client_host);
  m.session_timeout_ms = limits.session_timeout_ms;
  m.session_deadline = now + limits.session_timeout_ms;
  if (req.rebalance_timeout_ms >= 0) m.rebalance_timeout_ms = req.rebalance_timeout_ms;
  if (req.rack_id) m.rack_id = req.rack_id;
  bool changed = false;
  if (req.subscribed_topic_names && *req.subscribed_topic_names != m.subscribed_names) {
    m.subscribed_names = std::move(*req.subscribed_topic_names);
    changed = true;
  }
  if (req.subscribed_topic_regex && req.subscribed_topic_regex != m.regex) {
    m.regex = req.subscribed_topic_regex->empty() ? std::nullopt : req.subscribed_topic_regex;
    changed = true;
  }
  if (req.server_assignor && req.server_assignor != m.server_assignor) {
    m.server_assignor = req.server_assignor;
    changed = true;
  }
  if (changed) ++group_epoch_;
  refresh_metadata(topics);
  if (group_epoch_ > target_epoch_) compute_target(topics);
  reconcile(m, req.owned, now);
  if (req.member_epoch == 0) m.last_sent.reset();  // a joining member gets its assignment
  auto r = answer(m, limits);
  // Whatever the record holds may have moved: epochs, assignments, subscriptions.
  if (r.assignment || group_epoch_ != epoch_before || r.member_epoch != member_epoch_before) {
    dirty_ = true;
  }
  return r;
}

void consumer_group::remove_member(const std::string& member_id, int64_t now) {
  dirty_ = true;
  members_.erase(member_id);
  target_.erase(member_id);
  ++group_epoch_;
  if (members_.empty()) empty_since_ = now;
}

void consumer_group::tick(int64_t now) {
  std::vector<std::string> gone;
  for (const auto& [id, m] : members_) {
    const bool session = m.session_deadline <= now;
    const bool revocation = m.state == member_state::unrevoked && m.revocation_deadline <= now;
    if (session || revocation) gone.push_back(id);
  }
  for (const auto& id : gone) remove_member(id, now);
}

namespace {

constexpr int8_t consumer_record = 2;  // docs/formats/metadata.md: consumer_groups.data kinds

void put_assignment(protocol::writer& w, const member_assignment& a) {
  const member_assignment n = normalized(a);
  w.array_length(n.size(), true);
  for (const auto& [topic, parts] : n) {
    w.raw(topic);
    w.array_length(parts.size(), true);
    for (const int32_t p : parts) w.int32(p);
  }
}

member_assignment get_assignment(protocol::reader& r) {
  member_assignment a;
  const int32_t topics = r.array_length(true, 17);
  for (int32_t i = 0; i < topics && r.ok(); ++i) {
    topic_uuid id{};
    const auto bytes = r.raw(id.size());
    if (!r.ok()) break;
    std::copy(bytes.begin(), bytes.end(), id.begin());
    const int32_t n = r.array_length(true, 4);
    auto& parts = a[id];
    for (int32_t k = 0; k < n && r.ok(); ++k) parts.insert(r.int32());
  }
  return a;
}

}  // namespace

std::vector<uint8_t> consumer_group::encode() const {
  protocol::writer w;
  w.int8(consumer_record);
  w.int32(group_epoch_);
  w.int32(target_epoch_);
  w.int64(empty_since_);
  w.array_length(members_.size(), true);
  for (const auto& [id, m] : members_) {
    w.string(m.id, true);
    put_optional(w, m.instance_id);
    put_optional(w, m.rack_id);
    w.string(m.client_id, true);
    w.string(m.client_host, true);
    w.int32(m.rebalance_timeout_ms);
    w.array_length(m.subscribed_names.size(), true);
    for (const auto& t : m.subscribed_names) w.string(t, true);
    put_optional(w, m.regex);
    put_optional(w, m.server_assignor);
    w.int32(m.epoch);
    w.int32(m.previous_epoch);
    w.int8(static_cast<int8_t>(m.state));
    put_assignment(w, m.assigned);
    put_assignment(w, m.pending_revocation);
    auto t = target_.find(id);
    put_assignment(w, t != target_.end() ? t->second : member_assignment{});
  }
  return std::move(w.buffer());
}

std::unique_ptr<consumer_group> consumer_group::decode(std::string id,
                                                       std::span<const uint8_t> data,
                                                       int32_t session_timeout_ms, int64_t now) {
  protocol::reader r(data);
  if (r.int8() != consumer_record || !r.ok()) return nullptr;
  auto g = std::make_unique<consumer_group>(std::move(id), now);
  g->group_epoch_ = r.int32();
  g->target_epoch_ = r.int32();
  g->empty_since_ = r.int64();
  const int32_t n = r.array_length(true, 8);
  for (int32_t i = 0; i < n && r.ok(); ++i) {
    member m;
    m.id = r.string(true);
    m.instance_id = r.nullable_string(true, true);
    m.rack_id = r.nullable_string(true, true);
    m.client_id = r.string(true);
    m.client_host = r.string(true);
    m.rebalance_timeout_ms = r.int32();
    const int32_t topics = r.array_length(true, 1);
    for (int32_t k = 0; k < topics && r.ok(); ++k) m.subscribed_names.push_back(r.string(true));
    m.regex = r.nullable_string(true, true);
    m.server_assignor = r.nullable_string(true, true);
    m.epoch = r.int32();
    m.previous_epoch = r.int32();
    const int8_t state = r.int8();
    if (state < 0 || state > static_cast<int8_t>(member_state::unreleased)) return nullptr;
    m.state = static_cast<member_state>(state);
    m.assigned = get_assignment(r);
    m.pending_revocation = get_assignment(r);
    member_assignment target = get_assignment(r);
    if (!target.empty()) g->target_[m.id] = std::move(target);
    m.session_timeout_ms = session_timeout_ms;
    m.session_deadline = now + session_timeout_ms;
    m.revocation_deadline = now + m.rebalance_timeout_ms;
    g->members_.emplace(m.id, std::move(m));
  }
  r.expect_end();
  if (!r.ok() || g->group_epoch_ < g->target_epoch_ || g->target_epoch_ < 0) return nullptr;
  // The partition counts were those of the target's epoch: recomputed at the next heartbeat
  // (a change bumps the epoch as it would have).
  g->subscribed_partitions_.clear();
  g->subscribed_partitions_known_ = false;
  return g;
}

std::optional<int64_t> consumer_group::next_deadline() const {
  std::optional<int64_t> next;
  for (const auto& [id, m] : members_) {
    int64_t t = m.session_deadline;
    if (m.state == member_state::unrevoked) t = std::min(t, m.revocation_deadline);
    next = next ? std::min(*next, t) : t;
  }
  return next;
}

}  // namespace silt::coordinator
