// An object store in an S3 bucket (AWS S3, Ceph radosgw, or any S3-compatible server).
//
// Requests are signed with AWS Signature V4 by libcurl (CURLOPT_AWS_SIGV4); each carries
// x-amz-content-sha256 with the payload's SHA-256 (or UNSIGNED-PAYLOAD when sign_payload is
// off), so the server also checks the body's integrity. Objects up to multipart_threshold go up
// in one PUT; larger ones as a multipart upload of part_size parts, upload_concurrency at a
// time, aborted if a part fails for good. Reads are ranged GETs; listings use ListObjectsV2.
//
// Retries: connection failures, timeouts, 5xx (but 501), 503 SlowDown and 429 are retried up
// to retry.max_attempts attempts with exponential backoff and full jitter (backoff.h); so are
// truncated bodies and the few 400 codes that mean "send it again" (RequestTimeout,
// IncompleteBody, XAmzContentSHA256Mismatch, BadDigest). Everything else fails at once.
//
// Threads: every call may come from any thread. The store holds a pool of curl handles
// (http_client.h); a multipart put runs its parts on extra threads of its own for its duration.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "storage/object/backoff.h"
#include "storage/object/http_client.h"
#include "storage/object/http_retry.h"
#include "storage/object/object_store.h"
#include "storage/object/uri.h"

namespace silt::storage {

struct s3_options {
  std::string bucket;
  // scheme://host[:port] of the S3 server; empty: https://s3.REGION.amazonaws.com.
  std::string endpoint;
  std::string region = "us-east-1";
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // temporary credentials only (x-amz-security-token)
  // Path-style (http://host/bucket/key) or virtual-hosted (http://bucket.host/key) URLs. A
  // virtual-hosted bucket needs a host name that resolves with the bucket in front (AWS does;
  // libcurl resolves any *.localhost itself; an IP address cannot work and is refused).
  bool path_style = false;
  uint64_t multipart_threshold = 16ull << 20;  // larger objects use a multipart upload
  uint64_t part_size = 8ull << 20;             // S3 requires at least 5 MiB but for the last
  uint32_t upload_concurrency = 4;             // parts of one put in flight at a time
  bool sign_payload = true;        // false: UNSIGNED-PAYLOAD (no hashing; TLS protects the body)
  uint32_t list_page_size = 1000;  // max-keys of each ListObjectsV2 request
  retry_policy retry;
  uint64_t jitter_seed = 0;  // 0: a random seed
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{0};  // 0: none (large objects take long)
  std::chrono::seconds stall_timeout{30};        // a transfer moving no byte this long fails
  // How the store waits between retries; tests substitute a recorder. Default: a wait that
  // cancel() cuts short.
  std::function<void(std::chrono::milliseconds)> sleep;
  // Called with a one-line description of every failed attempt, retried or not (for logs).
  std::function<void(std::string_view)> on_failure;
};

using env_lookup = uri::env_lookup;

// The options an s3:// URI gives:
//   s3://BUCKET?endpoint=http://127.0.0.1:7480&region=us-east-1&path_style=true
//       &access_key=..&secret_key=..
// Parameters (values percent-decoded; '+' stays '+'): endpoint, region, path_style,
// access_key, secret_key, session_token, multipart_threshold, part_size (bytes),
// upload_concurrency, max_attempts, sign_payload (true/false), connect_timeout_ms,
// request_timeout_ms. Credentials missing from the URI come from AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN; the region from AWS_REGION, then
// AWS_DEFAULT_REGION, then us-east-1. The error names the bad part.
[[nodiscard]] tl::expected<s3_options, std::string> parse_s3_uri(std::string_view uri,
                                                                 const env_lookup& env = {});

// Whether `name` follows S3's bucket naming rules: 3-63 characters of a-z, 0-9, '.' and '-',
// starting and ending with a letter or digit.
[[nodiscard]] bool valid_s3_bucket_name(std::string_view name);

class s3_store final : public object_store {
 public:
  // Checks the options (bucket name, endpoint, credentials, sizes); no request is made.
  [[nodiscard]] static tl::expected<std::unique_ptr<s3_store>, std::string> open(
      s3_options options);

  // Creates the bucket (in the store's region); succeeds when this account already owns it.
  [[nodiscard]] tl::expected<void, store_error> create_bucket();
  // Deletes the bucket, which must be empty; succeeds when there is no such bucket.
  [[nodiscard]] tl::expected<void, store_error> delete_bucket();

  [[nodiscard]] tl::expected<void, store_error> put(std::string_view key,
                                                    std::span<const uint8_t> data) override;
  // One PUT with If-None-Match: * (at most 5 GiB; never a multipart upload).
  [[nodiscard]] tl::expected<void, store_error> put_if_absent(
      std::string_view key, std::span<const uint8_t> data) override;
  [[nodiscard]] tl::expected<std::vector<uint8_t>, store_error> get(std::string_view key,
                                                                    uint64_t offset,
                                                                    uint64_t length) override;
  [[nodiscard]] tl::expected<uint64_t, store_error> head(std::string_view key) override;
  [[nodiscard]] tl::expected<void, store_error> remove(std::string_view key) override;
  [[nodiscard]] tl::expected<std::vector<object_info>, store_error> list(
      std::string_view prefix) override;
  [[nodiscard]] std::string describe() const override;
  void cancel() override;

  // The URL of `key` (of the bucket when empty) with a query already in canonical form.
  [[nodiscard]] std::string url(std::string_view key, std::string_view query = {}) const;

 private:
  struct endpoint_parts {
    std::string scheme;  // "http" or "https"
    std::string host;    // host[:port]
  };
  s3_store(s3_options options, endpoint_parts endpoint);

  // Sends `req`, retrying transient failures (http_retry.h).
  [[nodiscard]] tl::expected<http::response, store_error> execute(
      const http::request& req, const http::transient_check& unusable = {}) {
    return http_.execute(req, unusable);
  }
  [[nodiscard]] http::request make_request(std::string method, std::string_view key,
                                           std::string_view query,
                                           std::span<const uint8_t> body) const;
  // `if_absent`: the write is conditional (If-None-Match: *, one PUT); a 412 or 409 is
  // returned as already_exists, to be settled by taken_by().
  [[nodiscard]] tl::expected<void, store_error> put_object(std::string_view key,
                                                           std::span<const uint8_t> data,
                                                           bool if_absent);
  [[nodiscard]] tl::expected<void, store_error> put_single(std::string_view key,
                                                           std::span<const uint8_t> data,
                                                           bool if_absent);
  [[nodiscard]] tl::expected<void, store_error> put_multipart(std::string_view key,
                                                              std::span<const uint8_t> data);

  const s3_options options_;
  const endpoint_parts endpoint_;
  http::retrying_client http_;
};

}  // namespace silt::storage
