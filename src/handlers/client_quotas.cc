#include "handlers/client_quotas.h"

#include <algorithm>
#include <cmath>

namespace silt::handlers {

namespace {

using metadata::quota_entity;
using part = metadata::quota_entity_part;

}  // namespace

std::string_view quota_key(quota_type t) {
  switch (t) {
    case quota_type::produce:
      return "producer_byte_rate";
    case quota_type::fetch:
      return "consumer_byte_rate";
    case quota_type::request:
      return "request_percentage";
  }
  return "";
}

std::string_view quota_type_name(quota_type t) {
  switch (t) {
    case quota_type::produce:
      return "Produce";
    case quota_type::fetch:
      return "Fetch";
    case quota_type::request:
      return "Request";
  }
  return "";
}

quota_resolution resolve_quota(const std::map<quota_entity, double>& quotas, std::string_view user,
                               std::string_view client_id) {
  const auto u = part::named(std::string(user));
  const auto c = part::named(std::string(client_id));
  const auto d = part::default_name();
  const part none;
  // Kafka's levels, in order, with whose rate each measures.
  enum class tags : uint8_t { both, user, client };
  const std::array<std::pair<quota_entity, tags>, 8> levels{{
      {{u, c}, tags::both},
      {{u, d}, tags::both},
      {{u, none}, tags::user},
      {{d, c}, tags::both},
      {{d, d}, tags::both},
      {{d, none}, tags::user},
      {{none, c}, tags::client},
      {{none, d}, tags::client},
  }};
  for (const auto& [entity, t] : levels) {
    const auto it = quotas.find(entity);
    if (it == quotas.end()) continue;
    quota_resolution r;
    if (t != tags::client) r.user = user;
    if (t != tags::user) r.client_id = client_id;
    // Kafka measures nobody whose tags are both empty (an empty client id under a client
    // quota): no quota applies.
    if (!r.user.empty() || !r.client_id.empty()) r.limit = it->second;
    return r;
  }
  return {.user = {}, .client_id = std::string(client_id), .limit = std::nullopt};
}

client_quotas::client_quotas(quota_window w) : window_(w) {}

void client_quotas::replace(const metadata::quota_map& quotas) {
  std::array<std::map<quota_entity, double>, quota_type_count> by_type;
  for (const auto& [entity, values] : quotas) {
    for (size_t t = 0; t < quota_type_count; ++t) {
      const auto it = values.find(std::string(quota_key(static_cast<quota_type>(t))));
      if (it != values.end()) by_type[t][entity] = it->second;
    }
  }
  base::lock_guard lock(mu_);
  all_ = quotas;
  for (size_t t = 0; t < quota_type_count; ++t) {
    enabled_[t].store(!by_type[t].empty(), std::memory_order_relaxed);
    quotas_[t] = std::move(by_type[t]);
  }
}

metadata::quota_map client_quotas::snapshot() const {
  base::lock_guard lock(mu_);
  return all_;
}

int32_t client_quotas::record(quota_type t, std::string_view user, std::string_view client_id,
                              double value, int64_t now_ms) {
  const auto i = static_cast<size_t>(t);
  base::lock_guard lock(mu_);
  expire_locked(now_ms);
  auto r = resolve_quota(quotas_[i], user, client_id);
  if (!r.limit) return 0;
  const int64_t window_ms = int64_t{window_.window_seconds} * 1000;
  auto [it, added] = rates_.try_emplace(rate_key{t, std::move(r.user), std::move(r.client_id)},
                                        window_.samples, window_ms);
  auto& rate = it->second;
  rate.record(value, now_ms);
  const double measured = rate.measure(now_ms);
  const double bound = *r.limit;
  if (measured <= bound) return 0;
  // The time the rate needs to come back to the quota, measured over the same span.
  double throttle = (measured - bound) / bound * static_cast<double>(rate.window_size_ms(now_ms));
  if (t == quota_type::request) throttle = std::min(throttle, static_cast<double>(window_ms));
  const auto ms = static_cast<int32_t>(std::clamp(std::round(throttle), 0.0, double{INT32_MAX}));
  if (ms > 0) {
    throttled_[i].fetch_add(1, std::memory_order_relaxed);
    throttle_ms_[i].fetch_add(static_cast<uint64_t>(ms), std::memory_order_relaxed);
  }
  return ms;
}

std::optional<double> client_quotas::max_in_window(quota_type t, std::string_view user,
                                                   std::string_view client_id) {
  base::lock_guard lock(mu_);
  const auto r = resolve_quota(quotas_[static_cast<size_t>(t)], user, client_id);
  if (!r.limit) return std::nullopt;
  return *r.limit * (window_.samples - 1) * window_.window_seconds;
}

void client_quotas::expire_locked(int64_t now_ms) {
  // A rate that recorded nothing for a whole span measures nothing any more: forgetting it
  // changes no answer, and client ids that come and go cost no memory.
  const int64_t span = int64_t{window_.samples} * window_.window_seconds * 1000;
  if (now_ms - last_expiry_ms_ < span) return;
  last_expiry_ms_ = now_ms;
  std::erase_if(rates_,
                [&](const auto& kv) { return now_ms - kv.second.last_record_ms() >= span; });
}

quota_type_stats client_quotas::stats(quota_type t) const {
  const auto i = static_cast<size_t>(t);
  return {.throttled = throttled_[i].load(std::memory_order_relaxed),
          .throttle_ms = throttle_ms_[i].load(std::memory_order_relaxed)};
}

size_t client_quotas::rates() const {
  base::lock_guard lock(mu_);
  return rates_.size();
}

}  // namespace silt::handlers
