// What open() does before the WAL takes appends: find the current header slot, then replay the
// valid frames after the trim point and find where writing resumes.
//
// Runs on the thread calling open(), before the I/O thread exists.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "storage/wal/ring_file.h"
#include "storage/wal/wal.h"
#include "storage/wal/wal_format.h"

namespace silt::storage::wal {

struct current_header {
  format::header_slot slot;
  int index = 0;  // which of the two slots holds it
};

// Reads both header slots and returns the valid one with the larger sequence. A block device
// on which neither slot was ever written is given a first header (capacity: options.capacity,
// clamped to the device). bad_format when neither slot is valid, or the file is too small for
// the capacity its header names.
[[nodiscard]] tl::expected<current_header, wal_error> read_current_header(
    const ring_file& file, const wal_options& options);

struct recovered_ring {
  wal_position end = 0;       // the end of the last valid frame: where writing resumes
  std::vector<uint8_t> tail;  // the bytes [align_down(end), end), which the first write rewrites
};

// Calls `replay` for every valid record from the header's trim point on, in order, and stops at
// the first frame that is not valid (docs/formats/wal.md, "Recovery").
[[nodiscard]] tl::expected<recovered_ring, wal_error> replay_ring(
    const ring_file& file, const format::header_slot& header,
    const std::function<void(const replayed_record&)>& replay);

// Reads the WAL at `path` without writing anything to it (a dead broker's, taken over by
// another): calls `replay` for every valid record from its trim point on, as open() would
// replay them. bad_format when the file holds no WAL (a block device never formatted
// included); bad_options when it does not exist.
[[nodiscard]] tl::expected<void, wal_error> read_wal(
    const std::string& path, const std::function<void(const replayed_record&)>& replay);

}  // namespace silt::storage::wal
