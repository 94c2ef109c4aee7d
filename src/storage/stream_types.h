// What the parts of the stream store share: errors, read results, offsets, and the few fields
// of a Kafka v2 record batch header the store reads (it keeps batches as sent and only assigns
// their base offsets and leader epoch; protocol/record_batch.h has the full layout).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "base/endian.h"
#include "base/ids.h"

namespace silt::storage {

enum class stream_error : uint8_t {
  offset_out_of_range,  // below the stream's start or above its end
  invalid_batch,        // append data that is not whole record batches
  wal_failed,           // the WAL write failed, or the WAL is recovering from one, or closed
  wal_full,             // no room in the WAL now: try again after the room listener runs
  too_large,            // larger than the WAL can ever hold
  object_store,         // a cold read failed in the object store
  corrupt_object,       // an object failed its checksums
  catalog,              // the catalog failed
  fenced,               // another node took the stream (a newer epoch): not ours to serve
};

[[nodiscard]] std::string_view stream_error_name(stream_error e);

[[nodiscard]] inline tl::unexpected<stream_error> fail(stream_error e) {
  return tl::make_unexpected(e);
}

// What read() returns: whole record batches in offset order, as views kept alive by owners
// (batches next to each other in one buffer make one chunk).
struct read_result {
  std::vector<std::span<const uint8_t>> chunks;
  std::vector<std::shared_ptr<const void>> owners;
  base::offset next_offset{};  // the offset after the last batch returned
  [[nodiscard]] size_t bytes() const;
  // The chunks concatenated (for tests and small reads).
  [[nodiscard]] std::vector<uint8_t> concatenate() const;
};

struct stream_offsets {
  base::offset start_offset{};
  base::offset end_offset{};   // durable end: the next offset an append gets once all are durable
  base::leader_epoch epoch{};  // the stream's epoch (Kafka's leader epoch)
  bool fenced = false;         // another node took the stream
  base::node_id owner{-1};     // the node owning it as far as this store knows (-1: none)
  // Being handed to another node, or taken over from a dead one: appends are refused.
  bool moving = false;
};

namespace batch {

constexpr size_t header_size = 61;
constexpr size_t length_offset = 8;
constexpr size_t leader_epoch_offset = 12;
constexpr size_t magic_offset = 16;
constexpr size_t last_delta_offset = 23;
constexpr size_t max_timestamp_offset = 35;

struct view {
  std::span<const uint8_t> bytes;
  base::offset base_offset;
  base::offset end_offset;  // exclusive
  int64_t max_timestamp;
};

// Calls f(view) for each whole batch of `data`; false when `data` is not whole batches.
template <typename F>
bool for_each(std::span<const uint8_t> data, F&& f) {
  size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < header_size) return false;
    const uint8_t* p = data.data() + pos;
    const int32_t length = base::load_be<int32_t>(p + length_offset);
    if (length < static_cast<int32_t>(header_size - 12) ||
        static_cast<size_t>(length) + 12 > data.size() - pos || p[magic_offset] != 2) {
      return false;
    }
    const int32_t last_delta = base::load_be<int32_t>(p + last_delta_offset);
    if (last_delta < 0) return false;
    const base::offset first(base::load_be<int64_t>(p));
    const size_t size = static_cast<size_t>(length) + 12;
    f(view{data.subspan(pos, size), first, first + last_delta + 1,
           base::load_be<int64_t>(p + max_timestamp_offset)});
    pos += size;
  }
  return true;
}

// Adds the batches of `data` that end after `offset` to `out`, while they fit in max_bytes
// (the first batch of a read always fits). `bytes` counts what `out` holds. Returns false when
// `data` is not whole batches; sets `full` when a batch did not fit.
bool add_to(read_result& out, size_t& bytes, std::span<const uint8_t> data, base::offset offset,
            size_t max_bytes, bool& full);

}  // namespace batch

}  // namespace silt::storage
