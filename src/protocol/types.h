// Value types shared by the generated Kafka messages: Uuid, record-data views, tagged fields.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace silt::protocol {

// A Kafka Uuid: 16 bytes, written most significant byte first.
struct uuid {
  std::array<uint8_t, 16> bytes{};

  [[nodiscard]] bool is_zero() const {
    return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
  }
  bool operator==(const uuid&) const = default;
};

// A view of record data (one or more record batches) inside a buffer the caller keeps alive:
// decoding a Produce request does not copy its records, and a Fetch response can reference
// cached data. Equality compares the bytes.
class records_view {
 public:
  records_view() = default;
  explicit records_view(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  [[nodiscard]] std::span<const uint8_t> bytes() const { return bytes_; }
  [[nodiscard]] const uint8_t* data() const { return bytes_.data(); }
  [[nodiscard]] size_t size() const { return bytes_.size(); }
  [[nodiscard]] bool empty() const { return bytes_.empty(); }

  bool operator==(const records_view& o) const {
    return std::equal(bytes_.begin(), bytes_.end(), o.bytes_.begin(), o.bytes_.end());
  }

 private:
  std::span<const uint8_t> bytes_;
};

// A tagged field this code does not know (a newer version's): kept raw and written back.
struct tagged_field {
  uint32_t tag = 0;
  std::vector<uint8_t> data;
  bool operator==(const tagged_field&) const = default;
};

}  // namespace silt::protocol
