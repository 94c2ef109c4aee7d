#include "storage/object/azure_store.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/redact.h"
#include "storage/object/azure_xml.h"
#include "storage/object/uri.h"
#include "storage/object/xml_util.h"

namespace silt::storage {
namespace {

// The REST API version requests ask for: Put Blob up to 5000 MiB, If-None-Match on writes.
constexpr std::string_view api_version = "2021-12-02";
constexpr size_t max_key_bytes = 1024;
constexpr uint64_t max_blocks = 50000;  // Azure's limit on blocks of one blob

using http::is_2xx;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

std::string base64(std::span<const uint8_t> data) {
  std::string out(4 * ((data.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data.data(),
                                static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(std::max(n, 0)));
  return out;
}

std::optional<std::vector<uint8_t>> unbase64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  std::vector<uint8_t> out(text.size() / 4 * 3);
  const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  size_t size = static_cast<size_t>(n);
  // EVP_DecodeBlock counts the padding as zero bytes.
  if (text.ends_with("==")) {
    size -= 2;
  } else if (text.ends_with('=')) {
    size -= 1;
  }
  out.resize(size);
  return out;
}

std::optional<std::string> error_code(const http::response& r) {
  if (auto h = r.header("x-ms-error-code")) return std::string(*h);
  return xml::error_code(r.body_text());
}

// A failure worth another attempt, and what it is if the attempts run out.
std::optional<store_error> transient_error(const http::response& r) {
  if (auto e = http::common_transient_error(r)) return e;
  if (r.status == 408) return store_error::timeout;
  return std::nullopt;
}

// The error a final, unsuccessful response stands for.
store_error error_of(const http::response& r) {
  if (auto e = transient_error(r)) return *e;
  if (auto e = http::common_final_error(r)) return *e;
  if (r.status == 409 || r.status == 412) return store_error::already_exists;
  if (r.status == 400) {
    const auto code = error_code(r).value_or("");
    if (code == "InvalidResourceName" || code == "InvalidUri" || code == "OutOfRangeInput" ||
        code == "InvalidQueryParameterValue")
      return store_error::invalid_argument;
  }
  return store_error::io;
}

bool container_missing(const http::response& r) {
  return r.status == 404 && error_code(r) == "ContainerNotFound";
}

// The block ids of one upload: base64 of a fixed-length name (Azure wants them all the same
// length), percent-encoded for the query.
std::string block_id(size_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "silt-block-%06zu", index);
  return base64({reinterpret_cast<const uint8_t*>(name), std::strlen(name)});
}

}  // namespace

namespace azure {

std::string string_to_sign(std::string_view method, const std::vector<std::string>& headers,
                           uint64_t content_length, std::string_view account,
                           std::string_view url) {
  std::map<std::string, std::string> standard;
  std::map<std::string, std::string> ms;
  for (const auto& line : headers) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = lower(trim(std::string_view(line).substr(0, colon)));
    std::string value(trim(std::string_view(line).substr(colon + 1)));
    if (name.starts_with("x-ms-")) {
      ms[std::move(name)] = std::move(value);
    } else {
      standard[std::move(name)] = std::move(value);
    }
  }
  const auto field = [&](const char* name) {
    auto it = standard.find(name);
    return it == standard.end() ? std::string() : it->second;
  };
  std::string out(method);
  out += '\n';
  for (const char* name : {"content-encoding", "content-language"}) out += field(name) + "\n";
  // Since version 2015-02-21 a zero length is signed as an empty string.
  out += content_length == 0 ? std::string() : std::to_string(content_length);
  out += '\n';
  for (const char* name : {"content-md5", "content-type", "date", "if-modified-since", "if-match",
                           "if-none-match", "if-unmodified-since", "range"}) {
    out += field(name) + "\n";
  }
  for (const auto& [name, value] : ms) {
    out += name;
    out += ':';
    out += value;
    out += '\n';
  }

  // The canonical resource: /ACCOUNT/PATH, then the query parameters.
  std::string_view rest = url;
  const size_t scheme = rest.find("://");
  if (scheme != std::string_view::npos) rest.remove_prefix(scheme + 3);
  const size_t slash = rest.find('/');
  rest = slash == std::string_view::npos ? std::string_view("/") : rest.substr(slash);
  const size_t q = rest.find('?');
  const std::string_view path = rest.substr(0, q);
  out += '/';
  out += account;
  out += path.empty() ? "/" : path;
  if (q != std::string_view::npos) {
    std::map<std::string, std::vector<std::string>> params;
    auto parsed = uri::parse_query(rest.substr(q + 1));
    if (!parsed) parsed.emplace();
    for (auto& [name, value] : *parsed) {
      params[lower(name)].push_back(std::move(value));
    }
    for (auto& [name, values] : params) {
      std::sort(values.begin(), values.end());
      out += '\n' + name + ':';
      for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + values[i];
    }
  }
  return out;
}

std::string authorization(std::string_view account, std::string_view key_base64,
                          std::string_view string_to_sign) {
  const auto key = unbase64(key_base64);
  if (!key || key->empty()) return {};
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key->data(), static_cast<int>(key->size()),
           reinterpret_cast<const unsigned char*>(string_to_sign.data()), string_to_sign.size(),
           mac, &length) == nullptr) {
    return {};
  }
  return "SharedKey " + std::string(account) + ":" + base64({mac, length});
}

std::string http_date(std::chrono::system_clock::time_point t) {
  static constexpr const char* days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char out[40];
  std::snprintf(out, sizeof out, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday % 7],
                tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                tm.tm_sec);
  return out;
}

}  // namespace azure

bool valid_azure_container_name(std::string_view n) {
  if (n.size() < 3 || n.size() > 63) return false;
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(n.front()) || !alnum(n.back())) return false;
  if (n.find("--") != std::string_view::npos) return false;
  return std::all_of(n.begin(), n.end(), [&](char c) { return alnum(c) || c == '-'; });
}

tl::expected<std::unique_ptr<azure_store>, std::string> azure_store::open(azure_options options) {
  if (!valid_azure_container_name(options.container)) {
    return tl::make_unexpected("container name '" + options.container +
                               "' is invalid (3-63 characters: a-z, 0-9, single '-')");
  }
  if (options.account.empty() ||
      !std::all_of(options.account.begin(), options.account.end(),
                   [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); })) {
    return tl::make_unexpected("account name '" + options.account +
                               "' is invalid (lower-case letters and digits)");
  }
  if (options.key.empty() && options.sas.empty()) {
    return tl::make_unexpected(std::string("no credentials (an account key or a SAS token)"));
  }
  if (!options.key.empty() && !unbase64(options.key)) {
    return tl::make_unexpected(std::string("the account key is not base64"));
  }
  if (options.sas.starts_with('?')) options.sas.erase(0, 1);
  if (options.endpoint.empty()) {
    options.endpoint = "https://" + options.account + ".blob.core.windows.net";
  }
  while (options.endpoint.ends_with('/')) options.endpoint.pop_back();
  const size_t sep = options.endpoint.find("://");
  const std::string scheme = sep == std::string::npos ? "" : options.endpoint.substr(0, sep);
  const std::string rest = sep == std::string::npos ? "" : options.endpoint.substr(sep + 3);
  if ((scheme != "http" && scheme != "https") || rest.empty() || rest.front() == '/' ||
      rest.find_first_of("?#@") != std::string::npos) {
    return tl::make_unexpected("endpoint '" + base::redact_uri(options.endpoint) +
                               "' is not of the form http[s]://host[:port][/path]");
  }
  if (options.block_size == 0 || options.block_size > (4000ull << 20) ||
      options.upload_concurrency == 0 || options.list_page_size == 0 ||
      options.list_page_size > 5000 || options.retry.max_attempts == 0) {
    return tl::make_unexpected(
        std::string("block_size must be 1 byte to 4000 MiB, upload_concurrency and max_attempts "
                    "positive, list_page_size 1-5000"));
  }
  return std::unique_ptr<azure_store>(new azure_store(std::move(options)));
}

azure_store::azure_store(azure_options options)
    : options_(std::move(options)),
      http_(
          http::client_options{
              .connect_timeout = options_.connect_timeout,
              .request_timeout = options_.request_timeout,
              .stall_timeout = options_.stall_timeout,
          },
          http::retry_options{
              .label = "azblob",
              .retry = options_.retry,
              .jitter_seed = options_.jitter_seed,
              .sleep = options_.sleep,
              .on_failure = options_.on_failure,
              .transient = transient_error,
              .error_code = error_code,
          }) {}

std::string azure_store::url(std::string_view key, std::string_view query) const {
  std::string out = options_.endpoint + "/" + options_.container;
  if (!key.empty()) out += "/" + uri::encode(key, /*keep_slash=*/true);
  std::string q(query);
  if (options_.key.empty() && !options_.sas.empty()) q += (q.empty() ? "" : "&") + options_.sas;
  if (!q.empty()) out += "?" + q;
  return out;
}

std::string azure_store::describe() const {
  return "azblob://" + options_.container + " at " + options_.endpoint + " (account " +
         options_.account + ")";
}

http::request azure_store::unsigned_request(std::string method, std::string_view key,
                                            std::string_view query, std::span<const uint8_t> body,
                                            std::vector<std::string> extra) const {
  http::request r;
  r.method = std::move(method);
  r.url = url(key, query);
  r.body = body;
  r.headers = std::move(extra);
  return r;
}

http::request azure_store::make_request(std::string method, std::string_view key,
                                        std::string_view query, std::span<const uint8_t> body,
                                        std::vector<std::string> extra) const {
  http::request r = unsigned_request(std::move(method), key, query, body, std::move(extra));
  sign(r);
  return r;
}

void azure_store::sign(http::request& req) const {
  const auto now = options_.now ? options_.now() : std::chrono::system_clock::now();
  req.headers.push_back("x-ms-date: " + azure::http_date(now));
  req.headers.push_back("x-ms-version: " + std::string(api_version));
  if (options_.key.empty()) return;  // the SAS token in the URL authorises it
  const auto to_sign =
      azure::string_to_sign(req.method, req.headers, req.body.size(), options_.account, req.url);
  req.headers.push_back("Authorization: " +
                        azure::authorization(options_.account, options_.key, to_sign));
}

tl::expected<void, store_error> azure_store::create_container() {
  auto r = http_.execute(make_request("PUT", "", "restype=container", {}));
  if (!r) return tl::make_unexpected(r.error());
  if (is_2xx(*r)) return {};
  if (r->status == 409 && error_code(*r) == "ContainerAlreadyExists") return {};
  return tl::make_unexpected(error_of(*r));
}

tl::expected<void, store_error> azure_store::delete_container() {
  auto r = http_.execute(make_request("DELETE", "", "restype=container", {}));
  if (!r) return tl::make_unexpected(r.error());
  if (is_2xx(*r) || r->status == 404) return {};
  return tl::make_unexpected(error_of(*r));
}

tl::expected<void, store_error> azure_store::put(std::string_view key,
                                                 std::span<const uint8_t> data) {
  return put_object(key, data, /*if_absent=*/false);
}

tl::expected<void, store_error> azure_store::put_if_absent(std::string_view key,
                                                           std::span<const uint8_t> data) {
  auto r = put_object(key, data, /*if_absent=*/true);
  if (!r && r.error() == store_error::already_exists) return taken_by(key, data);
  return r;
}

tl::expected<void, store_error> azure_store::put_object(std::string_view key,
                                                        std::span<const uint8_t> data,
                                                        bool if_absent) {
  if (key.empty() || key.size() > max_key_bytes) {
    return tl::make_unexpected(store_error::invalid_argument);
  }
  if (data.size() > options_.block_threshold) return put_blocks(key, data, if_absent);
  std::vector<std::string> headers = {"x-ms-blob-type: BlockBlob"};
  if (if_absent) headers.emplace_back("If-None-Match: *");
  auto r = http_.execute(make_request("PUT", key, "", data, std::move(headers)));
  if (!r) return tl::make_unexpected(r.error());
  if (is_2xx(*r)) return {};
  return tl::make_unexpected(error_of(*r));
}

tl::expected<void, store_error> azure_store::put_blocks(std::string_view key,
                                                        std::span<const uint8_t> data,
                                                        bool if_absent) {
  // Azure allows 50000 blocks: a larger object gets larger blocks.
  const uint64_t block_size =
      std::max(options_.block_size, (data.size() + max_blocks - 1) / max_blocks);
  const size_t blocks = static_cast<size_t>((data.size() + block_size - 1) / block_size);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  store_error first_error = store_error::io;  // guarded by error_mu
  const auto upload_blocks = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      const size_t i = next.fetch_add(1);
      if (i >= blocks) return;
      const uint64_t begin = i * block_size;
      const auto block = data.subspan(begin, std::min<uint64_t>(block_size, data.size() - begin));
      const auto query = uri::canonical_query({{"blockid", block_id(i)}, {"comp", "block"}});
      auto r = http_.execute(make_request("PUT", key, query, block));
      if (r && is_2xx(*r)) continue;
      std::lock_guard lock(error_mu);
      if (!failed.exchange(true)) first_error = r ? error_of(*r) : r.error();
      return;
    }
  };
  {
    std::vector<std::jthread> helpers;
    const size_t threads = std::min<size_t>(options_.upload_concurrency, blocks);
    for (size_t t = 1; t < threads; ++t) helpers.emplace_back(upload_blocks);
    upload_blocks();
  }
  if (failed.load()) {
    // Uncommitted blocks are dropped by Azure after a week; there is nothing to abort.
    std::lock_guard lock(error_mu);
    return tl::make_unexpected(first_error);
  }
  std::vector<std::string> ids;
  ids.reserve(blocks);
  for (size_t i = 0; i < blocks; ++i) ids.push_back(block_id(i));
  const std::string body = azure_xml::block_list_body(ids);
  std::vector<std::string> headers = {"Content-Type: application/xml"};
  if (if_absent) headers.emplace_back("If-None-Match: *");
  auto r = http_.execute(make_request("PUT", key, "comp=blocklist",
                                      {reinterpret_cast<const uint8_t*>(body.data()), body.size()},
                                      std::move(headers)));
  if (!r) return tl::make_unexpected(r.error());
  if (is_2xx(*r)) return {};
  return tl::make_unexpected(error_of(*r));
}

tl::expected<std::vector<uint8_t>, store_error> azure_store::get(std::string_view key,
                                                                 uint64_t offset, uint64_t length) {
  if (key.empty() || key.size() > max_key_bytes) {
    return tl::make_unexpected(store_error::invalid_argument);
  }
  // Signed once the range is added.
  return http::ranged_get(http_, unsigned_request("GET", key, "", {}), offset, length,
                          {.range_header = "x-ms-range",
                           .finish = [this](http::request& r) { sign(r); },
                           .head = [&] { return head(key); },
                           .error_of = error_of});
}

tl::expected<uint64_t, store_error> azure_store::head(std::string_view key) {
  if (key.empty() || key.size() > max_key_bytes) {
    return tl::make_unexpected(store_error::invalid_argument);
  }
  auto r = http_.execute(make_request("HEAD", key, "", {}));
  if (!r) return tl::make_unexpected(r.error());
  if (!is_2xx(*r)) return tl::make_unexpected(error_of(*r));
  const auto size = http::parse_u64(r->header("content-length").value_or(""));
  if (!size) return tl::make_unexpected(store_error::io);
  return *size;
}

tl::expected<void, store_error> azure_store::remove(std::string_view key) {
  if (key.empty() || key.size() > max_key_bytes) {
    return tl::make_unexpected(store_error::invalid_argument);
  }
  auto r = http_.execute(make_request("DELETE", key, "", {}));
  if (!r) return tl::make_unexpected(r.error());
  if (is_2xx(*r)) return {};
  if (r->status == 404) {
    if (container_missing(*r)) return tl::make_unexpected(store_error::not_found);
    return {};
  }
  return tl::make_unexpected(error_of(*r));
}

tl::expected<std::vector<object_info>, store_error> azure_store::list(std::string_view prefix) {
  std::vector<object_info> out;
  std::string marker;
  while (true) {
    std::vector<std::pair<std::string, std::string>> params = {
        {"restype", "container"},
        {"comp", "list"},
        {"maxresults", std::to_string(options_.list_page_size)},
    };
    if (!prefix.empty()) params.emplace_back("prefix", std::string(prefix));
    if (!marker.empty()) params.emplace_back("marker", marker);
    const auto req = make_request("GET", "", uri::canonical_query(std::move(params)), {});
    auto r = http_.execute(req);
    if (!r) return tl::make_unexpected(r.error());
    if (!is_2xx(*r)) return tl::make_unexpected(error_of(*r));
    auto page = azure_xml::parse_list(r->body_text());
    if (!page) {
      if (options_.on_failure) options_.on_failure("azblob GET " + req.url + ": " + page.error());
      return tl::make_unexpected(store_error::io);
    }
    std::move(page->objects.begin(), page->objects.end(), std::back_inserter(out));
    if (page->next_marker.empty()) break;
    marker = std::move(page->next_marker);
  }
  // Azure lists in UTF-8 byte order already; sorting makes it so for any server.
  std::sort(out.begin(), out.end(),
            [](const object_info& a, const object_info& b) { return a.key < b.key; });
  return out;
}

void azure_store::cancel() {
  http_.cancel();
}

}  // namespace silt::storage
