#include "net/request_metrics.h"

#include "protocol/generated/api_table.h"

namespace silt::net {

struct request_metrics::snapshots {
  struct api {
    base::histogram_snapshot total, handle, queue, send;
  };
  std::array<api, max_key + 1> apis;
};

request_metrics::request_metrics() = default;

request_metrics::~request_metrics() {
  for (auto& a : apis_) delete a.load();
}

request_metrics::api_timing* request_metrics::of(int16_t key) {
  if (key < 0 || key > max_key) return nullptr;
  auto& slot = apis_[static_cast<size_t>(key)];
  api_timing* t = slot.load(std::memory_order_acquire);
  if (t != nullptr) return t;
  auto fresh = std::make_unique<api_timing>();
  if (slot.compare_exchange_strong(t, fresh.get(), std::memory_order_acq_rel)) {
    return fresh.release();
  }
  return t;  // another thread created it first
}

std::string request_metrics::report(std::string_view prefix) {
  base::lock_guard lock(report_mu_);
  if (!last_) last_ = std::make_unique<snapshots>();
  std::string out;
  for (int16_t key = 0; key <= max_key; ++key) {
    const api_timing* t = apis_[static_cast<size_t>(key)].load(std::memory_order_acquire);
    if (t == nullptr) continue;
    auto& prev = last_->apis[static_cast<size_t>(key)];
    snapshots::api now{t->total.snapshot(), t->handle.snapshot(), t->queue.snapshot(),
                       t->send.snapshot()};
    const auto total = now.total.since(prev.total);
    const auto handle = now.handle.since(prev.handle);
    const auto queue = now.queue.since(prev.queue);
    const auto send = now.send.since(prev.send);
    prev = now;
    if (total.count() == 0) continue;
    const auto* info = protocol::find_api(key);
    out += prefix;
    out += info != nullptr ? std::string(info->name) : "api " + std::to_string(key);
    out += " n=" + std::to_string(total.count()) + " total " + total.percentiles_ms() +
           " | handle " + handle.percentiles_ms() + " | queue " + queue.percentiles_ms() +
           " | send " + send.percentiles_ms() + " ms\n";
  }
  return out;
}

}  // namespace silt::net
