#include "topics.h"

#include <chrono>
#include <map>
#include <memory>
#include <thread>

namespace silt::perf {

namespace {

using std::chrono::steady_clock;

constexpr int metadata_timeout_ms = 10000;
constexpr int admin_timeout_ms = 60000;
constexpr auto ready_timeout = std::chrono::seconds(60);

struct client_deleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
using client_ptr = std::unique_ptr<rd_kafka_t, client_deleter>;

struct queue_deleter {
  void operator()(rd_kafka_queue_t* q) const { rd_kafka_queue_destroy(q); }
};
using queue_ptr = std::unique_ptr<rd_kafka_queue_t, queue_deleter>;

struct event_deleter {
  void operator()(rd_kafka_event_t* e) const { rd_kafka_event_destroy(e); }
};
using event_ptr = std::unique_ptr<rd_kafka_event_t, event_deleter>;

tl::expected<client_ptr, std::string> admin_client(const librdkafka_properties& admin,
                                                   const std::string& bootstrap) {
  auto conf = make_conf(admin, bootstrap);
  if (!conf) return tl::make_unexpected("admin client: " + conf.error());
  log_to_stderr(conf->get());
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf->get(), err, sizeof err);
  if (rk == nullptr)
    return tl::make_unexpected(std::string("cannot create an admin client: ") + err);
  (void)conf->release();
  return client_ptr(rk);
}

// Topic name -> (partitions, every partition has a leader), from one metadata request.
tl::expected<std::map<std::string, std::pair<int, bool>>, std::string> list_topics(rd_kafka_t* rk) {
  const rd_kafka_metadata_t* md = nullptr;
  const rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, nullptr, &md, metadata_timeout_ms);
  if (err) return tl::make_unexpected(std::string(rd_kafka_err2str(err)));
  std::map<std::string, std::pair<int, bool>> out;
  for (int i = 0; i < md->topic_cnt; ++i) {
    const auto& t = md->topics[i];
    if (t.err) continue;
    bool leaders = t.partition_cnt > 0;
    for (int p = 0; p < t.partition_cnt; ++p) {
      if (t.partitions[p].leader < 0 || t.partitions[p].err) leaders = false;
    }
    out[t.topic] = {t.partition_cnt, leaders};
  }
  rd_kafka_metadata_destroy(md);
  return out;
}

}  // namespace

tl::expected<std::vector<topic_layout>, std::string> prepare_topics(
    const workload& w, const librdkafka_properties& admin, std::vector<std::string>& notes) {
  auto rk = admin_client(admin, w.bootstrap_servers);
  if (!rk) return tl::make_unexpected(rk.error());
  auto existing = list_topics(rk->get());
  if (!existing) {
    return tl::make_unexpected("cannot reach the broker at " + w.bootstrap_servers + ": " +
                               existing.error());
  }

  std::vector<topic_layout> topics;
  std::vector<std::string> to_create;
  for (int i = 0; i < w.topics; ++i) {
    const std::string name = topic_name(w, i);
    topics.push_back({name, w.partitions_per_topic});
    const auto it = existing->find(name);
    if (it == existing->end()) {
      to_create.push_back(name);
      continue;
    }
    const int have = it->second.first;
    if (have != w.partitions_per_topic) {
      if (!w.reuse_topics) {
        return tl::make_unexpected("topic " + name + " exists with " + std::to_string(have) +
                                   " partitions, not " + std::to_string(w.partitions_per_topic) +
                                   ": use another topic prefix, or reuse it as it is");
      }
      notes.push_back("reused topic " + name + " has " + std::to_string(have) +
                      " partitions, not " + std::to_string(w.partitions_per_topic));
      topics.back().partitions = have;
    }
  }
  const int reused = w.topics - static_cast<int>(to_create.size());
  if (reused > 0) {
    notes.push_back(
        "used " + std::to_string(reused) + " existing topic(s) named " + w.topic_prefix + "-NNNN" +
        (w.topic_configs.empty() ? "" : "; the topic configs were not applied to them"));
  }

  if (!to_create.empty()) {
    std::vector<rd_kafka_NewTopic_t*> specs;
    char err[512];
    auto free_specs = [&] { rd_kafka_NewTopic_destroy_array(specs.data(), specs.size()); };
    for (const auto& name : to_create) {
      rd_kafka_NewTopic_t* t = rd_kafka_NewTopic_new(name.c_str(), w.partitions_per_topic,
                                                     w.replication_factor, err, sizeof err);
      if (t == nullptr) {
        free_specs();
        return tl::make_unexpected("topic " + name + ": " + err);
      }
      specs.push_back(t);
      for (const auto& [k, v] : w.topic_configs) {
        if (const auto e = rd_kafka_NewTopic_set_config(t, k.c_str(), v.c_str()); e) {
          free_specs();
          return tl::make_unexpected(
              concat({"topic config ", k, "=", v, ": ", rd_kafka_err2str(e)}));
        }
      }
    }
    queue_ptr q(rd_kafka_queue_new(rk->get()));
    rd_kafka_AdminOptions_t* options =
        rd_kafka_AdminOptions_new(rk->get(), RD_KAFKA_ADMIN_OP_CREATETOPICS);
    (void)rd_kafka_AdminOptions_set_operation_timeout(options, admin_timeout_ms / 2, err,
                                                      sizeof err);
    (void)rd_kafka_AdminOptions_set_request_timeout(options, admin_timeout_ms, err, sizeof err);
    rd_kafka_CreateTopics(rk->get(), specs.data(), specs.size(), options, q.get());
    rd_kafka_AdminOptions_destroy(options);
    free_specs();
    event_ptr ev(rd_kafka_queue_poll(q.get(), admin_timeout_ms + 5000));
    if (!ev) return tl::make_unexpected("creating the topics timed out");
    if (rd_kafka_event_error(ev.get())) {
      return tl::make_unexpected(std::string("creating the topics failed: ") +
                                 rd_kafka_event_error_string(ev.get()));
    }
    const rd_kafka_CreateTopics_result_t* res = rd_kafka_event_CreateTopics_result(ev.get());
    size_t n = 0;
    const rd_kafka_topic_result_t** results = rd_kafka_CreateTopics_result_topics(res, &n);
    for (size_t i = 0; i < n; ++i) {
      const auto e = rd_kafka_topic_result_error(results[i]);
      if (e == RD_KAFKA_RESP_ERR_NO_ERROR || e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) continue;
      const char* msg = rd_kafka_topic_result_error_string(results[i]);
      return tl::make_unexpected(std::string("cannot create topic ") +
                                 rd_kafka_topic_result_name(results[i]) + ": " +
                                 (msg ? msg : rd_kafka_err2str(e)));
    }
  }

  // Created is not yet usable: wait until the metadata shows every partition with a leader.
  const auto deadline = steady_clock::now() + ready_timeout;
  std::string missing;
  while (true) {
    auto now_listed = list_topics(rk->get());
    missing.clear();
    if (!now_listed) {
      missing = now_listed.error();
    } else {
      for (auto& t : topics) {
        const auto it = now_listed->find(t.name);
        if (it == now_listed->end()) {
          missing = "topic " + t.name + " is not in the metadata";
        } else if (it->second.first != t.partitions && !w.reuse_topics) {
          missing = "topic " + t.name + " has " + std::to_string(it->second.first) + " partitions";
        } else if (!it->second.second) {
          missing = "topic " + t.name + " has partitions without a leader";
        }
        if (!missing.empty()) break;
      }
    }
    if (missing.empty()) break;
    if (steady_clock::now() > deadline) {
      return tl::make_unexpected("the topics did not become ready in 60 s: " + missing);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return topics;
}

tl::expected<void, std::string> delete_topics(const std::vector<std::string>& names,
                                              const librdkafka_properties& admin,
                                              const std::string& bootstrap) {
  if (names.empty()) return {};
  auto rk = admin_client(admin, bootstrap);
  if (!rk) return tl::make_unexpected(rk.error());
  std::vector<rd_kafka_DeleteTopic_t*> specs;
  specs.reserve(names.size());
  for (const auto& n : names) specs.push_back(rd_kafka_DeleteTopic_new(n.c_str()));
  queue_ptr q(rd_kafka_queue_new(rk->get()));
  rd_kafka_DeleteTopics(rk->get(), specs.data(), specs.size(), nullptr, q.get());
  rd_kafka_DeleteTopic_destroy_array(specs.data(), specs.size());
  event_ptr ev(rd_kafka_queue_poll(q.get(), admin_timeout_ms));
  if (!ev) return tl::make_unexpected("deleting the topics timed out");
  if (rd_kafka_event_error(ev.get())) {
    return tl::make_unexpected(std::string("deleting the topics failed: ") +
                               rd_kafka_event_error_string(ev.get()));
  }
  size_t n = 0;
  const rd_kafka_topic_result_t** results =
      rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev.get()), &n);
  for (size_t i = 0; i < n; ++i) {
    if (const auto e = rd_kafka_topic_result_error(results[i]); e) {
      return tl::make_unexpected(std::string("cannot delete topic ") +
                                 rd_kafka_topic_result_name(results[i]) + ": " +
                                 rd_kafka_err2str(e));
    }
  }
  return {};
}

}  // namespace silt::perf
