// Distinct types for the numbers that name things: a stream id cannot be passed where an
// offset is expected, nor a leader epoch where a producer epoch is. Each is a thin wrapper
// over the integer the Kafka protocol or the metadata schema uses; `.value()` unwraps it at
// the edges (wire encoding, SQL binding, printing).
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>

namespace silt::base {

// An identifier: compared and hashed, never computed with.
template <typename Tag, typename T>
class strong_id {
 public:
  using value_type = T;

  constexpr strong_id() = default;
  constexpr explicit strong_id(T v) : v_(v) {}

  [[nodiscard]] constexpr T value() const { return v_; }

  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  constexpr auto operator<=>(const strong_id&) const = default;
  constexpr bool operator==(const strong_id&) const = default;

 private:
  T v_{};
};

// A counter that moves forward: an identifier plus the next one.
template <typename Tag, typename T>
class strong_counter {
 public:
  using value_type = T;

  constexpr strong_counter() = default;
  constexpr explicit strong_counter(T v) : v_(v) {}

  [[nodiscard]] constexpr T value() const { return v_; }
  [[nodiscard]] constexpr strong_counter next() const { return strong_counter(v_ + 1); }

  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  constexpr auto operator<=>(const strong_counter&) const = default;
  constexpr bool operator==(const strong_counter&) const = default;

 private:
  T v_{};
};

// A position in a log (Kafka's int64 offset): moved by counts of records; the distance
// between two is a count.
class offset {
 public:
  using value_type = int64_t;

  constexpr offset() = default;
  constexpr explicit offset(int64_t v) : v_(v) {}

  [[nodiscard]] constexpr int64_t value() const { return v_; }

  constexpr offset& operator+=(int64_t n) {
    v_ += n;
    return *this;
  }
  constexpr offset& operator-=(int64_t n) {
    v_ -= n;
    return *this;
  }
  [[nodiscard]] friend constexpr offset operator+(offset o, int64_t n) { return o += n; }
  [[nodiscard]] friend constexpr offset operator-(offset o, int64_t n) { return o -= n; }
  [[nodiscard]] friend constexpr int64_t operator-(offset a, offset b) { return a.v_ - b.v_; }

  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  constexpr auto operator<=>(const offset&) const = default;
  constexpr bool operator==(const offset&) const = default;

 private:
  int64_t v_ = 0;
};

struct stream_id_tag;
struct object_id_tag;
struct node_id_tag;
struct partition_id_tag;
struct producer_id_tag;
struct leader_epoch_tag;
struct producer_epoch_tag;

// A stream of the stream store: one per partition, never reused.
using stream_id = strong_id<stream_id_tag, uint64_t>;
// An object in the object store (its key derives from it).
using object_id = strong_id<object_id_tag, uint64_t>;
// A broker (Kafka's node.id); -1 is none.
using node_id = strong_id<node_id_tag, int32_t>;
// A partition's index within its topic.
using partition_id = strong_id<partition_id_tag, int32_t>;
// An idempotent producer (Kafka's int64 producer id); -1 is none.
using producer_id = strong_id<producer_id_tag, int64_t>;
// A stream's ownership epoch, which Kafka clients see as the partition's leader epoch.
using leader_epoch = strong_counter<leader_epoch_tag, int32_t>;
// A producer's epoch (Kafka's int16), bumped by InitProducerId.
using producer_epoch = strong_counter<producer_epoch_tag, int16_t>;

template <typename Tag, typename T>
std::ostream& operator<<(std::ostream& os, strong_id<Tag, T> id) {
  return os << id.value();
}

template <typename Tag, typename T>
std::ostream& operator<<(std::ostream& os, strong_counter<Tag, T> c) {
  return os << c.value();
}

inline std::ostream& operator<<(std::ostream& os, offset o) {
  return os << o.value();
}

}  // namespace silt::base

template <typename Tag, typename T>
struct std::hash<silt::base::strong_id<Tag, T>> {
  size_t operator()(silt::base::strong_id<Tag, T> id) const noexcept {
    return std::hash<T>{}(id.value());
  }
};

template <>
struct std::hash<silt::base::offset> {
  size_t operator()(silt::base::offset o) const noexcept { return std::hash<int64_t>{}(o.value()); }
};
