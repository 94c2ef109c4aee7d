#include "storage/object_format.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cinttypes>
#include <cstdio>
#include <limits>

#include "base/crc32c.h"
#include "base/endian.h"

namespace silt::storage {

namespace {

// Layout constants; docs/formats/object.md is the specification.
constexpr uint16_t object_format_version = 1;
constexpr std::array<uint8_t, 8> object_magic = {'S', 'I', 'L', 'T', 'O', 'B', 'J', '1'};
constexpr size_t footer_index_position_at = 0;
constexpr size_t footer_index_size_at = 8;
constexpr size_t footer_version_at = 12;
constexpr size_t footer_reserved_at = 14;
constexpr size_t footer_crc_at = 36;
constexpr size_t footer_magic_at = 40;
static_assert(footer_magic_at + object_magic.size() == object_footer_size);

constexpr uint8_t index_version = 1;
constexpr size_t index_header_size = 8;  // version, 3 reserved bytes, entry count
constexpr size_t index_entry_size = 44;
constexpr size_t index_trailer_size = 4;
constexpr size_t min_index_size = index_header_size + index_trailer_size;

// What one block and one index can address: sizes are stored in 32 bits.
constexpr size_t max_block_batch_bytes = std::numeric_limits<uint32_t>::max() - block_trailer_size;
constexpr size_t max_blocks =
    (std::numeric_limits<uint32_t>::max() - min_index_size) / index_entry_size;

tl::unexpected<object_format_error> fail(object_format_error e) {
  return tl::make_unexpected(e);
}

template <typename T>
void append_be(std::vector<uint8_t>& out, T v) {
  std::array<uint8_t, sizeof(T)> bytes;
  base::store_be(bytes.data(), v);
  out.insert(out.end(), bytes.begin(), bytes.end());
}

bool all_zero(std::span<const uint8_t> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
}

void append_entry(std::vector<uint8_t>& out, const block_entry& e) {
  append_be<uint64_t>(out, e.stream_id.value());
  append_be<int64_t>(out, e.start_offset.value());
  append_be<int64_t>(out, e.end_offset.value());
  append_be<uint64_t>(out, e.position);
  append_be<uint32_t>(out, e.size);
  append_be<int64_t>(out, e.max_timestamp);
}

block_entry load_entry(const uint8_t* p) {
  block_entry e;
  e.stream_id = base::stream_id(base::load_be<uint64_t>(p));
  e.start_offset = base::offset(base::load_be<int64_t>(p + 8));
  e.end_offset = base::offset(base::load_be<int64_t>(p + 16));
  e.position = base::load_be<uint64_t>(p + 24);
  e.size = base::load_be<uint32_t>(p + 32);
  e.max_timestamp = base::load_be<int64_t>(p + 36);
  return e;
}

// An entry that is well-formed on its own and lies in the data region [0, data_end).
bool entry_is_valid(const block_entry& e, uint64_t data_end) {
  return e.start_offset >= base::offset(0) && e.end_offset > e.start_offset &&
         e.size > block_trailer_size && e.position <= data_end && e.size <= data_end - e.position;
}

// Whether `e` may follow `prev` in an index: sorted by (stream_id, start_offset), no offset
// overlap within a stream, and blocks in index order that do not overlap in the object.
bool follows(const block_entry& prev, const block_entry& e) {
  if (e.stream_id < prev.stream_id) return false;
  if (e.stream_id == prev.stream_id && e.start_offset < prev.end_offset) return false;
  return e.position >= prev.position + prev.size;  // no overflow: prev ends inside the data
}

}  // namespace

std::string_view object_format_error_name(object_format_error e) {
  switch (e) {
    case object_format_error::bad_footer:
      return "bad footer";
    case object_format_error::bad_index:
      return "bad index";
    case object_format_error::bad_block:
      return "bad block";
    case object_format_error::out_of_order:
      return "out of order";
    case object_format_error::invalid_argument:
      return "invalid argument";
  }
  return "unknown";
}

object_writer::object_writer(uint32_t block_size)
    // Merged adds must leave room for the checksum within a block's 32-bit size.
    : block_size_(static_cast<uint32_t>(std::min<size_t>(block_size, max_block_batch_bytes))) {}

std::vector<uint8_t> object_parts::concatenate() const {
  std::vector<uint8_t> out;
  out.reserve(size);
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

tl::expected<void, object_format_error> object_writer::add(base::stream_id stream_id,
                                                           base::offset start_offset,
                                                           base::offset end_offset,
                                                           int64_t max_timestamp,
                                                           std::span<const uint8_t> batches) {
  if (batches.empty()) return fail(object_format_error::invalid_argument);
  auto copy = std::make_shared<const std::vector<uint8_t>>(batches.begin(), batches.end());
  const std::span<const uint8_t> view(*copy);
  return add_view(stream_id, start_offset, end_offset, max_timestamp, view, std::move(copy));
}

tl::expected<void, object_format_error> object_writer::add_view(
    base::stream_id stream_id, base::offset start_offset, base::offset end_offset,
    int64_t max_timestamp, std::span<const uint8_t> batches, std::shared_ptr<const void> owner) {
  if (batches.empty() || start_offset < base::offset(0) || end_offset <= start_offset ||
      batches.size() > max_block_batch_bytes) {
    return fail(object_format_error::invalid_argument);
  }
  auto it = streams_.find(stream_id);
  const pending_block* last = nullptr;
  if (it != streams_.end()) {
    last = &it->second.blocks.back();
    if (start_offset != last->entry.end_offset) return fail(object_format_error::out_of_order);
  }
  const bool new_block = last == nullptr || it->second.last_block_full ||
                         size_t{last->entry.size} + batches.size() > block_size_;
  if (new_block && block_count_ >= max_blocks) return fail(object_format_error::invalid_argument);

  if (it == streams_.end()) it = streams_.try_emplace(stream_id).first;
  stream_data& stream = it->second;
  if (new_block) {
    block_entry entry{.stream_id = stream_id,
                      .start_offset = start_offset,
                      .end_offset = start_offset,
                      .position = 0,
                      .size = 0,
                      .max_timestamp = max_timestamp};
    stream.blocks.push_back(
        {.entry = entry, .crc = 0, .first_piece = stream.pieces.size(), .piece_count = 0});
    ++block_count_;
    size_ += block_trailer_size;
  }
  pending_block& block = stream.blocks.back();
  block.entry.end_offset = end_offset;
  block.entry.size += static_cast<uint32_t>(batches.size());
  block.entry.max_timestamp = std::max(block.entry.max_timestamp, max_timestamp);
  block.crc = base::crc32c(batches, block.crc);
  ++block.piece_count;
  stream.pieces.push_back(batches);
  stream.last_block_full = block.entry.size >= block_size_;
  size_ += batches.size();
  // Adds from one owner (a request frame, an object read back) tend to come in a row.
  if (owner && (owners_.empty() || owners_.back() != owner)) owners_.push_back(std::move(owner));
  return {};
}

object_parts object_writer::finish_parts() {
  const size_t index_size = min_index_size + block_count_ * index_entry_size;
  object_parts out;
  std::vector<uint8_t>& owned = out.owned_;
  // Sized once: the parts point into it.
  owned.reserve(block_count_ * block_trailer_size + index_size + object_footer_size);

  // The block checksums, in object order, and the index entries.
  index_.clear();
  index_.reserve(block_count_);
  uint64_t position = 0;
  size_t piece_count = 0;
  for (const auto& [stream_id, stream] : streams_) {
    for (const pending_block& block : stream.blocks) {
      block_entry entry = block.entry;
      entry.position = position;
      entry.size += block_trailer_size;
      position += entry.size;
      append_be<uint32_t>(owned, block.crc);
      index_.push_back(entry);
    }
    piece_count += stream.pieces.size();
  }
  assert(position == size_);

  const uint64_t index_position = position;
  const size_t index_at = owned.size();
  owned.push_back(index_version);
  owned.insert(owned.end(), 3, 0);
  append_be<uint32_t>(owned, static_cast<uint32_t>(index_.size()));
  for (const block_entry& e : index_) append_entry(owned, e);
  append_be<uint32_t>(owned, base::crc32c(std::span<const uint8_t>(owned).subspan(index_at)));
  assert(owned.size() - index_at == index_size);

  const size_t footer_at = owned.size();
  append_be<uint64_t>(owned, index_position);
  append_be<uint32_t>(owned, static_cast<uint32_t>(index_size));
  append_be<uint16_t>(owned, object_format_version);
  owned.insert(owned.end(), footer_crc_at - footer_reserved_at, 0);
  append_be<uint32_t>(owned, base::crc32c(std::span<const uint8_t>(owned).subspan(footer_at)));
  owned.insert(owned.end(), object_magic.begin(), object_magic.end());
  assert(owned.size() - footer_at == object_footer_size);
  assert(owned.size() <= owned.capacity());

  // The parts: each block's batches, then its checksum; then index and footer together.
  // Views that touch in memory are merged.
  const std::span<const uint8_t> owned_view(owned);
  out.parts.reserve(piece_count + block_count_ + 1);
  const auto push = [&out](std::span<const uint8_t> part) {
    if (!out.parts.empty() && out.parts.back().data() + out.parts.back().size() == part.data()) {
      out.parts.back() = {out.parts.back().data(), out.parts.back().size() + part.size()};
    } else {
      out.parts.push_back(part);
    }
  };
  size_t crc_at = 0;
  for (const auto& [stream_id, stream] : streams_) {
    for (const pending_block& block : stream.blocks) {
      for (size_t i = 0; i < block.piece_count; ++i) push(stream.pieces[block.first_piece + i]);
      push(owned_view.subspan(crc_at, block_trailer_size));
      crc_at += block_trailer_size;
    }
  }
  push(owned_view.subspan(index_at));
  out.size = size_ + index_size + object_footer_size;
  out.owners = std::move(owners_);

  streams_.clear();
  owners_.clear();
  size_ = 0;
  block_count_ = 0;
  return out;
}

std::vector<uint8_t> object_writer::finish() {
  return finish_parts().concatenate();
}

tl::expected<object_footer, object_format_error> parse_footer(std::span<const uint8_t> footer) {
  if (footer.size() != object_footer_size) return fail(object_format_error::bad_footer);
  const uint8_t* p = footer.data();
  if (!std::equal(object_magic.begin(), object_magic.end(), p + footer_magic_at)) {
    return fail(object_format_error::bad_footer);
  }
  if (base::crc32c(footer.first(footer_crc_at)) != base::load_be<uint32_t>(p + footer_crc_at)) {
    return fail(object_format_error::bad_footer);
  }
  if (base::load_be<uint16_t>(p + footer_version_at) != object_format_version ||
      !all_zero(footer.subspan(footer_reserved_at, footer_crc_at - footer_reserved_at))) {
    return fail(object_format_error::bad_footer);
  }
  object_footer f{.index_position = base::load_be<uint64_t>(p + footer_index_position_at),
                  .index_size = base::load_be<uint32_t>(p + footer_index_size_at)};
  if (f.index_size < min_index_size ||
      f.index_position > std::numeric_limits<uint64_t>::max() - f.index_size - object_footer_size) {
    return fail(object_format_error::bad_footer);
  }
  return f;
}

tl::expected<std::vector<block_entry>, object_format_error> parse_index(
    std::span<const uint8_t> index, const object_footer& footer) {
  if (index.size() != footer.index_size || index.size() < min_index_size) {
    return fail(object_format_error::bad_index);
  }
  const size_t body_size = index.size() - index_trailer_size;
  if (base::crc32c(index.first(body_size)) != base::load_be<uint32_t>(index.data() + body_size)) {
    return fail(object_format_error::bad_index);
  }
  if (index[0] != index_version || !all_zero(index.subspan(1, 3))) {
    return fail(object_format_error::bad_index);
  }
  // The count must account for every byte, so it bounds the allocation below by the input.
  const uint64_t count = base::load_be<uint32_t>(index.data() + 4);
  if (count * index_entry_size != body_size - index_header_size) {
    return fail(object_format_error::bad_index);
  }
  std::vector<block_entry> entries;
  entries.reserve(count);
  const uint8_t* p = index.data() + index_header_size;
  for (uint64_t i = 0; i < count; ++i, p += index_entry_size) {
    const block_entry e = load_entry(p);
    if (!entry_is_valid(e, footer.index_position) ||
        (!entries.empty() && !follows(entries.back(), e))) {
      return fail(object_format_error::bad_index);
    }
    entries.push_back(e);
  }
  return entries;
}

tl::expected<std::span<const uint8_t>, object_format_error> checked_block_batches(
    const block_entry& entry, std::span<const uint8_t> block) {
  if (block.size() != entry.size || block.size() <= block_trailer_size) {
    return fail(object_format_error::bad_block);
  }
  return block.first(block.size() - block_trailer_size);
}

tl::expected<std::span<const uint8_t>, object_format_error> open_block(
    const block_entry& entry, std::span<const uint8_t> block) {
  const auto batches = checked_block_batches(entry, block);
  if (!batches) return batches;
  if (base::crc32c(*batches) != base::load_be<uint32_t>(block.data() + batches->size())) {
    return fail(object_format_error::bad_block);
  }
  return batches;
}

std::span<const block_entry> find_blocks(const std::vector<block_entry>& index,
                                         base::stream_id stream_id, base::offset offset,
                                         size_t max_bytes) {
  // Within a stream, end offsets ascend with start offsets (blocks do not overlap), so this
  // finds the first block of the stream that ends after `offset`.
  const auto first = std::partition_point(index.begin(), index.end(), [&](const block_entry& e) {
    return e.stream_id < stream_id || (e.stream_id == stream_id && e.end_offset <= offset);
  });
  if (first == index.end() || first->stream_id != stream_id || first->start_offset > offset) {
    return {};
  }
  auto last = first + 1;
  size_t bytes = first->size;
  while (bytes < max_bytes && last != index.end() && last->stream_id == stream_id) {
    bytes += last->size;
    ++last;
  }
  return {first, last};
}

std::string object_key(uint64_t id, bool stream_object) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "objects/%016" PRIx64 ".%s", id, stream_object ? "stream" : "set");
  return buf;
}

std::optional<uint64_t> object_key_id(std::string_view key) {
  constexpr size_t digits = 16;
  if (!key.starts_with(object_prefix) || key.size() < object_prefix.size() + digits) {
    return std::nullopt;
  }
  const std::string_view hex = key.substr(object_prefix.size(), digits);
  uint64_t id = 0;
  for (const char c : hex) {
    const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return std::nullopt;
    id = id << 4 | static_cast<uint64_t>(v);
  }
  // Exactly the key of one kind: no other suffix, no upper-case digits.
  for (const bool stream_object : {false, true}) {
    if (object_key(id, stream_object) == key) return id;
  }
  return std::nullopt;
}

}  // namespace silt::storage
