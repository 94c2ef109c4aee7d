#include "storage/wal/recovery.h"

#include <algorithm>

#include "storage/wal/aligned_buffer.h"

namespace silt::storage::wal {

namespace {

constexpr uint64_t read_chunk = 1u << 20;

// A window over the ring's logical bytes, refilled with aligned reads as replay moves on.
class ring_reader {
 public:
  ring_reader(const ring_file& file, uint64_t capacity) : file_(file), capacity_(capacity) {}

  // The bytes [pos, pos + len), valid until the next call.
  [[nodiscard]] tl::expected<const uint8_t*, wal_error> get(wal_position pos, uint64_t len) {
    if (pos >= start_ && pos + len <= start_ + filled_) return buf_.data() + (pos - start_);
    const wal_position start = format::align_down(pos);
    const uint64_t need = format::align_up(pos + len) - start;
    const uint64_t n = std::max(need, std::min(read_chunk, capacity_));
    if (buf_.size() < n) buf_ = aligned_buffer(n);
    filled_ = 0;
    uint64_t done = 0;
    while (done < n) {
      const uint64_t at = (start + done) % capacity_;
      const uint64_t piece = std::min(n - done, capacity_ - at);
      auto r = file_.read(format::ring_offset + at, {buf_.data() + done, piece});
      if (!r) return tl::unexpected(r.error());
      done += piece;
    }
    start_ = start;
    filled_ = n;
    return buf_.data() + (pos - start_);
  }

 private:
  const ring_file& file_;
  uint64_t capacity_;
  aligned_buffer buf_;
  wal_position start_ = 0;
  uint64_t filled_ = 0;
};

}  // namespace

tl::expected<current_header, wal_error> read_current_header(const ring_file& file,
                                                            const wal_options& options) {
  if (file.size() < format::header_bytes) return tl::unexpected(wal_error::bad_format);
  aligned_buffer slots(format::header_bytes);
  if (auto r = file.read(0, slots.span()); !r) return tl::unexpected(r.error());
  auto slot = [&](int i) {
    return format::decode_header_slot(
        slots.span().subspan(i * format::block_size, format::block_size));
  };
  auto s0 = slot(0);
  auto s1 = slot(1);
  const bool blank = !s0 && !s1 && s0.error() == format::slot_state::blank &&
                     s1.error() == format::slot_state::blank;
  if (blank && file.block_device()) {
    // A device is not created by open(), so a device that never held a WAL is formatted here.
    // A file is never formatted in place: a file with no header is not a WAL.
    format::header_slot first;
    first.sequence = 1;
    first.capacity =
        format::align_down(std::min(options.capacity, file.size() - format::header_bytes));
    if (first.capacity < format::min_capacity) return tl::unexpected(wal_error::bad_options);
    aligned_buffer block(format::block_size);
    format::encode_header_slot(first, block.span());
    if (auto r = file.write(0, block.span()); !r) return tl::unexpected(r.error());
    if (auto r = file.sync(); !r) return tl::unexpected(r.error());
    return current_header{first, 0};
  }
  current_header current;
  if (s0 && (!s1 || s0->sequence > s1->sequence)) {
    current = {*s0, 0};
  } else if (s1) {
    current = {*s1, 1};
  } else {
    return tl::unexpected(wal_error::bad_format);
  }
  if (file.size() < format::header_bytes + current.slot.capacity) {
    return tl::unexpected(wal_error::bad_format);
  }
  return current;
}

tl::expected<recovered_ring, wal_error> replay_ring(
    const ring_file& file, const format::header_slot& header,
    const std::function<void(const replayed_record&)>& replay) {
  const uint64_t capacity = header.capacity;
  const wal_position limit = header.trim_point + capacity;  // one lap from the trim point
  ring_reader reader(file, capacity);
  wal_position pos = header.trim_point;
  uint32_t previous_epoch = 0;
  for (;;) {
    if (pos + format::frame_header_size > limit) break;
    auto head = reader.get(pos, format::frame_header_size);
    if (!head) return tl::unexpected(head.error());
    auto h = format::decode_frame_header(*head);
    if (!h || h->position != pos) break;
    // Frames from the epoch that was current when the header was written start at
    // epoch_start; before it lie frames of earlier epochs only. Anything else is a frame cut
    // off by an earlier recovery (or a previous lap) that happens to sit where one could be.
    const bool epoch_ok = pos >= header.epoch_start
                              ? h->epoch == header.epoch
                              : (h->epoch < header.epoch && h->epoch >= previous_epoch);
    if (!epoch_ok || h->epoch == 0) break;
    // Lengths no writer produces are rejected before the frame is read: a torn header must
    // not make replay read (and allocate) up to a whole ring.
    const wal_position end = pos + format::frame_header_size + h->length;
    if (end > limit) break;
    if (h->type == format::frame_type::padding
            ? (end % format::block_size != 0 || end - pos > 2 * format::block_size)
            : end - pos > capacity - format::ring_slack) {
      break;
    }
    auto frame = reader.get(pos, end - pos);
    if (!frame) return tl::unexpected(frame.error());
    if (!format::frame_checksum_ok(*frame, *h)) break;
    if (h->type == format::frame_type::record) {
      replay(replayed_record{
          .position = pos,
          .end = end,
          .stream_id = h->stream_id,
          .offset = h->offset,
          .payload = std::span<const uint8_t>(*frame + format::frame_header_size, h->length)});
    }
    previous_epoch = h->epoch;
    pos = end;
  }
  recovered_ring ring;
  ring.end = pos;
  const uint64_t tail_len = pos % format::block_size;
  if (tail_len > 0) {
    auto tail = reader.get(format::align_down(pos), tail_len);
    if (!tail) return tl::unexpected(tail.error());
    ring.tail.assign(*tail, *tail + tail_len);
  }
  return ring;
}

tl::expected<void, wal_error> read_wal(const std::string& path,
                                       const std::function<void(const replayed_record&)>& replay) {
  auto file = ring_file::open_read_only(path);
  if (!file) return tl::unexpected(file.error());
  // A blank device would be formatted by read_current_header(): with no capacity to give it,
  // it is refused before anything is written.
  wal_options none;
  none.capacity = 0;
  auto header = read_current_header(*file, none);
  if (!header) {
    return tl::unexpected(header.error() == wal_error::bad_options ? wal_error::bad_format
                                                                   : header.error());
  }
  auto ring = replay_ring(*file, header->slot, replay);
  if (!ring) return tl::unexpected(ring.error());
  return {};
}

}  // namespace silt::storage::wal
