#include "storage/object/object_store.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "base/log.h"
#include "base/redact.h"
#include "storage/object/azure_store.h"
#include "storage/object/local_store.h"
#include "storage/object/s3_store.h"
#include "storage/object/uri.h"

namespace silt::storage {

std::string_view store_error_name(store_error e) {
  switch (e) {
    case store_error::not_found:
      return "not_found";
    case store_error::invalid_range:
      return "invalid_range";
    case store_error::access_denied:
      return "access_denied";
    case store_error::throttled:
      return "throttled";
    case store_error::timeout:
      return "timeout";
    case store_error::io:
      return "io";
    case store_error::invalid_argument:
      return "invalid_argument";
    case store_error::already_exists:
      return "already_exists";
  }
  return "unknown";
}

tl::expected<void, store_error> object_store::put_parts(
    std::string_view key, std::span<const std::span<const uint8_t>> parts) {
  if (parts.size() == 1) return put(key, parts.front());
  size_t size = 0;
  for (const auto& part : parts) size += part.size();
  std::vector<uint8_t> data;
  data.reserve(size);
  for (const auto& part : parts) data.insert(data.end(), part.begin(), part.end());
  return put(key, data);
}

tl::expected<shared_bytes, store_error> object_store::get_shared(std::string_view key,
                                                                 uint64_t offset, uint64_t length) {
  auto got = get(key, offset, length);
  if (!got) return tl::make_unexpected(got.error());
  auto owner = std::make_shared<const std::vector<uint8_t>>(std::move(*got));
  const std::span<const uint8_t> bytes(*owner);
  return shared_bytes{std::move(owner), bytes};
}

tl::expected<void, store_error> object_store::taken_by(std::string_view key,
                                                       std::span<const uint8_t> data) {
  auto there = get(key, 0, to_end);
  if (!there) {
    // Deleted meanwhile: the key was taken when the write was refused all the same.
    if (there.error() == store_error::not_found)
      return tl::make_unexpected(store_error::already_exists);
    return tl::make_unexpected(there.error());
  }
  if (std::equal(there->begin(), there->end(), data.begin(), data.end())) return {};
  return tl::make_unexpected(store_error::already_exists);
}

namespace {

// Logs the failed attempts of an HTTP store's requests, each with its cause (the HTTP status
// and error code, or the transport error), at most one line every 10 s with the count of
// those left out.
std::function<void(std::string_view)> failure_logger() {
  auto limiter = std::make_shared<base::log_limiter>(std::chrono::seconds(10));
  return [limiter](std::string_view line) {
    uint64_t left_out = 0;
    if (!limiter->allow(left_out)) return;
    if (left_out == 0) {
      SILT_LOG(warn, "silt: object store: %.*s", static_cast<int>(line.size()), line.data());
    } else {
      SILT_LOG(warn, "silt: object store: %.*s (%llu similar line(s) left out)",
               static_cast<int>(line.size()), line.data(),
               static_cast<unsigned long long>(left_out));
    }
  };
}

// open_object_store, but for the masking of the error.
tl::expected<std::unique_ptr<object_store>, std::string> open_store(std::string_view uri) {
  constexpr std::string_view file_scheme = "file://";
  if (uri.starts_with(file_scheme)) {
    std::string_view rest = uri.substr(file_scheme.size());
    std::string_view query;
    if (const auto q = rest.find('?'); q != std::string_view::npos) {
      query = rest.substr(q + 1);
      rest = rest.substr(0, q);
    }
    const auto path = uri::decode(rest);
    if (!path) {
      return tl::make_unexpected("file:// URI: malformed %-escape in '" + base::redact_uri(uri) +
                                 "'");
    }
    if (path->empty()) return tl::make_unexpected(std::string("file:// URI: no directory path"));
    const auto params = uri::parse_query(query);
    if (!params) {
      return tl::make_unexpected("file:// URI: malformed query in '" + base::redact_uri(uri) + "'");
    }
    bool direct = true;
    for (const auto& [name, value] : *params) {
      if (name != "direct") {
        return tl::make_unexpected("file:// URI: unknown parameter '" + name + "' (known: direct)");
      }
      if (value != "true" && value != "false") {
        return tl::make_unexpected("file:// URI: direct must be true or false, not '" + value +
                                   "'");
      }
      direct = value == "true";
    }
    auto store = local_store::open(*path, direct);
    if (!store) return tl::make_unexpected("file:// URI: " + store.error());
    return std::unique_ptr<object_store>(std::move(*store));
  }
  if (uri.starts_with("s3://")) {
    auto options = parse_s3_uri(uri);
    if (!options) return tl::make_unexpected(options.error());
    options->on_failure = failure_logger();
    auto store = s3_store::open(std::move(*options));
    if (!store) return tl::make_unexpected("s3:// URI: " + store.error());
    return std::unique_ptr<object_store>(std::move(*store));
  }
  if (uri.starts_with("azblob://")) {
    auto options = parse_azure_uri(uri);
    if (!options) return tl::make_unexpected(options.error());
    options->on_failure = failure_logger();
    const bool create = options->create_container;
    auto store = azure_store::open(std::move(*options));
    if (!store) return tl::make_unexpected("azblob:// URI: " + store.error());
    if (create) {
      if (auto made = (*store)->create_container(); !made) {
        return tl::make_unexpected("azblob:// URI: cannot create the container: " +
                                   std::string(store_error_name(made.error())));
      }
    }
    return std::unique_ptr<object_store>(std::move(*store));
  }
  const size_t colon = uri.find("://");
  if (colon == std::string_view::npos) {
    return tl::make_unexpected("object store URI '" + base::redact_uri(uri) +
                               "' has no scheme (file://, s3:// or azblob://)");
  }
  return tl::make_unexpected("object store URI scheme '" + std::string(uri.substr(0, colon)) +
                             "' is not supported (file://, s3:// or azblob://)");
}

}  // namespace

tl::expected<std::unique_ptr<object_store>, std::string> open_object_store(std::string_view uri) {
  auto store = open_store(uri);
  // The messages above mask what they quote of the URI; this catches what a parser quotes
  // of it otherwise (a bucket or container name, a parameter's name or value).
  if (!store) return tl::make_unexpected(base::redact_secrets(store.error(), uri));
  return store;
}

}  // namespace silt::storage
