// libFuzzer target: stream-set / stream objects (docs/formats/object.md). The first byte is a
// mode byte.
//
// Mode bit 1 clear: the rest is an object as an object store returns it, read the way the cold
// reader reads one: parse_footer on its last bytes, parse_index on the bytes the footer points
// at, then open_block on every block and batch_reader over its batches, and find_blocks for
// every entry. None may crash or read out of bounds, and an index that parses must keep the
// promises parse_index makes (sorted, no overlap, inside the data region). With mode bit 0 set
// the harness first rewrites the footer, index and block checksums so that mutations reach the
// checks behind them.
//
// Mode bit 1 set: the rest drives an object_writer (adds of several streams, some out of order,
// into small blocks, by copy and by view); the object it writes must read back, through the
// same parsers, to the index the writer reports and to the bytes that were added, and finish()
// and finish_parts() must write the same bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "base/crc32c.h"
#include "base/endian.h"
#include "protocol/record_batch.h"
#include "storage/object_format.h"

namespace {

using namespace silt;
using namespace silt::storage;

constexpr size_t footer_crc_at = 36;

// Rewrites the footer checksum, then the index checksum and the checksum of each block the
// index names, wherever they lie inside the object.
void fix_checksums(std::span<uint8_t> object) {
  if (object.size() < object_footer_size) return;
  uint8_t* footer = object.data() + object.size() - object_footer_size;
  base::store_be<uint32_t>(footer + footer_crc_at, base::crc32c({footer, footer_crc_at}));
  const uint64_t index_position = base::load_be<uint64_t>(footer);
  const uint32_t index_size = base::load_be<uint32_t>(footer + 8);
  const size_t limit = object.size() - object_footer_size;
  if (index_size < 12 || index_position > limit || index_size > limit - index_position) return;
  uint8_t* index = object.data() + index_position;
  const size_t body = index_size - 4;
  base::store_be<uint32_t>(index + body, base::crc32c({index, body}));
  for (size_t at = 8; at + 44 <= body; at += 44) {
    const uint64_t position = base::load_be<uint64_t>(index + at + 24);
    const uint32_t size = base::load_be<uint32_t>(index + at + 32);
    if (size <= block_trailer_size || position > index_position ||
        size > index_position - position) {
      continue;
    }
    uint8_t* block = object.data() + position;
    base::store_be<uint32_t>(block + size - block_trailer_size,
                             base::crc32c({block, size - block_trailer_size}));
  }
}

// Reads an object as the cold reader does; the parsed index, or nullopt where a reader stops.
std::optional<std::vector<block_entry>> read_object(std::span<const uint8_t> object,
                                                    std::vector<std::span<const uint8_t>>* blocks) {
  if (object.size() < object_footer_size) return std::nullopt;
  auto footer = parse_footer(object.last(object_footer_size));
  if (!footer) return std::nullopt;
  if (footer->index_position + footer->index_size + object_footer_size != object.size()) {
    return std::nullopt;
  }
  auto index = parse_index(object.subspan(footer->index_position, footer->index_size), *footer);
  if (!index) return std::nullopt;
  for (size_t i = 0; i < index->size(); ++i) {
    const block_entry& e = (*index)[i];
    // What parse_index promises.
    if (e.start_offset < base::offset(0) || e.end_offset <= e.start_offset ||
        e.size <= block_trailer_size || e.position > footer->index_position ||
        e.size > footer->index_position - e.position) {
      std::abort();
    }
    if (i > 0) {
      const block_entry& p = (*index)[i - 1];
      if (e.stream_id < p.stream_id ||
          (e.stream_id == p.stream_id && e.start_offset < p.end_offset) ||
          e.position < p.position + p.size) {
        std::abort();
      }
    }
    auto found = find_blocks(*index, e.stream_id, e.start_offset, 1);
    if (found.empty() || found.front() != e) std::abort();
    const auto block = object.subspan(e.position, e.size);
    auto batches = open_block(e, block);
    if (!batches) {
      if (blocks) blocks->clear();
      continue;
    }
    if (batches->size() != e.size - block_trailer_size) std::abort();
    if (!checked_block_batches(e, block)) std::abort();
    if (blocks) blocks->push_back(*batches);
    protocol::batch_reader reader(*batches);
    for (int n = 0; n < 16; ++n) {
      auto next = reader.next();
      if (!next || !next->has_value()) break;
    }
  }
  return std::move(*index);
}

// Takes bytes off the front of the input.
struct input {
  std::span<const uint8_t> rest;
  uint8_t byte() {
    if (rest.empty()) return 0;
    const uint8_t b = rest[0];
    rest = rest.subspan(1);
    return b;
  }
  std::span<const uint8_t> take(size_t n) {
    n = std::min(n, rest.size());
    auto out = rest.first(n);
    rest = rest.subspan(n);
    return out;
  }
};

void check_writer(std::span<const uint8_t> bytes) {
  input in{bytes};
  const uint32_t block_size = 16 + in.byte() * 4u;
  object_writer copy_writer(block_size);
  object_writer view_writer(block_size);
  std::map<uint64_t, std::vector<uint8_t>> added;  // stream -> its bytes, in order
  std::map<uint64_t, int64_t> next_offset;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> kept;
  for (int adds = 0; adds < 32 && !in.rest.empty(); ++adds) {
    const uint8_t op = in.byte();
    const uint64_t stream = op % 4;
    const int64_t count = in.byte() % 8;   // 0 is an empty range
    const size_t length = in.byte() % 96;  // 0 is no bytes
    auto batch = std::make_shared<std::vector<uint8_t>>();
    const auto piece = in.take(length);
    batch->assign(piece.begin(), piece.end());
    const auto it = next_offset.find(stream);
    const bool first = it == next_offset.end();
    const bool skip = (op & 0x10) != 0;  // a start that does not continue the stream
    const int64_t start = first ? (op >> 5) * 1000 : it->second + (skip ? 1 : 0);
    const bool valid = count > 0 && !batch->empty() && (first || !skip);
    const int64_t max_ts = static_cast<int64_t>(op) * 7;
    auto a = copy_writer.add(base::stream_id(stream), base::offset(start),
                             base::offset(start + count), max_ts, *batch);
    auto b = view_writer.add_view(base::stream_id(stream), base::offset(start),
                                  base::offset(start + count), max_ts, *batch, batch);
    if (a.has_value() != valid || b.has_value() != valid) std::abort();
    if (!valid) continue;
    next_offset[stream] = start + count;
    auto& all = added[stream];
    all.insert(all.end(), batch->begin(), batch->end());
    kept.push_back(batch);
  }
  const auto object = copy_writer.finish();
  const auto parts = view_writer.finish_parts();
  if (parts.size != object.size() || parts.concatenate() != object) std::abort();
  kept.clear();  // the parts' owners keep the viewed batches alive
  if (parts.concatenate() != object) std::abort();
  if (added.empty()) return;
  std::vector<std::span<const uint8_t>> blocks;
  auto index = read_object(object, &blocks);
  if (!index || *index != copy_writer.index() || blocks.size() != index->size()) std::abort();
  std::map<uint64_t, std::vector<uint8_t>> read;
  for (size_t i = 0; i < index->size(); ++i) {
    auto& all = read[(*index)[i].stream_id.value()];
    all.insert(all.end(), blocks[i].begin(), blocks[i].end());
  }
  if (read != added) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  if ((mode & 2) != 0) {
    check_writer({data + 1, size - 1});
    return 0;
  }
  std::vector<uint8_t> object(data + 1, data + size);
  if ((mode & 1) != 0) fix_checksums(object);
  (void)read_object(object, nullptr);
  return 0;
}
