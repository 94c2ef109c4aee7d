#include "storage/object/gated_store.h"

namespace silt::storage {

namespace {

constexpr auto held = [] { return tl::make_unexpected(store_error::io); };

}  // namespace

gated_store::gated_store(std::unique_ptr<object_store> inner) : inner_(std::move(inner)) {}

tl::expected<void, store_error> gated_store::put(std::string_view key,
                                                 std::span<const uint8_t> data) {
  if (!is_open()) return held();
  return inner_->put(key, data);
}

tl::expected<void, store_error> gated_store::put_parts(
    std::string_view key, std::span<const std::span<const uint8_t>> parts) {
  if (!is_open()) return held();
  return inner_->put_parts(key, parts);
}

tl::expected<void, store_error> gated_store::put_if_absent(std::string_view key,
                                                           std::span<const uint8_t> data) {
  if (!is_open()) return held();
  return inner_->put_if_absent(key, data);
}

tl::expected<std::vector<uint8_t>, store_error> gated_store::get(std::string_view key,
                                                                 uint64_t offset, uint64_t length) {
  if (!is_open()) return held();
  return inner_->get(key, offset, length);
}

tl::expected<shared_bytes, store_error> gated_store::get_shared(std::string_view key,
                                                                uint64_t offset, uint64_t length) {
  if (!is_open()) return held();
  return inner_->get_shared(key, offset, length);
}

tl::expected<uint64_t, store_error> gated_store::head(std::string_view key) {
  if (!is_open()) return held();
  return inner_->head(key);
}

tl::expected<void, store_error> gated_store::remove(std::string_view key) {
  if (!is_open()) return held();
  return inner_->remove(key);
}

tl::expected<std::vector<object_info>, store_error> gated_store::list(std::string_view prefix) {
  if (!is_open()) return held();
  return inner_->list(prefix);
}

}  // namespace silt::storage
