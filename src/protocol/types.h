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

// A view of record data (one or more record batches) inside buffers the caller keeps alive:
// decoding a Produce request does not copy its records, and a Fetch response can reference
// cached data, also when its batches lie in several buffers (pieces, written one after the
// other). Equality compares the bytes.
class records_view {
 public:
  records_view() = default;
  explicit records_view(std::span<const uint8_t> bytes) : bytes_(bytes), size_(bytes.size()) {}
  explicit records_view(std::vector<std::span<const uint8_t>> pieces) {
    for (const auto& p : pieces) size_ += p.size();
    if (pieces.size() == 1) {
      bytes_ = pieces.front();
    } else {
      pieces_ = std::move(pieces);
    }
  }

  // The bytes, of a view in one piece (every decoded one).
  [[nodiscard]] std::span<const uint8_t> bytes() const { return bytes_; }
  [[nodiscard]] const uint8_t* data() const { return bytes_.data(); }
  // The pieces, in order (a view in one piece is one piece).
  [[nodiscard]] std::span<const std::span<const uint8_t>> pieces() const {
    if (pieces_.empty()) return {&bytes_, 1};
    return pieces_;
  }
  [[nodiscard]] bool in_one_piece() const { return pieces_.empty(); }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }

  bool operator==(const records_view& o) const {
    if (size_ != o.size_) return false;
    if (in_one_piece() && o.in_one_piece()) {
      return std::equal(bytes_.begin(), bytes_.end(), o.bytes_.begin());
    }
    std::vector<uint8_t> a;
    std::vector<uint8_t> b;
    for (const auto& p : pieces()) a.insert(a.end(), p.begin(), p.end());
    for (const auto& p : o.pieces()) b.insert(b.end(), p.begin(), p.end());
    return a == b;
  }

 private:
  std::span<const uint8_t> bytes_;                // in one piece
  std::vector<std::span<const uint8_t>> pieces_;  // in several
  size_t size_ = 0;
};

// A tagged field this code does not know (a newer version's): kept raw and written back.
struct tagged_field {
  uint32_t tag = 0;
  std::vector<uint8_t> data;
  bool operator==(const tagged_field&) const = default;
};

}  // namespace silt::protocol
