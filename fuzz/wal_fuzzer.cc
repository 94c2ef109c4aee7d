// libFuzzer target: WAL recovery (docs/formats/wal.md) over any file contents. The input is a
// mode byte, the two 64-byte header slots, then the ring's bytes; the harness lays them out as
// a WAL file (slots at 0 and 4096, the ring from 8192, padded with zeros to at least the
// minimum capacity) in a memfd and recovers it as read_wal() does: read_current_header, then
// replay_ring. Neither may crash or read out of bounds, and what they recover must be what the
// recovery rules of the format document give, computed here independently: the same current
// header, the same records (position, end, stream, offset, payload) and the same end and tail.
//
// Checksums and positions stop random bytes at the first frame, so the mode byte lets the
// harness repair them first: bit 0 rewrites the header slots' checksums, bit 1 also sets their
// capacity to the ring's size, bit 2 rewrites each frame's checksum along the chain replay
// follows, and bit 3 also sets each frame's position (and, from epoch_start on, its epoch) to
// what replay expects there.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/endian.h"
#include "storage/wal/recovery.h"
#include "storage/wal/ring_file.h"
#include "storage/wal/wal_format.h"

namespace {

using namespace silt;
using namespace silt::storage::wal;
namespace fmt = silt::storage::wal::format;

constexpr size_t slot_size = 64;
constexpr size_t max_frames = 4096;

// The WAL file's bytes with logical ring positions mapped onto them.
struct wal_file {
  std::vector<uint8_t> bytes;
  uint64_t capacity = 0;  // of the ring used to map positions

  uint8_t* at(wal_position pos) { return bytes.data() + fmt::ring_offset + pos % capacity; }
  void read(wal_position pos, uint8_t* out, uint64_t len) {
    for (uint64_t i = 0; i < len; ++i) out[i] = *at(pos + i);
  }
  void write(wal_position pos, const uint8_t* in, uint64_t len) {
    for (uint64_t i = 0; i < len; ++i) *at(pos + i) = in[i];
  }
  std::vector<uint8_t> range(wal_position pos, uint64_t len) {
    std::vector<uint8_t> out(len);
    read(pos, out.data(), len);
    return out;
  }
};

void fix_slot(uint8_t* slot, bool set_capacity, uint64_t ring_size) {
  if (set_capacity) base::store_be<uint64_t>(slot + 24, ring_size);
  base::store_be<uint32_t>(slot + 60, base::crc32c({slot, 60}));
}

// The current header as the format document defines it, from the file's bytes.
std::optional<fmt::header_slot> header_by_the_rules(const std::vector<uint8_t>& bytes) {
  auto s0 = fmt::decode_header_slot({bytes.data(), fmt::block_size});
  auto s1 = fmt::decode_header_slot({bytes.data() + fmt::block_size, fmt::block_size});
  for (const auto* s : {&s0, &s1}) {
    if (*s) {
      // Encoding what was decoded gives the same slot back.
      std::vector<uint8_t> block(fmt::block_size);
      fmt::encode_header_slot(**s, block);
      auto again = fmt::decode_header_slot(block);
      if (!again || *again != **s) std::abort();
    }
  }
  std::optional<fmt::header_slot> h;
  if (s0 && (!s1 || s0->sequence > s1->sequence)) {
    h = *s0;
  } else if (s1) {
    h = *s1;
  }
  if (h && bytes.size() < fmt::header_bytes + h->capacity) h.reset();
  return h;
}

struct expected_replay {
  std::vector<replayed_record> records;  // payloads point into `payloads`
  std::vector<std::vector<uint8_t>> payloads;
  wal_position end = 0;
  bool cut = false;  // stopped after max_frames frames, before replay would
};

// Replays the ring by the rules of docs/formats/wal.md, "Recovery"; with `fix_crc` and
// `fix_fields` it first repairs each frame it reaches (see the file comment).
expected_replay replay_by_the_rules(wal_file& f, const fmt::header_slot& h, bool fix_crc,
                                    bool fix_fields) {
  expected_replay out;
  const uint64_t capacity = h.capacity;
  const wal_position limit = h.trim_point + capacity;
  wal_position pos = h.trim_point;
  uint32_t previous_epoch = 0;
  for (size_t n = 0;; ++n) {
    if (n == max_frames) {
      out.cut = true;
      break;
    }
    if (pos + fmt::frame_header_size > limit) break;
    uint8_t head[fmt::frame_header_size];
    f.read(pos, head, sizeof head);
    if (fix_fields) {
      base::store_be<uint64_t>(head + 8, pos);
      if (pos >= h.epoch_start) base::store_be<uint32_t>(head + 16, h.epoch);
      f.write(pos, head, sizeof head);
    }
    const uint16_t type = base::load_be<uint16_t>(head + 20);
    if ((type != 1 && type != 2) || base::load_be<uint16_t>(head + 22) != 0) break;
    const uint32_t length = base::load_be<uint32_t>(head + 4);
    const uint32_t epoch = base::load_be<uint32_t>(head + 16);
    if (base::load_be<uint64_t>(head + 8) != pos) break;
    const bool epoch_ok =
        pos >= h.epoch_start ? epoch == h.epoch : (previous_epoch <= epoch && epoch < h.epoch);
    if (!epoch_ok || epoch == 0) break;
    const wal_position end = pos + fmt::frame_header_size + length;
    if (end > limit) break;
    if (type == 2 ? (end % fmt::block_size != 0 || end - pos > 2 * fmt::block_size)
                  : end - pos > capacity - fmt::ring_slack) {
      break;
    }
    auto payload = f.range(pos + fmt::frame_header_size, length);
    uint32_t crc = base::crc32c({head + 4, fmt::frame_header_size - 4});
    if (type == 1) crc = base::crc32c(payload, crc);
    if (fix_crc) {
      base::store_be<uint32_t>(head, crc);
      f.write(pos, head, 4);
    }
    if (base::load_be<uint32_t>(head) != crc) break;
    if (type == 1) {
      out.records.push_back({.position = pos,
                             .end = end,
                             .stream_id = base::stream_id(base::load_be<uint64_t>(head + 24)),
                             .offset = base::offset(base::load_be<int64_t>(head + 32)),
                             .payload = {}});
      out.payloads.push_back(std::move(payload));
    }
    previous_epoch = epoch;
    pos = end;
  }
  out.end = pos;
  for (size_t i = 0; i < out.records.size(); ++i) out.records[i].payload = out.payloads[i];
  return out;
}

int memfd() {
  static const int fd = [] {
    const int d = memfd_create("wal_fuzzer", MFD_CLOEXEC);
    if (d < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    return d;
  }();
  return fd;
}

void write_file(const std::vector<uint8_t>& bytes) {
  const int fd = memfd();
  if (ftruncate(fd, static_cast<off_t>(bytes.size())) != 0) std::abort();
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 + 2 * slot_size) return 0;
  const uint8_t mode = data[0];
  const uint8_t* slots = data + 1;
  const uint8_t* ring = slots + 2 * slot_size;
  const size_t ring_len = size - 1 - 2 * slot_size;
  const uint64_t ring_size = fmt::align_up(std::max<uint64_t>(ring_len, fmt::min_capacity));

  wal_file f;
  f.bytes.assign(fmt::header_bytes + ring_size, 0);
  std::memcpy(f.bytes.data(), slots, slot_size);
  std::memcpy(f.bytes.data() + fmt::block_size, slots + slot_size, slot_size);
  if (ring_len > 0) std::memcpy(f.bytes.data() + fmt::ring_offset, ring, ring_len);
  if ((mode & 3) != 0) {
    fix_slot(f.bytes.data(), (mode & 2) != 0, ring_size);
    fix_slot(f.bytes.data() + fmt::block_size, (mode & 2) != 0, ring_size);
  }

  const auto header = header_by_the_rules(f.bytes);
  std::optional<expected_replay> expected;
  if (header) {
    f.capacity = header->capacity;
    expected = replay_by_the_rules(f, *header, (mode & 4) != 0, (mode & 8) != 0);
  }
  write_file(f.bytes);

  auto file = ring_file::open_read_only("/proc/self/fd/" + std::to_string(memfd()));
  if (!file) std::abort();
  wal_options none;
  none.capacity = 0;
  auto current = read_current_header(*file, none);
  if (!current) {
    if (header || current.error() != wal_error::bad_format) std::abort();
    return 0;
  }
  if (!header || current->slot != *header) std::abort();

  size_t seen = 0;
  auto ring_end = replay_ring(*file, current->slot, [&](const replayed_record& r) {
    if (seen >= expected->records.size()) std::abort();
    const replayed_record& e = expected->records[seen++];
    if (r.position != e.position || r.end != e.end || r.stream_id != e.stream_id ||
        r.offset != e.offset || r.payload.size() != e.payload.size() ||
        (!r.payload.empty() &&
         std::memcmp(r.payload.data(), e.payload.data(), r.payload.size()) != 0)) {
      std::abort();
    }
  });
  if (!ring_end) std::abort();
  if (!expected->cut) {
    if (seen != expected->records.size() || ring_end->end != expected->end) std::abort();
    const uint64_t tail_len = expected->end % fmt::block_size;
    if (ring_end->tail != f.range(fmt::align_down(expected->end), tail_len)) std::abort();
  }
  return 0;
}
