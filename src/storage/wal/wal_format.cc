#include "storage/wal/wal_format.h"

#include <cassert>
#include <cstring>

#include "base/crc32c.h"
#include "base/endian.h"

namespace silt::storage::wal::format {

namespace {

using base::load_be;
using base::store_be;

// Header slot field offsets (docs/formats/wal.md).
constexpr size_t slot_magic = 0;
constexpr size_t slot_version = 8;
constexpr size_t slot_block_size = 12;
constexpr size_t slot_sequence = 16;
constexpr size_t slot_capacity = 24;
constexpr size_t slot_trim_point = 32;
constexpr size_t slot_epoch_start = 40;
constexpr size_t slot_epoch = 48;
constexpr size_t slot_reserved = 52;
constexpr size_t slot_crc = 60;
constexpr size_t slot_size = 64;

// Frame header field offsets.
constexpr size_t frame_crc = 0;
constexpr size_t frame_length = 4;
constexpr size_t frame_position = 8;
constexpr size_t frame_epoch = 16;
constexpr size_t frame_type_at = 20;
constexpr size_t frame_reserved = 22;
constexpr size_t frame_stream_id = 24;
constexpr size_t frame_offset = 32;

void store_frame_header(const frame_header& h, uint8_t* out) {
  store_be<uint32_t>(out + frame_length, h.length);
  store_be<uint64_t>(out + frame_position, h.position);
  store_be<uint32_t>(out + frame_epoch, h.epoch);
  store_be<uint16_t>(out + frame_type_at, static_cast<uint16_t>(h.type));
  store_be<uint16_t>(out + frame_reserved, 0);
  store_be<uint64_t>(out + frame_stream_id, h.stream_id.value());
  store_be<int64_t>(out + frame_offset, h.offset.value());
}

// The checksum covers the header after the checksum field, then (for records) the payload.
uint32_t header_crc(const uint8_t* frame) {
  return base::crc32c(std::span<const uint8_t>(frame + frame_length, frame_header_size - 4));
}

}  // namespace

void encode_header_slot(const header_slot& slot, std::span<uint8_t> block) {
  assert(block.size() >= slot_size);
  std::memset(block.data(), 0, block.size());
  uint8_t* p = block.data();
  store_be<uint64_t>(p + slot_magic, magic);
  store_be<uint32_t>(p + slot_version, version);
  store_be<uint32_t>(p + slot_block_size, block_size);
  store_be<uint64_t>(p + slot_sequence, slot.sequence);
  store_be<uint64_t>(p + slot_capacity, slot.capacity);
  store_be<uint64_t>(p + slot_trim_point, slot.trim_point);
  store_be<uint64_t>(p + slot_epoch_start, slot.epoch_start);
  store_be<uint32_t>(p + slot_epoch, slot.epoch);
  store_be<uint32_t>(p + slot_crc, base::crc32c(std::span<const uint8_t>(p, slot_crc)));
}

tl::expected<header_slot, slot_state> decode_header_slot(std::span<const uint8_t> block) {
  if (block.size() < slot_size) return tl::unexpected(slot_state::corrupt);
  const uint8_t* p = block.data();
  if (load_be<uint64_t>(p + slot_magic) != magic) return tl::unexpected(slot_state::blank);
  if (load_be<uint32_t>(p + slot_crc) != base::crc32c(std::span<const uint8_t>(p, slot_crc))) {
    return tl::unexpected(slot_state::corrupt);
  }
  header_slot slot;
  slot.sequence = load_be<uint64_t>(p + slot_sequence);
  slot.capacity = load_be<uint64_t>(p + slot_capacity);
  slot.trim_point = load_be<uint64_t>(p + slot_trim_point);
  slot.epoch_start = load_be<uint64_t>(p + slot_epoch_start);
  slot.epoch = load_be<uint32_t>(p + slot_epoch);
  const bool fields_ok = load_be<uint32_t>(p + slot_version) == version &&
                         load_be<uint32_t>(p + slot_block_size) == block_size &&
                         load_be<uint64_t>(p + slot_reserved) == 0 &&
                         slot.capacity >= min_capacity && slot.capacity % block_size == 0;
  if (!fields_ok) return tl::unexpected(slot_state::corrupt);
  return slot;
}

void encode_record(const frame_header& header, std::span<const uint8_t> payload, uint8_t* out) {
  assert(header.type == frame_type::record && header.length == payload.size());
  store_frame_header(header, out);
  if (!payload.empty()) std::memcpy(out + frame_header_size, payload.data(), payload.size());
  // Over the copy, which is in cache, rather than the caller's bytes, so that what is
  // checksummed is what is written.
  const uint32_t crc = base::crc32c(
      std::span<const uint8_t>(out + frame_header_size, payload.size()), header_crc(out));
  store_be<uint32_t>(out + frame_crc, crc);
}

void encode_padding(wal_position position, wal_position end, uint32_t epoch, uint8_t* out) {
  assert(end >= position + frame_header_size);
  frame_header h;
  h.type = frame_type::padding;
  h.length = static_cast<uint32_t>(end - position - frame_header_size);
  h.position = position;
  h.epoch = epoch;
  store_frame_header(h, out);
  store_be<uint32_t>(out + frame_crc, header_crc(out));
  std::memset(out + frame_header_size, 0, h.length);
}

std::optional<frame_header> decode_frame_header(const uint8_t* in) {
  const uint16_t type = load_be<uint16_t>(in + frame_type_at);
  if (type != static_cast<uint16_t>(frame_type::record) &&
      type != static_cast<uint16_t>(frame_type::padding)) {
    return std::nullopt;
  }
  if (load_be<uint16_t>(in + frame_reserved) != 0) return std::nullopt;
  frame_header h;
  h.type = static_cast<frame_type>(type);
  h.length = load_be<uint32_t>(in + frame_length);
  h.position = load_be<uint64_t>(in + frame_position);
  h.epoch = load_be<uint32_t>(in + frame_epoch);
  h.stream_id = base::stream_id(load_be<uint64_t>(in + frame_stream_id));
  h.offset = base::offset(load_be<int64_t>(in + frame_offset));
  return h;
}

bool frame_checksum_ok(const uint8_t* frame, const frame_header& header) {
  uint32_t crc = header_crc(frame);
  if (header.type == frame_type::record) {
    crc = base::crc32c(std::span<const uint8_t>(frame + frame_header_size, header.length), crc);
  }
  return crc == load_be<uint32_t>(frame + frame_crc);
}

}  // namespace silt::storage::wal::format
