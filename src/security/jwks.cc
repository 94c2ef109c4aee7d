#include "security/jwks.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <system_error>

#include <curl/curl.h>

#include "base/log.h"
#include "base/redact.h"

namespace silt::security {
namespace {

using clock = std::chrono::steady_clock;

// Kafka's RefreshingHttpsJwks: how long a key id that asked for an early refresh waits before
// it may ask again, how many are remembered, and how long one may be.
constexpr auto missing_kid_wait = std::chrono::seconds(60);
constexpr size_t max_missing_kids = 16;
constexpr size_t max_kid_bytes = 1000;
// The least time between the starts of two fetches when tokens ask for early refreshes.
constexpr auto min_early_gap = std::chrono::milliseconds(100);

std::once_flag curl_init_once;

enum class scheme : uint8_t { file, http };

struct location {
  scheme kind = scheme::file;
  std::string target;  // the path of a file, or the URL
};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// What `url` names: file:///path (or file:/path, Java's spelling, or file://localhost/path)
// with %XX escapes decoded; an http:// or https:// URL as it is; a bare path.
tl::expected<location, std::string> parse_location(const std::string& url) {
  if (url.empty()) return tl::unexpected(std::string("no JWKS URL"));
  if (url.starts_with("https://") || url.starts_with("http://")) {
    return location{scheme::http, url};
  }
  if (url.starts_with("file:")) {
    std::string_view rest = std::string_view(url).substr(5);
    if (rest.starts_with("//")) {
      rest.remove_prefix(2);
      const size_t slash = rest.find('/');
      const std::string_view host = rest.substr(0, slash);
      if (slash == std::string_view::npos || (!host.empty() && host != "localhost")) {
        return tl::unexpected(std::string("a file URL on another host"));
      }
      rest.remove_prefix(slash);
    }
    if (!rest.starts_with("/")) return tl::unexpected(std::string("a file URL without a path"));
    std::string path;
    for (size_t i = 0; i < rest.size(); ++i) {
      if (rest[i] == '%') {
        const int hi = i + 2 < rest.size() ? hex_value(rest[i + 1]) : -1;
        const int lo = i + 2 < rest.size() ? hex_value(rest[i + 2]) : -1;
        if (hi < 0 || lo < 0) return tl::unexpected(std::string("a bad %-escape in the URL"));
        path.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
      } else {
        path.push_back(rest[i]);
      }
    }
    return location{scheme::file, path};
  }
  const size_t colon = url.find(':');
  const size_t slash = url.find('/');
  if (colon != std::string::npos && (slash == std::string::npos || colon < slash)) {
    return tl::unexpected(std::string("a URL that is neither file:, http: nor https:"));
  }
  return location{scheme::file, url};
}

tl::expected<std::string, std::string> read_file(const std::string& path, size_t max_bytes) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) {
    return tl::unexpected("cannot open it: " +
                          std::error_code(errno, std::generic_category()).message());
  }
  std::string out;
  char buffer[16384];
  while (true) {
    const size_t n = std::fread(buffer, 1, sizeof buffer, f.get());
    out.append(buffer, n);
    if (out.size() > max_bytes) {
      return tl::unexpected("it is larger than " + std::to_string(max_bytes) + " bytes");
    }
    if (n < sizeof buffer) break;
  }
  if (std::ferror(f.get()) != 0) return tl::unexpected(std::string("cannot read it"));
  return out;
}

struct download {
  std::string body;
  size_t max_bytes = 0;
  bool too_large = false;
};

size_t write_body(char* data, size_t size, size_t count, void* user) {
  auto* d = static_cast<download*>(user);
  const size_t n = size * count;
  if (d->body.size() + n > d->max_bytes) {
    d->too_large = true;
    return 0;  // aborts the transfer
  }
  d->body.append(data, n);
  return n;
}

// CURLOPT_XFERINFOFUNCTION: non-zero aborts the transfer (the source is stopping).
int abort_if_stopping(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(user)->load(std::memory_order_acquire) ? 1 : 0;
}

tl::expected<std::string, std::string> fetch(const std::string& url, const jwks_options& o,
                                             const std::atomic<bool>& stopping) {
  std::call_once(curl_init_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<CURL, void (*)(CURL*)> h(curl_easy_init(), curl_easy_cleanup);
  if (!h) return tl::unexpected(std::string("curl_easy_init failed"));
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> headers(
      curl_slist_append(nullptr, "Accept: application/json"), curl_slist_free_all);
  download d;
  d.max_bytes = o.max_document_bytes;
  char error[CURL_ERROR_SIZE] = {};
  CURL* c = h.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  // Redirects are followed as Java's HttpURLConnection follows them, but never from https
  // down to http.
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR,
                   url.starts_with("https://") ? "https" : "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(o.fetch_timeout.count()));
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(o.max_document_bytes));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &d);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, abort_if_stopping);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &stopping);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_USERAGENT, "silt");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  if (!o.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, o.ca_file.c_str());
  const CURLcode rc = curl_easy_perform(c);
  if (d.too_large || rc == CURLE_FILESIZE_EXCEEDED) {
    return tl::unexpected("the document is larger than " + std::to_string(o.max_document_bytes) +
                          " bytes");
  }
  if (rc != CURLE_OK) {
    return tl::unexpected(
        base::redact_secrets(error[0] != '\0' ? error : curl_easy_strerror(rc), url));
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) return tl::unexpected("HTTP status " + std::to_string(status));
  return std::move(d.body);
}

}  // namespace

jwks_source::jwks_source(jwks_options options)
    : options_(std::move(options)),
      location_(options_.url.empty() ? "a document in memory" : base::redact_uri(options_.url)) {}

tl::expected<std::shared_ptr<jwks_source>, std::string> jwks_source::open(jwks_options options) {
  if (auto where = parse_location(options.url); !where) {
    return tl::unexpected("sasl.oauthbearer.jwks.endpoint.url " + base::redact_uri(options.url) +
                          ": " + where.error());
  }
  if (options.refresh_interval <= std::chrono::milliseconds::zero()) {
    return tl::unexpected(std::string("the JWKS refresh interval must be positive"));
  }
  std::shared_ptr<jwks_source> s(new jwks_source(std::move(options)));
  auto set = s->load();
  if (!set) return tl::unexpected("cannot load the JWKS of " + s->location_ + ": " + set.error());
  s->install(std::move(*set));
  s->thread_ = std::thread([raw = s.get()] { raw->run(); });
  return s;
}

tl::expected<std::shared_ptr<jwks_source>, std::string> jwks_source::fixed(
    std::string_view document) {
  auto set = jwk_set::parse(document);
  if (!set) return tl::unexpected(set.error());
  std::shared_ptr<jwks_source> s(new jwks_source(jwks_options{}));
  s->install(std::move(*set));
  return s;
}

jwks_source::~jwks_source() {
  {
    base::lock_guard lock(mu_);
    stopping_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const jwk_set> jwks_source::keys() const {
  base::lock_guard lock(mu_);
  return keys_;
}

void jwks_source::key_missing(std::string_view kid) {
  if (!thread_.joinable() || kid.size() > max_kid_bytes) return;
  const auto now = clock::now();
  base::lock_guard lock(mu_);
  auto it =
      std::find_if(missing_.begin(), missing_.end(), [&](const auto& m) { return m.first == kid; });
  if (it != missing_.end()) {
    if (it->second > now) return;
    it->second = now + missing_kid_wait;
  } else {
    if (missing_.size() >= max_missing_kids) {
      missing_.erase(
          std::min_element(missing_.begin(), missing_.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; }));
    }
    missing_.emplace_back(std::string(kid), now + missing_kid_wait);
  }
  early_ = true;
  cv_.notify_one();
}

bool jwks_source::sleep(clock::duration d) {
  const auto until = clock::now() + d;
  base::unique_lock lock(mu_);
  while (!stopping_.load(std::memory_order_acquire) && clock::now() < until) {
    lock.wait_until(cv_, until);
  }
  return !stopping_.load(std::memory_order_acquire);
}

tl::expected<jwk_set, std::string> jwks_source::load() {
  const auto where = parse_location(options_.url);
  if (!where) return tl::unexpected(where.error());
  const auto deadline = clock::now() + options_.retry_backoff_max;
  auto wait = std::max<clock::duration>(options_.retry_backoff, std::chrono::milliseconds(1));
  for (int attempt = 1;; ++attempt) {
    auto document = where->kind == scheme::file
                        ? read_file(where->target, options_.max_document_bytes)
                        : fetch(where->target, options_, stopping_);
    tl::expected<jwk_set, std::string> set =
        document ? jwk_set::parse(*document, options_.max_json_depth)
                 : tl::expected<jwk_set, std::string>(tl::unexpect, document.error());
    if (set) return set;
    const auto left = deadline - clock::now();
    if (left <= clock::duration::zero() || stopping_.load(std::memory_order_acquire)) {
      return set;
    }
    SILT_LOG(debug, "oauthbearer: loading the JWKS of %s failed (attempt %d): %s",
             location_.c_str(), attempt, set.error().c_str());
    if (!sleep(std::min(wait, left))) return set;
    wait *= 2;
  }
}

void jwks_source::install(jwk_set set) {
  for (const auto& why : set.skipped()) {
    SILT_LOG(warn, "oauthbearer: the JWKS of %s has a key left out: %s", location_.c_str(),
             why.c_str());
  }
  SILT_LOG(info, "oauthbearer: %zu key(s) loaded from the JWKS of %s", set.size(),
           location_.c_str());
  auto shared = std::make_shared<const jwk_set>(std::move(set));
  {
    base::lock_guard lock(mu_);
    std::erase_if(missing_, [&](const auto& m) { return shared->contains(m.first); });
    keys_ = std::move(shared);
  }
  loads_.fetch_add(1, std::memory_order_acq_rel);
}

void jwks_source::run() {
  auto next = clock::now() + options_.refresh_interval;
  auto last_start = clock::now();
  const auto gap = std::max<clock::duration>(options_.retry_backoff, min_early_gap);
  while (true) {
    {
      base::unique_lock lock(mu_);
      while (true) {
        if (stopping_.load(std::memory_order_acquire)) return;
        auto due = next;
        if (early_) due = std::min(due, last_start + gap);
        if (clock::now() >= due) break;
        lock.wait_until(cv_, due);
      }
      early_ = false;
    }
    last_start = clock::now();
    auto set = load();
    if (set) {
      install(std::move(*set));
    } else if (!stopping_.load(std::memory_order_acquire)) {
      SILT_LOG(warn, "oauthbearer: cannot refresh the JWKS of %s, keeping the %s: %s",
               location_.c_str(), "keys loaded before", set.error().c_str());
    }
    next = clock::now() + options_.refresh_interval;
  }
}

}  // namespace silt::security
