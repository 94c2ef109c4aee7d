// A decorator that lets no call reach the store until open(): before, every call fails at once
// with store_error::io, as when the store is unreachable. The broker keeps its object store
// behind one until the store's cluster marker names its cluster (storage/cluster_marker.h), so
// that while the marker cannot be read nothing writes, deletes or reads objects that may be
// another cluster's; the code above handles the failures as it handles an outage (uploads
// retried, the WAL holding the data).
//
// Thread-safe: the gate is an atomic flag. The inner store is owned.
#pragma once

#include <atomic>
#include <memory>

#include "storage/object/object_store.h"

namespace silt::storage {

class gated_store final : public object_store {
 public:
  explicit gated_store(std::unique_ptr<object_store> inner);

  // Lets every call through from now on. Irreversible.
  void open() { open_.store(true, std::memory_order_release); }
  [[nodiscard]] bool is_open() const { return open_.load(std::memory_order_acquire); }

  [[nodiscard]] tl::expected<void, store_error> put(std::string_view key,
                                                    std::span<const uint8_t> data) override;
  [[nodiscard]] tl::expected<void, store_error> put_parts(
      std::string_view key, std::span<const std::span<const uint8_t>> parts) override;
  [[nodiscard]] tl::expected<void, store_error> put_if_absent(
      std::string_view key, std::span<const uint8_t> data) override;
  [[nodiscard]] tl::expected<std::vector<uint8_t>, store_error> get(std::string_view key,
                                                                    uint64_t offset,
                                                                    uint64_t length) override;
  [[nodiscard]] tl::expected<shared_bytes, store_error> get_shared(std::string_view key,
                                                                   uint64_t offset,
                                                                   uint64_t length) override;
  [[nodiscard]] tl::expected<uint64_t, store_error> head(std::string_view key) override;
  [[nodiscard]] tl::expected<void, store_error> remove(std::string_view key) override;
  [[nodiscard]] tl::expected<std::vector<object_info>, store_error> list(
      std::string_view prefix) override;
  // Whether open or not: neither touches the store.
  [[nodiscard]] std::string describe() const override { return inner_->describe(); }
  void cancel() override { inner_->cancel(); }

 private:
  const std::unique_ptr<object_store> inner_;
  std::atomic<bool> open_{false};
};

}  // namespace silt::storage
