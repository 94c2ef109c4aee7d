#include "storage/object/faulty_store.h"

#include <thread>

namespace silt::storage {

faulty_store::faulty_store(object_store& inner, const faulty_store_options& options)
    : inner_(inner), options_(options), random_(options.seed) {}

void faulty_store::set_options(const faulty_store_options& options) {
  base::lock_guard lock(mu_);
  options_ = options;
}

void faulty_store::script(store_operation op, const std::vector<fault>& faults) {
  base::lock_guard lock(mu_);
  auto& queue = scripts_[static_cast<size_t>(op)];
  queue.insert(queue.end(), faults.begin(), faults.end());
}

uint64_t faulty_store::injected(fault f) const {
  base::lock_guard lock(mu_);
  return injected_[static_cast<size_t>(f)];
}

bool faulty_store::in_fault_period() const {
  if (options_.off_period.count() <= 0) return true;
  const auto cycle = options_.on_period + options_.off_period;
  const auto since = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - made_);
  return since % cycle < options_.on_period;
}

faulty_store::decision faulty_store::next(store_operation op) {
  base::lock_guard lock(mu_);
  decision d;
  // Both draws happen on every call so that the sequence depends only on the call order.
  const double p = std::uniform_real_distribution<double>(0.0, 1.0)(random_);
  d.cut = random_();
  auto& queue = scripts_[static_cast<size_t>(op)];
  if (!queue.empty()) {
    d.f = queue.front();
    queue.pop_front();
  } else if ((options_.operations & (1u << static_cast<unsigned>(op))) != 0 && in_fault_period()) {
    const std::pair<double, fault> table[] = {
        {options_.error_probability, fault::io},
        {options_.throttle_probability, fault::throttled},
        {options_.timeout_probability, fault::timeout},
        {options_.slow_probability, fault::slow},
        {options_.partial_probability, fault::partial},
        {options_.lost_reply_probability, fault::lost_reply},
    };
    double sum = 0;
    for (const auto& [probability, f] : table) {
      sum += probability;
      if (p < sum) {
        d.f = f;
        break;
      }
    }
  }
  ++injected_[static_cast<size_t>(d.f)];
  return d;
}

std::optional<store_error> faulty_store::before(const decision& d) const {
  std::chrono::milliseconds delay{0};
  {
    base::lock_guard lock(mu_);
    delay = d.f == fault::timeout ? options_.timeout_delay : options_.slow_delay;
  }
  switch (d.f) {
    case fault::io:
      return store_error::io;
    case fault::throttled:
      return store_error::throttled;
    case fault::timeout:
      std::this_thread::sleep_for(delay);
      return store_error::timeout;
    case fault::slow:
      std::this_thread::sleep_for(delay);
      return std::nullopt;
    case fault::none:
    case fault::partial:
    case fault::lost_reply:
      return std::nullopt;
  }
  return std::nullopt;
}

void faulty_store::after(store_operation op, std::string_view key) const {
  std::function<void(store_operation, std::string_view)> hook;
  {
    base::lock_guard lock(mu_);
    hook = options_.after_inner_call;
  }
  if (hook) hook(op, key);
}

template <typename Call>
tl::expected<void, store_error> faulty_store::faulty_put(std::string_view key, Call&& call) {
  const auto d = next(store_operation::put);
  if (auto e = before(d)) return tl::make_unexpected(*e);
  if (d.f == fault::partial) return tl::make_unexpected(store_error::io);  // nothing written
  auto r = call();
  after(store_operation::put, key);
  if (r && d.f == fault::lost_reply) return tl::make_unexpected(store_error::io);
  return r;
}

tl::expected<void, store_error> faulty_store::put(std::string_view key,
                                                  std::span<const uint8_t> data) {
  return faulty_put(key, [&] { return inner_.put(key, data); });
}

tl::expected<void, store_error> faulty_store::put_parts(
    std::string_view key, std::span<const std::span<const uint8_t>> parts) {
  return faulty_put(key, [&] { return inner_.put_parts(key, parts); });
}

tl::expected<void, store_error> faulty_store::put_if_absent(std::string_view key,
                                                            std::span<const uint8_t> data) {
  return faulty_put(key, [&] { return inner_.put_if_absent(key, data); });
}

tl::expected<std::vector<uint8_t>, store_error> faulty_store::get(std::string_view key,
                                                                  uint64_t offset,
                                                                  uint64_t length) {
  const auto d = next(store_operation::get);
  if (auto e = before(d)) return tl::make_unexpected(*e);
  auto r = inner_.get(key, offset, length);
  after(store_operation::get, key);
  if (!r) return r;
  if (d.f == fault::lost_reply) return tl::make_unexpected(store_error::io);
  if (d.f == fault::partial && !r->empty()) r->resize(d.cut % r->size());
  return r;
}

tl::expected<shared_bytes, store_error> faulty_store::get_shared(std::string_view key,
                                                                 uint64_t offset, uint64_t length) {
  const auto d = next(store_operation::get);
  if (auto e = before(d)) return tl::make_unexpected(*e);
  auto r = inner_.get_shared(key, offset, length);
  after(store_operation::get, key);
  if (!r) return r;
  if (d.f == fault::lost_reply) return tl::make_unexpected(store_error::io);
  if (d.f == fault::partial && !r->bytes.empty())
    r->bytes = r->bytes.first(d.cut % r->bytes.size());
  return r;
}

tl::expected<uint64_t, store_error> faulty_store::head(std::string_view key) {
  const auto d = next(store_operation::head);
  if (auto e = before(d)) return tl::make_unexpected(*e);
  if (d.f == fault::partial) return tl::make_unexpected(store_error::io);
  auto r = inner_.head(key);
  after(store_operation::head, key);
  if (r && d.f == fault::lost_reply) return tl::make_unexpected(store_error::io);
  return r;
}

tl::expected<void, store_error> faulty_store::remove(std::string_view key) {
  const auto d = next(store_operation::remove);
  if (auto e = before(d)) return tl::make_unexpected(*e);
  if (d.f == fault::partial) return tl::make_unexpected(store_error::io);
  auto r = inner_.remove(key);
  after(store_operation::remove, key);
  if (r && d.f == fault::lost_reply) return tl::make_unexpected(store_error::io);
  return r;
}

tl::expected<std::vector<object_info>, store_error> faulty_store::list(std::string_view prefix) {
  const auto d = next(store_operation::list);
  if (auto e = before(d)) return tl::make_unexpected(*e);
  if (d.f == fault::partial) return tl::make_unexpected(store_error::io);
  auto r = inner_.list(prefix);
  after(store_operation::list, prefix);
  if (r && d.f == fault::lost_reply) return tl::make_unexpected(store_error::io);
  return r;
}

std::string faulty_store::describe() const {
  return "faulty(" + inner_.describe() + ")";
}

}  // namespace silt::storage
