// The WAL's on-disk layout: header slots, record frames, padding, and the mapping of logical
// positions onto the ring. Specified in docs/formats/wal.md (format version 1); this file and
// that document change together.
//
// Values only: no I/O, no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include <tl/expected.hpp>

#include "base/ids.h"
#include "storage/wal/wal.h"

namespace silt::storage::wal::format {

inline constexpr uint32_t version = 1;
inline constexpr uint32_t block_size = 4096;
inline constexpr uint64_t magic = 0x53494c5457414c00;     // "SILTWAL\0"
inline constexpr uint64_t header_bytes = 2 * block_size;  // two header slots
inline constexpr uint64_t ring_offset = header_bytes;     // file offset of ring byte 0
inline constexpr uint64_t min_capacity = 4 * block_size;
inline constexpr size_t frame_header_size = 40;

// A record's frame, 40 bytes plus payload, must leave this much of the ring free: the write
// that holds it starts at most one block before the record and ends at most one block plus a
// frame header after it, and the trim point can only reach the end of the previous record.
inline constexpr uint64_t ring_slack = 3 * block_size;

[[nodiscard]] constexpr uint64_t align_down(uint64_t v) {
  return v - v % block_size;
}
[[nodiscard]] constexpr uint64_t align_up(uint64_t v) {
  return align_down(v + block_size - 1);
}

// Where a write whose frames end at `pos` ends: the next block boundary, or the one after when
// fewer than a frame header's bytes remain (a padding frame always has a whole header).
[[nodiscard]] constexpr wal_position padded_end(wal_position pos) {
  const uint64_t gap = align_up(pos) - pos;
  if (gap == 0) return pos;
  return gap >= frame_header_size ? pos + gap : pos + gap + block_size;
}

// One header slot (the first 64 bytes of a 4 KiB block; the rest is zero).
struct header_slot {
  uint64_t sequence = 0;  // the slot with the larger sequence is the current one
  uint64_t capacity = 0;  // ring bytes
  wal_position trim_point = 0;
  wal_position epoch_start = 0;  // where the current epoch's frames begin
  uint32_t epoch = 0;            // bumped by every open()
  bool operator==(const header_slot&) const = default;
};

enum class slot_state : uint8_t {
  blank,    // no magic: never written
  corrupt,  // magic present but checksum, version or fields wrong
};

void encode_header_slot(const header_slot& slot, std::span<uint8_t> block);
[[nodiscard]] tl::expected<header_slot, slot_state> decode_header_slot(
    std::span<const uint8_t> block);

enum class frame_type : uint16_t {
  record = 1,
  padding = 2,  // fills a write up to its end; its payload is not checksummed
};

struct frame_header {
  frame_type type = frame_type::record;
  uint32_t length = 0;  // bytes after the 40-byte header
  wal_position position = 0;
  uint32_t epoch = 0;
  base::stream_id stream_id{};
  base::offset offset{};
};

// Writes a record frame (header and payload) to `out`, which holds 40 + payload.size() bytes.
void encode_record(const frame_header& header, std::span<const uint8_t> payload, uint8_t* out);

// Writes a padding frame covering [position, end) to `out` (end - position bytes); the bytes
// after its header are zeroed.
void encode_padding(wal_position position, wal_position end, uint32_t epoch, uint8_t* out);

// Decodes the 40-byte frame header at `in` without checking its checksum; nullopt when the
// type or the reserved bytes cannot be those of a frame.
[[nodiscard]] std::optional<frame_header> decode_frame_header(const uint8_t* in);

// Whether the checksum stored in the frame at `frame` (header then `length` bytes) holds.
[[nodiscard]] bool frame_checksum_ok(const uint8_t* frame, const frame_header& header);

// The file offset of ring position `pos`.
[[nodiscard]] constexpr uint64_t file_offset(wal_position pos, uint64_t capacity) {
  return ring_offset + pos % capacity;
}

}  // namespace silt::storage::wal::format
