// A decorator over any object store that counts its calls for the broker's metrics: per
// operation, the calls, their failures by error, their latency, and the bytes written and
// read. It changes nothing in the calls themselves.
//
// Thread-safe and lock-free: counters are relaxed atomics, latencies base::histogram (whose
// snapshots may be off by the calls in flight). The inner store is owned.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "base/histogram.h"
#include "base/log.h"
#include "storage/object/faulty_store.h"
#include "storage/object/object_store.h"

namespace silt::storage {

// store_operation's names, as metrics label them: "put", "get", "head", "delete", "list".
[[nodiscard]] std::string_view store_operation_name(store_operation op);

inline constexpr size_t store_error_count = 8;  // store_error's values

class metered_store final : public object_store {
 public:
  explicit metered_store(std::unique_ptr<object_store> inner);

  struct operation_stats {
    uint64_t calls = 0;
    std::array<uint64_t, store_error_count> errors{};  // by store_error
    uint64_t bytes = 0;                                // written (put) or read (get)
    base::histogram_snapshot latency_us;
  };
  [[nodiscard]] operation_stats stats(store_operation op) const;

  [[nodiscard]] tl::expected<void, store_error> put(std::string_view key,
                                                    std::span<const uint8_t> data) override;
  [[nodiscard]] tl::expected<void, store_error> put_parts(
      std::string_view key, std::span<const std::span<const uint8_t>> parts) override;
  // Counted as a put.
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
  [[nodiscard]] std::string describe() const override { return inner_->describe(); }
  void cancel() override { inner_->cancel(); }

 private:
  struct counters {
    std::atomic<uint64_t> calls{0};
    std::array<std::atomic<uint64_t>, store_error_count> errors{};
    std::atomic<uint64_t> bytes{0};
    base::histogram latency_us;
  };
  // Runs `call` on `key` (the prefix for a listing), then counts it under `op`; a failure
  // other than an ordinary answer (not_found, invalid_range, already_exists) is logged.
  template <typename Call>
  auto metered(store_operation op, std::string_view key, Call&& call);

  std::unique_ptr<object_store> inner_;
  std::array<counters, store_operation_count> ops_;
  base::log_limiter failures_{std::chrono::seconds(10)};
};

}  // namespace silt::storage
