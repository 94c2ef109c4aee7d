// The server-side assignors: completeness (every subscribed partition to exactly one of its
// subscribers), balance, stickiness counted in moved partitions, range's contiguous ranges,
// topics that are not there, and a timing at 1,000 members x 10,000 partitions.
#include "coordinator/assignors.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include <gtest/gtest.h>

namespace silt::coordinator {
namespace {

using assignment = std::map<std::string, member_assignment>;
using topic_counts = std::map<topic_uuid, int32_t>;

constexpr topic_uuid topic(uint8_t n) {
  topic_uuid t{};
  t[0] = 0xab;
  t[15] = n;
  return t;
}

constexpr topic_uuid t1 = topic(1);
constexpr topic_uuid t2 = topic(2);
constexpr topic_uuid t3 = topic(3);

assignor_member member(std::string id, std::set<topic_uuid> subscribed,
                       std::optional<std::string> instance = std::nullopt) {
  assignor_member m;
  m.member_id = std::move(id);
  m.instance_id = std::move(instance);
  m.subscribed = std::move(subscribed);
  return m;
}

// Each member's `current` set to what `previous` gave it.
std::vector<assignor_member> with_current(std::vector<assignor_member> members,
                                          const assignment& previous) {
  for (auto& m : members) {
    auto it = previous.find(m.member_id);
    m.current = it == previous.end() ? member_assignment{} : it->second;
  }
  return members;
}

int32_t size_of(const member_assignment& a) {
  int32_t n = 0;
  for (const auto& [t, parts] : a) n += static_cast<int32_t>(parts.size());
  return n;
}

// (topic, partition) -> member.
std::map<std::pair<topic_uuid, int32_t>, std::string> owners(const assignment& a) {
  std::map<std::pair<topic_uuid, int32_t>, std::string> out;
  for (const auto& [m, topics] : a) {
    for (const auto& [t, parts] : topics) {
      for (int32_t p : parts) out[{t, p}] = m;
    }
  }
  return out;
}

// Partitions that some member held before and another holds now.
int32_t moved(const assignment& before, const assignment& after) {
  auto old_owners = owners(before);
  int32_t n = 0;
  for (const auto& [tp, m] : owners(after)) {
    auto it = old_owners.find(tp);
    if (it != old_owners.end() && it->second != m) ++n;
  }
  return n;
}

// Every member has an entry, every partition of a subscribed topic is held by exactly one of
// its subscribers, nothing else is held, no topic has an empty set.
void expect_complete(const assignment& a, const std::vector<assignor_member>& members,
                     const topic_counts& partitions) {
  ASSERT_EQ(a.size(), members.size());
  std::set<topic_uuid> subscribed;
  for (const auto& m : members) {
    ASSERT_TRUE(a.contains(m.member_id)) << m.member_id;
    for (const auto& [t, parts] : a.at(m.member_id)) {
      EXPECT_TRUE(m.subscribed.contains(t)) << m.member_id << " holds a topic it does not want";
      EXPECT_FALSE(parts.empty()) << m.member_id;
    }
    for (const auto& t : m.subscribed) {
      if (partitions.contains(t)) subscribed.insert(t);
    }
  }
  std::map<topic_uuid, std::vector<int32_t>> holders;
  for (const auto& [m, topics] : a) {
    for (const auto& [t, parts] : topics) {
      auto& h = holders[t];
      if (h.empty()) h.assign(partitions.contains(t) ? partitions.at(t) : 0, 0);
      for (int32_t p : parts) {
        ASSERT_GE(p, 0);
        ASSERT_LT(p, static_cast<int32_t>(h.size()));
        ++h[p];
      }
    }
  }
  for (const auto& t : subscribed) {
    if (partitions.at(t) == 0) continue;
    ASSERT_TRUE(holders.contains(t));
    for (int32_t n : holders[t]) EXPECT_EQ(n, 1);
  }
  for (const auto& [t, h] : holders) EXPECT_TRUE(subscribed.contains(t));
}

std::pair<int32_t, int32_t> min_max_size(const assignment& a) {
  int32_t lo = INT32_MAX;
  int32_t hi = 0;
  for (const auto& [m, topics] : a) {
    lo = std::min(lo, size_of(topics));
    hi = std::max(hi, size_of(topics));
  }
  return {lo, hi};
}

// No single move of a partition from one subscriber of its topic to another improves balance.
void expect_no_improving_move(const assignment& a, const std::vector<assignor_member>& members) {
  for (const auto& holder : members) {
    for (const auto& [t, parts] : a.at(holder.member_id)) {
      for (const auto& other : members) {
        if (!other.subscribed.contains(t)) continue;
        EXPECT_LE(size_of(a.at(holder.member_id)) - size_of(a.at(other.member_id)), 1)
            << holder.member_id << " could give a partition to " << other.member_id;
      }
    }
  }
}

TEST(UniformAssignor, HomogeneousSubscriptionsAreCompleteAndDifferByAtMostOne) {
  const topic_counts partitions{{t1, 7}, {t2, 11}, {t3, 13}};
  std::vector<assignor_member> members;
  for (const char* id : {"a", "b", "c", "d", "e"}) members.push_back(member(id, {t1, t2, t3}));
  auto a = assign_uniform(members, partitions);
  expect_complete(a, members, partitions);
  EXPECT_EQ(min_max_size(a), std::make_pair(6, 7));
}

TEST(UniformAssignor, MoreMembersThanPartitionsLeavesSomeEmpty) {
  const topic_counts partitions{{t1, 2}};
  std::vector<assignor_member> members{member("a", {t1}), member("b", {t1}), member("c", {t1})};
  auto a = assign_uniform(members, partitions);
  expect_complete(a, members, partitions);
  EXPECT_EQ(min_max_size(a), std::make_pair(0, 1));
}

TEST(UniformAssignor, AMemberJoiningTakesOnlyItsShare) {
  const topic_counts partitions{{t1, 12}};
  std::vector<assignor_member> members{member("a", {t1}), member("b", {t1}), member("c", {t1})};
  auto before = assign_uniform(members, partitions);
  EXPECT_EQ(min_max_size(before), std::make_pair(4, 4));

  members.push_back(member("d", {t1}));
  auto after = assign_uniform(with_current(members, before), partitions);
  expect_complete(after, members, partitions);
  EXPECT_EQ(min_max_size(after), std::make_pair(3, 3));
  EXPECT_EQ(moved(before, after), 3);
  for (const char* id : {"a", "b", "c"}) {
    for (int32_t p : after.at(id).at(t1)) EXPECT_TRUE(before.at(id).at(t1).contains(p)) << id;
  }
}

TEST(UniformAssignor, AMemberLeavingMovesOnlyItsPartitions) {
  const topic_counts partitions{{t1, 6}, {t2, 6}};
  std::vector<assignor_member> members;
  for (const char* id : {"a", "b", "c", "d"}) members.push_back(member(id, {t1, t2}));
  auto before = assign_uniform(members, partitions);

  members.erase(members.begin() + 1);  // "b" leaves
  auto after = assign_uniform(with_current(members, before), partitions);
  expect_complete(after, members, partitions);
  EXPECT_EQ(min_max_size(after), std::make_pair(4, 4));
  for (const char* id : {"a", "c", "d"}) {
    for (const auto& [t, parts] : before.at(id)) {
      for (int32_t p : parts) EXPECT_TRUE(after.at(id).at(t).contains(p)) << id;
    }
  }
  EXPECT_EQ(moved(before, after), 3);  // the leaver's, and only those
}

TEST(UniformAssignor, ABalancedCurrentAssignmentIsKeptAsItIs) {
  const topic_counts partitions{{t1, 4}, {t2, 5}};
  std::vector<assignor_member> members{member("a", {t1, t2}), member("b", {t1, t2}),
                                       member("c", {t1, t2})};
  members[0].current = {{t1, {0, 3}}, {t2, {4}}};
  members[1].current = {{t1, {1}}, {t2, {0, 2}}};
  members[2].current = {{t1, {2}}, {t2, {1, 3}}};
  auto a = assign_uniform(members, partitions);
  for (const auto& m : members) EXPECT_EQ(a.at(m.member_id), m.current) << m.member_id;
}

TEST(UniformAssignor, ExtraSharesGoToMembersHoldingMoreSoFewerMove) {
  // 10 partitions over 3: shares 4, 3, 3. "b" and "c" hold more than 3, so they keep 4 and 3
  // rather than "a" (first by id) taking the 4: two moves, not three.
  const topic_counts partitions{{t1, 10}};
  std::vector<assignor_member> members{member("a", {t1}), member("b", {t1}), member("c", {t1})};
  members[0].current = {{t1, {0}}};
  members[1].current = {{t1, {1, 2, 3, 4, 5}}};
  members[2].current = {{t1, {6, 7, 8, 9}}};
  assignment before;
  for (const auto& m : members) before[m.member_id] = m.current;
  auto a = assign_uniform(members, partitions);
  expect_complete(a, members, partitions);
  EXPECT_EQ(min_max_size(a), std::make_pair(3, 4));
  EXPECT_EQ(moved(before, a), 2);
}

TEST(UniformAssignor, MembersWithTooManyGiveUpOnlyTheExcess) {
  const topic_counts partitions{{t1, 12}};
  std::vector<assignor_member> members{member("a", {t1}), member("b", {t1}), member("c", {t1})};
  members[0].current = {{t1, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}};
  auto a = assign_uniform(members, partitions);
  expect_complete(a, members, partitions);
  EXPECT_EQ(min_max_size(a), std::make_pair(4, 4));
  EXPECT_EQ(a.at("a").at(t1), (std::set<int32_t>{0, 1, 2, 3}));
}

TEST(UniformAssignor, HeterogeneousSubscriptionsAreBalancedAsFarAsTheyAllow) {
  // "a" and "b" share t1; "c" alone has t2 and cannot take any of t1.
  const topic_counts partitions{{t1, 10}, {t2, 2}};
  std::vector<assignor_member> members{member("a", {t1}), member("b", {t1}), member("c", {t2})};
  auto a = assign_uniform(members, partitions);
  expect_complete(a, members, partitions);
  EXPECT_EQ(size_of(a.at("a")), 5);
  EXPECT_EQ(size_of(a.at("b")), 5);
  EXPECT_EQ(size_of(a.at("c")), 2);

  // Overlapping: "b" bridges t1 and t2, so all three can get 4.
  std::vector<assignor_member> chain{member("a", {t1}), member("b", {t1, t2}), member("c", {t2})};
  const topic_counts six_each{{t1, 6}, {t2, 6}};
  auto c = assign_uniform(chain, six_each);
  expect_complete(c, chain, six_each);
  EXPECT_EQ(min_max_size(c), std::make_pair(4, 4));
}

TEST(UniformAssignor, HeterogeneousBalancesAlongAChainOfSubscriptions) {
  // "b" holds everything; "a" can only take t1 and "c" only t2. Balancing t1 on its own and
  // then t2 would stop at 5/4/3 (as Kafka's topic-by-topic rounds do); pulling to the least
  // loaded member from the most loaded one reaches 4/4/4.
  const topic_counts partitions{{t1, 6}, {t2, 6}};
  std::vector<assignor_member> members{member("a", {t1}), member("b", {t1, t2}), member("c", {t2})};
  members[1].current = {{t1, {0, 1, 2, 3, 4, 5}}, {t2, {0, 1, 2, 3, 4, 5}}};
  assignment before{{"b", members[1].current}};
  auto a = assign_uniform(members, partitions);
  expect_complete(a, members, partitions);
  EXPECT_EQ(min_max_size(a), std::make_pair(4, 4));
  EXPECT_EQ(moved(before, a), 8);
}

TEST(UniformAssignor, HeterogeneousJoinMovesOnlyWhatTheNewMemberGets) {
  const topic_counts partitions{{t1, 8}, {t2, 8}, {t3, 4}};
  std::vector<assignor_member> members{member("a", {t1, t2}), member("b", {t1, t3}),
                                       member("c", {t2, t3})};
  auto before = assign_uniform(members, partitions);
  expect_complete(before, members, partitions);
  EXPECT_EQ(min_max_size(before), std::make_pair(6, 7));

  members.push_back(member("d", {t1, t2, t3}));
  auto after = assign_uniform(with_current(members, before), partitions);
  expect_complete(after, members, partitions);
  expect_no_improving_move(after, members);
  EXPECT_EQ(min_max_size(after), std::make_pair(5, 5));
  EXPECT_EQ(moved(before, after), size_of(after.at("d")));
}

TEST(UniformAssignor, DroppingATopicMovesItsPartitionsAndRebalances) {
  const topic_counts partitions{{t1, 6}, {t2, 6}};
  std::vector<assignor_member> members{member("a", {t1}), member("b", {t1, t2}),
                                       member("c", {t1, t2})};  // "a" dropped t2
  members[0].current = {{t1, {0, 1}}, {t2, {0, 1}}};
  members[1].current = {{t1, {2, 3}}, {t2, {2, 3}}};
  members[2].current = {{t1, {4, 5}}, {t2, {4, 5}}};
  assignment before;
  for (const auto& m : members) before[m.member_id] = m.current;
  auto a = assign_uniform(members, partitions);
  expect_complete(a, members, partitions);
  expect_no_improving_move(a, members);
  EXPECT_EQ(min_max_size(a), std::make_pair(4, 4));
  EXPECT_FALSE(a.at("a").contains(t2));
  for (int32_t p : {0, 1}) EXPECT_TRUE(a.at("a").at(t1).contains(p));
  // "a"'s two partitions of t2 go, and two of t1 come to it to even the counts.
  EXPECT_EQ(moved(before, a), 4);
}

TEST(UniformAssignor, RandomHeterogeneousSubscriptionsAreCompleteAndLocallyBalanced) {
  std::mt19937 rng(42);
  for (int round = 0; round < 50; ++round) {
    topic_counts partitions;
    const int topics = 1 + static_cast<int>(rng() % 6);
    for (int t = 0; t < topics; ++t) {
      partitions[topic(static_cast<uint8_t>(t))] = static_cast<int32_t>(rng() % 20);
    }
    std::vector<assignor_member> members;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < n; ++i) {
      std::set<topic_uuid> subs;
      for (int t = 0; t < topics + 1; ++t) {  // topic(topics) does not exist
        if (rng() % 2 != 0) subs.insert(topic(static_cast<uint8_t>(t)));
      }
      members.push_back(member("m" + std::to_string(i), subs));
    }
    auto first = assign_uniform(members, partitions);
    expect_complete(first, members, partitions);
    expect_no_improving_move(first, members);
    // A new subscription for everyone and run again from there.
    for (auto& m : members) {
      m.subscribed.clear();
      for (int t = 0; t < topics; ++t) {
        if (rng() % 2 != 0) m.subscribed.insert(topic(static_cast<uint8_t>(t)));
      }
    }
    auto second = assign_uniform(with_current(members, first), partitions);
    expect_complete(second, members, partitions);
    expect_no_improving_move(second, members);
    if (HasFailure()) FAIL() << "round " << round;
  }
}

TEST(UniformAssignor, ATopicNobodySubscribesToIsNotAssigned) {
  const topic_counts partitions{{t1, 4}, {t2, 4}, {t3, 4}};
  std::vector<assignor_member> members{member("a", {t1}), member("b", {t1, t2})};
  auto a = assign_uniform(members, partitions);
  expect_complete(a, members, partitions);
  for (const auto& [m, topics] : a) EXPECT_FALSE(topics.contains(t3));
}

TEST(UniformAssignor, AMemberSubscribedToNothingGetsAnEmptyEntry) {
  const topic_counts partitions{{t1, 4}};
  std::vector<assignor_member> members{member("a", {t1}), member("b", {})};
  members[1].current = {{t1, {0, 1}}};
  auto a = assign_uniform(members, partitions);
  expect_complete(a, members, partitions);
  ASSERT_TRUE(a.contains("b"));
  EXPECT_TRUE(a.at("b").empty());
  EXPECT_EQ(size_of(a.at("a")), 4);

  std::vector<assignor_member> nobody{member("a", {}), member("b", {})};
  auto none = assign_uniform(nobody, partitions);
  EXPECT_EQ(none, (assignment{{"a", {}}, {"b", {}}}));
  EXPECT_TRUE(assign_uniform({}, partitions).empty());
}

TEST(UniformAssignor, TopicsThatDoNotExistAndBadCurrentEntriesAreIgnored) {
  const topic_uuid gone = topic(9);
  const topic_counts partitions{{t1, 4}};
  std::vector<assignor_member> members{member("a", {t1, gone}), member("b", {t1, gone})};
  members[0].current = {{gone, {0}}, {t1, {0, 1, 7, -1}}};  // 7 and -1 are out of range
  members[1].current = {{t1, {1, 2}}};                      // 1 is "a"'s (first by id)
  auto a = assign_uniform(members, partitions);
  expect_complete(a, members, partitions);
  EXPECT_EQ(a.at("a"), (member_assignment{{t1, {0, 1}}}));
  EXPECT_EQ(a.at("b"), (member_assignment{{t1, {2, 3}}}));
}

TEST(UniformAssignor, TheOrderOfMembersDoesNotMatter) {
  const topic_counts partitions{{t1, 7}, {t2, 5}, {t3, 3}};
  std::vector<assignor_member> members{member("a", {t1, t2}), member("b", {t2, t3}),
                                       member("c", {t1, t3}), member("d", {t1, t2, t3})};
  auto a = assign_uniform(members, partitions);
  std::reverse(members.begin(), members.end());
  EXPECT_EQ(assign_uniform(members, partitions), a);
  const std::vector<assignor_member> reversed(members.rbegin(), members.rend());
  EXPECT_EQ(assign_range(members, partitions), assign_range(reversed, partitions));
}

TEST(RangeAssignor, RangesAreContiguousAndTheFirstMembersGetTheExtraPartition) {
  const topic_counts partitions{{t1, 8}, {t2, 8}};
  std::vector<assignor_member> members{member("c", {t1, t2}), member("a", {t1, t2}),
                                       member("b", {t1, t2})};
  auto a = assign_range(members, partitions);
  expect_complete(a, members, partitions);
  // Co-partitioned: the same ranges of both topics.
  EXPECT_EQ(a.at("a"), (member_assignment{{t1, {0, 1, 2}}, {t2, {0, 1, 2}}}));
  EXPECT_EQ(a.at("b"), (member_assignment{{t1, {3, 4, 5}}, {t2, {3, 4, 5}}}));
  EXPECT_EQ(a.at("c"), (member_assignment{{t1, {6, 7}}, {t2, {6, 7}}}));
}

TEST(RangeAssignor, StaticMembersComeFirstByInstanceId) {
  const topic_counts partitions{{t1, 6}};
  std::vector<assignor_member> members{member("a", {t1}), member("b", {t1}, "zeta"),
                                       member("c", {t1}, "alpha")};
  auto a = assign_range(members, partitions);
  expect_complete(a, members, partitions);
  EXPECT_EQ(a.at("c"), (member_assignment{{t1, {0, 1}}}));
  EXPECT_EQ(a.at("b"), (member_assignment{{t1, {2, 3}}}));
  EXPECT_EQ(a.at("a"), (member_assignment{{t1, {4, 5}}}));
}

TEST(RangeAssignor, EachTopicIsSplitOverItsOwnSubscribers) {
  const topic_counts partitions{{t1, 5}, {t2, 3}, {t3, 4}};
  std::vector<assignor_member> members{member("a", {t1}), member("b", {t1, t2}), member("c", {t2}),
                                       member("d", {})};
  auto a = assign_range(members, partitions);
  expect_complete(a, members, partitions);
  EXPECT_EQ(a.at("a"), (member_assignment{{t1, {0, 1, 2}}}));
  EXPECT_EQ(a.at("b"), (member_assignment{{t1, {3, 4}}, {t2, {0, 1}}}));
  EXPECT_EQ(a.at("c"), (member_assignment{{t2, {2}}}));
  EXPECT_TRUE(a.at("d").empty());  // t3 has no subscriber and goes to nobody
}

TEST(RangeAssignor, FewerPartitionsThanMembersLeavesTheLastOnesEmpty) {
  const topic_counts partitions{{t1, 2}};
  std::vector<assignor_member> members{member("a", {t1}), member("b", {t1}), member("c", {t1})};
  auto a = assign_range(members, partitions);
  expect_complete(a, members, partitions);
  EXPECT_EQ(a.at("a"), (member_assignment{{t1, {0}}}));
  EXPECT_EQ(a.at("b"), (member_assignment{{t1, {1}}}));
  EXPECT_TRUE(a.at("c").empty());
}

TEST(RangeAssignor, TopicsThatDoNotExistAreIgnored) {
  const topic_counts partitions{{t1, 2}};
  std::vector<assignor_member> members{member("a", {t1, topic(9)})};
  members[0].current = {{topic(9), {0}}};
  auto a = assign_range(members, partitions);
  EXPECT_EQ(a, (assignment{{"a", {{t1, {0, 1}}}}}));
}

TEST(Assignors, FindAssignorKnowsUniformAndRange) {
  EXPECT_EQ(find_assignor("uniform"), &assign_uniform);
  EXPECT_EQ(find_assignor("range"), &assign_range);
  EXPECT_EQ(find_assignor("Uniform"), nullptr);
  EXPECT_EQ(find_assignor("sticky"), nullptr);
  EXPECT_EQ(find_assignor(""), nullptr);
}

// Not a benchmark: prints how long the assignors take at the scale the brief names, so that a
// regression shows; it never asserts a time.
TEST(Assignors, ThousandMembersTenThousandPartitionsTiming) {
  topic_counts partitions;
  std::set<topic_uuid> all;
  for (int t = 0; t < 100; ++t) {
    partitions[topic(static_cast<uint8_t>(t))] = 100;
    all.insert(topic(static_cast<uint8_t>(t)));
  }
  std::vector<assignor_member> homogeneous;
  std::vector<assignor_member> heterogeneous;
  std::mt19937 rng(7);
  for (int i = 0; i < 1000; ++i) {
    homogeneous.push_back(member("member-" + std::to_string(i), all));
    std::set<topic_uuid> some;
    for (int k = 0; k < 20; ++k) some.insert(topic(static_cast<uint8_t>(rng() % 100)));
    heterogeneous.push_back(member("member-" + std::to_string(i), some));
  }

  auto timed = [](const char* what, auto&& fn) {
    auto start = std::chrono::steady_clock::now();
    auto result = fn();
    auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start);
    std::printf("[ timing ] %-48s %8.1f ms\n", what, ms.count());
    return result;
  };

  auto h = timed("uniform homogeneous, from scratch",
                 [&] { return assign_uniform(homogeneous, partitions); });
  expect_complete(h, homogeneous, partitions);
  EXPECT_EQ(min_max_size(h), std::make_pair(10, 10));
  homogeneous.pop_back();
  homogeneous = with_current(homogeneous, h);
  auto h2 = timed("uniform homogeneous, a member left",
                  [&] { return assign_uniform(homogeneous, partitions); });
  expect_complete(h2, homogeneous, partitions);
  EXPECT_EQ(moved(h, h2), 10);

  auto g = timed("uniform heterogeneous, from scratch",
                 [&] { return assign_uniform(heterogeneous, partitions); });
  expect_complete(g, heterogeneous, partitions);
  heterogeneous.pop_back();
  heterogeneous = with_current(heterogeneous, g);
  auto g2 = timed("uniform heterogeneous, a member left",
                  [&] { return assign_uniform(heterogeneous, partitions); });
  expect_complete(g2, heterogeneous, partitions);
  auto [lo, hi] = min_max_size(g2);
  std::printf("[ timing ] heterogeneous sizes %d..%d, moved %d\n", lo, hi, moved(g, g2));

  auto r = timed("range homogeneous", [&] { return assign_range(homogeneous, partitions); });
  expect_complete(r, homogeneous, partitions);
}

}  // namespace
}  // namespace silt::coordinator
