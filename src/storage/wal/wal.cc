#include "storage/wal/wal.h"

#include <limits>
#include <utility>

#include "storage/wal/aligned_buffer.h"
#include "storage/wal/recovery.h"
#include "storage/wal/ring_file.h"
#include "storage/wal/uring_wal.h"
#include "storage/wal/wal_format.h"

namespace silt::storage::wal {

namespace {

// More writes in flight than this buy nothing on any device and cost ring memory.
constexpr uint32_t max_iodepth = 1024;

bool options_ok(const wal_options& o) {
  return !o.path.empty() && o.capacity >= format::min_capacity && o.iodepth >= 1 &&
         o.iodepth <= max_iodepth && o.max_write_bytes >= format::block_size;
}

// Starts a new epoch at `end`: both slots get the new epoch (the second write a higher
// sequence), so that whichever slot a later torn write leaves valid names the current epoch.
tl::expected<current_header, wal_error> begin_epoch(const ring_file& file,
                                                    const current_header& current,
                                                    wal_position end) {
  if (current.slot.epoch == std::numeric_limits<uint32_t>::max()) {
    return tl::unexpected(wal_error::bad_format);
  }
  format::header_slot next = current.slot;
  next.epoch = current.slot.epoch + 1;
  next.epoch_start = end;
  aligned_buffer block(format::block_size);
  int index = current.index;
  for (int i = 0; i < 2; ++i) {
    index ^= 1;
    ++next.sequence;
    format::encode_header_slot(next, block.span());
    if (auto r = file.write(static_cast<uint64_t>(index) * format::block_size, block.span()); !r) {
      return tl::unexpected(r.error());
    }
    if (auto r = file.sync(); !r) return tl::unexpected(r.error());
  }
  return current_header{next, index};
}

}  // namespace

std::string_view wal_error_name(wal_error e) {
  switch (e) {
    case wal_error::io:
      return "io";
    case wal_error::too_large:
      return "too_large";
    case wal_error::full:
      return "full";
    case wal_error::closed:
      return "closed";
    case wal_error::bad_options:
      return "bad_options";
    case wal_error::bad_format:
      return "bad_format";
  }
  return "unknown";
}

write_faults::write_faults(const options& o) : options_(o), state_(o.seed) {}

void write_faults::set_options(const options& o) {
  base::lock_guard lock(mu_);
  options_ = o;
}

void write_faults::fail_next(uint32_t n) {
  base::lock_guard lock(mu_);
  scripted_ += n;
}

write_fault write_faults::next() {
  base::lock_guard lock(mu_);
  if (scripted_ > 0) {
    --scripted_;
    ++failed_;
    return {true, {}};
  }
  // splitmix64: a draw in [0, 1) from the seeded state.
  state_ += 0x9e3779b97f4a7c15ULL;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  const double draw = static_cast<double>(z >> 11) * 0x1.0p-53;
  if (draw < options_.fail_probability) {
    ++failed_;
    return {true, {}};
  }
  if (draw < options_.fail_probability + options_.delay_probability) {
    ++delayed_;
    return {false, options_.delay};
  }
  return {};
}

uint64_t write_faults::failed() const {
  base::lock_guard lock(mu_);
  return failed_;
}

uint64_t write_faults::delayed() const {
  base::lock_guard lock(mu_);
  return delayed_;
}

tl::expected<std::unique_ptr<wal>, wal_error> wal::open(
    const wal_options& options, const std::function<void(const replayed_record&)>& replay) {
  if (!options_ok(options)) return tl::unexpected(wal_error::bad_options);
  auto file = ring_file::open(options);
  if (!file) return tl::unexpected(file.error());
  auto current = read_current_header(*file, options);
  if (!current) return tl::unexpected(current.error());
  auto ring = replay_ring(*file, current->slot, replay);
  if (!ring) return tl::unexpected(ring.error());
  auto next = begin_epoch(*file, *current, ring->end);
  if (!next) return tl::unexpected(next.error());
  uring_wal::initial_state state;
  state.header = next->slot;
  state.header_index = next->index;
  state.end = ring->end;
  state.tail = std::move(ring->tail);
  auto w = uring_wal::start(std::move(*file), options, state);
  if (!w) return tl::unexpected(w.error());
  return std::unique_ptr<wal>(std::move(*w));
}

}  // namespace silt::storage::wal
