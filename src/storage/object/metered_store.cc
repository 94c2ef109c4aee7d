#include "storage/object/metered_store.h"

#include <chrono>
#include <utility>

namespace silt::storage {

std::string_view store_operation_name(store_operation op) {
  switch (op) {
    case store_operation::put:
      return "put";
    case store_operation::get:
      return "get";
    case store_operation::head:
      return "head";
    case store_operation::remove:
      return "delete";
    case store_operation::list:
      return "list";
  }
  return "unknown";
}

metered_store::metered_store(std::unique_ptr<object_store> inner) : inner_(std::move(inner)) {}

template <typename Call>
auto metered_store::metered(store_operation op, std::string_view key, Call&& call) {
  const auto start = std::chrono::steady_clock::now();
  auto r = std::forward<Call>(call)();
  auto& c = ops_[static_cast<size_t>(op)];
  c.latency_us.record(base::micros(std::chrono::steady_clock::now() - start));
  c.calls.fetch_add(1, std::memory_order_relaxed);
  if (!r) {
    const auto e = static_cast<size_t>(r.error());
    if (e < store_error_count) c.errors[e].fetch_add(1, std::memory_order_relaxed);
    const store_error error = r.error();
    uint64_t left_out = 0;
    if (error != store_error::not_found && error != store_error::invalid_range &&
        error != store_error::already_exists && failures_.allow(left_out)) {
      const std::string more = left_out == 0 ? std::string()
                                             : " (" + std::to_string(left_out) +
                                                   " similar failure(s) since the last line)";
      SILT_LOG(warn, "silt: object store: %s %.*s in %s failed: %s%s",
               std::string(store_operation_name(op)).c_str(), static_cast<int>(key.size()),
               key.data(), inner_->describe().c_str(), std::string(store_error_name(error)).c_str(),
               more.c_str());
    }
  }
  return r;
}

metered_store::operation_stats metered_store::stats(store_operation op) const {
  const auto& c = ops_[static_cast<size_t>(op)];
  operation_stats s;
  s.calls = c.calls.load(std::memory_order_relaxed);
  for (size_t i = 0; i < store_error_count; ++i) {
    s.errors[i] = c.errors[i].load(std::memory_order_relaxed);
  }
  s.bytes = c.bytes.load(std::memory_order_relaxed);
  s.latency_us = c.latency_us.snapshot();
  return s;
}

tl::expected<void, store_error> metered_store::put(std::string_view key,
                                                   std::span<const uint8_t> data) {
  auto r = metered(store_operation::put, key, [&] { return inner_->put(key, data); });
  if (r) {
    ops_[static_cast<size_t>(store_operation::put)].bytes.fetch_add(data.size(),
                                                                    std::memory_order_relaxed);
  }
  return r;
}

tl::expected<void, store_error> metered_store::put_if_absent(std::string_view key,
                                                             std::span<const uint8_t> data) {
  auto r = metered(store_operation::put, key, [&] { return inner_->put_if_absent(key, data); });
  if (r) {
    ops_[static_cast<size_t>(store_operation::put)].bytes.fetch_add(data.size(),
                                                                    std::memory_order_relaxed);
  }
  return r;
}

tl::expected<void, store_error> metered_store::put_parts(
    std::string_view key, std::span<const std::span<const uint8_t>> parts) {
  auto r = metered(store_operation::put, key, [&] { return inner_->put_parts(key, parts); });
  if (r) {
    uint64_t n = 0;
    for (const auto& p : parts) n += p.size();
    ops_[static_cast<size_t>(store_operation::put)].bytes.fetch_add(n, std::memory_order_relaxed);
  }
  return r;
}

tl::expected<std::vector<uint8_t>, store_error> metered_store::get(std::string_view key,
                                                                   uint64_t offset,
                                                                   uint64_t length) {
  auto r = metered(store_operation::get, key, [&] { return inner_->get(key, offset, length); });
  if (r) {
    ops_[static_cast<size_t>(store_operation::get)].bytes.fetch_add(r->size(),
                                                                    std::memory_order_relaxed);
  }
  return r;
}

tl::expected<shared_bytes, store_error> metered_store::get_shared(std::string_view key,
                                                                  uint64_t offset,
                                                                  uint64_t length) {
  auto r =
      metered(store_operation::get, key, [&] { return inner_->get_shared(key, offset, length); });
  if (r) {
    ops_[static_cast<size_t>(store_operation::get)].bytes.fetch_add(r->bytes.size(),
                                                                    std::memory_order_relaxed);
  }
  return r;
}

tl::expected<uint64_t, store_error> metered_store::head(std::string_view key) {
  return metered(store_operation::head, key, [&] { return inner_->head(key); });
}

tl::expected<void, store_error> metered_store::remove(std::string_view key) {
  return metered(store_operation::remove, key, [&] { return inner_->remove(key); });
}

tl::expected<std::vector<object_info>, store_error> metered_store::list(std::string_view prefix) {
  return metered(store_operation::list, prefix, [&] { return inner_->list(prefix); });
}

}  // namespace silt::storage
