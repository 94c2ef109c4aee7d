// Topic patterns of the consumer protocol (ConsumerGroupHeartbeat's SubscribedTopicRegex):
// compiled as Kafka compiles them (RE2/J's syntax; RE2 here) and matched against whole topic
// names.
//
// RE2 matches in time linear in a name, but the factor is the pattern's program: a hostile
// pattern over a few thousand long names costs minutes of CPU. So matching never runs under the
// coordinator's lock nor on a network thread: the ConsumerGroupHeartbeat handler asks the
// coordinator which patterns the heartbeat needs matched (group_coordinator::regexes_to_match),
// matches them with match_topic_regexes() on the coordinator's matching strand (one matching at
// a time on the blocking pool, as Kafka resolves patterns on one executor thread), and hands the
// results to the heartbeat. Each matching stops once it has taken its CPU budget; a pattern it
// could not finish keeps what it matched at an earlier version of the topics, or, if it never
// matched in full, is refused.
//
// Thread-safety: free functions over values; the topic_lookup given must be usable from the
// calling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator/assignors.h"

namespace re2 {
class RE2;
}

namespace silt::coordinator {

class topic_lookup;

// The longest pattern taken (INVALID_REGULAR_EXPRESSION past it).
inline constexpr size_t max_topic_regex_bytes = 16384;
// The CPU time one heartbeat's matching may take, checked between topic names (one name's match
// may go past it: well under a second for the largest program the pattern bound and RE2's
// memory bound allow, against a name of at most 249 bytes).
inline constexpr std::chrono::milliseconds topic_regex_cpu_budget{500};

// A client's pattern compiled (check ok()), with a bound on the memory it may take and no log
// line when it does not compile (the heartbeat's answer names the reason).
[[nodiscard]] std::unique_ptr<re2::RE2> compile_topic_regex(const std::string& pattern);

// What a pattern matched.
struct regex_matches {
  // The topic_lookup version the topics were read at (the last matching tried).
  uint64_t version = 0;
  // The matching topics; none when the pattern was never matched in full within its budget.
  std::optional<std::set<topic_uuid>> ids;
  // Why the pattern does not compile; empty when it does.
  std::string error;
};
using regex_match_map = std::map<std::string, regex_matches, std::less<>>;

// Whether a heartbeat's pattern is one to match: set, not empty (no pattern) and within
// max_topic_regex_bytes (refused otherwise).
[[nodiscard]] bool matchable_topic_regex(const std::optional<std::string>& pattern);

// Matches each pattern, in order, against every topic of `topics` (read once, at the version
// read before), within `budget` of the calling thread's CPU time in all. A pattern not finished
// within it, and those after it, get no ids.
[[nodiscard]] regex_match_map match_topic_regexes(
    const std::vector<std::string>& patterns, const topic_lookup& topics,
    std::chrono::nanoseconds budget = topic_regex_cpu_budget);

}  // namespace silt::coordinator
