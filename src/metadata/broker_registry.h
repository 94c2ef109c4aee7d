// The broker registry: which brokers are members of the cluster. Each broker registers its
// advertised endpoint, rack and WAL location and holds a lease that it renews by heartbeat;
// a broker whose lease lapsed is no longer a member. Leases are kept in the database's clock
// (sql::now_ms_expression), so brokers need not agree on theirs.
//
// Every registration gets a broker epoch from a counter, unique across the cluster and
// increasing. A heartbeat names the epoch it renews: once the lease lapsed (or the node id
// registered again), the old epoch is fenced for good and the broker must register anew.
// A broker whose lease lapsed can no longer commit: the stream catalog and the group store
// check the committing node's lease in the same transaction (lease_lapsed()).
//
// Stored through sql::database; every call blocks on the database (never on a network
// thread). Thread-safe: every call takes the registry's mutex (one connection).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

#include "base/ids.h"
#include "base/mutex.h"
#include "metadata/sql.h"

namespace silt::metadata {

enum class membership_error : uint8_t {
  duplicate,  // the node id is registered with a lease that has not lapsed
  fenced,     // the lease of this epoch lapsed, or the node id registered again since
  io,         // the database failed (logged)
};

[[nodiscard]] std::string_view membership_error_name(membership_error e);

// One advertised listener of a broker: where clients of that listener reach it.
struct listener_endpoint {
  std::string name;  // the listener's name, e.g. SASL_SSL
  std::string host;
  int32_t port = 0;
  bool operator==(const listener_endpoint&) const = default;
};

// Advertised listeners as the brokers table stores them: "NAME://host:port" joined by commas
// (an IPv6 host in brackets). parse_listeners() skips an entry it cannot read.
[[nodiscard]] std::string format_listeners(const std::vector<listener_endpoint>& listeners);
[[nodiscard]] std::vector<listener_endpoint> parse_listeners(std::string_view text);

// What a broker registers.
struct broker_info {
  base::node_id node{-1};
  std::string host;  // advertised host and port of its first listener
  int32_t port = 0;
  std::string rack;                          // broker.rack; empty: none
  std::string wal_location;                  // where a survivor finds this broker's WAL
  std::string machine;                       // the machine and boot it runs on (same_machine_id())
  std::vector<listener_endpoint> listeners;  // every advertised listener (may be empty)
  bool operator==(const broker_info&) const = default;

  // Where a client that came through the listener `name` reaches this broker, as Kafka
  // advertises a broker per listener: that listener's endpoint, or the first listener's when
  // the broker has none of that name.
  [[nodiscard]] std::pair<std::string_view, int32_t> endpoint_for(std::string_view name) const {
    for (const auto& l : listeners) {
      if (l.name == name) return {l.host, l.port};
    }
    return {host, port};
  }
};

// A stream's ingest as the broker owning it measured it (bytes uploaded per second).
struct stream_load {
  base::stream_id stream{};
  uint64_t bytes_per_s = 0;
  bool operator==(const stream_load&) const = default;
};

// Loads as the brokers table stores them: "stream:bytes_per_s" joined by commas. parse_loads()
// skips what it cannot read (a row is advice for placement, never trusted for data).
[[nodiscard]] std::string format_loads(const std::vector<stream_load>& loads);
[[nodiscard]] std::vector<stream_load> parse_loads(std::string_view text);

struct broker_record {
  broker_info info;
  int64_t broker_epoch = 0;
  int64_t lease_left_ms = 0;       // until the lease lapses, in the database's clock (<= 0: lapsed)
  bool draining = false;           // stopping cleanly: handing its streams over, given none
  std::vector<stream_load> loads;  // its busiest streams, as it last reported them
  [[nodiscard]] bool live() const { return lease_left_ms > 0; }
};

// A live broker and the value of the topic change counter (topic_registry.h) up to which it
// has taken every topic change in (-1: none yet; it is still opening).
struct topics_applied_by {
  base::node_id node{-1};
  int64_t topics_applied = -1;
  bool operator==(const topics_applied_by&) const = default;
};

// A dead broker's WAL that a live broker, the holder, is taking over (cluster/controller.h): the
// holder takes the dead broker's streams, appends what that WAL holds of them beyond their
// committed ends to its own WAL, and then ends the takeover. While a takeover of its WAL is
// under way, a broker of that node id acknowledges nothing and does not open its WAL.
struct wal_takeover {
  base::node_id node{-1};    // whose WAL
  base::node_id holder{-1};  // the live broker taking it over
  std::string wal_location;  // as the dead broker registered it
  bool operator==(const wal_takeover&) const = default;
};

// This machine and boot (the kernel's boot id): a registration made from the same machine
// and boot by a process that no longer holds the broker's WAL lock is known to be dead.
[[nodiscard]] std::string same_machine_id();

class broker_registry {
 public:
  [[nodiscard]] static tl::expected<std::unique_ptr<broker_registry>, std::string> open(
      std::shared_ptr<sql::database> db);
  ~broker_registry();
  broker_registry(const broker_registry&) = delete;
  broker_registry& operator=(const broker_registry&) = delete;

  // Registers `info` with a lease of `session_timeout` and returns its broker epoch. A node id
  // whose lease has not lapsed is refused (`duplicate`), unless `replace_own` and that
  // registration came from the same machine and WAL location: the caller holds the WAL's
  // lock, so the process that registered it is gone.
  [[nodiscard]] tl::expected<int64_t, membership_error> register_broker(
      const broker_info& info, std::chrono::milliseconds session_timeout, bool replace_own);
  // Renews the lease of (node, epoch) for `session_timeout` from now; fenced when that lease
  // lapsed or the node registered again.
  [[nodiscard]] tl::expected<void, membership_error> heartbeat(
      base::node_id node, int64_t broker_epoch, std::chrono::milliseconds session_timeout);
  // Records the loads (node, epoch) measured for its busiest streams, replacing the last ones.
  [[nodiscard]] tl::expected<void, membership_error> report_loads(
      base::node_id node, int64_t broker_epoch, const std::vector<stream_load>& loads);
  // Records that (node, epoch) has taken in every topic change up to counter value `applied`.
  // A registration starts at -1.
  [[nodiscard]] tl::expected<void, membership_error> report_topics_applied(base::node_id node,
                                                                           int64_t broker_epoch,
                                                                           int64_t applied);
  // The live brokers with what each reported it has taken in, by node id.
  [[nodiscard]] tl::expected<std::vector<topics_applied_by>, membership_error> topics_applied();
  // Marks (node, epoch) as stopping cleanly: the controller places nothing on it any more.
  [[nodiscard]] tl::expected<void, membership_error> drain(base::node_id node,
                                                           int64_t broker_epoch);
  // Ends the lease of (node, epoch) now (a clean shutdown): the node id is free at once.
  [[nodiscard]] tl::expected<void, membership_error> unregister(base::node_id node,
                                                                int64_t broker_epoch);
  // Every registration, live or not, by node id.
  [[nodiscard]] tl::expected<std::vector<broker_record>, membership_error> brokers();
  // Claims or renews the controller lease for (node, broker_epoch) for `lease` from now: held
  // when no other node holds a live one, and only while the node's own broker lease is live.
  // Returns the controller epoch, which moves whenever another node takes the lease; fenced
  // when another node holds it (or this node's broker lease lapsed).
  [[nodiscard]] tl::expected<int64_t, membership_error> claim_controller(
      base::node_id node, int64_t broker_epoch, std::chrono::milliseconds lease);
  // Gives the controller lease up now, if (node, epoch) holds it.
  void release_controller(base::node_id node, int64_t epoch);
  // The node holding a live controller lease, or -1.
  [[nodiscard]] tl::expected<base::node_id, membership_error> controller();

  // Every takeover under way, by node id.
  [[nodiscard]] tl::expected<std::vector<wal_takeover>, membership_error> takeovers();
  // The controller's: in one transaction, under its lease (controller_holds(); fenced when not
  // held), gives each node's takeover to the holder named (`wal_location` is ignored). A
  // takeover not under way yet starts only if the node's lease has lapsed (it is skipped
  // otherwise: the broker is back), with the WAL location it registered; registrations and
  // this transaction are serialized, so a broker that registered again sees every takeover of
  // its WAL started before. Returns how many rows were written.
  [[nodiscard]] tl::expected<size_t, membership_error> place_takeovers(
      base::node_id controller, int64_t controller_epoch, const std::vector<wal_takeover>& rows);

 private:
  broker_registry(std::shared_ptr<sql::database> db, std::unique_ptr<sql::connection> c);

  base::mutex mu_;
  std::shared_ptr<sql::database> db_;
  std::unique_ptr<sql::connection> c_ GUARDED_BY(mu_);
  const std::string now_;  // the database's clock in ms, as SQL
};

// Whether `node` has a registration whose lease has lapsed, read on `c` inside the caller's
// transaction. A node that never registered (a store used without the registry, as in tests
// of one component) has no lease to lapse.
[[nodiscard]] tl::expected<bool, std::string> lease_lapsed(sql::connection& c, base::node_id node);

// Whether `node` may be given streams: its lease is live and it is not stopping (drain()). A
// node that never registered (a store used without the registry) may. Read on `c` inside the
// caller's transaction; on PostgreSQL the row stays share-locked until it ends, so that a
// drain() waits for a handover that found the node open and is then seen by the node.
[[nodiscard]] tl::expected<bool, std::string> takes_streams(sql::connection& c, base::node_id node);

// Whether `holder` holds the takeover of `node`'s WAL, read on `c` inside the caller's
// transaction.
[[nodiscard]] tl::expected<bool, std::string> takeover_held(sql::connection& c, base::node_id node,
                                                            base::node_id holder);

// Whether `node` holds the controller lease at controller epoch `epoch` now, read on `c` inside
// the caller's transaction.
[[nodiscard]] tl::expected<bool, std::string> controller_holds(sql::connection& c,
                                                               base::node_id node, int64_t epoch);

}  // namespace silt::metadata
