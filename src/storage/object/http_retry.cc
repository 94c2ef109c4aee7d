#include "storage/object/http_retry.h"

#include <charconv>
#include <random>
#include <utility>

#include "base/redact.h"

namespace silt::storage::http {
namespace {

uint64_t seed_or_random(uint64_t seed) {
  if (seed != 0) return seed;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) | rd();
}

// Parses "bytes FIRST-LAST/TOTAL" (TOTAL may be '*').
struct content_range {
  uint64_t first = 0;
  uint64_t last = 0;
};
std::optional<content_range> parse_content_range(std::string_view v) {
  if (!v.starts_with("bytes ")) return std::nullopt;
  v.remove_prefix(6);
  const size_t dash = v.find('-');
  const size_t slash = v.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || slash < dash)
    return std::nullopt;
  const auto first = parse_u64(v.substr(0, dash));
  const auto last = parse_u64(v.substr(dash + 1, slash - dash - 1));
  if (!first || !last || *last < *first) return std::nullopt;
  return content_range{*first, *last};
}

}  // namespace

std::optional<uint64_t> parse_u64(std::string_view s) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<store_error> common_transient_error(const response& r) {
  switch (r.outcome) {
    case transport::timeout:
      return store_error::timeout;
    case transport::failed:
      return store_error::io;
    case transport::fatal:
    case transport::ok:
      break;
  }
  if (r.status == 503 || r.status == 429) return store_error::throttled;
  if (r.status >= 500 && r.status != 501) return store_error::io;
  return std::nullopt;
}

std::optional<store_error> common_final_error(const response& r) {
  if (r.outcome == transport::fatal) return store_error::io;
  switch (r.status) {
    case 404:
      return store_error::not_found;
    case 401:
    case 403:
      return store_error::access_denied;
    case 416:
      return store_error::invalid_range;
    default:
      return std::nullopt;
  }
}

retrying_client::retrying_client(client_options http, retry_options retry)
    : options_(std::move(retry)),
      client_(std::move(http)),
      backoff_(options_.retry, seed_or_random(options_.jitter_seed)) {}

void retrying_client::report(const request& req, const response& resp, uint32_t attempt,
                             std::optional<std::chrono::milliseconds> retry_in) const {
  if (!options_.on_failure) return;
  // A URL may carry a credential: an Azure SAS token's signature (sig=) is in every request's.
  std::string line = options_.label + " " + req.method + " " + base::redact_uri(req.url) + ": ";
  if (resp.outcome != transport::ok) {
    line += resp.transport_error;
  } else {
    line += "HTTP " + std::to_string(resp.status);
    if (options_.error_code) {
      if (auto code = options_.error_code(resp)) line += " " + *code;
    }
    if (is_2xx(resp)) line += " with an unusable reply (short, mismatched or an error document)";
  }
  line +=
      "; attempt " + std::to_string(attempt) + " of " + std::to_string(options_.retry.max_attempts);
  line += retry_in ? ", retrying in " + std::to_string(retry_in->count()) + " ms" : ", giving up";
  options_.on_failure(line);
}

tl::expected<response, store_error> retrying_client::execute(const request& req,
                                                             const transient_check& unusable) {
  for (uint32_t attempt = 1;; ++attempt) {
    response resp = client_.perform(req);
    auto failure = options_.transient ? options_.transient(resp) : std::nullopt;
    if (!failure && unusable && is_2xx(resp)) failure = unusable(resp);
    if (!failure) {
      // Not-found, range and precondition answers are ordinary results, not failures worth a
      // log line.
      if (!is_2xx(resp) && resp.status != 404 && resp.status != 416 && resp.status != 409 &&
          resp.status != 412) {
        report(req, resp, attempt, std::nullopt);
      }
      return resp;
    }
    if (attempt >= options_.retry.max_attempts || client_.cancelled()) {
      report(req, resp, attempt, std::nullopt);
      return tl::make_unexpected(*failure);
    }
    const auto wait = backoff_.delay(attempt - 1);
    report(req, resp, attempt, wait);
    if (options_.sleep) {
      options_.sleep(wait);
    } else {
      std::unique_lock lock(cancel_mu_);
      cancel_cv_.wait_for(lock, wait, [&] { return client_.cancelled(); });
    }
  }
}

void retrying_client::cancel() {
  client_.cancel();
  std::lock_guard lock(cancel_mu_);
  cancel_cv_.notify_all();
}

std::optional<store_error> check_ranged_body(const response& r, uint64_t offset, uint64_t length) {
  if (r.status == 206 && r.body.empty()) return std::nullopt;  // see ranged_get
  if (r.status == 206) {
    const auto range = parse_content_range(r.header("content-range").value_or(""));
    if (!range || range->first != offset || r.body.size() != range->last - range->first + 1)
      return store_error::io;
  } else if (auto length_header = r.header("content-length")) {
    const auto total = parse_u64(*length_header);
    if (!total) return store_error::io;
    const uint64_t expected = *total > offset ? std::min(*total - offset, length) : 0;
    if (r.body.size() != expected) return store_error::io;
  }
  return std::nullopt;
}

std::string range_value(uint64_t offset, uint64_t length) {
  const bool open_ended = length > to_end - offset;  // the last byte would overflow
  return "bytes=" + std::to_string(offset) + "-" +
         (open_ended ? "" : std::to_string(offset + length - 1));
}

tl::expected<std::vector<uint8_t>, store_error> ranged_get(retrying_client& client, request req,
                                                           uint64_t offset, uint64_t length,
                                                           const ranged_get_calls& calls) {
  if (length == 0) {
    // No Range header can ask for nothing; the size tells whether the offset is valid.
    auto size = calls.head();
    if (!size) return tl::make_unexpected(size.error());
    if (offset > *size) return tl::make_unexpected(store_error::invalid_range);
    return std::vector<uint8_t>();
  }
  // The whole object needs no Range, which also makes an empty object readable.
  if (offset != 0 || length != to_end) {
    req.headers.push_back(std::string(calls.range_header) + ": " + range_value(offset, length));
    req.window_offset = offset;
    req.window_length = length;
  }
  if (calls.finish) calls.finish(req);
  // A body that does not match its headers was cut short or is not the range asked for.
  const auto complete = [&](const response& r) { return check_ranged_body(r, offset, length); };
  auto r = client.execute(req, complete);
  if (!r) return tl::make_unexpected(r.error());
  if (r->status == 206 && !r->body.empty()) return std::move(r->body);
  if (r->status == 200) {
    // The server sent the whole object (no Range, or it ignored the Range).
    const auto total = parse_u64(r->header("content-length").value_or(""));
    if (total && offset > *total) return tl::make_unexpected(store_error::invalid_range);
    return std::move(r->body);
  }
  // An empty 206 is how Azurite answers a range at or past the end where Azure sends 416.
  if (r->status == 416 || r->status == 206) {
    // Only an empty object has no byte 0. Past that, the size tells "at the end" (an empty
    // read) from "past the end".
    if (offset == 0) return std::vector<uint8_t>();
    auto size = calls.head();
    if (!size) return tl::make_unexpected(size.error());
    if (offset == *size) return std::vector<uint8_t>();
    if (offset > *size) return tl::make_unexpected(store_error::invalid_range);
    return tl::make_unexpected(store_error::io);  // replaced by a larger object meanwhile
  }
  return tl::make_unexpected(calls.error_of(*r));
}

}  // namespace silt::storage::http
