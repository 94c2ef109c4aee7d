// The key map of log compaction, as Kafka's SkimpyOffsetMap: for each key, the offset of its
// latest record, in a fixed memory budget (log.cleaner.dedupe.buffer.size). A key is kept as a
// 16-byte digest (the first bytes of its SHA-256), so a slot costs 24 bytes whatever the key;
// open addressing with linear probing. When the map is as full as its load factor allows,
// put() refuses: the cleaner then cleans up to the offsets it has mapped and maps the rest in
// a later pass. Not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace silt::storage {

class offset_map {
 public:
  static constexpr size_t slot_bytes = 24;

  // A map of at most memory_bytes of slots (at least 16), filled to at most load_factor.
  explicit offset_map(size_t memory_bytes, double load_factor = 0.9);

  // Maps `key` to `offset` (a later offset replaces an earlier one). False, and nothing
  // changed, when the key is new and the map is full.
  [[nodiscard]] bool put(std::span<const uint8_t> key, int64_t offset);
  [[nodiscard]] std::optional<int64_t> get(std::span<const uint8_t> key) const;

  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] size_t capacity() const { return max_entries_; }
  // The highest offset put so far (-1 when empty).
  [[nodiscard]] int64_t latest_offset() const { return latest_; }
  void clear();

 private:
  using digest = std::array<uint8_t, 16>;
  struct slot {
    digest key{};
    int64_t offset = -1;  // -1: empty
  };
  static digest digest_of(std::span<const uint8_t> key);
  [[nodiscard]] size_t find(const digest& d) const;  // its slot, or the empty one it would take

  std::vector<slot> slots_;
  size_t max_entries_ = 0;
  size_t size_ = 0;
  int64_t latest_ = -1;
};

}  // namespace silt::storage
