// libFuzzer target: any bytes as the records field of a Produce request or Fetch response.
// The first byte is a mode byte; the rest are the batches. batch_reader and decode_records (and
// so decompression with every codec) must never crash, read out of bounds or take memory past
// their limit. When mode bit 0 is set the harness first rewrites each batch's CRC so that
// mutated batches reach decompression and the record parser instead of stopping at the CRC.
// A batch whose records decode is rebuilt with record_batch_builder (same codec, keys, values,
// headers) and must decode again to the same records.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "base/crc32c.h"
#include "base/endian.h"
#include "protocol/record_batch.h"

namespace {

using namespace silt::protocol;

constexpr size_t max_decompressed = size_t{1} << 20;

// Rewrites the CRC of every batch whose framing holds, as a producer would have written it.
void fix_crcs(std::span<uint8_t> records) {
  size_t at = 0;
  while (records.size() - at >= record_batch_header_size) {
    uint8_t* p = records.data() + at;
    const auto length = silt::base::load_be<int32_t>(p + 8);
    if (length < static_cast<int32_t>(record_batch_header_size - record_batch_log_overhead)) return;
    const size_t size = record_batch_log_overhead + static_cast<size_t>(length);
    if (size > records.size() - at) return;
    silt::base::store_be<uint32_t>(p + 17, silt::base::crc32c({p + 21, size - 21}));
    at += size;
  }
}

bool same_bytes(const std::optional<std::span<const uint8_t>>& a,
                const std::optional<std::span<const uint8_t>>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  return a->size() == b->size() &&
         (a->empty() || std::memcmp(a->data(), b->data(), a->size()) == 0);
}

bool same_records(const record& a, const record& b) {
  if (!same_bytes(a.key, b.key) || !same_bytes(a.value, b.value)) return false;
  if (a.headers.size() != b.headers.size()) return false;
  for (size_t i = 0; i < a.headers.size(); ++i) {
    if (!same_bytes(a.headers[i].key, b.headers[i].key) ||
        !same_bytes(a.headers[i].value, b.headers[i].value)) {
      return false;
    }
  }
  return true;
}

// Rebuilds the batch from its decoded records and checks that they survive the trip.
void check_round_trip(const record_batch& batch, const decoded_records& records) {
  if (records.size() > 256) return;  // keep each run cheap
  record_batch_builder builder;
  builder.codec(batch.header.codec());
  for (const auto& r : records) {
    // The builder takes absolute timestamps; keep them far from overflowing.
    if (r.timestamp_delta < -(int64_t{1} << 40) || r.timestamp_delta > (int64_t{1} << 40)) return;
    builder.add(r.timestamp_delta, r.key, r.value, r.headers);
  }
  const auto built = builder.build();
  batch_reader reader(built);
  auto again = reader.next();
  if (!again || !again->has_value()) std::abort();
  if ((*again)->header.records_count != static_cast<int32_t>(records.size())) std::abort();
  auto next = reader.next();
  if (!next || next->has_value()) std::abort();  // exactly one batch
  auto decoded = decode_records(**again, size_t{64} << 20);
  if (!decoded || decoded->size() != records.size()) std::abort();
  for (size_t i = 0; i < records.size(); ++i) {
    if (!same_records(records[i], (*decoded)[i])) std::abort();
    if ((*decoded)[i].offset_delta != static_cast<int32_t>(i)) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::vector<uint8_t> bytes(data + 1, data + size);
  if ((mode & 1) != 0) fix_crcs(bytes);
  batch_reader batches(bytes);
  for (int i = 0; i < 64; ++i) {
    auto next = batches.next();
    if (!next) {
      // Errors are sticky.
      auto again = batches.next();
      if (again || again.error() != next.error()) std::abort();
      return 0;
    }
    if (!next->has_value()) {
      if (!batches.remaining().empty()) std::abort();
      return 0;
    }
    const record_batch& batch = **next;
    if (batch.bytes.size() != batch.header.size() || batch.bytes.size() < record_batch_header_size)
      std::abort();
    auto decoded = decode_records(batch, max_decompressed);
    if (!decoded) continue;
    if (static_cast<int64_t>(decoded->size()) != batch.header.records_count) std::abort();
    // The allocation-free walker agrees with decode_records.
    std::vector<uint8_t> scratch;
    auto section = records_section(batch, scratch, max_decompressed);
    if (!section) std::abort();
    record_walker walker(*section, batch.header.records_count);
    size_t walked = 0;
    for (;;) {
      auto r = walker.next();
      if (!r) std::abort();
      if (!r->has_value()) break;
      if (walked >= decoded->size() || !same_bytes((*r)->key, (*decoded)[walked].key) ||
          !same_bytes((*r)->value, (*decoded)[walked].value) ||
          static_cast<size_t>((*r)->header_count) != (*decoded)[walked].headers.size()) {
        std::abort();
      }
      ++walked;
    }
    if (walked != decoded->size()) std::abort();
    check_round_trip(batch, *decoded);
  }
  return 0;
}
