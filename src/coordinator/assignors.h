// The server-side partition assignors of Kafka's consumer group protocol (KIP-848): given the
// members of a group, what each subscribes to and what each holds in the current target
// assignment, they compute the next target assignment. The coordinator picks one by the name a
// member asks for (`group.remote.assignor`) or the broker's default, as Apache Kafka's
// GroupCoordinator does.
//
// - "uniform" (Kafka's UniformAssignor, the default): balances the number of partitions per
//   member and is sticky. When every member subscribes to the same topics, the homogeneous
//   builder gives each member its share (counts differ by at most one) and moves only what a
//   member holds above its share. Otherwise the heterogeneous builder keeps every partition a
//   member still subscribes to, hands out the free ones to the least loaded subscribers (topics
//   with the most partitions per subscriber first) and then moves partitions until no single
//   move from one subscriber of a topic to another would help, Kafka's stopping point. (Kafka
//   moves topic by topic for at most 16 rounds; here the least loaded member pulls from the
//   most loaded one that holds one of its topics, which moves less and follows chains; see
//   `balancer` in assignors.cc.) Overlapping subscriptions can still leave it short of the best
//   balance when only a chain of moves that do not each help would reach it, as in Kafka.
// - "range" (Kafka's RangeAssignor since KAFKA-16944): each topic's partitions in contiguous
//   ranges over its subscribers, static members first by instance id and then the others by
//   member id, the first ones getting one extra partition when the count does not divide.
//   Not sticky beyond that order (Kafka gave up stickiness there to keep co-partitioning), so
//   `current` is not read.
//
// Neither reads `rack`: Kafka took rack awareness out of its server-side assignors
// (KAFKA-16694); the field is there so that an assignor that uses it needs no new interface.
//
// The functions are pure: no state, no locks, safe from any thread. The same input (whatever
// the order of `members`) gives the same output. Member ids must be unique.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace silt::coordinator {

using topic_uuid = std::array<uint8_t, 16>;

// A member's view for the assignor: what it subscribes to and what it holds in the current
// target assignment (for stickiness).
struct assignor_member {
  std::string member_id;
  std::optional<std::string> instance_id;
  std::optional<std::string> rack;
  std::set<topic_uuid> subscribed;                  // topics it subscribes to that exist
  std::map<topic_uuid, std::set<int32_t>> current;  // its current target assignment
};

// Topic -> partitions; a topic is present only with at least one partition.
using member_assignment = std::map<topic_uuid, std::set<int32_t>>;

// Every member of `members` gets an entry (possibly empty). `partitions` gives each existing
// topic's partition count (topics not in it do not exist and are ignored, in `subscribed` and
// in `current`). Every partition of a topic some member subscribes to goes to exactly one of
// its subscribers. Entries of `current` that cannot stand (a topic the member no longer
// subscribes to, a partition out of range, a partition another member also claims: the member
// first by member id keeps it) are dropped.
[[nodiscard]] std::map<std::string, member_assignment> assign_uniform(
    const std::vector<assignor_member>& members, const std::map<topic_uuid, int32_t>& partitions);
[[nodiscard]] std::map<std::string, member_assignment> assign_range(
    const std::vector<assignor_member>& members, const std::map<topic_uuid, int32_t>& partitions);

// "uniform" or "range" -> the function, or null for an unknown name.
using assignor_fn = std::map<std::string, member_assignment> (*)(
    const std::vector<assignor_member>&, const std::map<topic_uuid, int32_t>&);
[[nodiscard]] assignor_fn find_assignor(std::string_view name);

}  // namespace silt::coordinator
