// The classic group state machine driven by a fake clock: joins, the initial delay, syncs,
// heartbeats, leaving, session and rebalance timeouts (the longest of the members'), static
// members and their ids, the new-member join timeout, commits as heartbeats, protocol choice.
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

TEST_F(ClassicGroup, AStaticMemberIdStartsWithItsInstanceIdADynamicOneWithItsClientId) {
  // Clients' assignors order members by id: the prefix decides who gets the first partitions.
  join_slot a, b;
  group_.join(request("", {"range"}, "instance-a"), limits_, now_, a.callback());
  const std::string idb = join_new(b);
  advance(3000);
  advance(3000);
  ASSERT_TRUE(a.result);
  EXPECT_EQ(a.result->member_id.rfind("instance-a-", 0), 0u) << a.result->member_id;
  EXPECT_EQ(idb.rfind("client-", 0), 0u) << idb;
}

TEST_F(ClassicGroup, AMemberIdThatWouldBeTooLongForTheProtocolIsAnUnknownServerError) {
  // As on Kafka: the id is the prefix, a dash and a UUID, at most 32,767 bytes in all.
  join_slot longest, dynamic, instance;
  join_request r = request("");
  r.client_id = std::string(32730, 'c');
  group_.join(r, limits_, now_, longest.callback());
  ASSERT_TRUE(longest.result);
  EXPECT_EQ(longest.result->error, error_code::member_id_required);
  EXPECT_EQ(longest.result->member_id.size(), 32767u);
  r.client_id += 'c';
  group_.join(r, limits_, now_, dynamic.callback());
  ASSERT_TRUE(dynamic.result);
  EXPECT_EQ(dynamic.result->error, error_code::unknown_server_error);
  EXPECT_EQ(dynamic.result->member_id, "");
  group_.join(request("", {"range"}, std::string(32731, 'i')), limits_, now_, instance.callback());
  ASSERT_TRUE(instance.result);
  EXPECT_EQ(instance.result->error, error_code::unknown_server_error);
  EXPECT_EQ(group_.size(), 0u);
}

TEST_F(ClassicGroup, AStaticLeaderBackIsToldItLeadsOnlyIfItCanSkipTheAssignment) {
  join_slot a, b;
  group_.join(request("", {"range"}, "instance-a"), limits_, now_, a.callback());
  const std::string idb = join_new(b);
  advance(3000);
  advance(3000);
  ASSERT_TRUE(a.result);
  const std::string ida = a.result->member_id;
  ASSERT_EQ(group_.leader(), ida);
  std::vector<sync_slot> syncs;
  sync_all({ida, idb}, syncs);
  // A client before JoinGroup v9 is told the leader as it was, and no members: it syncs as a
  // follower and gets its assignment, and runs no assignment of its own.
  join_slot old_client;
  group_.join(request("", {"range"}, "instance-a"), limits_, now_, old_client.callback());
  ASSERT_TRUE(old_client.result);
  EXPECT_EQ(old_client.result->error, error_code::none);
  EXPECT_EQ(old_client.result->leader, ida);
  EXPECT_NE(old_client.result->member_id, ida);
  EXPECT_TRUE(old_client.result->members.empty());
  EXPECT_FALSE(old_client.result->skip_assignment);
  EXPECT_EQ(group_.leader(), old_client.result->member_id) << "it leads the next rebalance";
  // From v9 it is told it leads, with the members, and to skip the assignment.
  join_request again = request("", {"range"}, "instance-a");
  again.supports_skip_assignment = true;
  join_slot new_client;
  group_.join(std::move(again), limits_, now_, new_client.callback());
  ASSERT_TRUE(new_client.result);
  EXPECT_EQ(new_client.result->leader, new_client.result->member_id);
  EXPECT_EQ(new_client.result->members.size(), 2u);
  EXPECT_TRUE(new_client.result->skip_assignment);
  EXPECT_EQ(group_.state(), group_state::stable);
  sync_slot s;
  group_.sync(new_client.result->member_id, "instance-a", group_.generation(), "consumer", "range",
              {}, now_, s.callback());
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->assignment, syncs[0].result->assignment);
  EXPECT_EQ(group_.heartbeat(idb, std::nullopt, group_.generation(), now_), error_code::none);
}

TEST_F(ClassicGroup,
       AHeartbeatingMemberThatDoesNotRejoinIsWaitedForUntilTheLongestRebalanceTimeout) {
  // b's rebalance timeout (its max.poll.interval.ms) is twice a's: the group waits for b, alive
  // but not rejoining, that long, and b keeps its place (and its partitions) until then.
  join_slot a, b;
  const std::string ida = join_new(a);
  join_slot first;
  join_request rb = request("");
  rb.rebalance_timeout_ms = 2 * rebalance_ms;
  group_.join(rb, limits_, now_, first.callback());
  ASSERT_TRUE(first.result);
  const std::string idb = first.result->member_id;
  rb.member_id = idb;
  group_.join(rb, limits_, now_, b.callback());
  advance(3000);
  advance(3000);
  std::vector<sync_slot> syncs;
  sync_all({ida, idb}, syncs);
  join_slot a2;
  group_.join(request(ida, {"range", "roundrobin"}), limits_, now_, a2.callback());
  ASSERT_EQ(group_.state(), group_state::preparing_rebalance);
  const int64_t start = now_;
  while (now_ + 3000 < start + 2 * rebalance_ms) {
    advance(3000);
    EXPECT_EQ(group_.heartbeat(idb, std::nullopt, 1, now_), error_code::rebalance_in_progress);
    ASSERT_FALSE(a2.result) << "the join completed " << now_ - start << " ms in, before b's "
                            << "rebalance timeout";
    EXPECT_TRUE(group_.has_member(idb));
  }
  advance(start + 2 * rebalance_ms - now_);
  ASSERT_TRUE(a2.result);
  EXPECT_EQ(a2.result->generation_id, 2);
  EXPECT_EQ(a2.result->members.size(), 1u);
  EXPECT_FALSE(group_.has_member(idb));
  EXPECT_EQ(group_.heartbeat(idb, std::nullopt, 1, now_), error_code::unknown_member_id);
}

TEST_F(ClassicGroup, StaticMembersThatHaveNotRejoinedKeepTheGroupWaitingRatherThanLeaderless) {
  join_slot a, b;
  group_.join(request("", {"range"}, "instance-a"), limits_, now_, a.callback());
  group_.join(request("", {"range"}, "instance-b"), limits_, now_, b.callback());
  advance(3000);
  advance(3000);
  ASSERT_TRUE(a.result && b.result);
  const std::string ida = a.result->member_id;
  const std::string idb = b.result->member_id;
  std::vector<sync_slot> syncs;
  sync_all({ida, idb}, syncs);
  // A dynamic member comes and goes: the rebalance it started waits for a and b, which do not
  // rejoin (their clients are busy) but heartbeat.
  join_slot c;
  const std::string idc = join_new(c);
  ASSERT_EQ(group_.state(), group_state::preparing_rebalance);
  EXPECT_EQ(group_.leave(idc, std::nullopt, now_), error_code::none);
  for (int i = 0; i < 12; ++i) {
    advance(3000);
    EXPECT_EQ(group_.heartbeat(ida, "instance-a", 1, now_), error_code::rebalance_in_progress);
    EXPECT_EQ(group_.heartbeat(idb, "instance-b", 1, now_), error_code::rebalance_in_progress);
  }
  EXPECT_EQ(group_.state(), group_state::preparing_rebalance)
      << "no member rejoined: no generation without a leader to assign";
  EXPECT_EQ(group_.generation(), 1);
  join_slot b2;
  group_.join(request(idb, {"range"}, "instance-b"), limits_, now_, b2.callback());
  for (int i = 0; i < 11 && !b2.result; ++i) {
    advance(3000);
    (void)group_.heartbeat(ida, "instance-a", 1, now_);
  }
  ASSERT_TRUE(b2.result);
  EXPECT_EQ(b2.result->generation_id, 2);
  EXPECT_EQ(b2.result->leader, idb);
  EXPECT_EQ(b2.result->members.size(), 2u) << "a, static, keeps its place until its session lapses";
}

TEST_F(ClassicGroup, CommitsKeepAMemberSessionAlive) {
  join_slot a, b;
  const std::string ida = join_new(a);
  const std::string idb = join_new(b);
  advance(3000);
  advance(3000);
  std::vector<sync_slot> syncs;
  sync_all({ida, idb}, syncs);
  for (int i = 0; i < 6; ++i) {
    advance(3000);
    EXPECT_EQ(group_.heartbeat(ida, std::nullopt, 1, now_), error_code::none);
    ASSERT_EQ(group_.check_commit(idb, std::nullopt, 1), error_code::none);
    group_.committed(idb, now_);  // b commits but sends no heartbeat
  }
  EXPECT_TRUE(group_.has_member(idb));
  EXPECT_EQ(group_.state(), group_state::stable);
}

TEST_F(ClassicGroup, ANewMemberWhoseJoinWaitsLongerThanTheNewMemberTimeoutIsDropped) {
  // a is alive but never rejoins, with a rebalance timeout beyond the new-member join timeout:
  // the new member's join lapses first (its client may be gone) and is told UNKNOWN_MEMBER_ID.
  join_slot a;
  join_request ra = request("");
  ra.rebalance_timeout_ms = static_cast<int32_t>(2 * new_member_join_ms);
  join_slot first;
  group_.join(ra, limits_, now_, first.callback());
  ASSERT_TRUE(first.result);
  const std::string ida = first.result->member_id;
  ra.member_id = ida;
  group_.join(ra, limits_, now_, a.callback());
  advance(3000);
  std::vector<sync_slot> syncs;
  sync_all({ida}, syncs);
  join_slot b;
  const std::string idb = join_new(b);
  const int64_t start = now_;
  while (!b.result && now_ - start < 2 * new_member_join_ms) {
    advance(3000);
    (void)group_.heartbeat(ida, std::nullopt, 1, now_);
  }
  ASSERT_TRUE(b.result);
  EXPECT_EQ(b.result->error, error_code::unknown_member_id);
  EXPECT_GE(now_ - start, new_member_join_ms);
  EXPECT_LT(now_ - start, new_member_join_ms + 3000);
  EXPECT_FALSE(group_.has_member(idb));
}

TEST_F(ClassicGroup, AnInstanceIdThatNamesNoStaticMemberIsUnknown) {
  join_slot a;
  const std::string ida = join_new(a);
  advance(3000);
  std::vector<sync_slot> syncs;
  sync_all({ida}, syncs);
  EXPECT_EQ(group_.heartbeat(ida, "no-such-instance", 1, now_), error_code::unknown_member_id);
  EXPECT_EQ(group_.heartbeat(ida, std::nullopt, 1, now_), error_code::none);
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
