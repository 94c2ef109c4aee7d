// The broker's claim of its object store for its cluster (cluster_marker.h), and the gate that
// keeps the rest of the broker off the store until the claim holds (object/gated_store.h).
//
// start() makes the first attempt on a thread of its own and waits for it, up to a bound. While
// the store cannot be read (it failed after its own retries), the thread tries again every
// retry interval, and the gate stays closed: the broker runs as during an outage of the store,
// serving from its WAL. The first attempt that reads a marker decides: one naming this cluster
// opens the gate; another cluster's, or an object that is not a marker, leaves it closed for good
// and the refusal callback gets the message.
//
// Owned by the broker's node. Thread-safe: a mutex guards the state. stop() (or the destructor)
// ends the thread; cancel the store first, so that an attempt in progress gives up at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "base/log.h"
#include "base/mutex.h"
#include "storage/cluster_marker.h"
#include "storage/object/gated_store.h"
#include "storage/object/object_store.h"

namespace silt::storage {

class cluster_claim {
 public:
  enum class state : uint8_t {
    pending,  // not read yet: the gate is closed, the thread tries again
    claimed,  // the marker names this cluster: the gate is open
    refused,  // the store is another cluster's, or its marker unreadable: closed for good
  };
  struct status {
    cluster_claim::state state = state::pending;
    std::string message;  // pending: the last failure; refused: why; claimed: empty
  };

  // `store` is the store itself, not `gate` (which stands in front of it for everything else);
  // both must outlive this.
  cluster_claim(object_store& store, gated_store& gate, std::string cluster_id,
                std::chrono::milliseconds retry_interval);
  ~cluster_claim();
  cluster_claim(const cluster_claim&) = delete;
  cluster_claim& operator=(const cluster_claim&) = delete;

  // Starts the thread and waits until its first attempt ends or `bound` passes (no bound: until
  // the attempt ends, which the store's own retries and timeouts bound); the status then (when
  // the bound passed first: pending, with a message saying the store has not answered). Once.
  [[nodiscard]] status start(std::optional<std::chrono::milliseconds> bound);
  [[nodiscard]] status current();
  // `callback` gets the message when an attempt after start() finds the store refused: on the
  // claim's thread, or at once on this one when that happened already. Once.
  void on_refused(std::function<void(const std::string&)> callback);
  // Ends the thread (an attempt in progress first ends). The state stays.
  void stop();

 private:
  void run();

  object_store& store_;
  gated_store& gate_;
  const std::string cluster_id_;
  const std::chrono::milliseconds retry_interval_;
  base::log_limiter failures_{std::chrono::seconds(60)};  // repeated failures, logged
  base::mutex mu_;
  std::condition_variable changed_;  // an attempt ended, or stop()
  status status_ GUARDED_BY(mu_);
  uint64_t attempts_ GUARDED_BY(mu_) = 0;  // attempts ended
  bool stopping_ GUARDED_BY(mu_) = false;
  std::function<void(const std::string&)> on_refused_ GUARDED_BY(mu_);
  // The refusal went to start()'s caller or to the callback.
  bool refusal_reported_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace silt::storage
