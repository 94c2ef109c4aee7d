#include "producers.h"

#include <algorithm>
#include <array>
#include <cerrno>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace silt::perf {

namespace {

using std::chrono::steady_clock;

constexpr auto late_after = std::chrono::seconds(1);
constexpr int sends_per_round = 512;  // per producer, before its thread serves the others
constexpr auto idle_wait = std::chrono::milliseconds(100);
constexpr auto queue_full_retry = std::chrono::milliseconds(1);

// A delivery report's opaque: the record's due time, in nanoseconds after the clock anchor
// (always > 0: the anchor is taken before any schedule starts). 0 marks a probe.
void* due_opaque(const clock_anchor& clock, steady_time due) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(due - clock.steady0).count();
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the opaque is the value itself, no allocation
  return reinterpret_cast<void*>(static_cast<uintptr_t>(std::max<int64_t>(1, ns)));
}

}  // namespace

struct producer_pool::producer {
  producer_pool* pool = nullptr;
  rd_kafka_t* rk = nullptr;
  rd_kafka_topic_t* rkt = nullptr;
  int topic = 0;
  int partitions = 1;
  int index = 0;  // among all producers: its place in the schedule
  bool first_of_topic = false;
  send_schedule schedule;  // owned by its sender thread
  uint64_t next = 0;       // the next record's number in the schedule
  uint64_t key_counter = 0;
  uint64_t value_counter = 0;
  bool queue_full = false;  // in the sender's last round
};

struct producer_pool::sender {
  std::vector<producer*> producers;
  int wake_fd = -1;  // eventfd librdkafka signals when a delivery report queue fills
  std::thread thread;
};

producer_pool::producer_pool(options o) : o_(std::move(o)) {}

producer_pool::~producer_pool() {
  stop(0);
}

tl::expected<void, std::string> producer_pool::start() {
  const int total = static_cast<int>(o_.topics.size()) * o_.producers_per_topic;
  {
    base::lock_guard l(mu_);
    plan_ = send_schedule(steady_clock::now(), 0, total, 0);
  }
  for (int t = 0; t < static_cast<int>(o_.topics.size()); ++t) {
    for (int i = 0; i < o_.producers_per_topic; ++i) {
      auto p = std::make_unique<producer>();
      p->pool = this;
      p->topic = t;
      p->partitions = o_.topics[static_cast<size_t>(t)].partitions;
      // Interleave topics in the schedule: producer i of every topic before producer i + 1.
      p->index = i * static_cast<int>(o_.topics.size()) + t;
      p->first_of_topic = i == 0;
      auto conf = make_conf(o_.props, o_.bootstrap);
      if (!conf) return tl::make_unexpected("producer: " + conf.error());
      log_to_stderr(conf->get());
      rd_kafka_conf_set_error_cb(conf->get(), &producer_pool::on_error);
      rd_kafka_conf_set_dr_msg_cb(conf->get(), &producer_pool::on_delivery);
      rd_kafka_conf_set_opaque(conf->get(), p.get());
      char err[512];
      p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf->get(), err, sizeof err);
      if (p->rk == nullptr)
        return tl::make_unexpected(std::string("cannot create a producer: ") + err);
      (void)conf->release();  // rd_kafka_new took it
      p->rkt = rd_kafka_topic_new(p->rk, o_.topics[static_cast<size_t>(t)].name.c_str(), nullptr);
      if (p->rkt == nullptr) {
        return tl::make_unexpected("cannot create a topic handle: " +
                                   std::string(rd_kafka_err2str(rd_kafka_last_error())));
      }
      producers_.push_back(std::move(p));
    }
  }
  int threads = o_.threads > 0
                    ? o_.threads
                    : static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  threads = std::min(threads, total);
  for (int i = 0; i < threads; ++i) {
    auto s = std::make_unique<sender>();
    s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->wake_fd < 0) return tl::make_unexpected("eventfd failed");
    senders_.push_back(std::move(s));
  }
  for (size_t i = 0; i < producers_.size(); ++i) {
    auto& s = *senders_[i % senders_.size()];
    auto* p = producers_[i].get();
    s.producers.push_back(p);
    rd_kafka_queue_t* q = rd_kafka_queue_get_main(p->rk);
    static constexpr uint64_t one = 1;
    rd_kafka_queue_io_event_enable(q, s.wake_fd, &one, sizeof one);
    rd_kafka_queue_destroy(q);
  }
  for (auto& s : senders_) {
    sender* sp = s.get();
    s->thread = std::thread([this, sp] { run_sender(*sp); });
  }
  return {};
}

void producer_pool::set_rate(double rate, steady_time start) {
  {
    base::lock_guard l(mu_);
    plan_ = send_schedule(start, rate, static_cast<int>(producers_.size()), 0);
  }
  plan_generation_.fetch_add(1);
  for (auto& s : senders_) {
    const uint64_t one = 1;
    (void)!write(s->wake_fd, &one, sizeof one);
  }
}

send_schedule producer_pool::schedule() const {
  base::lock_guard l(mu_);
  return plan_;
}

void producer_pool::send_probes() {
  probe_generation_.fetch_add(1);
  for (auto& s : senders_) {
    const uint64_t one = 1;
    (void)!write(s->wake_fd, &one, sizeof one);
  }
}

std::string producer_pool::last_probe_error() const {
  base::lock_guard l(mu_);
  return last_probe_error_;
}

int producer_pool::in_flight() const {
  int n = 0;
  for (const auto& p : producers_) n += rd_kafka_outq_len(p->rk);
  return n;
}

void producer_pool::on_error(rd_kafka_t* /*rk*/, int err, const char* reason, void* opaque) {
  auto* p = static_cast<producer*>(opaque);
  p->pool->o_.stats->client_error(
      std::string("producer: ") + rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err)), reason);
}

void producer_pool::on_delivery(rd_kafka_t* /*rk*/, const rd_kafka_message_t* m, void* opaque) {
  auto* p = static_cast<producer*>(opaque);
  producer_pool& pool = *p->pool;
  if (m->_private == nullptr) {  // a probe
    if (m->err) {
      pool.probes_failed_.fetch_add(1);
      base::lock_guard l(pool.mu_);
      pool.last_probe_error_ = rd_kafka_err2str(m->err);
    } else {
      pool.probes_acked_.fetch_add(1);
    }
    return;
  }
  if (m->err) {
    pool.o_.stats->produce_error(p->topic, rd_kafka_err2str(m->err));
    return;
  }
  const auto due_ns = static_cast<int64_t>(reinterpret_cast<uintptr_t>(m->_private));
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(steady_clock::now() -
                                                                           pool.o_.clock->steady0)
                          .count();
  const auto latency_us = static_cast<uint64_t>(std::max<int64_t>(0, now_ns - due_ns) / 1000);
  pool.o_.stats->acked(p->topic, m->len, latency_us);
}

bool producer_pool::send_one(producer& p, steady_time due, steady_time now) {
  const payload_pool& payloads = *o_.payloads;
  const std::string& value = payloads.value(p.value_counter++);
  const std::string* key = nullptr;
  switch (o_.keys) {
    case key_distributor::no_key:
      break;
    case key_distributor::key_round_robin:
      key = &payloads.key(p.key_counter++);
      break;
    case key_distributor::random_nano:
      key = &payloads.key(static_cast<uint64_t>(now.time_since_epoch().count()));
      break;
  }
  const int64_t due_us = o_.clock->wall_us(due);
  const auto header = encode_record_header(o_.run_id, due_us);
  std::array<rd_kafka_vu_t, 7> vu{};
  vu[0].vtype = RD_KAFKA_VTYPE_RKT;
  vu[0].u.rkt = p.rkt;
  vu[1].vtype = RD_KAFKA_VTYPE_PARTITION;
  vu[1].u.i32 = RD_KAFKA_PARTITION_UA;
  // No copy (no RD_KAFKA_MSG_F_COPY): the pool outlives the producers.
  vu[2].vtype = RD_KAFKA_VTYPE_VALUE;
  vu[2].u.mem = {const_cast<char*>(value.data()), value.size()};
  vu[3].vtype = RD_KAFKA_VTYPE_KEY;
  vu[3].u.mem = {key ? const_cast<char*>(key->data()) : nullptr, key ? key->size() : 0};
  vu[4].vtype = RD_KAFKA_VTYPE_TIMESTAMP;
  vu[4].u.i64 = due_us / 1000;
  vu[5].vtype = RD_KAFKA_VTYPE_HEADER;
  vu[5].u.header = {record_header_name, header.data(), static_cast<ssize_t>(header.size())};
  vu[6].vtype = RD_KAFKA_VTYPE_OPAQUE;
  vu[6].u.ptr = due_opaque(*o_.clock, due);
  rd_kafka_error_t* error = rd_kafka_produceva(p.rk, vu.data(), vu.size());
  const rd_kafka_resp_err_t err = error ? rd_kafka_error_code(error) : RD_KAFKA_RESP_ERR_NO_ERROR;
  if (error) rd_kafka_error_destroy(error);
  if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
    --p.value_counter;
    if (key != nullptr && o_.keys == key_distributor::key_round_robin) --p.key_counter;
    o_.stats->queue_full();
    return false;
  }
  if (err) {
    o_.stats->produce_error(p.topic, rd_kafka_err2str(err));
  } else {
    o_.stats->sent();
  }
  const auto lag_us = static_cast<uint64_t>(std::max<int64_t>(
      0, std::chrono::duration_cast<std::chrono::microseconds>(now - due).count()));
  if (now - due > late_after) o_.stats->late_send();
  uint64_t seen = max_lag_us_.load(std::memory_order_relaxed);
  while (lag_us > seen && !max_lag_us_.compare_exchange_weak(seen, lag_us)) {
  }
  return true;
}

void producer_pool::send_probes_of(producer& p) {
  const auto header = encode_record_header(o_.run_id, 0);
  static const char probe_value[] = "silt-perf probe";
  for (int partition = 0; partition < p.partitions; ++partition) {
    std::array<rd_kafka_vu_t, 5> vu{};
    vu[0].vtype = RD_KAFKA_VTYPE_RKT;
    vu[0].u.rkt = p.rkt;
    vu[1].vtype = RD_KAFKA_VTYPE_PARTITION;
    vu[1].u.i32 = partition;
    vu[2].vtype = RD_KAFKA_VTYPE_VALUE;
    vu[2].u.mem = {const_cast<char*>(probe_value), sizeof probe_value - 1};
    vu[3].vtype = RD_KAFKA_VTYPE_HEADER;
    vu[3].u.header = {record_header_name, header.data(), static_cast<ssize_t>(header.size())};
    vu[4].vtype = RD_KAFKA_VTYPE_OPAQUE;
    vu[4].u.ptr = nullptr;  // a probe
    if (rd_kafka_error_t* error = rd_kafka_produceva(p.rk, vu.data(), vu.size()); error) {
      probes_failed_.fetch_add(1);
      base::lock_guard l(mu_);
      last_probe_error_ = rd_kafka_error_string(error);
      rd_kafka_error_destroy(error);
    }
  }
}

void producer_pool::run_sender(sender& s) {
  uint64_t plan_seen = ~uint64_t{0};
  uint64_t probes_seen = 0;
  steady_time last_served = steady_clock::now();
  while (!stopping_.load()) {
    if (const uint64_t g = plan_generation_.load(); g != plan_seen) {
      plan_seen = g;
      const send_schedule plan = schedule();
      for (producer* p : s.producers) {
        p->schedule = plan.paused() ? send_schedule{}
                                    : send_schedule(plan.start(), plan.rate(),
                                                    static_cast<int>(producers_.size()), p->index);
        p->next = 0;
      }
    }
    if (const uint64_t g = probe_generation_.load(); g != probes_seen) {
      probes_seen = g;
      for (producer* p : s.producers) {
        if (p->first_of_topic) send_probes_of(*p);
      }
    }

    auto now = steady_clock::now();
    bool queue_full = false;
    for (producer* p : s.producers) {
      p->queue_full = false;
      if (p->schedule.paused()) continue;
      for (int n = 0; n < sends_per_round; ++n) {
        const steady_time due = p->schedule.due(p->next);
        if (due > now) break;
        if (!send_one(*p, due, now)) {
          p->queue_full = queue_full = true;
          break;
        }
        ++p->next;
      }
    }
    // Serve the producers' queues when one signalled (every queue that became non-empty
    // since the last serving did: serving them all leaves them empty, so each signals
    // again), and once a second regardless.
    uint64_t signals = 0;
    const bool signalled = read(s.wake_fd, &signals, sizeof signals) == sizeof signals;
    if (signalled || now - last_served > std::chrono::seconds(1)) {
      for (producer* p : s.producers) rd_kafka_poll(p->rk, 0);
      last_served = now;
    }

    now = steady_clock::now();
    steady_time wake = now + idle_wait;
    for (producer* p : s.producers) {
      // A producer whose queue is full tries again after queue_full_retry, not at once.
      if (!p->schedule.paused() && !p->queue_full) wake = std::min(wake, p->schedule.due(p->next));
    }
    if (queue_full) wake = std::min(wake, now + queue_full_retry);
    if (wake <= now) continue;
    const auto wait_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wake - now).count();
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(wait_ns / 1000000000);
    ts.tv_nsec = static_cast<long>(wait_ns % 1000000000);
    pollfd pfd{s.wake_fd, POLLIN, 0};
    (void)ppoll(&pfd, 1, &ts, nullptr);
  }
}

void producer_pool::stop(int flush_ms) {
  if (stopping_.exchange(true)) return;
  for (auto& s : senders_) {
    const uint64_t one = 1;
    (void)!write(s->wake_fd, &one, sizeof one);
  }
  for (auto& s : senders_) {
    if (s->thread.joinable()) s->thread.join();
  }
  // Nothing may report to the stats once the run is over: flush what is left, purge the rest.
  const auto deadline = steady_clock::now() + std::chrono::milliseconds(flush_ms);
  for (auto& p : producers_) {
    if (p->rk == nullptr) continue;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_clock::now());
    if (rd_kafka_flush(p->rk, static_cast<int>(std::max<int64_t>(0, left.count()))) != 0) {
      rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    }
  }
  for (auto& p : producers_) {
    if (p->rkt != nullptr) rd_kafka_topic_destroy(p->rkt);
    if (p->rk != nullptr) rd_kafka_destroy(p->rk);
    p->rkt = nullptr;
    p->rk = nullptr;
  }
  for (auto& s : senders_) {
    if (s->wake_fd >= 0) close(s->wake_fd);
    s->wake_fd = -1;
  }
}

}  // namespace silt::perf
