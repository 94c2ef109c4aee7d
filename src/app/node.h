// The broker process's node: opens storage and metadata from the configuration and wires them
// together (membership, controller, group coordinator, the follower of the cluster and the
// callbacks between them), runs the background timers, and owns the context handlers share and
// the dispatcher (handlers/dispatch.h) that serves every request the network server hands it.
// Owned by main(). Lifecycle: open(), start_background(), serve (the dispatcher's handle() from
// many connections at once), hand_over_partitions() and begin_shutdown() at a clean shutdown,
// then close() after the server stopped.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <tl/expected.hpp>

#include "cluster/controller.h"
#include "cluster/follower.h"
#include "cluster/membership.h"
#include "config/config.h"
#include "coordinator/coordinator.h"
#include "handlers/context.h"
#include "handlers/dispatch.h"
#include "metadata/credential_store.h"
#include "metadata/group_store.h"
#include "storage/cluster_claim.h"
#include "storage/object/gated_store.h"
#include "storage/object/metered_store.h"
#include "storage/object/object_store.h"

namespace silt::app {

class node {
 public:
  // Creates the data directory, opens the metadata store, the object store (and claims it for
  // the cluster: another cluster's store is refused, see storage/cluster_claim.h), the topic
  // registry, the stream store (replaying the WAL) and the credential store.
  [[nodiscard]] static tl::expected<std::unique_ptr<node>, std::string> open(
      const config::broker_config& config);
  ~node();
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  // What the network server calls for each request.
  [[nodiscard]] handlers::dispatcher& handler() { return *dispatcher_; }

  // Starts the group coordinator's deadline loop, snapshots producer state every `period` on
  // the blocking pool, and runs the follow loop (cluster::follower::follow()) every tenth of a
  // second (at most a heartbeat interval) on a thread of its own, until close().
  void start_background(std::chrono::milliseconds period);
  // The first step of a clean shutdown, before begin_shutdown() (blocking, not on a network
  // thread): in a cluster, gives up the controller role and hands every partition this broker
  // owns to the other live brokers, so that none waits for this one to come back. Clients are
  // served meanwhile; consumers it serves as a preferred read replica are sent to the owners,
  // within a second.
  void hand_over_partitions();
  // Wakes long polls and makes new ones return at once (shutdown has begun).
  void begin_shutdown();
  // Stores producer state and closes the stream store (pending appends finish, the WAL is
  // synced). Call after the server stopped.
  void close();
  // `callback` gets the message if the object store, which could not be read at open(), turns
  // out to be another cluster's (from the claim's thread; at once if that happened already): the
  // broker has then written nothing to it, and must stop.
  void on_store_refused(std::function<void(const std::string&)> callback);

  [[nodiscard]] handlers::context& ctx() { return *ctx_; }
  // The users' SCRAM credentials, which the listeners' SCRAM mechanisms look users up in.
  [[nodiscard]] const metadata::credential_store& credentials() const { return *credentials_; }
  // The object store's calls, errors and latencies (the metrics endpoint).
  [[nodiscard]] const storage::metered_store& object_metrics() const { return *metered_objects_; }

 private:
  // Takes in the ACL changes other brokers made (the follow loop's thread).
  void follow_acls();
  // Takes in the client quota changes other brokers made (the follow loop's thread).
  void follow_quotas();
  explicit node(const config::broker_config& config);

  config::broker_config config_;
  int wal_lock_fd_ = -1;  // holds the WAL's lock (lock_wal) while the broker lives
  std::unique_ptr<cluster::membership> membership_;
  std::unique_ptr<cluster::controller> controller_;
  // The object store under SILT_TEST_STORE_FAULTS' faulty_store (null without it); objects_
  // refers to it, so it is declared first and destroyed last.
  std::unique_ptr<storage::object_store> faulty_inner_;
  // The gate (gated_store) in front of the metered store (metered_store) in front of the store:
  // everything but the claim goes through the gate, which the claim opens.
  std::unique_ptr<storage::object_store> objects_;
  storage::gated_store* gated_objects_ = nullptr;      // objects_
  storage::metered_store* metered_objects_ = nullptr;  // behind the gate
  std::unique_ptr<storage::cluster_claim> claim_;      // of the store, for the cluster
  std::string metadata_description_;                   // the metadata store, for messages
  std::unique_ptr<storage::stream_store> store_;
  std::unique_ptr<metadata::topic_registry> registry_;
  std::unique_ptr<metadata::credential_store> credentials_;
  std::unique_ptr<handlers::producer_state> producers_;
  boost::asio::thread_pool blocking_;
  // The follow loop (topic changes and owners, every 100 ms: cluster/follower.h) runs on a
  // thread of its own, so that blocking work of requests never leaves this broker's view of
  // owners behind; releases and takeovers run on the follower's own threads, so that neither
  // holds the loop up.
  boost::asio::thread_pool follow_{1};
  std::unique_ptr<metadata::group_store> group_store_;
  std::unique_ptr<metadata::acl_store> acl_store_;  // with authorizer.class.name only
  std::unique_ptr<metadata::quota_store> quota_store_;
  std::unique_ptr<coordinator::group_coordinator> groups_;
  std::unique_ptr<handlers::context> ctx_;
  std::unique_ptr<handlers::dispatcher> dispatcher_;
  std::unique_ptr<cluster::follower> follower_;
  std::unique_ptr<boost::asio::steady_timer> snapshot_timer_;
  std::unique_ptr<boost::asio::steady_timer> topics_timer_;
  std::atomic<bool> closed_{false};
};

}  // namespace silt::app
