#include "coordinator/assignors.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <queue>
#include <utility>

namespace silt::coordinator {
namespace {

constexpr int32_t no_owner = -1;

// The group as the uniform assignor works on it. Members are numbered in member id order and
// topics in topic id order, so that the result does not depend on the order of the input.
struct group_view {
  std::vector<const assignor_member*> members;
  std::vector<topic_uuid> topics;  // the existing topics some member subscribes to
  std::map<topic_uuid, int32_t> topic_index;
  std::vector<int32_t> partition_counts;            // by topic
  std::vector<std::vector<int32_t>> subscribers;    // by topic: members, ascending
  std::vector<std::vector<int32_t>> member_topics;  // by member: topics, ascending
  std::vector<std::vector<int32_t>> owner;          // by topic, then partition: member or no_owner
  std::vector<int32_t> load;                        // by member: partitions owned
};

[[nodiscard]] std::vector<const assignor_member*> by_member_id(
    const std::vector<assignor_member>& members) {
  std::vector<const assignor_member*> sorted;
  sorted.reserve(members.size());
  for (const auto& m : members) sorted.push_back(&m);
  std::sort(sorted.begin(), sorted.end(), [](const assignor_member* a, const assignor_member* b) {
    return a->member_id < b->member_id;
  });
  assert(std::adjacent_find(sorted.begin(), sorted.end(),
                            [](const assignor_member* a, const assignor_member* b) {
                              return a->member_id == b->member_id;
                            }) == sorted.end() &&
         "member ids must be unique");
  return sorted;
}

[[nodiscard]] group_view make_view(const std::vector<assignor_member>& members,
                                   const std::map<topic_uuid, int32_t>& partitions) {
  group_view v;
  v.members = by_member_id(members);
  for (const auto* m : v.members) {
    for (const auto& t : m->subscribed) {
      if (partitions.contains(t)) v.topic_index.emplace(t, 0);
    }
  }
  for (auto& [t, index] : v.topic_index) {
    index = static_cast<int32_t>(v.topics.size());
    v.topics.push_back(t);
    v.partition_counts.push_back(std::max(partitions.at(t), 0));
  }
  v.subscribers.resize(v.topics.size());
  v.member_topics.resize(v.members.size());
  for (size_t i = 0; i < v.members.size(); ++i) {
    for (const auto& t : v.members[i]->subscribed) {
      auto it = v.topic_index.find(t);
      if (it == v.topic_index.end()) continue;
      v.member_topics[i].push_back(it->second);
      v.subscribers[it->second].push_back(static_cast<int32_t>(i));
    }
  }
  v.owner.resize(v.topics.size());
  for (size_t t = 0; t < v.topics.size(); ++t) v.owner[t].assign(v.partition_counts[t], no_owner);
  v.load.assign(v.members.size(), 0);
  return v;
}

// Gives member `m` every partition of its current assignment that can stand: of a topic it
// still subscribes to, in range, and not taken by a member before it. Calls `kept(t, p)` for
// each, in topic then partition order.
template <typename Kept>
void keep_current(group_view& v, int32_t m, Kept kept) {
  const auto& subscribed = v.member_topics[m];
  for (const auto& [topic, parts] : v.members[m]->current) {
    auto it = v.topic_index.find(topic);
    if (it == v.topic_index.end()) continue;
    int32_t t = it->second;
    if (!std::binary_search(subscribed.begin(), subscribed.end(), t)) continue;
    auto& owners = v.owner[t];
    for (int32_t p : parts) {
      if (p < 0 || p >= v.partition_counts[t] || owners[p] != no_owner) continue;
      owners[p] = m;
      ++v.load[m];
      kept(t, p);
    }
  }
}

[[nodiscard]] std::map<std::string, member_assignment> to_result(const group_view& v) {
  std::map<std::string, member_assignment> out;
  std::vector<member_assignment*> slots;
  slots.reserve(v.members.size());
  for (const auto* m : v.members) slots.push_back(&out[m->member_id]);
  for (size_t t = 0; t < v.topics.size(); ++t) {
    const auto& owners = v.owner[t];
    for (int32_t p = 0; p < static_cast<int32_t>(owners.size()); ++p) {
      assert(owners[p] != no_owner && "a subscribed partition was left unassigned");
      auto& parts = (*slots[owners[p]])[v.topics[t]];
      parts.emplace_hint(parts.end(), p);
    }
  }
  return out;
}

// Every member subscribes to the same topics (Kafka's UniformHomogeneousAssignmentBuilder).
// Each member's share is total / members, and total % members of them get one more; those
// extra shares go first to members that hold more than the minimum, so that fewer partitions
// move (Kafka hands them out in member order). A member keeps its current partitions up to
// its share (the lowest ones), and the free partitions fill the members below their share.
void build_homogeneous(group_view& v) {
  const auto n = static_cast<int32_t>(v.members.size());
  int64_t total = 0;
  for (int32_t c : v.partition_counts) total += c;
  const auto min_share = static_cast<int32_t>(total / n);
  auto extra = static_cast<int32_t>(total % n);

  std::vector<std::vector<std::pair<int32_t, int32_t>>> kept(n);
  for (int32_t m = 0; m < n; ++m) {
    keep_current(v, m, [&](int32_t t, int32_t p) { kept[m].emplace_back(t, p); });
  }

  std::vector<int32_t> share(n, min_share);
  for (int32_t m = 0; m < n && extra > 0; ++m) {
    if (v.load[m] > min_share) {
      ++share[m];
      --extra;
    }
  }
  for (int32_t m = 0; m < n && extra > 0; ++m) {
    if (share[m] == min_share) {
      ++share[m];
      --extra;
    }
  }

  for (int32_t m = 0; m < n; ++m) {
    while (v.load[m] > share[m]) {
      auto [t, p] = kept[m].back();
      kept[m].pop_back();
      v.owner[t][p] = no_owner;
      --v.load[m];
    }
  }

  // Shares add up to the total, so the free partitions fill the members exactly.
  int32_t m = 0;
  for (size_t t = 0; t < v.topics.size(); ++t) {
    auto& owners = v.owner[t];
    for (auto& owner : owners) {
      if (owner != no_owner) continue;
      while (v.load[m] >= share[m]) ++m;
      owner = m;
      ++v.load[m];
    }
  }
}

// The heterogeneous builder's topic order (Kafka's): partitions per subscriber, descending,
// then subscribers, ascending, then topic id. Topics hard to spread come first, while the
// members still have room.
[[nodiscard]] std::vector<int32_t> topic_order(const group_view& v) {
  std::vector<int32_t> order(v.topics.size());
  for (size_t t = 0; t < order.size(); ++t) order[t] = static_cast<int32_t>(t);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const auto pa = static_cast<int64_t>(v.partition_counts[a]);
    const auto pb = static_cast<int64_t>(v.partition_counts[b]);
    const auto sa = static_cast<int64_t>(v.subscribers[a].size());
    const auto sb = static_cast<int64_t>(v.subscribers[b].size());
    if (pa * sb != pb * sa) return pa * sb > pb * sa;
    if (sa != sb) return sa < sb;
    return a < b;
  });
  return order;
}

// Hands the free partitions of topic `t` one by one to its least loaded subscriber (ties: the
// first by member id).
void fill_topic(group_view& v, int32_t t) {
  auto& owners = v.owner[t];
  if (std::find(owners.begin(), owners.end(), no_owner) == owners.end()) return;
  using entry = std::pair<int32_t, int32_t>;  // load, member
  std::vector<entry> entries;
  entries.reserve(v.subscribers[t].size());
  for (int32_t m : v.subscribers[t]) entries.emplace_back(v.load[m], m);
  std::priority_queue<entry, std::vector<entry>, std::greater<>> least(std::greater<>(),
                                                                       std::move(entries));
  for (auto& owner : owners) {
    if (owner != no_owner) continue;
    auto [load, m] = least.top();
    least.pop();
    owner = m;
    ++v.load[m];
    least.emplace(load + 1, m);
  }
}

// The heterogeneous builder's last step: moves partitions until no single move from one
// subscriber of a topic to another would bring their counts closer (Kafka's stopping point).
// Kafka gets there topic by topic, each topic's most loaded subscriber giving to its least
// loaded one, for at most 16 rounds. Here the least loaded member of the whole group pulls from
// the most loaded member that holds a partition of one of its topics, so that partitions go
// straight from where there are too many to where there are too few: fewer moves, and chains
// (a member that can only feed a second one, which can only feed a third) are followed. Each
// move lowers the sum of the squared counts, so it ends; a pass that moves nothing ends it.
class balancer {
 public:
  explicit balancer(group_view& v) : v_(v), held_(v.members.size()), holders_(v.topics.size()) {
    for (size_t t = 0; t < v_.topics.size(); ++t) {
      const auto& owners = v_.owner[t];
      for (int32_t p = 0; p < static_cast<int32_t>(owners.size()); ++p) {
        held_[owners[p]][static_cast<int32_t>(t)].insert(p);
      }
    }
    for (size_t m = 0; m < held_.size(); ++m) {
      for (const auto& [t, parts] : held_[m]) {
        holders_[t].emplace(-v_.load[m], static_cast<int32_t>(m));
      }
    }
  }

  void run() {
    for (;;) {
      std::set<std::pair<int32_t, int32_t>> receivers;  // (load, member), least loaded first
      for (size_t m = 0; m < v_.members.size(); ++m) {
        if (!v_.member_topics[m].empty()) receivers.emplace(v_.load[m], static_cast<int32_t>(m));
      }
      int64_t moved = 0;
      while (!receivers.empty()) {
        const int32_t to = receivers.begin()->second;
        receivers.erase(receivers.begin());
        auto [from, t] = best_donor(to);
        if (from == no_owner || v_.load[from] - v_.load[to] < 2) continue;
        receivers.erase({v_.load[from], from});
        move(t, *held_[from][t].rbegin(), from, to);
        ++moved;
        // Both may have more to do: the receiver can take more, the donor now takes too.
        receivers.emplace(v_.load[to], to);
        receivers.emplace(v_.load[from], from);
      }
      if (moved == 0) return;
    }
  }

 private:
  // The most loaded member (then the first by member id) holding a partition of one of `to`'s
  // topics, and that topic; no_owner if there is none.
  [[nodiscard]] std::pair<int32_t, int32_t> best_donor(int32_t to) const {
    int32_t from = no_owner;
    int32_t topic = no_owner;
    for (int32_t t : v_.member_topics[to]) {
      if (holders_[t].empty()) continue;
      const int32_t m = holders_[t].begin()->second;
      if (m == to) continue;  // `to` is the most loaded holder: nobody here can give to it
      if (from == no_owner || v_.load[m] > v_.load[from] ||
          (v_.load[m] == v_.load[from] && m < from)) {
        from = m;
        topic = t;
      }
    }
    return {from, topic};
  }

  // Changes member `m`'s count by `delta`, keeping its place in the holder sets.
  void add_load(int32_t m, int32_t delta) {
    for (const auto& [t, parts] : held_[m]) holders_[t].erase({-v_.load[m], m});
    v_.load[m] += delta;
    for (const auto& [t, parts] : held_[m]) holders_[t].emplace(-v_.load[m], m);
  }

  void move(int32_t t, int32_t p, int32_t from, int32_t to) {
    auto& from_parts = held_[from][t];
    from_parts.erase(p);
    if (from_parts.empty()) {
      holders_[t].erase({-v_.load[from], from});
      held_[from].erase(t);
    }
    add_load(from, -1);

    add_load(to, 1);
    auto& to_parts = held_[to][t];
    if (to_parts.empty()) holders_[t].emplace(-v_.load[to], to);
    to_parts.insert(p);
    v_.owner[t][p] = to;
  }

  group_view& v_;
  std::vector<std::map<int32_t, std::set<int32_t>>> held_;      // by member: topic -> partitions
  std::vector<std::set<std::pair<int32_t, int32_t>>> holders_;  // by topic: (-load, member)
};

// Members subscribe to different topics (Kafka's UniformHeterogeneousAssignmentBuilder): every
// member keeps what it still subscribes to, the free partitions go to the least loaded
// subscribers, then partitions move from the most to the least loaded members until no single
// move helps.
void build_heterogeneous(group_view& v) {
  const auto n = static_cast<int32_t>(v.members.size());
  for (int32_t m = 0; m < n; ++m) keep_current(v, m, [](int32_t, int32_t) {});
  for (int32_t t : topic_order(v)) fill_topic(v, t);
  balancer(v).run();
}

}  // namespace

std::map<std::string, member_assignment> assign_uniform(
    const std::vector<assignor_member>& members, const std::map<topic_uuid, int32_t>& partitions) {
  if (members.empty()) return {};
  group_view v = make_view(members, partitions);
  const bool homogeneous =
      std::all_of(v.member_topics.begin(), v.member_topics.end(),
                  [&](const std::vector<int32_t>& ts) { return ts == v.member_topics.front(); });
  if (homogeneous) {
    build_homogeneous(v);
  } else {
    build_heterogeneous(v);
  }
  return to_result(v);
}

std::map<std::string, member_assignment> assign_range(
    const std::vector<assignor_member>& members, const std::map<topic_uuid, int32_t>& partitions) {
  // Static members first, by instance id, so that a static member coming back with a new
  // member id gets the same ranges; then the others by member id.
  std::vector<const assignor_member*> order = by_member_id(members);
  std::stable_sort(order.begin(), order.end(),
                   [](const assignor_member* a, const assignor_member* b) {
                     if (a->instance_id && b->instance_id) return *a->instance_id < *b->instance_id;
                     return a->instance_id.has_value() && !b->instance_id.has_value();
                   });

  struct topic_state {
    int32_t partitions = 0;
    int32_t subscribers = 0;
    int32_t served = 0;  // subscribers given their range so far
    int32_t next = 0;    // the first partition not handed out yet
  };
  std::map<topic_uuid, topic_state> topics;
  for (const auto* m : order) {
    for (const auto& t : m->subscribed) {
      auto it = partitions.find(t);
      if (it == partitions.end()) continue;
      auto& ts = topics[t];
      ts.partitions = std::max(it->second, 0);
      ++ts.subscribers;
    }
  }

  std::map<std::string, member_assignment> out;
  for (const auto* m : order) {
    auto& assignment = out[m->member_id];
    for (const auto& t : m->subscribed) {
      auto it = topics.find(t);
      if (it == topics.end()) continue;
      auto& ts = it->second;
      // The first partitions % subscribers members get one more than the others.
      const int32_t share =
          ts.partitions / ts.subscribers + (ts.served < ts.partitions % ts.subscribers ? 1 : 0);
      const int32_t begin = ts.next;
      const int32_t end = std::min(begin + share, ts.partitions);
      ts.next = end;
      ++ts.served;
      if (begin == end) continue;
      auto& parts = assignment[t];
      for (int32_t p = begin; p < end; ++p) parts.emplace_hint(parts.end(), p);
    }
  }
  return out;
}

assignor_fn find_assignor(std::string_view name) {
  if (name == "uniform") return &assign_uniform;
  if (name == "range") return &assign_range;
  return nullptr;
}

}  // namespace silt::coordinator
