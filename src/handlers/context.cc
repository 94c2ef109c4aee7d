#include "handlers/context.h"

#include <algorithm>
#include <cstdio>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <unistd.h>

#include "base/log.h"

namespace silt::handlers {

context::context(const config::broker_config& config, std::string cluster_id,
                 storage::stream_store& store, metadata::topic_registry& registry,
                 producer_state& producers, boost::asio::thread_pool& blocking)
    : config(config),
      cluster_id(std::move(cluster_id)),
      node_id(config.node_id),
      advertised_host(config::advertised_endpoint(config).host),
      advertised_port(config::advertised_endpoint(config).port),
      store(store),
      registry(registry),
      producers(producers),
      blocking(blocking),
      sessions(config.max_incremental_fetch_session_cache_slots),
      quotas({.samples = config.quota_window_num,
              .window_seconds = config.quota_window_size_seconds}) {}

topic_entry_ptr context::topic(std::string_view name) const {
  base::lock_guard lock(mu_);
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

topic_entry_ptr context::topic(const metadata::topic_id& id) const {
  auto info = registry.find(id);
  return info ? topic(info->name) : nullptr;
}

std::vector<topic_entry_ptr> context::topics() const {
  std::vector<topic_entry_ptr> out;
  for (const auto& t : registry.all()) {
    if (auto e = topic(t->name)) out.push_back(std::move(e));
  }
  return out;
}

tl::expected<topic_entry_ptr, config::config_error> context::create_topic(
    const std::string& name, int32_t partitions,
    const std::map<std::string, std::string>& configs) {
  if (auto v = config::validate_topic_configs(configs); !v) return tl::make_unexpected(v.error());
  base::lock_guard creating(create_mu_);
  auto info = registry.create(name, partitions, configs);
  if (!info) {
    if (info.error() == metadata::registry_error::exists) {
      return tl::make_unexpected(config::config_error{36, "Topic '" + name + "' already exists."});
    }
    return tl::make_unexpected(config::config_error{-1, "cannot store topic " + name});
  }
  take((*info)->streams);
  return refresh(*info);
}

topic_entry_ptr context::refresh(const metadata::topic_ptr& info) {
  auto e = std::make_shared<topic_entry>();
  e->info = info;
  e->cfg = config::effective_topic_config(config, info->configs);
  for (base::stream_id s : info->streams) {
    store.set_retention(s, e->cfg.retention_ms, e->cfg.retention_bytes);
    store.set_active_segment(s, e->cfg.segment_ms, e->cfg.segment_bytes);
    store.set_compaction(s,
                         {e->cfg.compact, e->cfg.delete_retention_ms, e->cfg.min_compaction_lag_ms,
                          e->cfg.max_compaction_lag_ms, e->cfg.min_cleanable_dirty_ratio});
  }
  base::lock_guard lock(mu_);
  auto& slot = by_name_[info->name];
  e->counters =
      slot && slot->info->id == info->id ? slot->counters : std::make_shared<topic_counters>();
  slot = e;
  return e;
}

void context::take(const std::vector<base::stream_id>& streams) {
  // A stream not taken is still served, at epoch 0 and owned by no node; the next start
  // takes it.
  if (auto r = store.take(streams); !r) {
    SILT_LOG(warn, "silt: cannot take %zu stream(s): %s", streams.size(),
             std::string(storage::stream_error_name(r.error())).c_str());
  }
}

boost::asio::awaitable<bool> context::agree(int64_t since, std::chrono::milliseconds cap) {
  const int64_t change = registry.last_change();
  if (membership_ == nullptr || change <= since) co_return true;
  using clock = std::chrono::steady_clock;
  const auto bound = std::min(cap, std::chrono::milliseconds(config.broker_session_timeout_ms +
                                                             config.broker_heartbeat_interval_ms));
  const auto deadline = clock::now() + bound;
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  for (;;) {
    auto applied = membership_->topics_applied(clock::now());
    // Behind: a broker that reported a change before this one. One that reported none (-1)
    // is still opening and reads every topic before it serves.
    int32_t behind = -1;
    if (applied) {
      for (const auto& b : *applied) {
        if (b.node.value() != node_id && b.topics_applied >= 0 && b.topics_applied < change) {
          behind = b.node.value();
          break;
        }
      }
    }
    if (applied && behind < 0) co_return true;
    const auto now = clock::now();
    if (now >= deadline) {
      uint64_t left_out = 0;
      if (late_agreement_log_.allow(left_out)) {
        const std::string who = behind >= 0 ? "node " + std::to_string(behind)
                                            : std::string("the broker registry, unreadable,");
        SILT_LOG(warn,
                 "silt: cluster: answering a topic change (counter %lld) that %s has not taken "
                 "in after %lld ms (%llu more left out)",
                 static_cast<long long>(change), who.c_str(), static_cast<long long>(bound.count()),
                 static_cast<unsigned long long>(left_out));
      }
      co_return false;
    }
    timer.expires_after(std::min<clock::duration>(std::chrono::milliseconds(20), deadline - now));
    boost::system::error_code ec;
    co_await timer.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  }
}

void context::forget(const metadata::topic_ptr& info) {
  base::lock_guard lock(mu_);
  // Only the deleted topic's entry: a topic created again under the name stays.
  auto it = by_name_.find(info->name);
  if (it != by_name_.end() && it->second->info->id == info->id) by_name_.erase(it);
  // Nothing of it stays in memory: its streams' state and cached batches, and their producers.
  store.forget(info->streams);
  producers.erase(info->streams);
}

rack_view::rack_view(const context& ctx) {
  if (!ctx.reads_near_client()) return;
  // Only brokers heard from lately: a client sent to one it cannot reach may stay there.
  const auto list = ctx.recently_heard();
  if (!list) {
    if (!ctx.config.broker_rack.empty()) {
      by_rack_[ctx.config.broker_rack].push_back(ctx.node_id);
      racks_[ctx.node_id] = ctx.config.broker_rack;
    }
    return;
  }
  for (const auto& b : *list) {
    if (b.info.rack.empty() || b.draining) continue;
    by_rack_[b.info.rack].push_back(b.info.node.value());
    racks_[b.info.node.value()] = b.info.rack;
  }
  for (auto& [rack, nodes] : by_rack_) std::sort(nodes.begin(), nodes.end());
}

const std::string* rack_view::rack_of(int32_t node) const {
  const auto it = racks_.find(node);
  return it == racks_.end() ? nullptr : &it->second;
}

int32_t rack_view::reader(base::stream_id stream, std::string_view rack, int32_t owner) const {
  const auto it = by_rack_.find(rack);
  if (it == by_rack_.end()) return -1;
  const auto* own = rack_of(owner);
  if (own != nullptr && *own == rack) return -1;
  const auto& nodes = it->second;
  return nodes[stream.value() % nodes.size()];
}

std::vector<int32_t> rack_view::replicas(base::stream_id stream, int32_t owner) const {
  std::vector<int32_t> out{owner};
  for (const auto& [rack, nodes] : by_rack_) {
    if (const int32_t r = reader(stream, rack, owner); r >= 0) out.push_back(r);
  }
  return out;
}

}  // namespace silt::handlers
