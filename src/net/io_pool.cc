#include "net/io_pool.h"

#include <cstdio>

#include "base/log.h"
#include "base/sched.h"

namespace silt::net {

namespace asio = boost::asio;

io_pool::io_pool(uint32_t threads) : main_(1) {
  main_guard_.emplace(asio::make_work_guard(main_));
  if (threads > 1) {
    for (uint32_t i = 0; i < threads; ++i) {
      workers_.push_back(std::make_unique<asio::io_context>(1));
      worker_guards_.push_back(asio::make_work_guard(*workers_.back()));
    }
  }
}

io_pool::~io_pool() {
  if (watchdog_.joinable()) watchdog_.join();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

std::vector<asio::io_context*> io_pool::workers() const {
  std::vector<asio::io_context*> out;
  out.reserve(workers_.size());
  for (const auto& w : workers_) out.push_back(w.get());
  return out;
}

void io_pool::run(const std::function<void()>& on_thread) {
  threads_.reserve(workers_.size());
  for (auto& w : workers_) {
    threads_.emplace_back([this, ctx = w.get(), &on_thread, n = threads_.size()] {
      base::set_thread_name("silt-net-" + std::to_string(n));
      on_thread();
      ctx->run();
      base::lock_guard lock(mu_);
      ++workers_done_;
      cv_.notify_all();
    });
  }
  on_thread();
  main_.run();
  {
    base::lock_guard lock(mu_);
    main_done_ = true;
    cv_.notify_all();
  }
  for (auto& t : threads_) t.join();
  threads_.clear();
  if (watchdog_.joinable()) watchdog_.join();
}

void io_pool::finish(std::chrono::milliseconds grace) {
  // Releasing a guard only counts the work down (thread-safe); each guard is touched here only.
  worker_guards_.clear();
  watchdog_ = std::thread([this, grace] {
    base::set_thread_name("silt-net-drain");
    watch(grace);
  });
}

void io_pool::watch(std::chrono::milliseconds grace) {
  bool workers_done = false;
  {
    base::unique_lock lock(mu_);
    workers_done =
        lock.wait_for(cv_, grace, [&]() REQUIRES(mu_) { return workers_done_ == workers_.size(); });
  }
  if (!workers_done) {
    SILT_LOG(warn, "silt: network threads still busy after %lld ms; stopping them",
             static_cast<long long>(grace.count()));
    for (auto& w : workers_) w->stop();
  }
  // The workers are done: what they posted to the main context (connections leaving the
  // server) runs, then the main context runs dry too.
  main_guard_.reset();
  bool main_done = false;
  {
    base::unique_lock lock(mu_);
    main_done = lock.wait_for(cv_, grace, [&]() REQUIRES(mu_) { return main_done_; });
  }
  if (!main_done) {
    SILT_LOG(warn, "silt: the main network thread still busy after %lld ms; stopping it",
             static_cast<long long>(grace.count()));
    main_.stop();
  }
}

}  // namespace silt::net
