#include "protocol/reader.h"

#include <bit>
#include <cstring>

#include "base/endian.h"

namespace silt::protocol {

std::string_view decode_error_name(decode_error e) {
  switch (e) {
    case decode_error::none:
      return "none";
    case decode_error::truncated:
      return "truncated";
    case decode_error::varint_too_long:
      return "varint too long";
    case decode_error::invalid_length:
      return "invalid length";
    case decode_error::length_exceeds_remaining:
      return "length exceeds remaining bytes";
    case decode_error::null_in_non_nullable_field:
      return "null in a non-nullable field";
    case decode_error::tagged_field_size_mismatch:
      return "tagged field size mismatch";
    case decode_error::trailing_bytes:
      return "trailing bytes";
    case decode_error::unknown_api_key:
      return "unknown API key";
    case decode_error::string_too_long:
      return "string too long";
    case decode_error::too_much_memory:
      return "decodes to more memory than the message may take";
  }
  return "unknown";
}

double reader::float64() {
  return std::bit_cast<double>(fixed<uint64_t>());
}

protocol::uuid reader::uuid() {
  protocol::uuid u;
  auto b = raw(16);
  if (!b.empty()) std::memcpy(u.bytes.data(), b.data(), 16);
  return u;
}

uint32_t reader::uvarint() {
  uint32_t v = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    if (p_ == end_) {
      fail(decode_error::truncated);
      return 0;
    }
    const uint8_t b = *p_++;
    // The fifth byte may carry only the top 4 bits of a 32-bit value.
    if (shift == 28 && (b & 0xf0) != 0) {
      fail(decode_error::varint_too_long);
      return 0;
    }
    v |= static_cast<uint32_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
  fail(decode_error::varint_too_long);
  return 0;
}

uint64_t reader::uvarlong() {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (p_ == end_) {
      fail(decode_error::truncated);
      return 0;
    }
    const uint8_t b = *p_++;
    if (shift == 63 && (b & 0xfe) != 0) {
      fail(decode_error::varint_too_long);
      return 0;
    }
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
  fail(decode_error::varint_too_long);
  return 0;
}

int32_t reader::varint() {
  const uint32_t u = uvarint();
  return static_cast<int32_t>((u >> 1) ^ (~(u & 1) + 1));
}

int64_t reader::varlong() {
  const uint64_t u = uvarlong();
  return static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
}

int64_t reader::length(bool compact, bool wide) {
  int64_t n;
  if (compact) {
    n = static_cast<int64_t>(uvarint()) - 1;
  } else if (wide) {
    n = int32();
  } else {
    n = int16();
  }
  if (!ok()) return 0;
  if (n < -1) {
    fail(decode_error::invalid_length);
    return 0;
  }
  if (n > 0 && static_cast<uint64_t>(n) > remaining()) {
    fail(decode_error::length_exceeds_remaining);
    return 0;
  }
  return n;
}

std::span<const uint8_t> reader::raw(size_t n) {
  if (remaining() < n) {
    fail(decode_error::truncated);
    return {};
  }
  std::span<const uint8_t> s(p_, n);
  p_ += n;
  return s;
}

std::optional<std::string> reader::nullable_string(bool compact, bool nullable) {
  const int64_t n = length(compact, false);
  if (n < 0) {
    if (!nullable) fail(decode_error::null_in_non_nullable_field);
    return std::nullopt;
  }
  if (static_cast<uint64_t>(n) > max_string_bytes) {
    fail(decode_error::string_too_long);
    return std::string();
  }
  auto s = raw(static_cast<size_t>(n));
  if (!charge(s.size())) return std::string();
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}

std::string reader::string(bool compact) {
  return nullable_string(compact, false).value_or(std::string());
}

std::optional<std::vector<uint8_t>> reader::nullable_bytes(bool compact, bool nullable) {
  const int64_t n = length(compact, true);
  if (n < 0) {
    if (!nullable) fail(decode_error::null_in_non_nullable_field);
    return std::nullopt;
  }
  auto s = raw(static_cast<size_t>(n));
  if (!charge(s.size())) return std::vector<uint8_t>();
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::vector<uint8_t> reader::bytes(bool compact) {
  return nullable_bytes(compact, false).value_or(std::vector<uint8_t>());
}

std::optional<records_view> reader::nullable_records(bool compact, bool nullable) {
  const int64_t n = length(compact, true);
  if (n < 0) {
    if (!nullable) fail(decode_error::null_in_non_nullable_field);
    return std::nullopt;
  }
  return records_view(raw(static_cast<size_t>(n)));
}

records_view reader::records(bool compact) {
  return nullable_records(compact, false).value_or(records_view());
}

int32_t reader::array_length(bool compact, size_t min_element_size) {
  int64_t n;
  if (compact) {
    n = static_cast<int64_t>(uvarint()) - 1;
  } else {
    n = int32();
  }
  if (!ok()) return 0;
  if (n < -1) {
    fail(decode_error::invalid_length);
    return 0;
  }
  if (n > 0 && static_cast<uint64_t>(n) * min_element_size > remaining()) {
    fail(decode_error::length_exceeds_remaining);
    return 0;
  }
  // Even elements that encode to nothing may not outnumber the bytes left (as in Kafka), which
  // bounds the work a hostile count can cause.
  if (n > 0 && static_cast<uint64_t>(n) > remaining()) {
    fail(decode_error::length_exceeds_remaining);
    return 0;
  }
  return static_cast<int32_t>(n);
}

reader reader::sub(size_t n) {
  auto s = raw(n);
  if (!ok()) {
    reader r;
    r.fail(err_);
    return r;
  }
  reader out(s);
  out.memory_left_ = memory_left_;  // the message's budget, shared
  return out;
}

std::vector<uint8_t> reader::rest() {
  auto s = raw(remaining());
  // (An unknown tagged field's bytes, with its entry in the message's list.)
  if (!charge(s.size() + 32)) return {};
  return std::vector<uint8_t>(s.begin(), s.end());
}

}  // namespace silt::protocol
