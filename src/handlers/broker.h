// The broker: opens storage and metadata from the configuration, and serves every request
// the network server hands it by decoding it, running the API's handler and encoding the
// response. Owns the context handlers share. Lifecycle: open(), serve (handle() from many
// connections at once), then close() after the server stopped.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <tl/expected.hpp>

#include "cluster/controller.h"
#include "cluster/membership.h"
#include "config/config.h"
#include "coordinator/coordinator.h"
#include "handlers/context.h"
#include "metadata/group_store.h"
#include "net/server.h"
#include "storage/object/metered_store.h"
#include "storage/object/object_store.h"

namespace silt::handlers {

class broker final : public net::request_handler {
 public:
  // Creates the data directory, opens the object store, the stream store (replaying the
  // WAL) and the topic registry.
  [[nodiscard]] static tl::expected<std::unique_ptr<broker>, std::string> open(
      const config::broker_config& config);
  ~broker() override;
  broker(const broker&) = delete;
  broker& operator=(const broker&) = delete;

  boost::asio::awaitable<net::response> handle(net::request req) override;

  // Snapshots producer state every `period` on the blocking pool until close().
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

  [[nodiscard]] context& ctx() { return *ctx_; }
  // The object store's calls, errors and latencies (the metrics endpoint).
  [[nodiscard]] const storage::metered_store& object_metrics() const { return *metered_objects_; }

 private:
  explicit broker(const config::broker_config& config);

  config::broker_config config_;
  int wal_lock_fd_ = -1;  // holds the WAL's lock (lock_wal) while the broker lives
  std::unique_ptr<cluster::membership> membership_;
  std::unique_ptr<cluster::controller> controller_;
  // The object store under SILT_TEST_STORE_FAULTS' faulty_store (null without it); objects_
  // refers to it, so it is declared first and destroyed last.
  std::unique_ptr<storage::object_store> faulty_inner_;
  std::unique_ptr<storage::object_store> objects_;
  storage::metered_store* metered_objects_ = nullptr;  // objects_, as its metering sees it
  std::unique_ptr<storage::stream_store> store_;
  std::unique_ptr<metadata::topic_registry> registry_;
  std::unique_ptr<producer_state> producers_;
  boost::asio::thread_pool blocking_;
  // The follow loop (topic changes and owners, every 100 ms) runs on a thread of its own, so
  // that blocking work of requests never leaves this broker's view of owners behind; releases
  // and takeovers run on `moves_`, one of each at a time, so that neither holds the loop up
  // (a release waits for uploads, a takeover reads a whole WAL).
  boost::asio::thread_pool follow_{1};
  boost::asio::thread_pool moves_{2};
  std::unique_ptr<metadata::group_store> group_store_;
  std::unique_ptr<coordinator::group_coordinator> groups_;
  std::unique_ptr<context> ctx_;
  std::unique_ptr<boost::asio::steady_timer> snapshot_timer_;
  std::unique_ptr<boost::asio::steady_timer> topics_timer_;
  // Takes in the topic changes other brokers made, then follows ownership (`follow_`).
  void refresh_topics();
  // The first half: takes in the topic changes, then reports to the broker registry up to
  // which change it did, so that admin calls on other brokers answer once this one serves
  // their changes (context::agree()).
  void follow_topics();
  // Takes in streams handed to this broker, takes streams placed on it that nobody owns, and
  // starts handing over those placed elsewhere (on `moves_`, unless a release runs).
  void follow_owners();
  // hand_over_partitions() once the broker is draining: the handovers themselves.
  void hand_over_owned();
  // Hands each stream of `to` to its node: prepare_release(), producer state stored, then
  // handover(). Returns how many were handed over.
  tl::expected<size_t, storage::stream_error> release(
      const std::map<base::stream_id, base::node_id>& to);
  // Runs the takeovers of dead brokers' WALs this broker holds (stream_store::take_over()) on
  // `moves_`, one run at a time; called by the controller thread each round.
  void take_over(const std::vector<metadata::wal_takeover>& takeovers);
  // Takes the coordinator shards placed on this broker and drops those placed elsewhere or
  // taken by another broker; notes where each is coordinated (controller thread, each round).
  void follow_shards(const std::vector<metadata::shard_state>& shards);
  std::vector<base::stream_id> unsettled_;  // learned streams not taken yet (refresh_topics)
  // Since when unsettled_ has not been empty (follow_topics()).
  std::optional<std::chrono::steady_clock::time_point> unsettled_since_;
  std::atomic<bool> taking_over_{false};
  std::atomic<bool> releasing_{false};  // a release runs (follow_owners(), hand_over_owned())
  uint64_t takeover_failures_ = 0;      // in a row (the takeover run only)
  std::atomic<bool> closed_{false};
};

// Encodes a response with the header version its request calls for (size prefix included).
// Record data of `zero_copy_threshold` bytes or more is referenced, not copied.
template <typename Resp>
[[nodiscard]] net::response encode_response(const protocol::parsed_request_header& h, const Resp& r,
                                            size_t zero_copy_threshold = SIZE_MAX);

}  // namespace silt::handlers
