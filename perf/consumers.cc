#include "consumers.h"

#include <algorithm>
#include <cstring>

namespace silt::perf {

struct consumer_pool::group {
  int index = 0;
  int topic = 0;
  int partitions = 1;
  std::string id;
  std::unique_ptr<std::atomic<bool>[]> probed;  // per partition
  std::atomic<int> probed_count{0};
};

struct consumer_pool::consumer {
  consumer_pool* pool = nullptr;
  group* g = nullptr;
  rd_kafka_t* rk = nullptr;
  bool cooperative = false;
  bool paused_applied = false;  // owned by its thread
  std::atomic<bool> had_assignment{false};
  std::atomic<int> assigned{0};
  std::thread thread;
};

consumer_pool::consumer_pool(options o) : o_(std::move(o)) {}

consumer_pool::~consumer_pool() {
  stop();
}

tl::expected<void, std::string> consumer_pool::start() {
  const int topics = static_cast<int>(o_.topics.size());
  for (int t = 0; t < topics; ++t) {
    for (int j = 0; j < o_.groups_per_topic; ++j) {
      auto g = std::make_unique<group>();
      g->index = t * o_.groups_per_topic + j;
      g->topic = t;
      g->partitions = o_.topics[static_cast<size_t>(t)].partitions;
      g->id = o_.group_ids[static_cast<size_t>(g->index)];
      g->probed.reset(new std::atomic<bool>[static_cast<size_t>(g->partitions)]);
      for (int p = 0; p < g->partitions; ++p) g->probed[static_cast<size_t>(p)].store(false);
      groups_.push_back(std::move(g));
    }
  }
  for (auto& g : groups_) {
    for (int i = 0; i < o_.consumers_per_group; ++i) {
      auto c = std::make_unique<consumer>();
      c->pool = this;
      c->g = g.get();
      auto conf = make_conf(o_.props, o_.bootstrap);
      if (!conf) return tl::make_unexpected("consumer: " + conf.error());
      char err[512];
      if (rd_kafka_conf_set(conf->get(), "group.id", g->id.c_str(), err, sizeof err) !=
          RD_KAFKA_CONF_OK) {
        return tl::make_unexpected("consumer group id " + g->id + ": " + err);
      }
      log_to_stderr(conf->get());
      rd_kafka_conf_set_error_cb(conf->get(), &consumer_pool::on_error);
      rd_kafka_conf_set_rebalance_cb(conf->get(), &consumer_pool::on_rebalance);
      rd_kafka_conf_set_opaque(conf->get(), c.get());
      c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf->get(), err, sizeof err);
      if (c->rk == nullptr)
        return tl::make_unexpected(std::string("cannot create a consumer: ") + err);
      (void)conf->release();
      c->cooperative = std::strcmp(rd_kafka_rebalance_protocol(c->rk), "COOPERATIVE") == 0;
      rd_kafka_poll_set_consumer(c->rk);
      rd_kafka_topic_partition_list_t* topics_list = rd_kafka_topic_partition_list_new(1);
      rd_kafka_topic_partition_list_add(topics_list,
                                        o_.topics[static_cast<size_t>(g->topic)].name.c_str(),
                                        RD_KAFKA_PARTITION_UA);
      const rd_kafka_resp_err_t serr = rd_kafka_subscribe(c->rk, topics_list);
      rd_kafka_topic_partition_list_destroy(topics_list);
      if (serr) {
        rd_kafka_destroy(c->rk);
        c->rk = nullptr;
        return tl::make_unexpected(std::string("cannot subscribe: ") + rd_kafka_err2str(serr));
      }
      consumers_.push_back(std::move(c));
    }
  }
  for (auto& c : consumers_) {
    consumer* cp = c.get();
    c->thread = std::thread([this, cp] { run_consumer(*cp); });
  }
  return {};
}

void consumer_pool::pause(bool paused) {
  paused_.store(paused);
}

bool consumer_pool::assigned() const {
  std::vector<int> per_group(groups_.size(), 0);
  for (const auto& c : consumers_) {
    if (!c->had_assignment.load()) return false;
    per_group[static_cast<size_t>(c->g->index)] += c->assigned.load();
  }
  for (const auto& g : groups_) {
    if (per_group[static_cast<size_t>(g->index)] != g->partitions) return false;
  }
  return true;
}

int consumer_pool::groups_probed() const {
  int n = 0;
  for (const auto& g : groups_) {
    if (g->probed_count.load() >= g->partitions) ++n;
  }
  return n;
}

void consumer_pool::reset_probes() {
  for (auto& g : groups_) {
    for (int p = 0; p < g->partitions; ++p) g->probed[static_cast<size_t>(p)].store(false);
    g->probed_count.store(0);
  }
}

std::string consumer_pool::readiness_detail() const {
  int waiting = 0;
  for (const auto& c : consumers_) {
    if (!c->had_assignment.load()) ++waiting;
  }
  if (waiting > 0) {
    return std::to_string(waiting) + " of " + std::to_string(consumers_.size()) +
           " consumers have not joined their group yet";
  }
  for (const auto& g : groups_) {
    int assigned = 0;
    for (const auto& c : consumers_) {
      if (c->g == g.get()) assigned += c->assigned.load();
    }
    if (assigned != g->partitions) {
      return "group " + g->id + " has " + std::to_string(assigned) + " of " +
             std::to_string(g->partitions) + " partitions assigned";
    }
    if (g->probed_count.load() < g->partitions) {
      return "group " + g->id + " has read probes from " + std::to_string(g->probed_count.load()) +
             " of " + std::to_string(g->partitions) + " partitions";
    }
  }
  return "all groups are ready";
}

void consumer_pool::on_error(rd_kafka_t* /*rk*/, int err, const char* reason, void* opaque) {
  auto* c = static_cast<consumer*>(opaque);
  c->pool->o_.stats->client_error(
      std::string("consumer: ") + rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err)), reason);
}

void consumer_pool::on_rebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                                 rd_kafka_topic_partition_list_t* partitions, void* opaque) {
  auto* c = static_cast<consumer*>(opaque);
  consumer_pool& pool = *c->pool;
  rd_kafka_error_t* error = nullptr;
  rd_kafka_resp_err_t result = RD_KAFKA_RESP_ERR_NO_ERROR;
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    if (c->cooperative) {
      error = rd_kafka_incremental_assign(rk, partitions);
    } else {
      result = rd_kafka_assign(rk, partitions);
    }
    // Partitions assigned while paused start paused: the backlog test must not read them.
    if (c->paused_applied && partitions->cnt > 0) rd_kafka_pause_partitions(rk, partitions);
    c->had_assignment.store(true);
  } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
    if (c->cooperative) {
      error = rd_kafka_incremental_unassign(rk, partitions);
    } else {
      result = rd_kafka_assign(rk, nullptr);
    }
  } else {
    pool.o_.stats->client_error("consumer: rebalance failed", rd_kafka_err2str(err));
    result = rd_kafka_assign(rk, nullptr);
  }
  if (error != nullptr) {
    pool.o_.stats->client_error("consumer: assignment failed", rd_kafka_error_string(error));
    rd_kafka_error_destroy(error);
  } else if (result) {
    pool.o_.stats->client_error("consumer: assignment failed", rd_kafka_err2str(result));
  }
  rd_kafka_topic_partition_list_t* now = nullptr;
  if (rd_kafka_assignment(rk, &now) == RD_KAFKA_RESP_ERR_NO_ERROR && now != nullptr) {
    c->assigned.store(now->cnt);
    rd_kafka_topic_partition_list_destroy(now);
  }
  pool.assignment_changes_.fetch_add(1);
  pool.o_.stats->rebalance();
}

void consumer_pool::handle(consumer& c, const rd_kafka_message_t& m) {
  if (m.err) {
    if (m.err == RD_KAFKA_RESP_ERR__PARTITION_EOF) return;
    o_.stats->client_error(std::string("consumer: ") + rd_kafka_err2str(m.err),
                           rd_kafka_message_errstr(&m));
    return;
  }
  rd_kafka_headers_t* headers = nullptr;
  const void* value = nullptr;
  size_t size = 0;
  std::optional<record_header> h;
  if (rd_kafka_message_headers(&m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR &&
      rd_kafka_header_get_last(headers, record_header_name, &value, &size) ==
          RD_KAFKA_RESP_ERR_NO_ERROR) {
    h = decode_record_header(value, size);
  }
  if (!h || h->run_id != o_.run_id) {
    o_.stats->foreign_record();
    return;
  }
  group& g = *c.g;
  if (h->due_us == 0) {
    if (m.partition >= 0 && m.partition < g.partitions &&
        !g.probed[static_cast<size_t>(m.partition)].exchange(true)) {
      g.probed_count.fetch_add(1);
    }
    return;
  }
  const int64_t e2e_us = o_.clock->now_wall_us() - h->due_us;
  o_.stats->consumed(g.index, m.len, static_cast<uint64_t>(std::max<int64_t>(0, e2e_us)));
}

void consumer_pool::run_consumer(consumer& c) {
  while (!stopping_.load()) {
    const bool want_paused = paused_.load();
    if (want_paused != c.paused_applied) {
      rd_kafka_topic_partition_list_t* assignment = nullptr;
      if (rd_kafka_assignment(c.rk, &assignment) == RD_KAFKA_RESP_ERR_NO_ERROR &&
          assignment != nullptr) {
        if (assignment->cnt > 0) {
          if (want_paused) {
            rd_kafka_pause_partitions(c.rk, assignment);
          } else {
            rd_kafka_resume_partitions(c.rk, assignment);
          }
        }
        rd_kafka_topic_partition_list_destroy(assignment);
      }
      c.paused_applied = want_paused;
    }
    rd_kafka_message_t* m = rd_kafka_consumer_poll(c.rk, 100);
    if (m == nullptr) continue;
    handle(c, *m);
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(c.rk);
}

void consumer_pool::stop() {
  if (stopping_.exchange(true)) return;
  for (auto& c : consumers_) {
    if (c->thread.joinable()) c->thread.join();
  }
  for (auto& c : consumers_) {
    if (c->rk != nullptr) rd_kafka_destroy(c->rk);
    c->rk = nullptr;
  }
}

}  // namespace silt::perf
