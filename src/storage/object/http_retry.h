// What the HTTP object stores (S3, Azure Blob) share: the retry loop around http::client, with
// backoff, cancellation and one log line per failed attempt, and the checks of a ranged GET.
//
// The store says which responses are transient (worth another attempt, and the error if the
// attempts run out); everything else is returned to it as a response to interpret.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "storage/object/backoff.h"
#include "storage/object/http_client.h"
#include "storage/object/object_store.h"

namespace silt::storage::http {

[[nodiscard]] inline bool is_2xx(const response& r) {
  return r.status >= 200 && r.status < 300;
}

// A decimal number that is the whole of `s`.
[[nodiscard]] std::optional<uint64_t> parse_u64(std::string_view s);

// What both HTTP stores retry: a timeout, a failed connection, 429 and 503 (throttled), other
// 5xx but 501 (io); nullopt for anything else.
[[nodiscard]] std::optional<store_error> common_transient_error(const response& r);
// The final statuses both map alike: 404 not_found, 401 and 403 access_denied, 416
// invalid_range, and a fatal transport failure io; nullopt for anything else.
[[nodiscard]] std::optional<store_error> common_final_error(const response& r);

// Classifies a response: the error it stands for when another attempt may help.
using transient_check = std::function<std::optional<store_error>(const response&)>;

struct retry_options {
  std::string label;  // "s3", "azblob": the first word of log lines
  retry_policy retry;
  uint64_t jitter_seed = 0;  // 0: a random seed
  // How to wait between attempts; empty: a wait that cancel() cuts short.
  std::function<void(std::chrono::milliseconds)> sleep;
  // Called with a one-line description of every failed attempt, retried or not.
  std::function<void(std::string_view)> on_failure;
  // The store's transient failures (connection, timeout, 5xx, throttling...).
  transient_check transient;
  // The error code a response carries (for log lines); nullopt when none.
  std::function<std::optional<std::string>(const response&)> error_code;
};

class retrying_client {
 public:
  retrying_client(client_options http, retry_options retry);

  // Sends `req`, retrying transient failures. `unusable` may call a 2xx response transient too
  // (a short body, an error document in a 200). The error is the last attempt's.
  [[nodiscard]] tl::expected<response, store_error> execute(const request& req,
                                                            const transient_check& unusable = {});
  // Aborts the exchanges in progress and the waits between attempts; later calls fail at once.
  void cancel();
  [[nodiscard]] bool cancelled() const { return client_.cancelled(); }
  [[nodiscard]] const retry_options& options() const { return options_; }

 private:
  void report(const request& req, const response& resp, uint32_t attempt,
              std::optional<std::chrono::milliseconds> retry_in) const;

  const retry_options options_;
  client client_;
  backoff backoff_;
  std::mutex cancel_mu_;
  std::condition_variable cancel_cv_;
};

// Whether a 2xx answer to a GET of `length` bytes from `offset` carries that range: a 206 must
// start at `offset` and hold as many bytes as its Content-Range says; a 200 (the whole object)
// as many as its Content-Length leaves from `offset`. io when not (a body cut short).
[[nodiscard]] std::optional<store_error> check_ranged_body(const response& r, uint64_t offset,
                                                           uint64_t length);

// The ranged read of the HTTP stores, with object_store::get's contract. `base` is the GET of
// the object without a range; `range_header` the header that takes one ("Range",
// "x-ms-range"); `finish` completes a request once its headers are all there (signing it);
// `head` and `error_of` are the store's.
struct ranged_get_calls {
  std::string_view range_header;
  std::function<void(request&)> finish;
  std::function<tl::expected<uint64_t, store_error>()> head;
  std::function<store_error(const response&)> error_of;
};
[[nodiscard]] tl::expected<std::vector<uint8_t>, store_error> ranged_get(
    retrying_client& client, request base, uint64_t offset, uint64_t length,
    const ranged_get_calls& calls);

// The value of a Range header for `length` bytes from `offset` ("bytes=10-19", "bytes=10-").
[[nodiscard]] std::string range_value(uint64_t offset, uint64_t length);

}  // namespace silt::storage::http
