// This broker's membership of the cluster: it registers in the broker registry
// (metadata/broker_registry.h) when it starts, renews its lease from a thread of its own
// every heartbeat interval, and keeps the list of live brokers that Metadata and
// DescribeCluster answer with.
//
// The lease as this broker counts it starts when a heartbeat is sent, not when the database
// stored it, so it always ends before the database's: while can_acknowledge() is false the
// broker acknowledges no produce (and the metadata store refuses its commits, trims and group
// writes). A broker whose lease lapsed (the database unreachable for a session timeout, the
// process stopped) registers again, at a new broker epoch, as soon as it can.
//
// Thread-safe. No call blocks on the database except start() (before the broker serves) and
// stop().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <tl/expected.hpp>

#include "base/mutex.h"
#include "metadata/broker_registry.h"

namespace silt::cluster {

struct membership_options {
  metadata::broker_info self;
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds session_timeout{3000};
  // The caller holds the WAL's lock: a live registration of this node id from this machine
  // and WAL location is a dead process's, replaced at once.
  bool holds_wal_lock = false;
  // How long start() waits for another broker to finish taking over this node's WAL.
  std::chrono::milliseconds takeover_wait{60000};
  // Every this many heartbeats the broker reports the loads of its busiest streams (at most
  // max_loads of them) for placement by load (controller.h).
  uint32_t load_report_heartbeats = 10;
  size_t max_loads = 256;
};

using broker_list = std::vector<metadata::broker_record>;

class membership {
 public:
  // Registers (waiting at most a session timeout for a live registration of this node id to
  // lapse), waits while another broker takes this node's WAL over (a takeover started while
  // this node was dead; at most options.takeover_wait), and starts the heartbeat thread.
  [[nodiscard]] static tl::expected<std::unique_ptr<membership>, std::string> start(
      std::shared_ptr<metadata::sql::database> db, membership_options options);
  ~membership();
  membership(const membership&) = delete;
  membership& operator=(const membership&) = delete;

  // Whether this broker's lease still holds: false from when it may have lapsed in the
  // database until the broker registered again and, after that, until no takeover of its WAL
  // is under way and on_rejoin returned true.
  [[nodiscard]] bool can_acknowledge() const;
  // Called on the heartbeat thread after this broker registered again (its lease had lapsed:
  // its streams may have been taken over meanwhile) and before it acknowledges anything: true
  // once the broker follows the streams' owners again.
  void set_on_rejoin(std::function<bool()> on_rejoin);
  // Called on the heartbeat thread every options.load_report_heartbeats heartbeats: the bytes
  // each stream this broker owns took in since the last call. Their rates are reported to the
  // registry (the busiest options.max_loads).
  using ingest_source = std::function<std::unordered_map<base::stream_id, uint64_t>()>;
  void set_ingest_source(ingest_source source);
  // The live brokers by node id as of the last heartbeat, this one always among them.
  [[nodiscard]] std::shared_ptr<const broker_list> brokers() const;
  // Of those, the brokers heard from lately: each renewed its lease within the last two
  // heartbeat intervals, as of a list read within the last two. Null when this broker's list
  // is older (its own heartbeats are late). For choices a client does not undo quickly, such as
  // a preferred read replica, which librdkafka may keep for minutes when it cannot reach it.
  [[nodiscard]] std::shared_ptr<const broker_list> recently_heard() const;
  [[nodiscard]] int64_t broker_epoch() const { return epoch_.load(std::memory_order_acquire); }
  // Heartbeats sent and registrations made since start (the first included).
  [[nodiscard]] uint64_t heartbeats() const { return heartbeats_.load(std::memory_order_relaxed); }
  [[nodiscard]] uint64_t registrations() const {
    return registrations_.load(std::memory_order_relaxed);
  }

  // Every registration, live or lapsed, by node id (a database call: blocking).
  [[nodiscard]] tl::expected<broker_list, metadata::membership_error> registered() {
    return registry_->brokers();
  }

  // Records that this broker has taken in every topic change up to counter value `applied`
  // (topic_registry::refresh()): written when it or the broker epoch moved since the last
  // report (a registration starts at -1, "still opening"). A database call when it writes:
  // blocking.
  void report_topics_applied(int64_t applied);
  // What each live broker reported it has taken in, from a read of the registry that began
  // at or after `since`. One read runs at a time and callers share it: a caller finds the
  // read in flight when it arrived too early to count, waits for it and then for the next,
  // and takes a read that began after `since` as its own; so callers waiting together cost
  // one query at a time between them. A database call: blocking.
  [[nodiscard]] tl::expected<std::vector<metadata::topics_applied_by>, metadata::membership_error>
  topics_applied(std::chrono::steady_clock::time_point since) const;

  // Tells the cluster that this broker stops (the controller places nothing on it any more);
  // a database call: blocking.
  void drain();
  // Stops the heartbeats and ends the lease (a clean shutdown: the node id is free at once).
  void stop();

 private:
  membership(std::unique_ptr<metadata::broker_registry> registry, membership_options options);
  void run();
  // One heartbeat (or registration, when the lease lapsed) and a refresh of the broker list.
  void beat();
  [[nodiscard]] bool register_now(bool first);
  void refresh_list();
  // Whether a takeover of this node's WAL is under way, and by which node; nullopt when the
  // registry cannot tell.
  [[nodiscard]] std::optional<base::node_id> taken_over_by();
  // The lease as counted from a heartbeat sent at `sent`.
  void hold_lease(std::chrono::steady_clock::time_point sent);
  // Reports the loads measured since the last report, every load_report_heartbeats beats.
  void report_loads();

  std::unique_ptr<metadata::broker_registry> registry_;
  const membership_options options_;
  std::atomic<int64_t> epoch_{0};
  // steady_clock ticks until which the lease holds (0: none).
  std::atomic<int64_t> lease_until_{0};
  std::atomic<uint64_t> heartbeats_{0};
  std::atomic<uint64_t> registrations_{0};
  mutable base::mutex mu_;
  std::shared_ptr<const broker_list> brokers_ GUARDED_BY(mu_);
  std::shared_ptr<const broker_list> heard_ GUARDED_BY(mu_);  // recently_heard()
  std::chrono::steady_clock::time_point listed_at_ GUARDED_BY(mu_);
  std::function<bool()> on_rejoin_ GUARDED_BY(mu_);
  ingest_source ingest_ GUARDED_BY(mu_);
  // Heartbeat thread only: beats since the last load report, when it was, and whether it
  // reported any load (an idle broker writes its empty list once).
  uint32_t beats_since_loads_ = 0;
  std::chrono::steady_clock::time_point loads_since_ = std::chrono::steady_clock::now();
  bool reported_loads_ = true;
  bool rejoining_ = false;  // heartbeat thread only: registered again, not acknowledging yet
  bool stopping_ GUARDED_BY(mu_) = false;
  // report_topics_applied(): what was last written, at which broker epoch.
  base::mutex report_mu_;
  int64_t reported_applied_ GUARDED_BY(report_mu_) = -1;
  int64_t reported_epoch_ GUARDED_BY(report_mu_) = 0;
  // topics_applied(): held through a read; its result and when it began.
  mutable base::mutex applied_mu_;
  mutable std::vector<metadata::topics_applied_by> applied_ GUARDED_BY(applied_mu_);
  mutable std::chrono::steady_clock::time_point applied_read_at_ GUARDED_BY(applied_mu_);
  mutable bool applied_known_ GUARDED_BY(applied_mu_) = false;
  std::condition_variable wake_;
  std::thread thread_;
  // Failures logged since the last success (the first of a run, then every 20th).
  uint64_t failures_ = 0;  // heartbeat thread only
};

}  // namespace silt::cluster
