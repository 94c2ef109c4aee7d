// One HTTP/1.1 exchange at a time per call, over libcurl, for the S3 store. Requests are
// signed by libcurl itself (AWS Signature V4) when credentials are set.
//
// The client keeps a small pool of curl easy handles (and with them their open connections,
// DNS and TLS session caches) behind a mutex: a call takes an idle handle or makes one, and
// returns it afterwards. Thread-safe; no retries here (the S3 store decides what to retry).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mutex.h"

namespace silt::storage::http {

struct client_options {
  std::string aws_sigv4;  // e.g. "aws:amz:us-east-1:s3"; empty: requests are not signed
  std::string access_key;
  std::string secret_key;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{0};  // a whole exchange at most; 0: no limit
  std::chrono::seconds stall_timeout{30};        // no byte moved for this long fails it
  size_t max_idle_handles = 16;
};

struct request {
  std::string method;                // GET, HEAD, PUT, POST or DELETE
  std::string url;                   // already encoded, query in canonical form
  std::vector<std::string> headers;  // "Name: value"
  std::span<const uint8_t> body;     // sent with PUT and POST
  // A GET of a byte range: if the server ignores Range and sends the whole object (200), only
  // these bytes of it are kept.
  uint64_t window_offset = 0;
  uint64_t window_length = std::numeric_limits<uint64_t>::max();
};

enum class transport : uint8_t {
  ok,       // a response arrived (any status)
  timeout,  // connect, stall or request timeout
  failed,   // connection refused or reset, truncated body, DNS, ...: worth another attempt
  fatal,    // a bad URL, an unsupported scheme, a certificate that does not verify: not
};

struct response {
  transport outcome = transport::failed;
  std::string transport_error;  // libcurl's message when outcome != ok
  long status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::vector<uint8_t> body;

  [[nodiscard]] std::optional<std::string_view> header(std::string_view lower_name) const;
  [[nodiscard]] std::string_view body_text() const {
    return {reinterpret_cast<const char*>(body.data()), body.size()};
  }
};

class client {
 public:
  explicit client(client_options options);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // Performs `r`; never throws.
  [[nodiscard]] response perform(const request& r);
  // Aborts the exchanges in progress (within about a second: libcurl's progress callback) and
  // fails every later one at once. Irreversible.
  void cancel();
  [[nodiscard]] bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

 private:
  void* acquire();  // a CURL*, kept opaque so that users need not include curl.h
  void release(void* handle);

  const client_options options_;
  std::atomic<bool> cancelled_{false};
  base::mutex mu_;
  std::vector<void*> idle_ GUARDED_BY(mu_);
};

}  // namespace silt::storage::http
