// The classic group state machine driven by a fake clock: joins, the initial delay, syncs,
// heartbeats, leaving, session and rebalance timeouts, static members, protocol choice.
#include "coordinator/classic_group.h"

#include <optional>

#include <gtest/gtest.h>

namespace silt::coordinator {
namespace {

constexpr int32_t session_ms = 10000;
constexpr int32_t rebalance_ms = 30000;

struct join_slot {
  std::optional<join_result> result;
  join_callback callback() {
    return [this](join_result r) { result = std::move(r); };
  }
};

struct sync_slot {
  std::optional<sync_result> result;
  sync_callback callback() {
    return [this](sync_result r) { result = std::move(r); };
  }
};

class ClassicGroup : public ::testing::Test {
 protected:
  ClassicGroup() : group_("g", now_) { limits_.initial_rebalance_delay_ms = 3000; }

  join_request request(const std::string& member_id,
                       const std::vector<std::string>& protocols = {"range"},
                       std::optional<std::string> instance = std::nullopt) {
    join_request r;
    r.member_id = member_id;
    r.group_instance_id = std::move(instance);
    r.client_id = "client";
    r.client_host = "/127.0.0.1";
    r.session_timeout_ms = session_ms;
    r.rebalance_timeout_ms = rebalance_ms;
    r.protocol_type = "consumer";
    for (const auto& p : protocols) r.protocols.push_back({p, {1, 2, 3}});
    r.require_known_member_id = true;
    return r;
  }

  // A first join as a v4+ client makes it: MEMBER_ID_REQUIRED, then the join with the id.
  std::string join_new(join_slot& slot, const std::vector<std::string>& protocols = {"range"}) {
    join_slot first;
    group_.join(request("", protocols), limits_, now_, first.callback());
    EXPECT_TRUE(first.result);
    EXPECT_EQ(first.result->error, error_code::member_id_required);
    std::string id = first.result->member_id;
    group_.join(request(id, protocols), limits_, now_, slot.callback());
    return id;
  }

  void advance(int64_t ms) {
    now_ += ms;
    group_.tick(now_);
  }

  // Brings members (all joined and waiting) through the leader's sync to Stable.
  void sync_all(const std::vector<std::string>& ids, std::vector<sync_slot>& slots) {
    slots.resize(ids.size());
    const std::string leader = group_.leader();
    std::map<std::string, std::vector<uint8_t>> assignments;
    for (size_t i = 0; i < ids.size(); ++i) {
      assignments[ids[i]] = {static_cast<uint8_t>(i)};
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == leader) continue;
      group_.sync(ids[i], std::nullopt, group_.generation(), "consumer", group_.protocol_name(), {},
                  now_, slots[i].callback());
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] != leader) continue;
      group_.sync(ids[i], std::nullopt, group_.generation(), "consumer", group_.protocol_name(),
                  assignments, now_, slots[i].callback());
    }
  }

  int64_t now_ = 1'000'000;
  group_limits limits_;
  classic_group group_;
};

TEST_F(ClassicGroup, FirstJoinWaitsForTheInitialDelayThenCompletes) {
  join_slot a;
  const std::string id = join_new(a);
  EXPECT_EQ(group_.state(), group_state::preparing_rebalance);
  advance(2000);
  EXPECT_FALSE(a.result) << "answered before group.initial.rebalance.delay.ms";
  advance(1000);
  ASSERT_TRUE(a.result);
  EXPECT_EQ(a.result->error, error_code::none);
  EXPECT_EQ(a.result->generation_id, 1);
  EXPECT_EQ(a.result->leader, id);
  EXPECT_EQ(a.result->protocol_name, "range");
  ASSERT_EQ(a.result->members.size(), 1u);
  EXPECT_EQ(group_.state(), group_state::completing_rebalance);
}

TEST_F(ClassicGroup, MembersJoiningDuringTheDelayShareOneGenerationAndGetTheirAssignments) {
  join_slot a, b, c;
  const std::string ida = join_new(a);
  advance(2000);
  const std::string idb = join_new(b);
  advance(2000);  // the delay grew with b's join
  EXPECT_FALSE(a.result);
  const std::string idc = join_new(c);
  advance(3000);
  advance(3000);
  ASSERT_TRUE(a.result && b.result && c.result);
  EXPECT_EQ(a.result->generation_id, 1);
  EXPECT_EQ(b.result->generation_id, 1);
  EXPECT_EQ(c.result->generation_id, 1);
  EXPECT_EQ(a.result->members.size(), 3u) << "the leader sees every member";
  EXPECT_TRUE(b.result->members.empty());
  std::vector<sync_slot> syncs;
  sync_all({ida, idb, idc}, syncs);
  EXPECT_EQ(group_.state(), group_state::stable);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(syncs[i].result) << i;
    EXPECT_EQ(syncs[i].result->error, error_code::none);
    EXPECT_EQ(syncs[i].result->assignment, std::vector<uint8_t>{static_cast<uint8_t>(i)});
  }
}

TEST_F(ClassicGroup, HeartbeatsReportTheRebalanceAndBadMembersOrGenerations) {
  join_slot a;
  const std::string ida = join_new(a);
  advance(3000);
  std::vector<sync_slot> syncs;
  sync_all({ida}, syncs);
  EXPECT_EQ(group_.heartbeat(ida, std::nullopt, 1, now_), error_code::none);
  EXPECT_EQ(group_.heartbeat(ida, std::nullopt, 7, now_), error_code::illegal_generation);
  EXPECT_EQ(group_.heartbeat("nobody", std::nullopt, 1, now_), error_code::unknown_member_id);
  join_slot b;
  join_new(b);  // a new member: the group rebalances
  EXPECT_EQ(group_.state(), group_state::preparing_rebalance);
  EXPECT_EQ(group_.heartbeat(ida, std::nullopt, 1, now_), error_code::rebalance_in_progress);
  join_slot a2;
  group_.join(request(ida), limits_, now_, a2.callback());
  ASSERT_TRUE(a2.result && b.result) << "the join completes when every member has rejoined";
  EXPECT_EQ(a2.result->generation_id, 2);
}

TEST_F(ClassicGroup, ALapsedSessionRemovesTheMemberAndTheOthersRebalance) {
  join_slot a, b;
  const std::string ida = join_new(a);
  const std::string idb = join_new(b);
  advance(3000);
  advance(3000);  // a second member joined during the delay: it ran once more
  std::vector<sync_slot> syncs;
  sync_all({ida, idb}, syncs);
  // a heartbeats, b does not.
  for (int i = 0; i < 4; ++i) {
    advance(3000);
    EXPECT_EQ(group_.heartbeat(ida, std::nullopt, 1, now_),
              group_.has_member(idb) ? error_code::none : error_code::rebalance_in_progress);
  }
  EXPECT_FALSE(group_.has_member(idb));
  EXPECT_EQ(group_.state(), group_state::preparing_rebalance);
  join_slot a2;
  group_.join(request(ida), limits_, now_, a2.callback());
  ASSERT_TRUE(a2.result);
  EXPECT_EQ(a2.result->generation_id, 2);
  EXPECT_EQ(a2.result->members.size(), 1u);
}

TEST_F(ClassicGroup, LeavingRebalancesAndTheLastToLeaveEmptiesTheGroup) {
  join_slot a, b;
  const std::string ida = join_new(a);
  const std::string idb = join_new(b);
  advance(3000);
  advance(3000);  // a second member joined during the delay: it ran once more
  std::vector<sync_slot> syncs;
  sync_all({ida, idb}, syncs);
  EXPECT_EQ(group_.leave(idb, std::nullopt, now_), error_code::none);
  EXPECT_EQ(group_.leave(idb, std::nullopt, now_), error_code::unknown_member_id);
  EXPECT_EQ(group_.state(), group_state::preparing_rebalance);
  EXPECT_EQ(group_.leave(ida, std::nullopt, now_), error_code::none);
  EXPECT_EQ(group_.state(), group_state::empty);
  EXPECT_EQ(group_.size(), 0u);
}

TEST_F(ClassicGroup, AMemberThatDoesNotRejoinWithinTheRebalanceTimeoutIsDropped) {
  join_slot a, b;
  const std::string ida = join_new(a);
  const std::string idb = join_new(b);
  advance(3000);
  advance(3000);  // a second member joined during the delay: it ran once more
  std::vector<sync_slot> syncs;
  sync_all({ida, idb}, syncs);
  join_slot a2;
  group_.join(request(ida, {"range", "roundrobin"}), limits_, now_, a2.callback());
  EXPECT_EQ(group_.state(), group_state::preparing_rebalance);
  for (int i = 0; i < 11; ++i) {
    advance(3000);
    (void)group_.heartbeat(idb, std::nullopt, 1, now_);  // alive, but never rejoins
  }
  ASSERT_TRUE(a2.result);
  EXPECT_EQ(a2.result->error, error_code::none);
  EXPECT_EQ(a2.result->members.size(), 1u);
  EXPECT_FALSE(group_.has_member(idb));
}

TEST_F(ClassicGroup, AStaticMemberBackWithinItsSessionKeepsItsAssignmentWithoutARebalance) {
  join_slot a, b;
  group_.join(request("", {"range"}, "instance-a"), limits_, now_, a.callback());
  const std::string idb = join_new(b);
  advance(3000);
  advance(3000);  // a second member joined during the delay: it ran once more
  ASSERT_TRUE(a.result);
  const std::string ida = a.result->member_id;
  std::vector<sync_slot> syncs;
  sync_all({ida, idb}, syncs);
  const int32_t generation = group_.generation();
  // The instance restarts: a first join with its instance id.
  join_slot again;
  group_.join(request("", {"range"}, "instance-a"), limits_, now_, again.callback());
  ASSERT_TRUE(again.result);
  EXPECT_EQ(again.result->error, error_code::none);
  EXPECT_NE(again.result->member_id, ida);
  EXPECT_EQ(again.result->generation_id, generation);
  EXPECT_EQ(group_.state(), group_state::stable);
  EXPECT_EQ(group_.heartbeat(ida, "instance-a", generation, now_), error_code::fenced_instance_id);
  sync_slot s;
  group_.sync(again.result->member_id, "instance-a", generation, "consumer", "range", {}, now_,
              s.callback());
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->assignment, syncs[0].result->assignment) << "its old assignment";
  EXPECT_EQ(group_.heartbeat(idb, std::nullopt, generation, now_), error_code::none);
}

TEST_F(ClassicGroup, TheProtocolEveryMemberSupportsWithTheMostVotesIsChosen) {
  join_slot a, b, c;
  join_new(a, {"cooperative-sticky", "range"});
  join_new(b, {"range", "cooperative-sticky"});
  join_new(c, {"range", "cooperative-sticky"});
  advance(3000);
  advance(3000);  // a second member joined during the delay: it ran once more
  ASSERT_TRUE(a.result);
  EXPECT_EQ(a.result->protocol_name, "range");
  join_slot d;
  group_.join(request("", {"roundrobin"}), limits_, now_, d.callback());
  ASSERT_TRUE(d.result);
  EXPECT_EQ(d.result->error, error_code::inconsistent_group_protocol);
}

TEST_F(ClassicGroup, CommitsNeedTheMemberAndGenerationUnlessTheGroupIsEmpty) {
  EXPECT_EQ(group_.check_commit("", std::nullopt, -1), error_code::none);
  join_slot a;
  const std::string ida = join_new(a);
  advance(3000);
  EXPECT_EQ(group_.check_commit(ida, std::nullopt, 1), error_code::rebalance_in_progress);
  std::vector<sync_slot> syncs;
  sync_all({ida}, syncs);
  EXPECT_EQ(group_.check_commit(ida, std::nullopt, 1), error_code::none);
  EXPECT_EQ(group_.check_commit(ida, std::nullopt, 0), error_code::illegal_generation);
  EXPECT_EQ(group_.check_commit("", std::nullopt, -1), error_code::unknown_member_id);
}

TEST_F(ClassicGroup, AMemberThatNeverSyncsIsDroppedAfterTheRebalanceTimeout) {
  join_slot a, b;
  const std::string ida = join_new(a);
  const std::string idb = join_new(b);
  advance(3000);
  advance(3000);  // a second member joined during the delay: it ran once more
  ASSERT_TRUE(a.result && b.result);
  const std::string leader = group_.leader();
  const std::string other = leader == ida ? idb : ida;
  sync_slot s;
  group_.sync(leader, std::nullopt, 1, "consumer", "range", {{leader, {1}}, {other, {2}}}, now_,
              s.callback());
  EXPECT_EQ(group_.state(), group_state::stable);
  for (int i = 0; i < 11; ++i) {
    advance(3000);
    (void)group_.heartbeat(leader, std::nullopt, group_.generation(), now_);
  }
  EXPECT_FALSE(group_.has_member(other));
  EXPECT_TRUE(group_.has_member(leader));
}

TEST_F(ClassicGroup, ClosingAnswersWaitingRequests) {
  join_slot a;
  join_new(a);
  group_.close(error_code::not_coordinator, now_);
  ASSERT_TRUE(a.result);
  EXPECT_EQ(a.result->error, error_code::not_coordinator);
  EXPECT_EQ(group_.state(), group_state::dead);
}

TEST_F(ClassicGroup, AStableGroupRestoredFromItsRecordGoesOnWithoutARebalance) {
  join_slot a, b;
  group_.join(request("", {"range"}, "instance-a"), limits_, now_, a.callback());
  const std::string idb = join_new(b);
  advance(3000);
  advance(3000);  // a second member joined during the delay: it ran once more
  ASSERT_TRUE(a.result && b.result);
  std::vector<sync_slot> syncs;
  sync_all({a.result->member_id, idb}, syncs);
  ASSERT_TRUE(group_.take_dirty()) << "became Stable";
  const auto record = group_.encode();
  auto restored = classic_group::decode("g", record, now_ + 500);
  ASSERT_TRUE(restored);
  EXPECT_EQ(restored->state(), group_state::stable);
  EXPECT_EQ(restored->generation(), group_.generation());
  EXPECT_EQ(restored->leader(), group_.leader());
  EXPECT_EQ(restored->heartbeat(idb, std::nullopt, group_.generation(), now_ + 600),
            error_code::none);
  sync_slot s;
  restored->sync(idb, std::nullopt, group_.generation(), "consumer", "range", {}, now_ + 700,
                 s.callback());
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->assignment, syncs[1].result->assignment);
  // A restarted static member gets its place back, as before the broker's restart.
  join_slot again;
  restored->join(request("", {"range"}, "instance-a"), limits_, now_ + 800, again.callback());
  ASSERT_TRUE(again.result);
  EXPECT_EQ(again.result->error, error_code::none);
  EXPECT_EQ(again.result->generation_id, group_.generation());
}

TEST_F(ClassicGroup, ACorruptRecordIsRefusedNotTrusted) {
  join_slot a;
  const std::string ida = join_new(a);
  advance(3000);
  std::vector<sync_slot> syncs;
  sync_all({ida}, syncs);
  const auto record = group_.encode();
  EXPECT_FALSE(classic_group::decode("g", {}, now_));
  for (size_t cut = 0; cut < record.size(); ++cut) {
    EXPECT_FALSE(classic_group::decode("g", std::span(record.data(), cut), now_)) << cut;
  }
  auto extra = record;
  extra.push_back(0);
  EXPECT_FALSE(classic_group::decode("g", extra, now_)) << "trailing bytes";
  auto other_kind = record;
  other_kind[0] = 2;
  EXPECT_FALSE(classic_group::decode("g", other_kind, now_));
  // Any single flipped byte either still decodes to some group or is refused: never a crash.
  for (size_t i = 0; i < record.size(); ++i) {
    auto flipped = record;
    flipped[i] ^= 0xff;
    (void)classic_group::decode("g", flipped, now_);
  }
}

}  // namespace
}  // namespace silt::coordinator
