// One group of Kafka's consumer group protocol (KIP-848, ConsumerGroupHeartbeat): the broker
// assigns the partitions (assignors.h) and moves each member to the target assignment in
// steps, so that no partition is owned by two members at once:
//
//   - the group epoch grows when members join or leave or change what they subscribe to, or
//     when a subscribed topic gains partitions; the target assignment is recomputed for it;
//   - a member that holds partitions the target gives to others is first told to revoke them
//     (its epoch stays, it is "unrevoked") and moves on once a heartbeat says it let them go;
//   - a member then takes the target epoch and what the target gives it, except partitions
//     others still hold ("unreleased"), which it gets on a later heartbeat once freed.
//
// Members that stop heartbeating for the session timeout, or do not revoke within their
// rebalance timeout, are removed. Time is an argument (fake clock in tests).
//
// Ownership: not thread-safe; the coordinator owns each group and calls it under its lock.
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

#include "coordinator/assignors.h"
#include "coordinator/topic_regex.h"
#include "protocol/generated/error_code.h"

namespace silt::coordinator {

using protocol::error_code;

struct topic_meta {
  topic_uuid id{};
  std::string name;
  int32_t partitions = 0;
};

// The broker's topics as the group sees them.
class topic_lookup {
 public:
  virtual ~topic_lookup() = default;
  [[nodiscard]] virtual std::optional<topic_meta> by_name(std::string_view name) const = 0;
  [[nodiscard]] virtual std::optional<topic_meta> by_id(const topic_uuid& id) const = 0;
  [[nodiscard]] virtual std::vector<topic_meta> all() const = 0;
  // Moves whenever the set of topics or their partition counts change: a regex subscription's
  // matches, computed at one version, are reused until it moves.
  [[nodiscard]] virtual uint64_t version() const = 0;
};

struct consumer_limits {
  int32_t session_timeout_ms = 45000;    // group.consumer.session.timeout.ms
  int32_t heartbeat_interval_ms = 5000;  // group.consumer.heartbeat.interval.ms
  int32_t max_size = INT32_MAX;          // group.consumer.max.size
};

struct consumer_heartbeat {
  std::string member_id;
  int32_t member_epoch = 0;  // 0 joins, -1 leaves, -2 leaves for now (a static member)
  std::optional<std::string> instance_id;
  std::optional<std::string> rack_id;
  int32_t rebalance_timeout_ms = -1;
  std::optional<std::vector<std::string>> subscribed_topic_names;  // none: unchanged
  std::optional<std::string> subscribed_topic_regex;
  std::optional<std::string> server_assignor;
  std::optional<member_assignment> owned;  // what the member holds; none: unchanged
  std::string client_id;
  std::string client_host;
};

struct consumer_heartbeat_result {
  error_code error = error_code::none;
  std::string message;
  std::string member_id;
  int32_t member_epoch = 0;
  int32_t heartbeat_interval_ms = 0;
  std::optional<member_assignment> assignment;  // none: unchanged since the last answer
};

enum class consumer_group_state : uint8_t { empty, assigning, reconciling, stable };
// Kafka's names: "Empty", "Assigning", "Reconciling", "Stable".
[[nodiscard]] std::string_view state_name(consumer_group_state s);

struct consumer_member_summary {
  std::string member_id;
  std::optional<std::string> instance_id;
  std::optional<std::string> rack_id;
  int32_t member_epoch = 0;
  std::string client_id;
  std::string client_host;
  std::vector<std::string> subscribed_topic_names;
  std::optional<std::string> subscribed_topic_regex;
  member_assignment assignment;
  member_assignment target_assignment;
};

class consumer_group {
 public:
  consumer_group(std::string id, int64_t now);

  [[nodiscard]] const std::string& id() const { return id_; }
  [[nodiscard]] consumer_group_state state() const;
  [[nodiscard]] int32_t group_epoch() const { return group_epoch_; }
  [[nodiscard]] int32_t assignment_epoch() const { return target_epoch_; }
  [[nodiscard]] std::string assignor_name() const;
  [[nodiscard]] size_t size() const { return members_.size(); }
  // When the group last lost its last member (offsets of an empty group expire from there).
  [[nodiscard]] int64_t empty_since() const { return empty_since_; }
  [[nodiscard]] std::vector<consumer_member_summary> members() const;
  // The names of the topics the members subscribe to (OffsetDelete's check).
  [[nodiscard]] std::set<std::string> subscribed_topics(const topic_lookup& topics) const;

  // The patterns to match (topic_regex.h) before a heartbeat carrying `incoming` when the topics
  // are at `version`: that one and the members' whose matches are of another version (or none).
  [[nodiscard]] std::vector<std::string> regexes_to_match(
      const std::optional<std::string>& incoming, uint64_t version) const;
  // Keeps what the patterns matched, for the heartbeats and subscribed_topics(); a pattern whose
  // matching ran out of its budget keeps what it matched before.
  void add_regex_matches(regex_match_map matches);

  // A heartbeat. Its pattern, if any, and the members' were matched first (regexes_to_match(),
  // add_regex_matches()): what was not is matched here.
  [[nodiscard]] consumer_heartbeat_result heartbeat(consumer_heartbeat req,
                                                    const consumer_limits& limits,
                                                    const topic_lookup& topics, int64_t now);
  // OffsetCommit and OffsetFetch by a member at `member_epoch` (-1 with no member: an admin,
  // allowed while the group is empty).
  [[nodiscard]] error_code check_commit(const std::string& member_id, int32_t member_epoch) const;
  // What survives a restart (docs/formats/metadata.md, consumer_groups): the group and
  // assignment epochs, the target assignment and each member with its epoch, subscriptions and
  // partitions, so that members go on at their epochs. take_dirty() says whether any of it
  // changed since last asked.
  [[nodiscard]] std::vector<uint8_t> encode() const;
  // The group as encoded, its members' sessions starting at `now` (of `session_timeout_ms`);
  // none if `data` is not a consumer group record this broker can read.
  [[nodiscard]] static std::unique_ptr<consumer_group> decode(std::string id,
                                                              std::span<const uint8_t> data,
                                                              int32_t session_timeout_ms,
                                                              int64_t now);
  [[nodiscard]] bool take_dirty() { return std::exchange(dirty_, false); }

  // Sessions and revocations that ran out.
  void tick(int64_t now);
  [[nodiscard]] std::optional<int64_t> next_deadline() const;

 private:
  enum class member_state : uint8_t { stable, unrevoked, unreleased };
  struct member {
    std::string id;
    std::optional<std::string> instance_id;
    std::optional<std::string> rack_id;
    std::string client_id;
    std::string client_host;
    int32_t rebalance_timeout_ms = 0;
    int32_t session_timeout_ms = 0;
    std::vector<std::string> subscribed_names;
    std::optional<std::string> regex;
    std::optional<std::string> server_assignor;
    int32_t epoch = 0;
    int32_t previous_epoch = -1;
    member_state state = member_state::stable;
    member_assignment assigned;
    member_assignment pending_revocation;
    std::optional<member_assignment> last_sent;
    int64_t session_deadline = 0;
    int64_t revocation_deadline = 0;  // unrevoked only
    bool left_static = false;         // left with epoch -2: its place is kept for a while
  };

  [[nodiscard]] consumer_heartbeat_result join(consumer_heartbeat& req,
                                               const consumer_limits& limits);
  void remove_member(const std::string& member_id, int64_t now);
  [[nodiscard]] std::set<topic_uuid> subscribed_ids(const member& m,
                                                    const topic_lookup& topics) const;
  // What `pattern` matched, as last matched (matched now if it never was).
  [[nodiscard]] const regex_matches& matches_of(const std::string& pattern,
                                                const topic_lookup& topics) const;
  void refresh_metadata(const topic_lookup& topics);
  void compute_target(const topic_lookup& topics);
  void reconcile(member& m, const std::optional<member_assignment>& owned, int64_t now);
  void advance(member& m, int64_t now);
  [[nodiscard]] consumer_heartbeat_result answer(member& m, const consumer_limits& limits);

  std::string id_;
  int32_t group_epoch_ = 0;
  int32_t target_epoch_ = 0;
  int64_t empty_since_ = 0;
  std::map<std::string, member> members_;
  std::map<std::string, member_assignment> target_;
  // Partition counts of the subscribed topics when the target was computed.
  std::map<topic_uuid, int32_t> subscribed_partitions_;
  // False after a restart until the first heartbeat has read them again (without a new epoch).
  bool subscribed_partitions_known_ = true;
  bool dirty_ = false;
  // What each pattern in use matched, at a topic_lookup version: matched again (outside the
  // coordinator's lock) only once the topics change.
  mutable regex_match_map regex_cache_;
};

}  // namespace silt::coordinator
