#include "cluster/membership.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "base/log.h"
#include "base/sched.h"

namespace silt::cluster {

namespace {

using clock = std::chrono::steady_clock;

int64_t ticks(clock::time_point t) {
  return t.time_since_epoch().count();
}

std::string describe(const metadata::broker_info& b) {
  return "node " + std::to_string(b.node.value()) + " (" + b.host + ":" + std::to_string(b.port) +
         ")";
}

}  // namespace

membership::membership(std::unique_ptr<metadata::broker_registry> registry,
                       membership_options options)
    : registry_(std::move(registry)), options_(std::move(options)) {}

membership::~membership() {
  stop();
}

tl::expected<std::unique_ptr<membership>, std::string> membership::start(
    std::shared_ptr<metadata::sql::database> db, membership_options options) {
  auto registry = metadata::broker_registry::open(std::move(db));
  if (!registry) return tl::make_unexpected(registry.error());
  std::unique_ptr<membership> m(new membership(std::move(*registry), std::move(options)));
  const auto& o = m->options_;
  // A registration of this node id whose lease is live belongs to another broker, or to this
  // one's previous process that stopped without ending it: wait for it to lapse.
  const auto deadline = clock::now() + o.session_timeout + o.heartbeat_interval;
  metadata::membership_error last = metadata::membership_error::io;
  bool said = false;
  for (;;) {
    const auto sent = clock::now();
    auto e = m->registry_->register_broker(o.self, o.session_timeout, o.holds_wal_lock);
    if (e) {
      m->epoch_.store(*e, std::memory_order_release);
      m->lease_until_.store(ticks(sent + o.session_timeout - o.session_timeout / 20),
                            std::memory_order_release);
      m->registrations_.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    last = e.error();
    if (clock::now() >= deadline) {
      return tl::make_unexpected("cannot register " + describe(o.self) + " in the cluster: " +
                                 std::string(metadata::membership_error_name(last)));
    }
    if (!said && last == metadata::membership_error::duplicate) {
      SILT_LOG(info,
               "silt: node.id %d is registered with a live lease; waiting up to %lld ms for "
               "it to lapse",
               o.self.node.value(), static_cast<long long>(o.session_timeout.count()));
      said = true;
    }
    std::this_thread::sleep_for(std::min(o.heartbeat_interval, std::chrono::milliseconds(200)));
  }
  // A takeover of this node's WAL started while it was dead: the WAL is another broker's to
  // read until it ends. The lease is renewed meanwhile (no new takeover starts while it holds).
  bool waited = false;
  const auto give_up = clock::now() + o.takeover_wait;
  for (;;) {
    auto by = m->taken_over_by();
    if (by && *by == base::node_id(-1)) break;
    if (clock::now() >= give_up) {
      return tl::make_unexpected(
          "another broker is taking over the WAL of node " + std::to_string(o.self.node.value()) +
          (by ? " (node " + std::to_string(by->value()) + ")" : std::string()) +
          " and has not finished; start this broker again once it has");
    }
    if (!waited && by) {
      SILT_LOG(info,
               "silt: cluster: node %d is taking over this broker's WAL (node %d died); "
               "waiting for it to finish",
               by->value(), o.self.node.value());
      waited = true;
    }
    std::this_thread::sleep_for(std::min(o.heartbeat_interval, std::chrono::milliseconds(100)));
    const auto sent = clock::now();
    if (m->registry_->heartbeat(o.self.node, m->epoch_.load(), o.session_timeout)) {
      m->hold_lease(sent);
    }
  }
  m->refresh_list();
  m->thread_ = std::thread([p = m.get()] {
    base::set_thread_name("silt-membership");
    p->run();
  });
  return m;
}

std::optional<base::node_id> membership::taken_over_by() {
  auto all = registry_->takeovers();
  if (!all) return std::nullopt;
  for (const auto& t : *all) {
    if (t.node == options_.self.node) return t.holder;
  }
  return base::node_id(-1);
}

void membership::hold_lease(clock::time_point sent) {
  lease_until_.store(ticks(sent + options_.session_timeout - options_.session_timeout / 20),
                     std::memory_order_release);
}

void membership::set_on_rejoin(std::function<bool()> on_rejoin) {
  base::lock_guard lock(mu_);
  on_rejoin_ = std::move(on_rejoin);
}

bool membership::can_acknowledge() const {
  return ticks(clock::now()) < lease_until_.load(std::memory_order_acquire);
}

void membership::set_ingest_source(ingest_source source) {
  base::lock_guard lock(mu_);
  ingest_ = std::move(source);
}

void membership::report_loads() {
  if (++beats_since_loads_ < options_.load_report_heartbeats) return;
  beats_since_loads_ = 0;
  ingest_source source;
  {
    base::lock_guard lock(mu_);
    source = ingest_;
  }
  if (!source) return;
  const auto now = clock::now();
  const auto ms = std::max<int64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now - loads_since_).count(), 1);
  loads_since_ = now;
  std::vector<metadata::stream_load> loads;
  for (const auto& [stream, bytes] : source()) {
    loads.push_back({stream, bytes * 1000 / static_cast<uint64_t>(ms)});
  }
  if (loads.empty() && !reported_loads_) return;
  const size_t keep = std::min(loads.size(), options_.max_loads);
  std::partial_sort(loads.begin(), loads.begin() + static_cast<ptrdiff_t>(keep), loads.end(),
                    [](const auto& a, const auto& b) { return a.bytes_per_s > b.bytes_per_s; });
  loads.resize(keep);
  // A failure is the heartbeat's to report; the next report replaces these anyway.
  if (registry_->report_loads(options_.self.node, epoch_.load(std::memory_order_acquire), loads)) {
    reported_loads_ = !loads.empty();
  }
}

std::shared_ptr<const broker_list> membership::brokers() const {
  base::lock_guard lock(mu_);
  return brokers_;
}

std::shared_ptr<const broker_list> membership::recently_heard() const {
  base::lock_guard lock(mu_);
  if (clock::now() - listed_at_ > 2 * options_.heartbeat_interval) return nullptr;
  return heard_;
}

void membership::run() {
  auto next = clock::now() + options_.heartbeat_interval;
  for (;;) {
    {
      base::unique_lock lock(mu_);
      while (!stopping_ && clock::now() < next) lock.wait_until(wake_, next);
      if (stopping_) return;
    }
    next = clock::now() + options_.heartbeat_interval;
    beat();
  }
}

void membership::beat() {
  const auto sent = clock::now();
  const int64_t epoch = epoch_.load(std::memory_order_acquire);
  auto r = registry_->heartbeat(options_.self.node, epoch, options_.session_timeout);
  if (r && rejoining_) {
    // Registered again after a lapse: another broker may be taking this one's WAL and
    // streams over. Nothing is acknowledged until that ended and the broker follows the
    // streams' owners again.
    auto by = taken_over_by();
    std::function<bool()> rejoin;
    {
      base::lock_guard lock(mu_);
      rejoin = on_rejoin_;
    }
    if (by && *by == base::node_id(-1) && (!rejoin || rejoin())) {
      rejoining_ = false;
      SILT_LOG(info, "silt: cluster: acknowledging again at broker epoch %lld",
               static_cast<long long>(epoch));
    }
  }
  if (r) {
    if (!rejoining_) hold_lease(sent);
    heartbeats_.fetch_add(1, std::memory_order_relaxed);
    report_loads();
    if (failures_ > 0) {
      SILT_LOG(info, "silt: cluster: heartbeats succeed again after %llu failure(s)",
               static_cast<unsigned long long>(failures_));
    }
    failures_ = 0;
  } else if (r.error() == metadata::membership_error::fenced) {
    // The lease lapsed in the database (or the node id registered again): this epoch is over.
    lease_until_.store(0, std::memory_order_release);
    SILT_LOG(warn,
             "silt: cluster: the lease of broker epoch %lld lapsed; acknowledging nothing "
             "until registered again",
             static_cast<long long>(epoch));
    (void)register_now(false);
  } else {
    if (failures_ % 20 == 0) {
      SILT_LOG(warn,
               "silt: cluster: heartbeat to the metadata store failed (%s); the lease holds "
               "for at most %lld ms after the last success",
               std::string(metadata::membership_error_name(r.error())).c_str(),
               static_cast<long long>(options_.session_timeout.count()));
    }
    ++failures_;
  }
  refresh_list();
}

bool membership::register_now(bool first) {
  const auto sent = clock::now();
  auto e =
      registry_->register_broker(options_.self, options_.session_timeout, options_.holds_wal_lock);
  if (!e) {
    if (failures_ % 20 == 0) {
      SILT_LOG(warn, "silt: cluster: registering %s failed: %s", describe(options_.self).c_str(),
               std::string(metadata::membership_error_name(e.error())).c_str());
    }
    ++failures_;
    return false;
  }
  epoch_.store(*e, std::memory_order_release);
  registrations_.fetch_add(1, std::memory_order_relaxed);
  failures_ = 0;
  if (first) {
    hold_lease(sent);
  } else {
    rejoining_ = true;  // the next heartbeats decide when it acknowledges again
    SILT_LOG(info, "silt: cluster: registered again at broker epoch %lld",
             static_cast<long long>(*e));
  }
  return true;
}

void membership::refresh_list() {
  const auto listed = clock::now();
  auto all = registry_->brokers();
  if (!all) return;  // the last list stands
  auto live = std::make_shared<broker_list>();
  auto heard = std::make_shared<broker_list>();
  // A broker renews its lease to session_timeout every heartbeat interval.
  const int64_t heard_left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    options_.session_timeout - 2 * options_.heartbeat_interval)
                                    .count();
  bool self = false;
  for (auto& b : *all) {
    if (!b.live()) continue;
    self = self || b.info.node == options_.self.node;
    if (b.info.node == options_.self.node || b.lease_left_ms >= heard_left_ms) heard->push_back(b);
    live->push_back(std::move(b));
  }
  if (!self) {
    metadata::broker_record me;
    me.info = options_.self;
    me.broker_epoch = epoch_.load(std::memory_order_acquire);
    const auto by_node = [](const auto& a, const auto& b) { return a.info.node < b.info.node; };
    heard->push_back(me);
    std::sort(heard->begin(), heard->end(), by_node);
    live->push_back(std::move(me));
    std::sort(live->begin(), live->end(), by_node);
  }
  base::lock_guard lock(mu_);
  brokers_ = std::move(live);
  heard_ = std::move(heard);
  listed_at_ = listed;
}

void membership::report_topics_applied(int64_t applied) {
  base::lock_guard lock(report_mu_);
  const int64_t epoch = epoch_.load(std::memory_order_acquire);
  if (applied == reported_applied_ && epoch == reported_epoch_) return;
  // Fenced (the lease lapsed): the next registration starts at -1, and the next round reports
  // at its epoch.
  if (registry_->report_topics_applied(options_.self.node, epoch, applied)) {
    reported_applied_ = applied;
    reported_epoch_ = epoch;
  }
}

tl::expected<std::vector<metadata::topics_applied_by>, metadata::membership_error>
membership::topics_applied(clock::time_point since) const {
  base::lock_guard lock(applied_mu_);
  // A read that began after `since` (the one that held the lock meanwhile) answers for it.
  if (applied_known_ && applied_read_at_ >= since) return applied_;
  const auto began = clock::now();
  auto r = registry_->topics_applied();
  if (!r) return r;
  applied_ = std::move(*r);
  applied_read_at_ = began;
  applied_known_ = true;
  return applied_;
}

void membership::drain() {
  if (auto r = registry_->drain(options_.self.node, epoch_.load(std::memory_order_acquire)); !r) {
    SILT_LOG(warn, "silt: cluster: cannot mark this broker as stopping: %s",
             std::string(metadata::membership_error_name(r.error())).c_str());
  }
  refresh_list();
}

void membership::stop() {
  {
    base::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  lease_until_.store(0, std::memory_order_release);
  if (const int64_t epoch = epoch_.load(std::memory_order_acquire); epoch != 0) {
    (void)registry_->unregister(options_.self.node, epoch);
  }
}

}  // namespace silt::cluster
