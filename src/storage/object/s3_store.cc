#include "storage/object/s3_store.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include <openssl/evp.h>

#include "base/redact.h"
#include "storage/object/s3_xml.h"
#include "storage/object/uri.h"

namespace silt::storage {
namespace {

// The SHA-256 of no bytes: the payload hash of every request without a body.
constexpr std::string_view empty_sha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr size_t max_key_bytes = 1024;           // S3's limit
constexpr uint64_t max_parts = 10000;            // S3's limit on parts of one upload
constexpr uint64_t max_single_put = 5ull << 30;  // S3's limit on one PUT

std::string sha256_hex(std::span<const uint8_t> data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) != 1) return {};
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xf];
  }
  return out;
}

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

using http::is_2xx;
using http::parse_u64;

// A failure worth another attempt, and what it is if the attempts run out.
std::optional<store_error> transient_error(const http::response& r) {
  if (auto e = http::common_transient_error(r)) return e;
  if (r.status == 400) {
    const auto code = s3_xml::parse_error_code(r.body_text());
    if (!code) return std::nullopt;
    if (*code == "SlowDown") return store_error::throttled;
    if (*code == "RequestTimeout" || *code == "IncompleteBody" ||
        *code == "XAmzContentSHA256Mismatch" || *code == "BadDigest")
      return store_error::io;
  }
  return std::nullopt;
}

// The error a final, unsuccessful response stands for.
store_error error_of(const http::response& r) {
  if (auto e = transient_error(r)) return *e;
  if (auto e = http::common_final_error(r)) return *e;
  if (r.status == 400) {
    const auto code = s3_xml::parse_error_code(r.body_text()).value_or("");
    if (code == "InvalidBucketName" || code == "KeyTooLongError" || code == "InvalidArgument" ||
        code == "InvalidURI")
      return store_error::invalid_argument;
  }
  return store_error::io;
}

bool is_ip_literal(std::string_view host) {
  if (host.starts_with('[')) return true;  // IPv6
  const size_t colon = host.rfind(':');
  if (colon != std::string_view::npos) host = host.substr(0, colon);
  return !host.empty() && std::all_of(host.begin(), host.end(),
                                      [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

}  // namespace

tl::expected<std::unique_ptr<s3_store>, std::string> s3_store::open(s3_options options) {
  if (!valid_s3_bucket_name(options.bucket)) {
    return tl::make_unexpected("bucket name '" + options.bucket +
                               "' is invalid (3-63 characters: a-z, 0-9, '.', '-')");
  }
  if (options.region.empty() || options.region.find(':') != std::string::npos) {
    return tl::make_unexpected("region '" + options.region + "' is invalid");
  }
  if (options.access_key.empty() || options.secret_key.empty()) {
    return tl::make_unexpected(std::string("no credentials (access key and secret key)"));
  }
  if (options.endpoint.empty())
    options.endpoint = "https://s3." + options.region + ".amazonaws.com";
  endpoint_parts ep;
  const size_t sep = options.endpoint.find("://");
  if (sep != std::string::npos) {
    ep.scheme = options.endpoint.substr(0, sep);
    ep.host = options.endpoint.substr(sep + 3);
  }
  if (ep.host.ends_with('/')) ep.host.pop_back();
  if ((ep.scheme != "http" && ep.scheme != "https") || ep.host.empty() ||
      ep.host.find_first_of("/?#@") != std::string::npos) {
    return tl::make_unexpected("endpoint '" + base::redact_uri(options.endpoint) +
                               "' is not of the form http[s]://host[:port]");
  }
  if (!options.path_style && is_ip_literal(ep.host)) {
    return tl::make_unexpected("endpoint '" + options.endpoint +
                               "' is an IP address: virtual-hosted addressing needs a host name "
                               "(or set path_style=true)");
  }
  if (options.part_size == 0 || options.upload_concurrency == 0 || options.list_page_size == 0 ||
      options.list_page_size > 1000 || options.retry.max_attempts == 0) {
    return tl::make_unexpected(std::string(
        "part_size, upload_concurrency and max_attempts must be positive, list_page_size 1-1000"));
  }
  return std::unique_ptr<s3_store>(new s3_store(std::move(options), std::move(ep)));
}

s3_store::s3_store(s3_options options, endpoint_parts endpoint)
    : options_(std::move(options)),
      endpoint_(std::move(endpoint)),
      http_(
          http::client_options{
              .aws_sigv4 = "aws:amz:" + options_.region + ":s3",
              .access_key = options_.access_key,
              .secret_key = options_.secret_key,
              .connect_timeout = options_.connect_timeout,
              .request_timeout = options_.request_timeout,
              .stall_timeout = options_.stall_timeout,
          },
          http::retry_options{
              .label = "s3",
              .retry = options_.retry,
              .jitter_seed = options_.jitter_seed,
              .sleep = options_.sleep,
              .on_failure = options_.on_failure,
              .transient = transient_error,
              .error_code =
                  [](const http::response& r) { return s3_xml::parse_error_code(r.body_text()); },
          }) {}

std::string s3_store::url(std::string_view key, std::string_view query) const {
  std::string out = endpoint_.scheme + "://";
  if (options_.path_style) {
    out += endpoint_.host;
    out += '/';
    out += options_.bucket;
    if (!key.empty()) out += '/';
  } else {
    out += options_.bucket;
    out += '.';
    out += endpoint_.host;
    out += '/';
  }
  out += uri::encode(key, /*keep_slash=*/true);
  if (!query.empty()) {
    out += '?';
    out += query;
  }
  return out;
}

std::string s3_store::describe() const {
  return "s3://" + options_.bucket + " at " + endpoint_.scheme + "://" + endpoint_.host +
         (options_.path_style ? " (path-style)" : " (virtual-hosted)");
}

http::request s3_store::make_request(std::string method, std::string_view key,
                                     std::string_view query, std::span<const uint8_t> body) const {
  http::request r;
  r.method = std::move(method);
  r.url = url(key, query);
  r.body = body;
  std::string hash = body.empty()            ? std::string(empty_sha256)
                     : options_.sign_payload ? sha256_hex(body)
                                             : std::string("UNSIGNED-PAYLOAD");
  r.headers.push_back("x-amz-content-sha256: " + hash);
  if (!options_.session_token.empty()) {
    r.headers.push_back("x-amz-security-token: " + options_.session_token);
  }
  if (r.method == "POST") r.headers.emplace_back("Content-Type: application/xml");
  return r;
}

tl::expected<void, store_error> s3_store::create_bucket() {
  std::string body;
  if (options_.region != "us-east-1") {
    body =
        "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<LocationConstraint>" +
        options_.region + "</LocationConstraint></CreateBucketConfiguration>";
  }
  auto r = execute(make_request("PUT", "", "", bytes_of(body)));
  if (!r) return tl::make_unexpected(r.error());
  if (is_2xx(*r)) return {};
  if (r->status == 409) {
    if (s3_xml::parse_error_code(r->body_text()) == "BucketAlreadyOwnedByYou") return {};
    return tl::make_unexpected(store_error::access_denied);  // someone else's bucket
  }
  return tl::make_unexpected(error_of(*r));
}

tl::expected<void, store_error> s3_store::delete_bucket() {
  auto r = execute(make_request("DELETE", "", "", {}));
  if (!r) return tl::make_unexpected(r.error());
  if (is_2xx(*r) || r->status == 404) return {};
  if (r->status == 409) return tl::make_unexpected(store_error::invalid_argument);  // not empty
  return tl::make_unexpected(error_of(*r));
}

tl::expected<void, store_error> s3_store::put(std::string_view key, std::span<const uint8_t> data) {
  return put_object(key, data, /*if_absent=*/false);
}

tl::expected<void, store_error> s3_store::put_if_absent(std::string_view key,
                                                        std::span<const uint8_t> data) {
  auto r = put_object(key, data, /*if_absent=*/true);
  if (!r && r.error() == store_error::already_exists) return taken_by(key, data);
  return r;
}

tl::expected<void, store_error> s3_store::put_object(std::string_view key,
                                                     std::span<const uint8_t> data,
                                                     bool if_absent) {
  if (key.empty() || key.size() > max_key_bytes) {
    return tl::make_unexpected(store_error::invalid_argument);
  }
  // A conditional write goes up in one PUT whatever its size: radosgw ignores If-None-Match on
  // CompleteMultipartUpload and would replace the object.
  if (if_absent && data.size() > max_single_put) {
    return tl::make_unexpected(store_error::invalid_argument);
  }
  if (!if_absent && data.size() > options_.multipart_threshold) return put_multipart(key, data);
  return put_single(key, data, if_absent);
}

namespace {
constexpr std::string_view if_none_match = "If-None-Match: *";

// The answer to a conditional write when the key is taken.
bool conflict(const http::response& r) {
  return r.status == 412 || r.status == 409;
}
}  // namespace

tl::expected<void, store_error> s3_store::put_single(std::string_view key,
                                                     std::span<const uint8_t> data,
                                                     bool if_absent) {
  auto req = make_request("PUT", key, "", data);
  if (if_absent) req.headers.emplace_back(if_none_match);
  auto r = execute(req);
  if (!r) return tl::make_unexpected(r.error());
  if (is_2xx(*r)) return {};
  if (if_absent && conflict(*r)) return tl::make_unexpected(store_error::already_exists);
  return tl::make_unexpected(error_of(*r));
}

tl::expected<void, store_error> s3_store::put_multipart(std::string_view key,
                                                        std::span<const uint8_t> data) {
  auto initiated = execute(make_request("POST", key, "uploads=", {}));
  if (!initiated) return tl::make_unexpected(initiated.error());
  if (!is_2xx(*initiated)) return tl::make_unexpected(error_of(*initiated));
  const auto upload_id = s3_xml::parse_upload_id(initiated->body_text());
  if (!upload_id) return tl::make_unexpected(store_error::io);
  const std::string upload_query = uri::canonical_query({{"uploadId", *upload_id}});
  const auto abort = [&] {
    // Best effort: an upload left behind only costs space until a lifecycle rule clears it.
    (void)execute(make_request("DELETE", key, upload_query, {}));
  };

  // S3 allows 10000 parts: a larger object gets larger parts.
  const uint64_t part_size =
      std::max(options_.part_size, (data.size() + max_parts - 1) / max_parts);
  const size_t parts = static_cast<size_t>((data.size() + part_size - 1) / part_size);
  std::vector<std::string> etags(parts);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  store_error first_error = store_error::io;  // guarded by error_mu
  const auto needs_etag = [](const http::response& r) -> std::optional<store_error> {
    if (!r.header("etag")) return store_error::io;
    return std::nullopt;
  };
  const auto upload_parts = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      const size_t i = next.fetch_add(1);
      if (i >= parts) return;
      const uint64_t begin = i * part_size;
      const auto part = data.subspan(begin, std::min<uint64_t>(part_size, data.size() - begin));
      const auto query =
          uri::canonical_query({{"partNumber", std::to_string(i + 1)}, {"uploadId", *upload_id}});
      auto r = execute(make_request("PUT", key, query, part), needs_etag);
      if (r && is_2xx(*r)) {
        etags[i] = std::string(*r->header("etag"));
        continue;
      }
      std::lock_guard lock(error_mu);
      if (!failed.exchange(true)) first_error = r ? error_of(*r) : r.error();
      return;
    }
  };
  {
    std::vector<std::jthread> helpers;
    const size_t threads = std::min<size_t>(options_.upload_concurrency, parts);
    for (size_t t = 1; t < threads; ++t) helpers.emplace_back(upload_parts);
    upload_parts();
  }
  if (failed.load()) {
    abort();
    std::lock_guard lock(error_mu);
    return tl::make_unexpected(first_error);
  }

  const std::string body = s3_xml::complete_multipart_body(etags);
  // S3 may answer 200 and then report an error in the body; that is retried like a 500.
  const auto completed_ok = [](const http::response& r) -> std::optional<store_error> {
    if (auto code = s3_xml::parse_error_code(r.body_text())) {
      return *code == "SlowDown" ? store_error::throttled : store_error::io;
    }
    return std::nullopt;
  };
  auto r = execute(make_request("POST", key, upload_query, bytes_of(body)), completed_ok);
  if (r && is_2xx(*r)) return {};
  if (r && r->status == 404 && s3_xml::parse_error_code(r->body_text()) == "NoSuchUpload") {
    // The upload is gone though it was never aborted: an earlier attempt completed it and
    // only its answer was lost. The object is there if it has the size written.
    auto size = head(key);
    if (size && *size == data.size()) return {};
  }
  abort();
  return tl::make_unexpected(r ? error_of(*r) : r.error());
}

tl::expected<std::vector<uint8_t>, store_error> s3_store::get(std::string_view key, uint64_t offset,
                                                              uint64_t length) {
  if (key.empty() || key.size() > max_key_bytes) {
    return tl::make_unexpected(store_error::invalid_argument);
  }
  return http::ranged_get(http_, make_request("GET", key, "", {}), offset, length,
                          {.range_header = "Range",
                           .finish = {},
                           .head = [&] { return head(key); },
                           .error_of = error_of});
}

tl::expected<uint64_t, store_error> s3_store::head(std::string_view key) {
  if (key.empty() || key.size() > max_key_bytes) {
    return tl::make_unexpected(store_error::invalid_argument);
  }
  auto r = execute(make_request("HEAD", key, "", {}));
  if (!r) return tl::make_unexpected(r.error());
  if (!is_2xx(*r)) return tl::make_unexpected(error_of(*r));
  const auto size = parse_u64(r->header("content-length").value_or(""));
  if (!size) return tl::make_unexpected(store_error::io);
  return *size;
}

tl::expected<void, store_error> s3_store::remove(std::string_view key) {
  if (key.empty() || key.size() > max_key_bytes) {
    return tl::make_unexpected(store_error::invalid_argument);
  }
  auto r = execute(make_request("DELETE", key, "", {}));
  if (!r) return tl::make_unexpected(r.error());
  if (is_2xx(*r)) return {};
  if (r->status == 404) {
    if (s3_xml::parse_error_code(r->body_text()) == "NoSuchBucket") {
      return tl::make_unexpected(store_error::not_found);
    }
    return {};
  }
  return tl::make_unexpected(error_of(*r));
}

tl::expected<std::vector<object_info>, store_error> s3_store::list(std::string_view prefix) {
  std::vector<object_info> out;
  std::string token;
  while (true) {
    std::vector<std::pair<std::string, std::string>> params = {
        {"list-type", "2"},
        {"prefix", std::string(prefix)},
        {"encoding-type", "url"},
        {"max-keys", std::to_string(options_.list_page_size)},
    };
    if (!token.empty()) params.emplace_back("continuation-token", token);
    const auto req = make_request("GET", "", uri::canonical_query(std::move(params)), {});
    auto r = execute(req);
    if (!r) return tl::make_unexpected(r.error());
    if (!is_2xx(*r)) return tl::make_unexpected(error_of(*r));
    auto page = s3_xml::parse_list(r->body_text());
    if (!page) {
      if (options_.on_failure) options_.on_failure("s3 GET " + req.url + ": " + page.error());
      return tl::make_unexpected(store_error::io);
    }
    std::move(page->objects.begin(), page->objects.end(), std::back_inserter(out));
    if (!page->truncated) break;
    token = std::move(page->next_token);
  }
  // S3 lists in UTF-8 byte order already; sorting makes it so for any server.
  std::sort(out.begin(), out.end(),
            [](const object_info& a, const object_info& b) { return a.key < b.key; });
  return out;
}

void s3_store::cancel() {
  http_.cancel();
}

}  // namespace silt::storage
