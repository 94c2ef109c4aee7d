// The io_contexts that serve the network, and the order in which they stop.
//
// With one network thread, everything runs on the main io_context. With more, each thread runs
// an io_context of its own and the server deals connections to them in turn, so that a
// connection's work stays on one thread and no thread wakes another to hand it over (with one
// io_context shared by all threads, that hand-off cost more CPU than the requests at 10,000
// partitions). The main io_context keeps the listeners, the server's stop state, signals and
// timers.
//
// Stopping: objects of one context refer to objects of another (a connection on a worker
// belongs to the server on the main context, whose state refers to the connection), so no
// context may be stopped with handlers pending, or destroying it would destroy objects whose
// sockets live on a context already gone. finish() lets every context run dry instead: the
// workers first (their connections closed by the server's stop()), then the main one. If that
// takes longer than the grace period, the contexts are stopped; a warning says so.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "base/mutex.h"

namespace silt::net {

class io_pool {
 public:
  // `threads` network threads: the caller's (running the main context) and, when more than one,
  // one per worker context.
  explicit io_pool(uint32_t threads);
  ~io_pool();
  io_pool(const io_pool&) = delete;
  io_pool& operator=(const io_pool&) = delete;

  [[nodiscard]] boost::asio::io_context& main() { return main_; }
  // The contexts connections are dealt to; empty with one network thread (they run on main()).
  [[nodiscard]] std::vector<boost::asio::io_context*> workers() const;

  // Runs the main context on the calling thread and each worker on a thread of its own (each
  // thread calls `on_thread` first), until all have run dry after finish(); then joins them.
  void run(const std::function<void()>& on_thread);

  // Lets the contexts run dry, workers first; after `grace` whatever is still running is
  // stopped. Call once, from any thread, after the server's stop() has completed.
  void finish(std::chrono::milliseconds grace);

 private:
  using guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;

  void watch(std::chrono::milliseconds grace);

  boost::asio::io_context main_;
  std::vector<std::unique_ptr<boost::asio::io_context>> workers_;
  // Keep each context running while it has nothing to do (a worker with no connection yet, the
  // main context between signals); released by finish().
  std::optional<guard> main_guard_;
  std::vector<guard> worker_guards_;
  std::vector<std::thread> threads_;
  std::thread watchdog_;

  base::mutex mu_;
  std::condition_variable cv_;
  uint32_t workers_done_ GUARDED_BY(mu_) = 0;
  bool main_done_ GUARDED_BY(mu_) = false;
};

}  // namespace silt::net
