// One consumer group of Kafka's classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup):
// its members, generations and the state machine of Apache Kafka's ClassicGroup
//
//   Empty -> PreparingRebalance -> CompletingRebalance -> Stable -> PreparingRebalance ...
//   (any) -> Dead (deleted)
//
// A join or sync that must wait for the other members is answered later through the callback
// it gave: when the rebalance completes, when the leader's assignment arrives, or when a
// deadline passes (tick()). Time is an argument of every call (milliseconds of any monotonic
// clock), so that tests drive the machine with a fake clock.
//
// The timing is Kafka's (GroupMetadataManager's classic groups): a rebalance waits for every
// known member up to the group's rebalance timeout, the longest of its members'; a member that
// heartbeats meanwhile (REBALANCE_IN_PROGRESS) but does not rejoin keeps its place until then,
// when a dynamic one is dropped and a static one stays.
//
// Ownership: not thread-safe; the coordinator (coordinator.h) owns each group and calls it under
// its lock. Callbacks run inside the calls; they must only hand the result on (post it to the
// waiting request's executor), never call back into the group.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/generated/error_code.h"

namespace silt::coordinator {

using protocol::error_code;

enum class group_state : uint8_t { empty, preparing_rebalance, completing_rebalance, stable, dead };

// Kafka's names: "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead".
[[nodiscard]] std::string_view state_name(group_state s);

struct member_protocol {
  std::string name;
  std::vector<uint8_t> metadata;
  bool operator==(const member_protocol&) const = default;
};

// What the group needs of the coordinator's settings.
struct group_limits {
  int64_t initial_rebalance_delay_ms = 3000;  // group.initial.rebalance.delay.ms
  int32_t min_session_timeout_ms = 6000;      // group.min.session.timeout.ms
  int32_t max_session_timeout_ms = 1800000;   // group.max.session.timeout.ms
  int32_t max_size = INT32_MAX;               // group.max.size
};

// How long a new member's join may wait for the rebalance to complete before it is dropped
// (Kafka's fixed five minutes): it cannot heartbeat yet, and its client may have gone.
inline constexpr int64_t new_member_join_ms = 5 * 60 * 1000;

struct join_request {
  std::string member_id;  // empty for a first join
  std::optional<std::string> group_instance_id;
  std::string client_id;
  std::string client_host;
  int32_t session_timeout_ms = 0;
  int32_t rebalance_timeout_ms = 0;
  std::string protocol_type;
  std::vector<member_protocol> protocols;
  bool require_known_member_id = false;  // JoinGroup v4+: a first join gets MEMBER_ID_REQUIRED
  // JoinGroup v9+ (KIP-814): a static leader back without a rebalance is told it leads, with
  // the members, and to skip the assignment; an older client is told the leader before it came
  // back, and no members, so that it does not run an assignment the group would not use.
  bool supports_skip_assignment = false;
};

struct join_member {
  std::string member_id;
  std::optional<std::string> group_instance_id;
  std::vector<uint8_t> metadata;
};

struct join_result {
  error_code error = error_code::none;
  int32_t generation_id = -1;
  std::optional<std::string> protocol_type;
  std::optional<std::string> protocol_name;
  std::string leader;
  bool skip_assignment = false;
  std::string member_id;
  std::vector<join_member> members;  // the leader's only
};

struct sync_result {
  error_code error = error_code::none;
  std::optional<std::string> protocol_type;
  std::optional<std::string> protocol_name;
  std::vector<uint8_t> assignment;
};

using join_callback = std::function<void(join_result)>;
using sync_callback = std::function<void(sync_result)>;

// A member as DescribeGroups shows it.
struct member_summary {
  std::string member_id;
  std::optional<std::string> group_instance_id;
  std::string client_id;
  std::string client_host;
  std::vector<uint8_t> metadata;    // of the chosen protocol (Stable only)
  std::vector<uint8_t> assignment;  // (Stable only)
};

class classic_group {
 public:
  // `id` is the group id; `now` when it came to be (a first join or commit).
  classic_group(std::string id, int64_t now);

  [[nodiscard]] const std::string& id() const { return id_; }
  [[nodiscard]] group_state state() const { return state_; }
  [[nodiscard]] int32_t generation() const { return generation_; }
  [[nodiscard]] const std::string& protocol_type() const { return protocol_type_; }
  [[nodiscard]] const std::optional<std::string>& protocol_name() const { return protocol_; }
  [[nodiscard]] const std::string& leader() const { return leader_; }
  [[nodiscard]] size_t size() const { return members_.size(); }
  [[nodiscard]] bool has_member(const std::string& member_id) const {
    return members_.contains(member_id);
  }
  // When the group last changed state (offsets of an Empty group expire from there).
  [[nodiscard]] int64_t state_since() const { return state_since_; }
  [[nodiscard]] std::vector<member_summary> members() const;
  // The topics the members subscribe to, when the protocol type is "consumer" and the group
  // is Stable (Kafka's OffsetDelete check); none otherwise.
  [[nodiscard]] std::optional<std::set<std::string>> subscribed_topics() const;

  // JoinGroup: answers through `done`, at once or when the rebalance completes.
  void join(join_request req, const group_limits& limits, int64_t now, join_callback done);
  // SyncGroup: the leader's `assignments` (member id -> bytes) are kept; answers through
  // `done`, at once or when the leader's assignment arrives.
  void sync(const std::string& member_id, const std::optional<std::string>& instance_id,
            int32_t generation, const std::optional<std::string>& protocol_type,
            const std::optional<std::string>& protocol_name,
            std::map<std::string, std::vector<uint8_t>> assignments, int64_t now,
            sync_callback done);
  // Heartbeat: keeps the member's session alive.
  [[nodiscard]] error_code heartbeat(const std::string& member_id,
                                     const std::optional<std::string>& instance_id,
                                     int32_t generation, int64_t now);
  // LeaveGroup of one member; an empty member id with an instance id removes that static
  // member (as an admin does).
  [[nodiscard]] error_code leave(const std::string& member_id,
                                 const std::optional<std::string>& instance_id, int64_t now);
  // OffsetCommit's check of who commits (generation -1 with no member: an admin or a consumer
  // without group management, allowed while the group is Empty).
  [[nodiscard]] error_code check_commit(const std::string& member_id,
                                        const std::optional<std::string>& instance_id,
                                        int32_t generation) const;
  // A commit that passed check_commit() keeps its member's session alive while the group is
  // Stable or PreparingRebalance, as a heartbeat does (Kafka's rule).
  void committed(const std::string& member_id, int64_t now);
  // Deadlines: sessions, rebalance and sync timeouts, pending members, the initial delay.
  void tick(int64_t now);
  // The earliest deadline tick() acts on, if any.
  [[nodiscard]] std::optional<int64_t> next_deadline() const;
  // What survives a restart (docs/formats/metadata.md, consumer_groups): a Stable group's
  // generation, protocol, leader and members with their assignments (so that members, static
  // ones above all, go on without a rebalance), or an Empty group's generation. Kept when the
  // group becomes Stable or Empty; take_dirty() says whether it changed since last asked.
  [[nodiscard]] std::vector<uint8_t> encode() const;
  // The group as encoded, its members' sessions starting at `now`; none if `data` is not a
  // classic group record this broker can read.
  [[nodiscard]] static std::unique_ptr<classic_group> decode(std::string id,
                                                             std::span<const uint8_t> data,
                                                             int64_t now);
  [[nodiscard]] bool take_dirty() { return std::exchange(dirty_, false); }

  // DeleteGroups (the group must be Empty) and shutdown: answers every waiting request with
  // `e` and makes the group Dead.
  void close(error_code e, int64_t now);

 private:
  struct member {
    std::string id;
    std::optional<std::string> instance_id;
    std::string client_id;
    std::string client_host;
    int32_t session_timeout_ms = 0;
    int32_t rebalance_timeout_ms = 0;
    std::vector<member_protocol> protocols;
    std::vector<uint8_t> assignment;
    join_callback awaiting_join;
    sync_callback awaiting_sync;
    bool pending_sync = false;  // given a generation, has not synced yet
    // Joined and not yet given a generation: its join may lapse, after new_member_join_ms,
    // even while it waits (its client may have given up on it), and its session does not run.
    bool is_new = false;
    int64_t session_deadline = 0;
  };

  [[nodiscard]] error_code check_member(const std::string& member_id,
                                        const std::optional<std::string>& instance_id) const;
  [[nodiscard]] bool supports(const join_request& req) const;
  void join_new_member(join_request req, const group_limits& limits, int64_t now,
                       join_callback done);
  void join_known_member(join_request req, const group_limits& limits, int64_t now,
                         join_callback done);
  void replace_static_member(join_request req, int64_t now, join_callback done);
  void add_member(join_request req, const std::string& member_id, const group_limits& limits,
                  int64_t now, join_callback done);
  void update_member(member& m, join_request& req, join_callback done);
  void prepare_rebalance(const group_limits* limits, int64_t now);
  void maybe_complete_join(int64_t now);
  void complete_join(int64_t now);
  void remove_member(const std::string& member_id, int64_t now);
  void set_state(group_state s, int64_t now);
  void fail_pending_syncs(error_code e);
  [[nodiscard]] bool expired(const member& m, int64_t now) const;
  [[nodiscard]] std::string select_protocol() const;
  [[nodiscard]] join_result join_response(const member& m) const;
  [[nodiscard]] int32_t max_rebalance_timeout() const;
  [[nodiscard]] const std::vector<uint8_t>* metadata_of(const member& m) const;

  std::string id_;
  group_state state_ = group_state::empty;
  int64_t state_since_ = 0;
  int32_t generation_ = 0;
  std::string protocol_type_;
  std::optional<std::string> protocol_;
  std::string leader_;
  std::map<std::string, member> members_;
  std::map<std::string, std::string> static_members_;  // instance id -> member id
  // Member ids handed out with MEMBER_ID_REQUIRED, with when they lapse if they do not join.
  std::map<std::string, int64_t> pending_members_;
  // PreparingRebalance: when the join completes without the members still missing.
  int64_t join_deadline_ = 0;
  // The initial delay of a rebalance from Empty: whether it runs, whether a member joined
  // since it last ran out, its length and how far it may still grow.
  bool initial_delay_ = false;
  bool new_member_added_ = false;
  int64_t initial_delay_ms_ = 0;
  int64_t initial_delay_limit_ = 0;
  // CompletingRebalance and Stable: members given a generation that do not sync by then leave.
  int64_t sync_deadline_ = 0;
  bool dirty_ = false;  // became Stable or Empty since take_dirty()
};

}  // namespace silt::coordinator
