// The KIP-848 consumer group driven by a fake clock: joining, the target assignment, revocation
// before reassignment, fencing of stale epochs, leaving, session and revocation timeouts,
// static members, subscription and partition changes.
#include "coordinator/consumer_group.h"

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace silt::coordinator {
namespace {

constexpr topic_uuid orders{1};
constexpr topic_uuid payments{2};

class fake_topics final : public topic_lookup {
 public:
  std::map<std::string, topic_meta> topics{{"orders", {orders, "orders", 6}},
                                           {"payments", {payments, "payments", 2}}};
  [[nodiscard]] std::optional<topic_meta> by_name(std::string_view name) const override {
    auto it = topics.find(std::string(name));
    if (it == topics.end()) return std::nullopt;
    return it->second;
  }
  [[nodiscard]] std::optional<topic_meta> by_id(const topic_uuid& id) const override {
    for (const auto& [name, t] : topics) {
      if (t.id == id) return t;
    }
    return std::nullopt;
  }
  [[nodiscard]] std::vector<topic_meta> all() const override {
    ++listed;
    std::vector<topic_meta> out;
    for (const auto& [name, t] : topics) out.push_back(t);
    return out;
  }
  // How often every topic was asked for: each matching of patterns asks once.
  mutable int listed = 0;
  // Tests change `topics` directly: the version follows its contents.
  [[nodiscard]] uint64_t version() const override {
    uint64_t v = topics.size();
    for (const auto& [name, t] : topics) {
      v = v * 1000003 + std::hash<std::string>{}(name) + static_cast<uint64_t>(t.partitions);
    }
    return v;
  }
};

size_t count(const member_assignment& a) {
  size_t n = 0;
  for (const auto& [t, p] : a) n += p.size();
  return n;
}

class ConsumerGroup : public ::testing::Test {
 protected:
  consumer_heartbeat join_request(const std::string& id,
                                  std::vector<std::string> topics_ = {"orders"}) {
    consumer_heartbeat r;
    r.member_id = id;
    r.member_epoch = 0;
    r.rebalance_timeout_ms = 30000;
    r.subscribed_topic_names = std::move(topics_);
    r.owned = member_assignment{};
    r.client_id = "client";
    r.client_host = "/127.0.0.1";
    return r;
  }
  // A steady heartbeat of a member that holds `owned`.
  consumer_heartbeat beat(const std::string& id, int32_t epoch, const member_assignment& owned) {
    consumer_heartbeat r;
    r.member_id = id;
    r.member_epoch = epoch;
    r.owned = owned;
    return r;
  }
  // As the coordinator sends one: the patterns it needs are matched first (outside its lock).
  consumer_heartbeat_result send(consumer_heartbeat r) {
    group_.add_regex_matches(match_topic_regexes(
        group_.regexes_to_match(r.subscribed_topic_regex, topics_.version()), topics_));
    return group_.heartbeat(std::move(r), limits_, topics_, now_);
  }
  consumer_heartbeat regex_join(const std::string& id, const std::string& pattern) {
    consumer_heartbeat r = join_request(id, {});
    r.subscribed_topic_names.reset();
    r.subscribed_topic_regex = pattern;
    return r;
  }

  int64_t now_ = 1'000'000;
  consumer_limits limits_;
  fake_topics topics_;
  consumer_group group_{"g", now_};
};

TEST_F(ConsumerGroup, AFirstMemberGetsEveryPartitionAtTheNewEpoch) {
  auto r = send(join_request("a"));
  ASSERT_EQ(r.error, error_code::none) << r.message;
  EXPECT_EQ(r.member_id, "a");
  EXPECT_GT(r.member_epoch, 0);
  ASSERT_TRUE(r.assignment);
  EXPECT_EQ(count(*r.assignment), 6u);
  EXPECT_EQ(group_.state(), consumer_group_state::stable);
  // Unchanged: no assignment in the answer.
  auto again = send(beat("a", r.member_epoch, *r.assignment));
  EXPECT_EQ(again.error, error_code::none);
  EXPECT_FALSE(again.assignment);
}

TEST_F(ConsumerGroup, PartitionsMoveOnlyAfterTheirOwnerRevokedThem) {
  auto a = send(join_request("a"));
  const member_assignment all = *a.assignment;
  auto b = send(join_request("b"));
  ASSERT_EQ(b.error, error_code::none);
  // b's share is still a's: b gets nothing yet, but already the new epoch.
  ASSERT_TRUE(b.assignment);
  EXPECT_EQ(count(*b.assignment), 0u);
  EXPECT_EQ(group_.state(), consumer_group_state::reconciling);
  // a is told to keep only its share; its epoch stays until it has revoked the rest.
  auto a2 = send(beat("a", a.member_epoch, all));
  ASSERT_TRUE(a2.assignment);
  EXPECT_EQ(count(*a2.assignment), 3u);
  EXPECT_EQ(a2.member_epoch, a.member_epoch);
  // b still waits while a holds them.
  auto b2 = send(beat("b", b.member_epoch, {}));
  EXPECT_FALSE(b2.assignment);
  // a revoked: it moves to the new epoch; then b gets its three.
  auto a3 = send(beat("a", a.member_epoch, *a2.assignment));
  EXPECT_EQ(a3.member_epoch, b.member_epoch);
  auto b3 = send(beat("b", b.member_epoch, {}));
  ASSERT_TRUE(b3.assignment);
  EXPECT_EQ(count(*b3.assignment), 3u);
  EXPECT_EQ(group_.state(), consumer_group_state::stable);
}

TEST_F(ConsumerGroup, ARegexSubscriptionFollowsTopicsCreatedLater) {
  consumer_heartbeat join = join_request("a", {});
  join.subscribed_topic_names.reset();
  join.subscribed_topic_regex = "pay.*";
  auto a = send(join);
  ASSERT_EQ(a.error, error_code::none) << a.message;
  ASSERT_TRUE(a.assignment);
  EXPECT_EQ(count(*a.assignment), 2u) << "payments only";
  // Unchanged topics: the same answer (the matches are reused).
  auto again = send(beat("a", a.member_epoch, *a.assignment));
  EXPECT_FALSE(again.assignment);
  // A new matching topic: the next heartbeat sees it, at a new epoch.
  topics_.topics.emplace("payouts", topic_meta{topic_uuid{3}, "payouts", 4});
  auto grown = send(beat("a", a.member_epoch, *a.assignment));
  ASSERT_TRUE(grown.assignment);
  EXPECT_EQ(count(*grown.assignment), 6u);
  EXPECT_GT(grown.member_epoch, a.member_epoch);
}

TEST_F(ConsumerGroup, RegexesMatchWholeNamesInLinearTimeAndBadOnesAreRefused) {
  // A pattern that backtracking engines take exponential time on, against a name that almost
  // matches: answered at once.
  const std::string long_name(249, 'a');
  topics_.topics.emplace(long_name, topic_meta{topic_uuid{3}, long_name, 1});
  topics_.topics.emplace("aaa", topic_meta{topic_uuid{4}, "aaa", 1});
  consumer_heartbeat join = join_request("a", {});
  join.subscribed_topic_names.reset();
  join.subscribed_topic_regex = "(a|aa)*b|(a+)+";
  auto a = send(join);
  ASSERT_EQ(a.error, error_code::none) << a.message;
  ASSERT_TRUE(a.assignment);
  EXPECT_EQ(count(*a.assignment), 2u) << "the long name and aaa";
  // Whole names only: "pay" matches no topic, though "payments" starts with it.
  consumer_heartbeat partial = join_request("b", {});
  partial.subscribed_topic_names.reset();
  partial.subscribed_topic_regex = "pay";
  auto b = send(partial);
  ASSERT_EQ(b.error, error_code::none) << b.message;
  ASSERT_TRUE(b.assignment);
  EXPECT_EQ(count(*b.assignment), 0u);
  // Not a pattern: INVALID_REGULAR_EXPRESSION, with the pattern named.
  consumer_heartbeat bad = join_request("c", {});
  bad.subscribed_topic_names.reset();
  bad.subscribed_topic_regex = "orders(";
  auto c = send(bad);
  EXPECT_EQ(c.error, error_code::invalid_regular_expression);
  EXPECT_NE(c.message.find("orders("), std::string::npos) << c.message;
  // Java's possessive quantifiers are not RE2's, as with Kafka's RE2/J.
  bad.subscribed_topic_regex = "a*+";
  EXPECT_EQ(send(bad).error, error_code::invalid_regular_expression);
  // Nesting that would exhaust a recursive engine's stack: RE2 parses and compiles it with
  // stacks of its own (a valid pattern, taken).
  bad.subscribed_topic_regex = std::string(5000, '(') + "a" + std::string(5000, ')');
  EXPECT_EQ(send(bad).error, error_code::none);
  // Patterns beyond 16 KiB are refused.
  bad.member_id = "d";
  bad.subscribed_topic_regex = std::string(16385, 'a');
  EXPECT_EQ(send(bad).error, error_code::invalid_regular_expression);
  bad.member_id = "e";
  bad.subscribed_topic_regex = "orders|" + std::string(16000, 'a');
  EXPECT_EQ(send(bad).error, error_code::none) << "a long pattern within the bound";
}

TEST_F(ConsumerGroup, AHeartbeatMatchesNoPatternItself) {
  auto a = send(regex_join("a", "pay.*"));
  ASSERT_EQ(a.error, error_code::none) << a.message;
  auto b = send(join_request("b"));
  ASSERT_EQ(b.error, error_code::none) << b.message;
  // A new topic: the coordinator is told to match a's pattern again before b's heartbeat...
  topics_.topics.emplace("payouts", topic_meta{topic_uuid{3}, "payouts", 4});
  EXPECT_EQ(group_.regexes_to_match(std::nullopt, topics_.version()),
            std::vector<std::string>{"pay.*"});
  // ...and a heartbeat before that sees the pattern's earlier matches without matching.
  const int listed = topics_.listed;
  (void)group_.heartbeat(beat("b", b.member_epoch, {}), limits_, topics_, now_);
  EXPECT_EQ(topics_.listed, listed);
  EXPECT_EQ(group_.subscribed_topics(topics_), (std::set<std::string>{"orders", "payments"}));
  group_.add_regex_matches(match_topic_regexes({"pay.*"}, topics_));
  EXPECT_TRUE(group_.regexes_to_match(std::nullopt, topics_.version()).empty());
  EXPECT_EQ(group_.subscribed_topics(topics_),
            (std::set<std::string>{"orders", "payments", "payouts"}));
}

TEST_F(ConsumerGroup, APatternNotMatchedWithinItsBudgetIsRefusedOrKeepsItsMatches) {
  constexpr std::chrono::nanoseconds none{0};
  // Never matched in full: refused, the group unchanged, and not matched again for a heartbeat
  // until the topics change.
  group_.add_regex_matches(match_topic_regexes({"pay.*"}, topics_, none));
  auto refused = group_.heartbeat(regex_join("a", "pay.*"), limits_, topics_, now_);
  EXPECT_EQ(refused.error, error_code::invalid_regular_expression);
  EXPECT_NE(refused.message.find("within"), std::string::npos) << refused.message;
  EXPECT_EQ(group_.size(), 0u);
  EXPECT_TRUE(group_.regexes_to_match("pay.*", topics_.version()).empty());
  topics_.topics.emplace("payouts", topic_meta{topic_uuid{3}, "payouts", 4});
  auto a = send(regex_join("a", "pay.*"));
  ASSERT_EQ(a.error, error_code::none) << a.message;
  // Matched once: a matching that runs out later keeps those matches.
  topics_.topics.emplace("paydays", topic_meta{topic_uuid{4}, "paydays", 1});
  group_.add_regex_matches(match_topic_regexes({"pay.*"}, topics_, none));
  EXPECT_TRUE(group_.regexes_to_match(std::nullopt, topics_.version()).empty());
  auto again = send(beat("a", a.member_epoch, *a.assignment));
  EXPECT_EQ(again.error, error_code::none) << again.message;
  EXPECT_EQ(group_.subscribed_topics(topics_), (std::set<std::string>{"payments", "payouts"}));
}

TEST_F(ConsumerGroup, StaleAndUnknownMembersAreRefused) {
  auto a = send(join_request("a"));
  EXPECT_EQ(send(beat("a", a.member_epoch + 5, {})).error, error_code::fenced_member_epoch);
  EXPECT_EQ(send(beat("nobody", 3, {})).error, error_code::unknown_member_id);
  EXPECT_EQ(group_.check_commit("a", a.member_epoch), error_code::none);
  EXPECT_EQ(group_.check_commit("a", a.member_epoch - 1), error_code::stale_member_epoch);
  EXPECT_EQ(group_.check_commit("", -1), error_code::unknown_member_id) << "not while members";
}

TEST_F(ConsumerGroup, ALeavingMembersPartitionsGoToTheOthers) {
  auto a = send(join_request("a"));
  auto b = send(join_request("b"));
  auto a2 = send(beat("a", a.member_epoch, *a.assignment));
  send(beat("a", a.member_epoch, *a2.assignment));
  auto b2 = send(beat("b", b.member_epoch, {}));
  ASSERT_TRUE(b2.assignment);
  auto left = send(beat("b", -1, *b2.assignment));
  EXPECT_EQ(left.member_epoch, -1);
  auto a3 = send(beat("a", b.member_epoch, *a2.assignment));
  ASSERT_TRUE(a3.assignment);
  EXPECT_EQ(count(*a3.assignment), 6u);
  EXPECT_GT(a3.member_epoch, b.member_epoch);
}

TEST_F(ConsumerGroup, SilentMembersAndSlowRevocationsAreRemoved) {
  auto a = send(join_request("a"));
  auto b = send(join_request("b"));
  // a never revokes: after its rebalance timeout it is removed.
  (void)send(beat("a", a.member_epoch, *a.assignment));
  now_ += 31000;
  group_.tick(now_);
  EXPECT_EQ(group_.size(), 1u);
  auto b2 = send(beat("b", b.member_epoch, {}));
  ASSERT_TRUE(b2.assignment);
  EXPECT_EQ(count(*b2.assignment), 6u);
  // b goes silent: after the session timeout the group is empty.
  now_ += limits_.session_timeout_ms + 1;
  group_.tick(now_);
  EXPECT_EQ(group_.state(), consumer_group_state::empty);
}

TEST_F(ConsumerGroup, AStaticMemberBackUnderANewIdKeepsItsPartitions) {
  auto j = join_request("a1");
  j.instance_id = "instance";
  auto a = send(j);
  const int32_t epoch = group_.group_epoch();
  auto left = send([&] {
    auto r = beat("a1", -2, *a.assignment);
    r.instance_id = "instance";
    return r;
  }());
  EXPECT_EQ(left.member_epoch, -2);
  auto back = join_request("a2");
  back.instance_id = "instance";
  auto r = send(back);
  ASSERT_EQ(r.error, error_code::none) << r.message;
  ASSERT_TRUE(r.assignment);
  EXPECT_EQ(*r.assignment, *a.assignment);
  EXPECT_EQ(group_.group_epoch(), epoch) << "no rebalance";
  auto other = join_request("a3");
  other.instance_id = "instance";
  EXPECT_EQ(send(other).error, error_code::unreleased_instance_id);
}

TEST_F(ConsumerGroup, NewPartitionsAndNewSubscriptionsBumpTheEpoch) {
  auto a = send(join_request("a"));
  const int32_t epoch = group_.group_epoch();
  topics_.topics["orders"].partitions = 8;
  auto a2 = send(beat("a", a.member_epoch, *a.assignment));
  EXPECT_GT(group_.group_epoch(), epoch);
  ASSERT_TRUE(a2.assignment);
  EXPECT_EQ(count(*a2.assignment), 8u);
  auto sub = beat("a", a2.member_epoch, *a2.assignment);
  sub.subscribed_topic_names = std::vector<std::string>{"orders", "payments"};
  auto a3 = send(sub);
  ASSERT_TRUE(a3.assignment);
  EXPECT_EQ(count(*a3.assignment), 10u);
}

TEST_F(ConsumerGroup, AnUnknownAssignorOrABadFirstHeartbeatIsRefused) {
  auto j = join_request("a");
  j.server_assignor = "sticky-ish";
  EXPECT_EQ(send(j).error, error_code::unsupported_assignor);
  auto k = join_request("a");
  k.subscribed_topic_names.reset();
  EXPECT_EQ(send(k).error, error_code::invalid_request);
  auto range = join_request("a");
  range.server_assignor = "range";
  EXPECT_EQ(send(range).error, error_code::none);
  EXPECT_EQ(group_.assignor_name(), "range");
}

TEST_F(ConsumerGroup, AGroupRestoredFromItsRecordKeepsEpochsAndAssignments) {
  auto a = send(join_request("a"));
  auto b = send(join_request("b"));
  auto a2 = send(beat("a", a.member_epoch, *a.assignment));
  (void)send(beat("a", a.member_epoch, *a2.assignment));
  auto b2 = send(beat("b", b.member_epoch, {}));
  ASSERT_TRUE(b2.assignment);
  ASSERT_TRUE(group_.take_dirty());
  const auto record = group_.encode();
  auto restored = consumer_group::decode("g", record, limits_.session_timeout_ms, now_ + 100);
  ASSERT_TRUE(restored);
  EXPECT_EQ(restored->group_epoch(), group_.group_epoch());
  EXPECT_EQ(restored->assignment_epoch(), group_.assignment_epoch());
  // The members go on at their epochs, holding what they held: no new epoch, same partitions.
  auto r =
      restored->heartbeat(beat("b", b.member_epoch, *b2.assignment), limits_, topics_, now_ + 200);
  ASSERT_EQ(r.error, error_code::none) << r.message;
  EXPECT_EQ(r.member_epoch, b.member_epoch);
  ASSERT_TRUE(r.assignment) << "the first answer after a restart carries the assignment";
  EXPECT_EQ(*r.assignment, *b2.assignment);
  EXPECT_EQ(restored->group_epoch(), group_.group_epoch());
  EXPECT_EQ(restored->state(), consumer_group_state::stable);
}

TEST_F(ConsumerGroup, ACorruptRecordIsRefusedNotTrusted) {
  auto a = send(join_request("a"));
  const auto record = group_.encode();
  EXPECT_FALSE(consumer_group::decode("g", {}, 45000, now_));
  for (size_t cut = 0; cut < record.size(); ++cut) {
    EXPECT_FALSE(consumer_group::decode("g", std::span(record.data(), cut), 45000, now_)) << cut;
  }
  auto extra = record;
  extra.push_back(0);
  EXPECT_FALSE(consumer_group::decode("g", extra, 45000, now_));
  auto other_kind = record;
  other_kind[0] = 1;
  EXPECT_FALSE(consumer_group::decode("g", other_kind, 45000, now_));
  for (size_t i = 0; i < record.size(); ++i) {
    auto flipped = record;
    flipped[i] ^= 0xff;
    (void)consumer_group::decode("g", flipped, 45000, now_);
  }
}

}  // namespace
}  // namespace silt::coordinator
