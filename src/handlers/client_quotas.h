// Client quotas (KIP-13, KIP-124) as the request path applies them: the quotas of
// kafka-configs.sh --entity-type users/clients held in memory, each client's rates, and the
// throttle time a request earns, all as Kafka's ClientQuotaManager computes them.
//
// Which quota a request falls under is Kafka's order, first found wins, separately for each
// quota type (producer_byte_rate, consumer_byte_rate, request_percentage):
//   1. user U, client id C       2. user U, client <default>    3. user U
//   4. user <default>, client C  5. user <default>, client <default>
//   6. user <default>            7. client id C                 8. client <default>
// The level found also says whose rate is measured: (U, C) for 1, 2, 4 and 5, U for 3 and 6, C
// for 7 and 8, so that every user (or client id) under a default has a rate of its own. None
// found: no quota, nothing measured.
//
// A request's value (produce request bytes, fetch response bytes, handler time as a percentage
// of one thread) is added to its rate (windowed_rate.h: quota.window.num windows of
// quota.window.size.seconds); when the rate is then above the quota, the request is throttled for
// (rate - quota) / quota * window, the time the rate takes to come back to the quota (at most
// one window for request_percentage). The broker answers at once with that throttle time and
// reads nothing more from the connection until it has passed (KIP-219).
//
// Cost when no quota of a type is configured: one relaxed atomic load (enabled()), nothing else.
// Thread-safe: one mutex over the quotas and the rates, taken only while quotas of the type are
// configured; replace() runs on the follow loop's thread, the rest on network threads.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "base/mutex.h"
#include "handlers/windowed_rate.h"
#include "metadata/quota_store.h"

namespace silt::handlers {

enum class quota_type : uint8_t { produce = 0, fetch = 1, request = 2 };
inline constexpr size_t quota_type_count = 3;

// The quota key of a type: producer_byte_rate, consumer_byte_rate, request_percentage.
[[nodiscard]] std::string_view quota_key(quota_type t);
// Kafka's name of the type (Produce, Fetch, Request), as its metrics' label.
[[nodiscard]] std::string_view quota_type_name(quota_type t);

// The quota a client falls under for one type: whose rate is measured (user and client id,
// either empty when not part of it) and the quota (none: unlimited).
struct quota_resolution {
  std::string user;
  std::string client_id;
  std::optional<double> limit;
  bool operator==(const quota_resolution&) const = default;
};

// The resolution of user `user` and client id `client_id` among `quotas` (the entities that
// have a quota of one type, and its value), in Kafka's order (see above).
[[nodiscard]] quota_resolution resolve_quota(const std::map<metadata::quota_entity, double>& quotas,
                                             std::string_view user, std::string_view client_id);

struct quota_window {
  int32_t samples = 11;        // quota.window.num
  int32_t window_seconds = 1;  // quota.window.size.seconds
};

// Throttled requests of one type since the start, and their throttle time.
struct quota_type_stats {
  uint64_t throttled = 0;
  uint64_t throttle_ms = 0;
};

class client_quotas {
 public:
  explicit client_quotas(quota_window w = {});
  client_quotas(const client_quotas&) = delete;
  client_quotas& operator=(const client_quotas&) = delete;

  // Replaces the configured quotas (as the store holds them). Rates measured so far are kept.
  void replace(const metadata::quota_map& quotas) EXCLUDES(mu_);

  // Held around each change of the quota store and the replace() that follows it, by
  // AlterClientQuotas and the follow loop alike, so that what is in memory ends as the store
  // does whatever order they run in.
  base::mutex change_mu;

  // Every quota, as last replaced (DescribeClientQuotas answers from it).
  [[nodiscard]] metadata::quota_map snapshot() const EXCLUDES(mu_);

  // Whether any quota of type `t` is configured: the request path asks this first and does
  // nothing more when none is.
  [[nodiscard]] bool enabled(quota_type t) const {
    return enabled_[static_cast<size_t>(t)].load(std::memory_order_relaxed);
  }

  // Adds `value` to the rate of (user, client_id) for type `t` at `now_ms` (a steady clock) and
  // returns the throttle time it earns in milliseconds (0: within its quota, or none applies).
  [[nodiscard]] int32_t record(quota_type t, std::string_view user, std::string_view client_id,
                               double value, int64_t now_ms) EXCLUDES(mu_);

  // The most of type `t` that (user, client_id) may use in one whole quota span (the quota
  // times quota.window.num - 1 windows, as Kafka bounds a throttled consumer's fetch size);
  // none without a quota.
  [[nodiscard]] std::optional<double> max_in_window(quota_type t, std::string_view user,
                                                    std::string_view client_id) EXCLUDES(mu_);

  [[nodiscard]] quota_type_stats stats(quota_type t) const;
  // Client rates currently kept (each expires once it has recorded nothing for a whole span).
  [[nodiscard]] size_t rates() const EXCLUDES(mu_);

 private:
  using rate_key = std::tuple<quota_type, std::string, std::string>;
  void expire_locked(int64_t now_ms) REQUIRES(mu_);

  const quota_window window_;
  std::array<std::atomic<bool>, quota_type_count> enabled_{};
  std::array<std::atomic<uint64_t>, quota_type_count> throttled_{};
  std::array<std::atomic<uint64_t>, quota_type_count> throttle_ms_{};
  mutable base::mutex mu_;
  metadata::quota_map all_ GUARDED_BY(mu_);
  std::array<std::map<metadata::quota_entity, double>, quota_type_count> quotas_ GUARDED_BY(mu_);
  std::map<rate_key, windowed_rate> rates_ GUARDED_BY(mu_);
  int64_t last_expiry_ms_ GUARDED_BY(mu_) = 0;
};

}  // namespace silt::handlers
