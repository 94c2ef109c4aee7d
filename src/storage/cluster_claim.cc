#include "storage/cluster_claim.h"

#include <string>
#include <utility>

#include "base/sched.h"

namespace silt::storage {

cluster_claim::cluster_claim(object_store& store, gated_store& gate, std::string cluster_id,
                             std::chrono::milliseconds retry_interval)
    : store_(store),
      gate_(gate),
      cluster_id_(std::move(cluster_id)),
      retry_interval_(retry_interval) {}

cluster_claim::~cluster_claim() {
  stop();
}

cluster_claim::status cluster_claim::start(std::optional<std::chrono::milliseconds> bound) {
  thread_ = std::thread([this] {
    base::set_thread_name("silt-claim");
    run();
  });
  base::unique_lock lock(mu_);
  const auto tried = [&]() REQUIRES(mu_) { return attempts_ > 0; };
  if (bound) {
    lock.wait_for(changed_, *bound, tried);
  } else {
    lock.wait(changed_, tried);
  }
  if (status_.state == state::refused) refusal_reported_ = true;
  if (attempts_ == 0) {
    // The first attempt is still in the store's retries: say so rather than nothing.
    return {state::pending,
            "the object store " + store_.describe() + " has not answered the read of its " +
                "cluster marker " + std::string(cluster_marker_key) + " within " +
                (bound->count() % 1000 == 0 ? std::to_string(bound->count() / 1000) + " s"
                                            : std::to_string(bound->count()) + " ms")};
  }
  return status_;
}

cluster_claim::status cluster_claim::current() {
  base::lock_guard lock(mu_);
  return status_;
}

void cluster_claim::on_refused(std::function<void(const std::string&)> callback) {
  std::string message;
  {
    base::lock_guard lock(mu_);
    if (status_.state != state::refused || refusal_reported_) {
      on_refused_ = std::move(callback);
      return;
    }
    refusal_reported_ = true;
    message = status_.message;
  }
  callback(message);
}

void cluster_claim::stop() {
  {
    base::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void cluster_claim::run() {
  const std::string where = store_.describe();
  for (uint64_t attempt = 1;; ++attempt) {
    auto claimed = claim_cluster_marker(store_, cluster_id_);
    const bool refused = !claimed && claimed.error().error != cluster_marker_error::unreadable;
    const std::string message =
        claimed ? std::string() : cluster_marker_message(claimed.error(), where, cluster_id_);
    if (claimed) gate_.open();
    std::function<void(const std::string&)> report;
    {
      base::lock_guard lock(mu_);
      attempts_ = attempt;
      status_ = {claimed ? state::claimed : refused ? state::refused : state::pending, message};
      if (refused && on_refused_ && !refusal_reported_) {
        refusal_reported_ = true;
        report = std::move(on_refused_);
      }
    }
    changed_.notify_all();
    if (claimed) {
      SILT_LOG(info, "silt: the object store %s is this cluster's (%s): its marker %s %s",
               where.c_str(), cluster_id_.c_str(), std::string(cluster_marker_key).c_str(),
               *claimed == cluster_marker_claim::created ? "was written now" : "names it");
      if (attempt > 1) SILT_LOG(info, "silt: the object store is used from now on");
      return;
    }
    if (refused) {
      if (report) report(message);
      return;
    }
    // The first failure is start()'s to report.
    uint64_t left_out = 0;
    if (attempt > 1 && failures_.allow(left_out)) {
      SILT_LOG(warn,
               "silt: %s; still nothing is read from or written to the store (tried every %g s, "
               "%llu similar failure(s) since the last line)",
               message.c_str(), std::chrono::duration<double>(retry_interval_).count(),
               static_cast<unsigned long long>(left_out));
    }
    base::unique_lock lock(mu_);
    if (lock.wait_for(changed_, retry_interval_, [&]() REQUIRES(mu_) { return stopping_; })) {
      return;
    }
  }
}

}  // namespace silt::storage
