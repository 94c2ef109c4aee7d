// A decorator over any object store that injects failures, for tests of the code above it
// (uploads, compaction, cold reads): errors, timeouts, slow calls, truncated reads and lost
// replies, drawn by probability from a seeded generator or taken from scripted schedules.
//
// Each call first takes the next fault scripted for its operation, if any; otherwise it draws
// one by the probabilities (checked in the order of the fields below). The faults:
//   io, throttled   fail with that error; the inner store is not called
//   timeout         sleep timeout_delay, then fail with timeout; the inner store is not called
//   slow            sleep slow_delay, then make the call
//   partial         get: return a strict prefix of what the inner store returned (at least one
//                   byte short), as a cut connection would; put: fail with io having written
//                   nothing; other calls: fail with io
//   lost_reply      make the call, then fail with io (the change happened; the caller saw a
//                   failure: puts and removes must be safe to repeat)
// A hook (after_inner_call) can also run between the inner call and the reply, e.g. to kill
// the process after an object is written and before its writer learns so.
// Deterministic for a seed when calls come in a fixed order. Thread-safe: a mutex guards the
// generator, the schedules and the counters; sleeps and inner calls run outside it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <vector>

#include "base/mutex.h"
#include "storage/object/object_store.h"

namespace silt::storage {

enum class fault : uint8_t { none, io, throttled, timeout, slow, partial, lost_reply };
inline constexpr size_t fault_count = 7;

enum class store_operation : uint8_t { put, get, head, remove, list };
inline constexpr size_t store_operation_count = 5;

struct faulty_store_options {
  uint64_t seed = 1;
  // Probabilities per call, each in [0, 1]; their sum at most 1.
  double error_probability = 0;       // fault::io
  double throttle_probability = 0;    // fault::throttled
  double timeout_probability = 0;     // fault::timeout
  double slow_probability = 0;        // fault::slow
  double partial_probability = 0;     // fault::partial
  double lost_reply_probability = 0;  // fault::lost_reply
  std::chrono::milliseconds timeout_delay{20};
  std::chrono::milliseconds slow_delay{20};
  // The operations the probabilities apply to (scripted faults apply regardless); all by
  // default. Bit i is store_operation i.
  uint32_t operations = (1u << store_operation_count) - 1;
  // With off_period > 0, the probabilities apply only in the first on_period of every
  // on_period + off_period since the store was made: outages for periods of a run.
  std::chrono::milliseconds on_period{0};
  std::chrono::milliseconds off_period{0};
  // Called after every call the inner store made (before a lost_reply turns its result into
  // a failure), with the operation and the key (the prefix of a list). Runs on the caller's
  // thread, outside the mutex.
  std::function<void(store_operation, std::string_view)> after_inner_call;
};

class faulty_store final : public object_store {
 public:
  // `inner` must outlive this store.
  faulty_store(object_store& inner, const faulty_store_options& options);

  // Replaces the options (e.g. to stop injecting faults); the generator keeps its state.
  void set_options(const faulty_store_options& options);
  // Queues faults for the next calls of `op`, one per call, before any drawn by probability.
  // fault::none lets a call through.
  void script(store_operation op, const std::vector<fault>& faults);
  // How many times `f` was injected (fault::none: calls let through untouched).
  [[nodiscard]] uint64_t injected(fault f) const;

  [[nodiscard]] tl::expected<void, store_error> put(std::string_view key,
                                                    std::span<const uint8_t> data) override;
  // Faults as for put (drawn and scripted as store_operation::put).
  [[nodiscard]] tl::expected<void, store_error> put_parts(
      std::string_view key, std::span<const std::span<const uint8_t>> parts) override;
  // Faults as for put (drawn and scripted as store_operation::put).
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
  [[nodiscard]] std::string describe() const override;
  void cancel() override { inner_.cancel(); }

 private:
  struct decision {
    fault f = fault::none;
    uint64_t cut = 0;  // for a partial get: a random number the kept length derives from
  };
  // Picks the fault of the next call of `op` and counts it.
  decision next(store_operation op);
  // Whether the probabilities apply now (on_period and off_period).
  [[nodiscard]] bool in_fault_period() const REQUIRES(mu_);
  // Sleeps and fails as `d` says before the inner call; nullopt: go on with the call.
  std::optional<store_error> before(const decision& d) const;
  // Runs the after_inner_call hook, if any.
  void after(store_operation op, std::string_view key) const;
  // A put of any kind, `call` making the inner one, with the faults of store_operation::put.
  template <typename Call>
  tl::expected<void, store_error> faulty_put(std::string_view key, Call&& call);

  object_store& inner_;
  const std::chrono::steady_clock::time_point made_ = std::chrono::steady_clock::now();
  mutable base::mutex mu_;
  faulty_store_options options_ GUARDED_BY(mu_);
  std::mt19937_64 random_ GUARDED_BY(mu_);
  std::array<std::deque<fault>, store_operation_count> scripts_ GUARDED_BY(mu_);
  std::array<uint64_t, fault_count> injected_ GUARDED_BY(mu_){};
};

}  // namespace silt::storage
