// An object store in an Azure Blob Storage container (Azure, or Azurite for tests).
//
// Requests are signed with Shared Key (HMAC-SHA256 of the canonical request, OpenSSL) or carry
// a SAS token instead. Objects up to block_threshold go up in one Put Blob; larger ones as
// blocks of block_size (Put Block, upload_concurrency at a time) committed by Put Block List.
// Reads are ranged Get Blob calls (x-ms-range); listings are List Blobs pages followed by their
// NextMarker. A conditional create sends If-None-Match: * (Azure answers 409 BlobAlreadyExists
// or 412 when the blob exists).
//
// Retries: connection failures, timeouts, 500, 503 (ServerBusy) and 429 are retried up to
// retry.max_attempts attempts with exponential backoff and full jitter (http_retry.h), as are
// truncated bodies. Everything else fails at once: 403 is access_denied (a wrong key or an
// expired SAS), 404 not_found (no blob, or no container for any call).
//
// Threads: every call may come from any thread; a block upload runs its blocks on extra threads
// of its own for its duration.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/object/backoff.h"
#include "storage/object/http_client.h"
#include "storage/object/http_retry.h"
#include "storage/object/object_store.h"
#include "storage/object/uri.h"

namespace silt::storage {

struct azure_options {
  std::string container;
  std::string account;
  // scheme://host[:port][/path] of the Blob service; empty: https://ACCOUNT.blob.core.windows.net.
  // Azurite's is http://127.0.0.1:10000/ACCOUNT (the account in the path).
  std::string endpoint;
  std::string key;  // the account key (base64), for Shared Key signing
  std::string sas;  // a SAS token (the query string, without '?'), used when there is no key
  uint64_t block_threshold = 32ull << 20;  // larger objects go up as blocks
  uint64_t block_size = 8ull << 20;
  uint32_t upload_concurrency = 4;  // blocks of one put in flight at a time
  uint32_t list_page_size = 1000;   // maxresults of each List Blobs request (1-5000)
  bool create_container = false;    // open_object_store creates the container when missing
  retry_policy retry;
  uint64_t jitter_seed = 0;  // 0: a random seed
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{0};  // 0: none (large objects take long)
  std::chrono::seconds stall_timeout{30};        // a transfer moving no byte this long fails
  // How the store waits between retries; empty: a wait that cancel() cuts short.
  std::function<void(std::chrono::milliseconds)> sleep;
  // Called with a one-line description of every failed attempt, retried or not (for logs).
  std::function<void(std::string_view)> on_failure;
  // The time requests are signed with (x-ms-date); empty: the system clock. For tests.
  std::function<std::chrono::system_clock::time_point()> now;
};

// The options an azblob:// URI gives:
//   azblob://CONTAINER?endpoint=http://127.0.0.1:10000/devstoreaccount1&account=devstoreaccount1
//       &key=BASE64 (or &sas=URL-ENCODED-TOKEN)
// Parameters (values percent-decoded; '+' stays '+'): endpoint, account, key, sas,
// block_threshold, block_size (bytes), upload_concurrency, max_attempts, connect_timeout_ms,
// request_timeout_ms, create_container (true/false). The account missing from the URI comes
// from AZURE_STORAGE_ACCOUNT; the credentials from AZURE_STORAGE_KEY, then
// AZURE_STORAGE_SAS_TOKEN. The error names the bad part.
[[nodiscard]] tl::expected<azure_options, std::string> parse_azure_uri(
    std::string_view uri, const uri::env_lookup& env = {});

// Whether `name` follows Azure's container naming rules: 3-63 characters of a-z, 0-9 and '-',
// starting and ending with a letter or digit, no "--".
[[nodiscard]] bool valid_azure_container_name(std::string_view name);

namespace azure {

// What Shared Key signs for a request (the "string to sign" of Azure's documentation):
// the verb, the standard headers, the canonical x-ms-* headers and the canonical resource
// (/ACCOUNT + the URL's path, then each query parameter as "\nname:value", names in lower case
// and sorted, values decoded). `headers` are "Name: value" lines; `content_length` is the body's.
[[nodiscard]] std::string string_to_sign(std::string_view method,
                                         const std::vector<std::string>& headers,
                                         uint64_t content_length, std::string_view account,
                                         std::string_view url);
// "SharedKey ACCOUNT:BASE64(HMAC-SHA256(key, string_to_sign))"; empty when the key is not
// base64.
[[nodiscard]] std::string authorization(std::string_view account, std::string_view key_base64,
                                        std::string_view string_to_sign);
// An RFC 1123 date in GMT, as x-ms-date takes it ("Fri, 04 Dec 2026 08:00:00 GMT").
[[nodiscard]] std::string http_date(std::chrono::system_clock::time_point t);

}  // namespace azure

class azure_store final : public object_store {
 public:
  // Checks the options (container name, account, endpoint, credentials, sizes); no request is
  // made.
  [[nodiscard]] static tl::expected<std::unique_ptr<azure_store>, std::string> open(
      azure_options options);

  // Creates the container; succeeds when it exists already.
  [[nodiscard]] tl::expected<void, store_error> create_container();
  // Deletes the container and everything in it; succeeds when there is no such container.
  [[nodiscard]] tl::expected<void, store_error> delete_container();

  [[nodiscard]] tl::expected<void, store_error> put(std::string_view key,
                                                    std::span<const uint8_t> data) override;
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

  // The URL of `key` (of the container when empty), `query` already encoded.
  [[nodiscard]] std::string url(std::string_view key, std::string_view query = {}) const;

 private:
  explicit azure_store(azure_options options);

  // A request with `extra` headers, not signed yet.
  [[nodiscard]] http::request unsigned_request(std::string method, std::string_view key,
                                               std::string_view query,
                                               std::span<const uint8_t> body,
                                               std::vector<std::string> extra = {}) const;
  // The same with x-ms-date and x-ms-version, signed (or authorised by the SAS in its URL).
  [[nodiscard]] http::request make_request(std::string method, std::string_view key,
                                           std::string_view query, std::span<const uint8_t> body,
                                           std::vector<std::string> extra = {}) const;
  // Adds x-ms-date, x-ms-version and the Authorization header (none with a SAS).
  void sign(http::request& req) const;
  [[nodiscard]] tl::expected<void, store_error> put_object(std::string_view key,
                                                           std::span<const uint8_t> data,
                                                           bool if_absent);
  [[nodiscard]] tl::expected<void, store_error> put_blocks(std::string_view key,
                                                           std::span<const uint8_t> data,
                                                           bool if_absent);

  const azure_options options_;
  http::retrying_client http_;
};

}  // namespace silt::storage
