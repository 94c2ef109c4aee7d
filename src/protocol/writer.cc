#include "protocol/writer.h"

#include <bit>
#include <cstring>
#include <limits>

namespace silt::protocol {

std::string_view encode_error_name(encode_error e) {
  switch (e) {
    case encode_error::none:
      return "none";
    case encode_error::null_in_non_nullable_field:
      return "null in a non-nullable field";
    case encode_error::value_too_large:
      return "value too large for its length prefix";
  }
  return "unknown";
}

void writer::float64(double v) {
  put(std::bit_cast<uint64_t>(v));
}

void writer::uvarint(uint32_t v) {
  while (v >= 0x80) {
    buf_.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  buf_.push_back(static_cast<uint8_t>(v));
}

void writer::uvarlong(uint64_t v) {
  while (v >= 0x80) {
    buf_.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  buf_.push_back(static_cast<uint8_t>(v));
}

void writer::string(std::string_view s, bool compact) {
  if (compact) {
    if (s.size() >= std::numeric_limits<uint32_t>::max())
      return fail(encode_error::value_too_large);
    uvarint(static_cast<uint32_t>(s.size() + 1));
  } else {
    if (s.size() > static_cast<size_t>(std::numeric_limits<int16_t>::max())) {
      return fail(encode_error::value_too_large);
    }
    int16(static_cast<int16_t>(s.size()));
  }
  buf_.insert(buf_.end(), s.begin(), s.end());
}

void writer::bytes(std::span<const uint8_t> b, bool compact) {
  if (b.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return fail(encode_error::value_too_large);
  }
  if (compact) {
    uvarint(static_cast<uint32_t>(b.size() + 1));
  } else {
    int32(static_cast<int32_t>(b.size()));
  }
  raw(b);
}

void writer::records(const records_view& r, bool compact) {
  if (r.in_one_piece() && r.size() < zero_copy_threshold_) return bytes(r.bytes(), compact);
  if (r.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return fail(encode_error::value_too_large);
  }
  if (compact) {
    uvarint(static_cast<uint32_t>(r.size() + 1));
  } else {
    int32(static_cast<int32_t>(r.size()));
  }
  for (const auto& piece : r.pieces()) {
    // Pieces below the threshold are copied; the others follow as segments at the same place.
    if (piece.size() < zero_copy_threshold_) {
      raw(piece);
    } else {
      segments_.push_back({buf_.size(), piece});
    }
  }
}

void writer::null_string(bool compact) {
  if (compact) {
    uvarint(0);
  } else {
    int16(-1);
  }
}

void writer::null_bytes(bool compact) {
  if (compact) {
    uvarint(0);
  } else {
    int32(-1);
  }
}

void writer::array_length(size_t n, bool compact) {
  if (n >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return fail(encode_error::value_too_large);
  }
  if (compact) {
    uvarint(static_cast<uint32_t>(n + 1));
  } else {
    int32(static_cast<int32_t>(n));
  }
}

void writer::null_array(bool compact) {
  if (compact) {
    uvarint(0);
  } else {
    int32(-1);
  }
}

std::vector<uint8_t> writer::take() {
  if (segments_.empty()) return std::move(buf_);
  size_t total = buf_.size();
  for (const auto& s : segments_) total += s.data.size();
  std::vector<uint8_t> out;
  out.reserve(total);
  size_t done = 0;
  for (const auto& s : segments_) {
    out.insert(out.end(), buf_.begin() + static_cast<ptrdiff_t>(done),
               buf_.begin() + static_cast<ptrdiff_t>(s.offset));
    out.insert(out.end(), s.data.begin(), s.data.end());
    done = s.offset;
  }
  out.insert(out.end(), buf_.begin() + static_cast<ptrdiff_t>(done), buf_.end());
  buf_.clear();
  segments_.clear();
  return out;
}

void write_tag_section(writer& w, const std::vector<tagged_field>& unknown) {
  w.uvarint(static_cast<uint32_t>(unknown.size()));
  write_unknown_tags_rest(w, unknown, 0);
}

namespace {
void write_tagged_field(writer& w, const tagged_field& t) {
  w.uvarint(t.tag);
  w.uvarint(static_cast<uint32_t>(t.data.size()));
  w.raw(t.data);
}
}  // namespace

size_t write_unknown_tags_below(writer& w, const std::vector<tagged_field>& unknown, size_t from,
                                uint32_t below) {
  for (; from < unknown.size() && unknown[from].tag < below; ++from) {
    write_tagged_field(w, unknown[from]);
  }
  return from;
}

void write_unknown_tags_rest(writer& w, const std::vector<tagged_field>& unknown, size_t from) {
  for (; from < unknown.size(); ++from) write_tagged_field(w, unknown[from]);
}

}  // namespace silt::protocol
