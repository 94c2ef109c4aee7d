#include "storage/object/http_client.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <curl/curl.h>

namespace silt::storage::http {
namespace {

// Error bodies are short XML documents; a longer one is cut here rather than held in memory.
constexpr size_t max_error_body = 1 << 20;

std::once_flag curl_init_once;

struct upload_state {
  std::span<const uint8_t> data;
  size_t position = 0;
};

size_t read_body(char* buffer, size_t size, size_t count, void* user) {
  auto* up = static_cast<upload_state*>(user);
  const size_t n = std::min(size * count, up->data.size() - up->position);
  std::memcpy(buffer, up->data.data() + up->position, n);
  up->position += n;
  return n;
}

int seek_body(void* user, curl_off_t offset, int origin) {
  auto* up = static_cast<upload_state*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<uint64_t>(offset) > up->data.size())
    return CURL_SEEKFUNC_CANTSEEK;
  up->position = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

struct download_state {
  CURL* handle = nullptr;
  const request* req = nullptr;
  response* resp = nullptr;
  bool started = false;
  uint64_t skip = 0;                                     // bytes still to drop (a whole-object 200)
  uint64_t keep = std::numeric_limits<uint64_t>::max();  // bytes still to keep
  bool stopped = false;  // the write callback ended the transfer on purpose
};

// CURLOPT_XFERINFOFUNCTION: non-zero aborts the transfer (CURLE_ABORTED_BY_CALLBACK).
int abort_if_cancelled(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(user)->load(std::memory_order_acquire) ? 1 : 0;
}

size_t write_body(char* data, size_t size, size_t count, void* user) {
  auto* st = static_cast<download_state*>(user);
  const size_t n = size * count;
  if (!st->started) {
    st->started = true;
    long status = 0;
    curl_easy_getinfo(st->handle, CURLINFO_RESPONSE_CODE, &status);
    curl_off_t length = -1;
    curl_easy_getinfo(st->handle, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
    if (status == 200) {
      st->skip = st->req->window_offset;
      st->keep = st->req->window_length;
    } else if (status == 206) {
      st->keep = st->req->window_length;
    } else if (status >= 300) {
      st->keep = max_error_body;
    }
    if (length > 0) {
      const auto expected = static_cast<uint64_t>(length);
      const uint64_t kept = expected > st->skip ? std::min(expected - st->skip, st->keep) : 0;
      st->resp->body.reserve(static_cast<size_t>(kept));
    }
  }
  size_t used = 0;
  if (st->skip > 0) {
    used = static_cast<size_t>(std::min<uint64_t>(st->skip, n));
    st->skip -= used;
  }
  const auto take = static_cast<size_t>(std::min<uint64_t>(n - used, st->keep));
  st->resp->body.insert(st->resp->body.end(), data + used, data + used + take);
  st->keep -= take;
  if (st->keep == 0 && used + take < n) {
    // Everything wanted has arrived; stop instead of downloading the rest of the object.
    st->stopped = true;
    return 0;
  }
  return n;
}

size_t read_header(char* data, size_t size, size_t count, void* user) {
  auto* resp = static_cast<response*>(user);
  const size_t n = size * count;
  std::string_view line(data, n);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (line.starts_with("HTTP/")) {
    resp->headers.clear();  // a new status line: an interim 100 Continue is forgotten
    return n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  std::string name(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  resp->headers.emplace_back(std::move(name), std::string(value));
  return n;
}

transport outcome_of(CURLcode rc) {
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
      return transport::timeout;
    // What another attempt cannot change: the configuration or the peer's certificate.
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_BAD_FUNCTION_ARGUMENT:
      return transport::fatal;
    default:
      return transport::failed;
  }
}

struct slist_guard {
  curl_slist* list = nullptr;
  ~slist_guard() { curl_slist_free_all(list); }
};

}  // namespace

std::optional<std::string_view> response::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return std::string_view(value);
  }
  return std::nullopt;
}

client::client(client_options options) : options_(std::move(options)) {
  std::call_once(curl_init_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

client::~client() {
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* client::acquire() {
  {
    base::lock_guard lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void client::release(void* handle) {
  {
    base::lock_guard lock(mu_);
    if (idle_.size() < options_.max_idle_handles) {
      idle_.push_back(handle);
      return;
    }
  }
  curl_easy_cleanup(static_cast<CURL*>(handle));
}

response client::perform(const request& r) {
  response resp;
  auto* h = static_cast<CURL*>(acquire());
  if (h == nullptr) {
    resp.transport_error = "curl_easy_init failed";
    return resp;
  }
  // Reset keeps the handle's connections and caches but forgets the previous request's options.
  curl_easy_reset(h);

  slist_guard headers;
  for (const auto& line : r.headers) {
    curl_slist* next = curl_slist_append(headers.list, line.c_str());
    if (next == nullptr) {
      release(h);
      resp.transport_error = "out of memory";
      return resp;
    }
    headers.list = next;
  }

  upload_state up{r.body, 0};
  download_state down{h, &r, &resp};
  if (cancelled()) {
    release(h);
    resp.transport_error = "cancelled: the broker is shutting down";
    return resp;
  }
  curl_easy_setopt(h, CURLOPT_URL, r.url.c_str());
  // Called about once a second even while nothing moves: a cancel() aborts the exchange.
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, abort_if_cancelled);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &cancelled_);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  // Object keys may contain "." and ".." segments; they must reach the server unchanged.
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "silt");
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout.count()));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.stall_timeout.count()));
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 256L * 1024);
  curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, 256L * 1024);
  if (!options_.aws_sigv4.empty()) {
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, options_.aws_sigv4.c_str());
    // Separate fields, not "key:secret": a secret may contain ':'.
    curl_easy_setopt(h, CURLOPT_USERNAME, options_.access_key.c_str());
    curl_easy_setopt(h, CURLOPT_PASSWORD, options_.secret_key.c_str());
  }
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.list);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, read_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &resp);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &down);

  if (r.method == "GET") {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else if (r.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (r.method == "PUT") {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, read_body);
    curl_easy_setopt(h, CURLOPT_READDATA, &up);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, seek_body);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, &up);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
  } else if (r.method == "POST") {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    const void* fields = r.body.empty() ? static_cast<const void*>("") : r.body.data();
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, fields);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
  } else {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  }

  const CURLcode rc = curl_easy_perform(h);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 1L);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp.status);
  if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && down.stopped)) {
    resp.outcome = transport::ok;
  } else {
    resp.outcome = outcome_of(rc);
    resp.transport_error = curl_easy_strerror(rc);
  }
  // The header list dies with this call: the handle must not keep pointing at it.
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  release(h);
  return resp;
}

void client::cancel() {
  cancelled_.store(true, std::memory_order_release);
}

}  // namespace silt::storage::http
