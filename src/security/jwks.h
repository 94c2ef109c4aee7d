// Where the broker's OAUTHBEARER verification keys come from: the JWKS (JSON Web Key Set) at
// Kafka's sasl.oauthbearer.jwks.endpoint.url, a file (file:///path, or a bare path) or an
// http:// or https:// URL fetched with libcurl. The set is kept in memory as an immutable
// jwk_set and replaced by a thread of its own: every refresh interval, and early when a token
// names a key id the set lacks (a key the identity provider has just rotated in), as Kafka's
// RefreshingHttpsJwks does. Early refreshes are rate-limited: one key id asks again only after
// a minute (Kafka's constant), at most 16 key ids are remembered, and fetches start at least
// max(retry_backoff, 100 ms) apart, so that tokens naming made-up key ids cannot turn the
// broker against its identity provider. A failed load is retried with a doubling backoff from
// retry_backoff for up to retry_backoff_max; when all attempts fail the set in memory stays.
// Unlike Kafka, which reads a JWKS file once, a file is read again on the same schedule, so
// that replacing it takes effect without a restart.
//
// Lifecycle: open() loads the set once on the caller's thread (with the retries above) and
// fails if it cannot, as Kafka's broker does not start then; it then starts the refresh
// thread. The destructor stops the thread, aborting a fetch in progress, and joins it.
// Thread-safe: keys() and key_missing() may be called from any thread, network threads
// included; neither waits on I/O (a mutex held for a pointer copy or a flag).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

#include "base/mutex.h"
#include "security/jwk.h"

namespace silt::security {

struct jwks_options {
  std::string url;                                        // sasl.oauthbearer.jwks.endpoint.url
  std::chrono::milliseconds refresh_interval{3'600'000};  // ...jwks.endpoint.refresh.ms
  std::chrono::milliseconds retry_backoff{100};           // ...jwks.endpoint.retry.backoff.ms
  std::chrono::milliseconds retry_backoff_max{10'000};    // ...jwks.endpoint.retry.backoff.max.ms
  // Silt's own bounds on one fetch.
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds fetch_timeout{30'000};
  size_t max_document_bytes = 1 << 20;
  size_t max_json_depth = 32;
  // https: the CA certificates (a PEM file) to trust instead of the system's; empty: the
  // system's.
  std::string ca_file;
};

class jwks_source {
 public:
  // The source of `options.url`, its first set loaded; the error says why it could not be
  // (the URL's credentials masked).
  [[nodiscard]] static tl::expected<std::shared_ptr<jwks_source>, std::string> open(
      jwks_options options);
  // A set that never changes, from a document in memory (tests, fuzzing): no thread.
  [[nodiscard]] static tl::expected<std::shared_ptr<jwks_source>, std::string> fixed(
      std::string_view document);

  ~jwks_source();
  jwks_source(const jwks_source&) = delete;
  jwks_source& operator=(const jwks_source&) = delete;

  // The set as last loaded.
  [[nodiscard]] std::shared_ptr<const jwk_set> keys() const EXCLUDES(mu_);
  // A token named `kid` (empty: it named none) and no key of the set fits it: asks the thread
  // for an early refresh, within the rate limits above. Returns at once.
  void key_missing(std::string_view kid) EXCLUDES(mu_);
  // How many times a set was loaded (1 once open() returns it).
  [[nodiscard]] uint64_t loads() const { return loads_.load(std::memory_order_acquire); }
  // The URL with its credentials masked, for log lines.
  [[nodiscard]] const std::string& location() const { return location_; }

 private:
  explicit jwks_source(jwks_options options);

  // One load with its retries; the set, or why the last attempt failed.
  tl::expected<jwk_set, std::string> load() EXCLUDES(mu_);
  // Waits up to `d` or until stop; false when stopping.
  bool sleep(std::chrono::steady_clock::duration d) EXCLUDES(mu_);
  void install(jwk_set set) EXCLUDES(mu_);
  void run() EXCLUDES(mu_);

  const jwks_options options_;
  const std::string location_;
  std::atomic<uint64_t> loads_{0};
  std::atomic<bool> stopping_{false};  // also read by libcurl's progress callback

  mutable base::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<const jwk_set> keys_ GUARDED_BY(mu_);
  bool early_ GUARDED_BY(mu_) = false;
  // Key ids that asked for an early refresh, and when each may ask again.
  std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> missing_
      GUARDED_BY(mu_);

  std::thread thread_;
};

}  // namespace silt::security
