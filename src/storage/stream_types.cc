#include "storage/stream_types.h"

namespace silt::storage {

std::string_view stream_error_name(stream_error e) {
  switch (e) {
    case stream_error::offset_out_of_range:
      return "offset out of range";
    case stream_error::invalid_batch:
      return "invalid record batch";
    case stream_error::wal_failed:
      return "WAL failed";
    case stream_error::wal_full:
      return "WAL full";
    case stream_error::too_large:
      return "too large for the WAL";
    case stream_error::object_store:
      return "object store error";
    case stream_error::corrupt_object:
      return "corrupt object";
    case stream_error::catalog:
      return "catalog error";
    case stream_error::fenced:
      return "fenced: the stream has a newer owner";
  }
  return "unknown";
}

size_t read_result::bytes() const {
  size_t n = 0;
  for (const auto& c : chunks) n += c.size();
  return n;
}

std::vector<uint8_t> read_result::concatenate() const {
  std::vector<uint8_t> out;
  out.reserve(bytes());
  for (const auto& c : chunks) out.insert(out.end(), c.begin(), c.end());
  return out;
}

namespace batch {

bool add_to(read_result& out, size_t& bytes, std::span<const uint8_t> data, base::offset offset,
            size_t max_bytes, bool& full) {
  const size_t first_new = out.chunks.size();
  return for_each(data, [&](const view& b) {
    if (full || b.end_offset <= offset) return;
    if (!out.chunks.empty() && bytes + b.bytes.size() > max_bytes) {
      full = true;
      return;
    }
    // Batches that follow each other in `data` make one chunk.
    if (out.chunks.size() > first_new &&
        out.chunks.back().data() + out.chunks.back().size() == b.bytes.data()) {
      out.chunks.back() = {out.chunks.back().data(), out.chunks.back().size() + b.bytes.size()};
    } else {
      out.chunks.push_back(b.bytes);
    }
    out.next_offset = b.end_offset;
    bytes += b.bytes.size();
  });
}

}  // namespace batch

}  // namespace silt::storage
