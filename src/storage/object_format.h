// Stream-set and stream objects: the layout of the objects uploads and compaction write.
//
// An object holds data blocks, each a run of whole record batches of one stream with
// consecutive offsets, then an index of the blocks, then a fixed-size footer that locates and
// checksums the index. A reader fetches the footer (the last object_footer_size bytes), then
// the index, then only the blocks it needs with ranged reads. Format: docs/formats/object.md.
//
// Values only: no I/O, no shared state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <tl/expected.hpp>

namespace silt::storage {

enum class object_format_error : uint8_t {
  bad_footer,     // wrong magic, version, length or footer checksum
  bad_index,      // index checksum mismatch or malformed entries
  bad_block,      // block checksum mismatch or a block that does not match its index entry
  out_of_order,   // data added to a stream below its end in this object
};

[[nodiscard]] std::string_view object_format_error_name(object_format_error e);

// One data block's index entry: offsets [start_offset, end_offset) of stream_id.
struct block_entry {
  uint64_t stream_id = 0;
  int64_t start_offset = 0;
  int64_t end_offset = 0;      // exclusive
  uint64_t position = 0;       // of the block in the object
  uint32_t size = 0;           // of the block in bytes (its batches plus its checksum)
  int64_t max_timestamp = -1;  // largest batch max_timestamp in the block (for time retention)
  bool operator==(const block_entry&) const = default;
};

inline constexpr size_t object_footer_size = 48;

// Builds one object in memory. Blocks are cut at block_size (a batch is never split); the
// data of one stream must be added in offset order without gaps.
class object_writer {
 public:
  explicit object_writer(uint32_t block_size = 1u << 20);

  // Adds batches holding offsets [start_offset, end_offset) of stream_id.
  [[nodiscard]] tl::expected<void, object_format_error> add(uint64_t stream_id,
                                                            int64_t start_offset,
                                                            int64_t end_offset,
                                                            int64_t max_timestamp,
                                                            std::span<const uint8_t> batches);
  [[nodiscard]] size_t size() const;  // bytes so far (before index and footer)
  // The finished object; the writer is then empty again.
  [[nodiscard]] std::vector<uint8_t> finish();
  // The index of the object finish() returned last.
  [[nodiscard]] const std::vector<block_entry>& index() const;
};

// Parses the footer (the object's last object_footer_size bytes): where the index is.
struct object_footer {
  uint64_t index_position = 0;
  uint32_t index_size = 0;
};
[[nodiscard]] tl::expected<object_footer, object_format_error> parse_footer(
    std::span<const uint8_t> footer);
// Parses the index bytes the footer points at.
[[nodiscard]] tl::expected<std::vector<block_entry>, object_format_error> parse_index(
    std::span<const uint8_t> index);
// Checks a block read at entry.position with entry.size bytes; returns its batches.
[[nodiscard]] tl::expected<std::span<const uint8_t>, object_format_error> open_block(
    const block_entry& entry, std::span<const uint8_t> block);

}  // namespace silt::storage
