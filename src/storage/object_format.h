// Stream-set and stream objects: the layout of the objects uploads and compaction write.
//
// An object holds data blocks, each a run of whole record batches of one stream with
// consecutive offsets, then an index of the blocks, then a fixed-size footer that locates and
// checksums the index. Blocks are laid out in index order, sorted by (stream, offset), so the
// blocks of one stream are adjacent and a reader fetches several with one ranged read. A reader
// fetches the footer (the last object_footer_size bytes), then the index, then only the blocks
// it needs with ranged reads. Format: docs/formats/object.md.
//
// Values only: no I/O, no shared state. Parsing never reads outside the spans it is given, so
// it is safe on any bytes an object store returns.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "base/ids.h"

namespace silt::storage {

enum class object_format_error : uint8_t {
  bad_footer,        // wrong magic, version, length or footer checksum
  bad_index,         // index checksum mismatch or malformed entries
  bad_block,         // block checksum mismatch or a block that does not match its index entry
  out_of_order,      // offsets that do not continue the stream's data in this object
  invalid_argument,  // an add() with no bytes, an empty or negative offset range, or more
                     // than the format can address (a block over 4 GiB, an index over 4 GiB)
};

[[nodiscard]] std::string_view object_format_error_name(object_format_error e);

// One data block's index entry: offsets [start_offset, end_offset) of stream_id.
struct block_entry {
  base::stream_id stream_id{};
  base::offset start_offset{};
  base::offset end_offset{};   // exclusive
  uint64_t position = 0;       // of the block in the object
  uint32_t size = 0;           // of the block in bytes (its batches plus its checksum)
  int64_t max_timestamp = -1;  // largest batch max_timestamp in the block (for time retention)
  bool operator==(const block_entry&) const = default;
};

inline constexpr size_t object_footer_size = 48;
// The checksum that ends every block.
inline constexpr size_t block_trailer_size = 4;

// A finished object as a gather list: `parts`, concatenated, are the object's bytes. The
// parts are views of the batches given to the writer (kept alive by `owners`, or by the caller
// for add_view() without an owner) and of small pieces this value owns (block checksums, index,
// footer). Move-only: a move keeps every view valid; a copy could not.
struct object_parts {
  std::vector<std::span<const uint8_t>> parts;
  size_t size = 0;  // of the object: the parts' sizes added up
  std::vector<std::shared_ptr<const void>> owners;

  object_parts() = default;
  object_parts(object_parts&&) = default;
  object_parts& operator=(object_parts&&) = default;
  object_parts(const object_parts&) = delete;
  object_parts& operator=(const object_parts&) = delete;
  ~object_parts() = default;

  // The object as one contiguous buffer (a copy of every part).
  [[nodiscard]] std::vector<uint8_t> concatenate() const;

 private:
  friend class object_writer;
  std::vector<uint8_t> owned_;  // the checksums, index and footer the parts point into
};

// Builds one object. Within a stream, consecutive adds share a block while its batches stay
// within block_size bytes; an add is never split, so one larger than block_size is a block of
// its own. Blocks never mix streams. The data of one stream must be added in offset order
// without gaps; the adds of different streams may interleave freely.
//
// Memory: add() copies the batches it is given (into one buffer per add); add_view() keeps
// only a view, so that building an object from data already in memory (the log cache, objects
// read back by compaction) copies nothing until the object is written out. finish() copies
// every byte once into one buffer; finish_parts() copies no batch at all.
class object_writer {
 public:
  explicit object_writer(uint32_t block_size = 1u << 20);

  // Adds batches holding offsets [start_offset, end_offset) of stream_id. A stream's first add
  // in this object may start anywhere; later ones must start at the end of the one before
  // (out_of_order otherwise). A failed add changes nothing. The bytes are copied.
  [[nodiscard]] tl::expected<void, object_format_error> add(base::stream_id stream_id,
                                                            base::offset start_offset,
                                                            base::offset end_offset,
                                                            int64_t max_timestamp,
                                                            std::span<const uint8_t> batches);
  // The same without a copy: the writer keeps a view of `batches`, which `owner` keeps alive
  // (the writer holds it until finish, then finish_parts() hands it on with the parts). With
  // no owner the caller keeps the bytes alive and unchanged until it is done with what
  // finish() or finish_parts() returns.
  [[nodiscard]] tl::expected<void, object_format_error> add_view(
      base::stream_id stream_id, base::offset start_offset, base::offset end_offset,
      int64_t max_timestamp, std::span<const uint8_t> batches,
      std::shared_ptr<const void> owner = {});
  // Bytes of blocks so far, checksums included (the object is this plus index and footer).
  [[nodiscard]] size_t size() const { return size_; }
  // The finished object in one buffer; the writer is then empty again, ready for the next.
  [[nodiscard]] std::vector<uint8_t> finish();
  // The finished object as a gather list (byte for byte what finish() would return); the
  // writer is then empty again.
  [[nodiscard]] object_parts finish_parts();
  // The index of the object finish() or finish_parts() returned last.
  [[nodiscard]] const std::vector<block_entry>& index() const { return index_; }

 private:
  // A block being built: its entry has size without the checksum, which is kept running;
  // its batches are pieces [first_piece, first_piece + piece_count) of its stream.
  struct pending_block {
    block_entry entry;
    uint32_t crc = 0;
    size_t first_piece = 0;
    size_t piece_count = 0;
  };
  struct stream_data {
    std::vector<std::span<const uint8_t>> pieces;  // the views of the stream's adds, in order
    std::vector<pending_block> blocks;
    bool last_block_full = false;
  };

  uint32_t block_size_;
  size_t size_ = 0;
  size_t block_count_ = 0;
  std::map<base::stream_id, stream_data> streams_;  // ordered: finish() writes streams in id order
  std::vector<std::shared_ptr<const void>> owners_;
  std::vector<block_entry> index_;
};

// What the footer says: where the index is.
struct object_footer {
  uint64_t index_position = 0;  // also the size of the data region, which starts at 0
  uint32_t index_size = 0;      // including the index checksum
  bool operator==(const object_footer&) const = default;
};

// Parses the footer (exactly the object's last object_footer_size bytes). A reader that knows
// the object's size also checks index_position + index_size + object_footer_size == size.
[[nodiscard]] tl::expected<object_footer, object_format_error> parse_footer(
    std::span<const uint8_t> footer);
// Parses the index bytes the footer points at. Checks the checksum and that the entries are
// sorted by (stream_id, start_offset), do not overlap in offsets or in bytes, and lie in the
// data region.
[[nodiscard]] tl::expected<std::vector<block_entry>, object_format_error> parse_index(
    std::span<const uint8_t> index, const object_footer& footer);
// Checks a block read at entry.position with entry.size bytes; returns its batches (a view
// into `block`).
[[nodiscard]] tl::expected<std::span<const uint8_t>, object_format_error> open_block(
    const block_entry& entry, std::span<const uint8_t> block);
// The batches of a block that open_block() checked already (its checksum is not computed
// again); bad_block only when its size is not the entry's.
[[nodiscard]] tl::expected<std::span<const uint8_t>, object_format_error> checked_block_batches(
    const block_entry& entry, std::span<const uint8_t> block);

// The blocks of stream_id to read for a fetch from `offset`: the block holding `offset` and the
// ones after it in the stream until their sizes add up to max_bytes (so the last may pass it).
// At least one block when one holds `offset`; none when none does. `index` is a parsed (sorted)
// index; the result points into it.
[[nodiscard]] std::span<const block_entry> find_blocks(const std::vector<block_entry>& index,
                                                       base::stream_id stream_id,
                                                       base::offset offset, size_t max_bytes);
// The result would point into a temporary.
std::span<const block_entry> find_blocks(std::vector<block_entry>&& index,
                                         base::stream_id stream_id, base::offset offset,
                                         size_t max_bytes) = delete;

// Object keys: `objects/` and the object id as 16 lower-case hex digits, then `.set` for a
// stream-set object or `.stream` for a stream object. The store writes nothing else under the
// prefix and nothing outside it.
inline constexpr std::string_view object_prefix = "objects/";
[[nodiscard]] std::string object_key(uint64_t id, bool stream_object);
// The id in a key object_key() made; nullopt for any other key.
[[nodiscard]] std::optional<uint64_t> object_key_id(std::string_view key);

}  // namespace silt::storage
