// Writes Kafka wire primitives into a growing buffer.
//
// Encoding cannot run past a buffer: the writer appends to a std::vector it owns. Callers
// that know the size (encoded_size()) reserve it first so that encoding never reallocates.
// Errors (a null where the version forbids one) are sticky, as in the reader. Large record
// data can be referenced instead of copied (zero-copy): see set_zero_copy_threshold().
// Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/endian.h"
#include "protocol/types.h"

namespace silt::protocol {

enum class encode_error : uint8_t {
  none = 0,
  null_in_non_nullable_field,  // a null value in a version where the field is not nullable
  value_too_large,             // a string or array longer than its length prefix allows
};

[[nodiscard]] std::string_view encode_error_name(encode_error e);

// Bytes the writer did not copy: `data` belongs right after `offset` bytes of the buffer.
struct external_segment {
  size_t offset;
  std::span<const uint8_t> data;
};

class writer {
 public:
  writer() = default;
  explicit writer(size_t reserve) { buf_.reserve(reserve); }

  [[nodiscard]] bool ok() const { return err_ == encode_error::none; }
  [[nodiscard]] encode_error error() const { return err_; }
  void fail(encode_error e) {
    if (err_ == encode_error::none) err_ = e;
  }

  // Record data of at least `n` bytes is referenced (external_segment) rather than copied.
  // The referenced memory must outlive the use of segments(). Default: always copy.
  void set_zero_copy_threshold(size_t n) { zero_copy_threshold_ = n; }

  void int8(int8_t v) { put(static_cast<uint8_t>(v)); }
  void int16(int16_t v) { put(static_cast<uint16_t>(v)); }
  void int32(int32_t v) { put(static_cast<uint32_t>(v)); }
  void int64(int64_t v) { put(static_cast<uint64_t>(v)); }
  void uint16(uint16_t v) { put(v); }
  void uint32(uint32_t v) { put(v); }
  void float64(double v);
  void boolean(bool v) { put(static_cast<uint8_t>(v ? 1 : 0)); }
  void uuid(const protocol::uuid& v) { raw(v.bytes); }

  void uvarint(uint32_t v);
  void uvarlong(uint64_t v);
  void varint(int32_t v) {
    uvarint((static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31));
  }
  void varlong(int64_t v) {
    uvarlong((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }

  // `compact` selects the flexible encoding (unsigned varint length + 1, 0 for null).
  void string(std::string_view s, bool compact);
  void bytes(std::span<const uint8_t> b, bool compact);
  void records(const records_view& r, bool compact);
  void null_string(bool compact);
  void null_bytes(bool compact);  // also a null records field
  void array_length(size_t n, bool compact);
  void null_array(bool compact);

  void raw(std::span<const uint8_t> b) { buf_.insert(buf_.end(), b.begin(), b.end()); }

  [[nodiscard]] size_t size() const { return buf_.size(); }
  // The bytes written; record data above the zero-copy threshold is not in here.
  [[nodiscard]] const std::vector<uint8_t>& buffer() const { return buf_; }
  [[nodiscard]] std::vector<uint8_t>& buffer() { return buf_; }
  [[nodiscard]] const std::vector<external_segment>& segments() const { return segments_; }
  // The whole encoding in one buffer, with external segments copied in.
  [[nodiscard]] std::vector<uint8_t> take();

 private:
  template <typename T>
  void put(T v) {
    const size_t n = buf_.size();
    buf_.resize(n + sizeof(T));
    base::store_be(buf_.data() + n, v);
  }
  void put(uint8_t v) { buf_.push_back(v); }

  std::vector<uint8_t> buf_;
  std::vector<external_segment> segments_;
  size_t zero_copy_threshold_ = SIZE_MAX;
  encode_error err_ = encode_error::none;
};

// Encoded sizes, matching what writer writes.
namespace wire_size {
[[nodiscard]] constexpr size_t uvarint(uint32_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
[[nodiscard]] constexpr size_t uvarlong(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
[[nodiscard]] constexpr size_t varint(int32_t v) {
  return uvarint((static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31));
}
[[nodiscard]] constexpr size_t varlong(int64_t v) {
  return uvarlong((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}
[[nodiscard]] constexpr size_t string(size_t len, bool compact) {
  return compact ? uvarint(static_cast<uint32_t>(len + 1)) + len : 2 + len;
}
[[nodiscard]] constexpr size_t bytes(size_t len, bool compact) {
  return compact ? uvarint(static_cast<uint32_t>(len + 1)) + len : 4 + len;
}
// The size of a null string; a null bytes or records field has the size of bytes(0, compact)
// in the compact form and 4 bytes otherwise.
[[nodiscard]] constexpr size_t null(bool compact) {
  return compact ? 1 : 2;
}
[[nodiscard]] constexpr size_t null_bytes(bool compact) {
  return compact ? 1 : 4;
}
[[nodiscard]] constexpr size_t array_length(size_t n, bool compact) {
  return compact ? uvarint(static_cast<uint32_t>(n + 1)) : 4;
}
}  // namespace wire_size

// Writes the tag section of a struct without known tagged fields: the count, then `unknown`.
void write_tag_section(writer& w, const std::vector<tagged_field>& unknown);
// Writes unknown[from..] while their tags are below `below`; returns the index reached.
size_t write_unknown_tags_below(writer& w, const std::vector<tagged_field>& unknown, size_t from,
                                uint32_t below);
// Writes unknown[from..], whatever their tags (the last, 4294967295, included).
void write_unknown_tags_rest(writer& w, const std::vector<tagged_field>& unknown, size_t from);

}  // namespace silt::protocol
