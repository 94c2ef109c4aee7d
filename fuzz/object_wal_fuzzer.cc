// libFuzzer target: any bytes as one WAL object of the object-storage WAL (docs/formats/
// wal-object.md). The first byte is a mode byte, the rest the object. decode_wal_object must
// never crash or read out of bounds; an object it accepts must have contiguous record
// positions and re-encode (encode_wal_object) to exactly its bytes. When mode bit 0 is set the
// harness first rewrites the header and record checksums so that mutations reach the record
// parser instead of stopping at a checksum.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "base/crc32c.h"
#include "base/endian.h"
#include "storage/wal/object_wal.h"

namespace {

using namespace silt;
using namespace silt::storage::wal;

constexpr size_t header_bytes = 24;         // magic, start, count, crc
constexpr size_t record_header_bytes = 24;  // length, stream, offset, crc

void fix_checksums(std::span<uint8_t> object) {
  if (object.size() < header_bytes) return;
  uint8_t* p = object.data();
  base::store_be<uint32_t>(p + 20, base::crc32c({p, 20}));
  const uint32_t count = base::load_be<uint32_t>(p + 16);
  size_t at = header_bytes;
  for (uint32_t i = 0; i < count && object.size() - at >= record_header_bytes; ++i) {
    uint8_t* r = p + at;
    const uint32_t length = base::load_be<uint32_t>(r);
    if (object.size() - at - record_header_bytes < length) return;
    const uint32_t crc = base::crc32c({r + record_header_bytes, length}, base::crc32c({r + 4, 16}));
    base::store_be<uint32_t>(r + 20, crc);
    at += record_header_bytes + length;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::vector<uint8_t> object(data + 1, data + size);
  if ((data[0] & 1) != 0) fix_checksums(object);
  auto decoded = decode_wal_object(object);
  if (!decoded) return 0;
  wal_position at = decoded->start;
  for (const auto& r : decoded->records) {
    if (r.position != at || r.end != at + object_wal_frame_bytes(r.payload.size())) std::abort();
    if (r.payload.data() < object.data() ||
        r.payload.data() + r.payload.size() > object.data() + object.size()) {
      std::abort();
    }
    at = r.end;
  }
  if (decoded->end != at) std::abort();
  if (encode_wal_object(decoded->start, decoded->records) != object) std::abort();
  return 0;
}
