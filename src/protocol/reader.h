// Reads Kafka wire primitives from a byte buffer with a sticky error.
//
// The reader never reads past its buffer: every read checks the remaining length, and the
// first failure is remembered; later reads return zero values and change nothing. Callers read
// a whole message and check ok() once at the end (as franz-go's kbin does). Strings and bytes
// are copied out; record data is returned as a view into the buffer, which the caller keeps
// alive. Not thread-safe; a reader is used by one thread at a time.
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

enum class decode_error : uint8_t {
  none = 0,
  truncated,                   // the buffer ended inside a value
  varint_too_long,             // a varint had more bytes than its type allows
  invalid_length,              // a negative length other than -1 (null)
  length_exceeds_remaining,    // a length or element count larger than the bytes left
  null_in_non_nullable_field,  // null where the version does not allow it
  tagged_field_size_mismatch,  // a known tagged field did not fill its declared size
  trailing_bytes,              // bytes left after a value that must fill its buffer
  unknown_api_key,             // a request header naming an API that is not in the table
  too_much_memory,             // decoding would take more memory than the message may
  string_too_long,             // a string longer than max_string_bytes
};

// The longest string a message may hold, in every encoding (Kafka's generated readers refuse a
// longer one, compact strings included, and so fail the whole request: an int16 length bounds
// the classic encoding anyway). Client ids, group, member, instance, rack and transactional ids
// are all bounded by it.
inline constexpr size_t max_string_bytes = 32767;

// What decoding a message may allocate: memory_base bytes, and memory_per_byte times the bytes
// of the message. Kafka's messages decode to a few times their size (an element of an array
// takes a few tens of bytes where it took a few on the wire); a hostile one made of empty
// elements would take tens of times its size.
inline constexpr size_t memory_base = size_t{1} << 20;
inline constexpr size_t memory_per_byte = 16;

[[nodiscard]] std::string_view decode_error_name(decode_error e);

class reader {
 public:
  reader() = default;
  explicit reader(std::span<const uint8_t> buf)
      : p_(buf.data()),
        end_(buf.data() + buf.size()),
        own_memory_left_(memory_base + memory_per_byte * buf.size()) {}
  // A copy or a moved reader that had a budget of its own keeps one (the same amount left); a
  // reader from sub() keeps sharing its parent's.
  reader(const reader& o) noexcept { *this = o; }
  reader& operator=(const reader& o) noexcept {
    if (this == &o) return *this;
    p_ = o.p_;
    end_ = o.end_;
    err_ = o.err_;
    own_memory_left_ = o.own_memory_left_;
    memory_left_ = o.memory_left_ == &o.own_memory_left_ ? &own_memory_left_ : o.memory_left_;
    return *this;
  }
  ~reader() = default;

  // Counts `n` bytes the caller is about to allocate for the message against its budget;
  // fails with too_much_memory (and returns false) past it.
  bool charge(size_t n) {
    if (n > *memory_left_) {
      fail(decode_error::too_much_memory);
      return false;
    }
    *memory_left_ -= n;
    return true;
  }

  [[nodiscard]] bool ok() const { return err_ == decode_error::none; }
  [[nodiscard]] decode_error error() const { return err_; }
  [[nodiscard]] size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  [[nodiscard]] const uint8_t* position() const { return p_; }

  // Records the first error; the reader then reads nothing more.
  void fail(decode_error e) {
    if (err_ == decode_error::none) {
      err_ = e;
      p_ = end_;
    }
  }

  int8_t int8() { return static_cast<int8_t>(fixed<uint8_t>()); }
  int16_t int16() { return static_cast<int16_t>(fixed<uint16_t>()); }
  int32_t int32() { return static_cast<int32_t>(fixed<uint32_t>()); }
  int64_t int64() { return static_cast<int64_t>(fixed<uint64_t>()); }
  uint16_t uint16() { return fixed<uint16_t>(); }
  uint32_t uint32() { return fixed<uint32_t>(); }
  double float64();
  bool boolean() { return fixed<uint8_t>() != 0; }
  protocol::uuid uuid();

  uint32_t uvarint();   // unsigned LEB128, at most 5 bytes
  uint64_t uvarlong();  // unsigned LEB128, at most 10 bytes
  int32_t varint();     // zig-zag
  int64_t varlong();    // zig-zag

  // Strings, bytes and records: `compact` selects the flexible encoding (unsigned varint of
  // length + 1, 0 for null) over the classic one (int16 or int32 length, -1 for null).
  std::string string(bool compact);
  std::optional<std::string> nullable_string(bool compact, bool nullable);
  std::vector<uint8_t> bytes(bool compact);
  std::optional<std::vector<uint8_t>> nullable_bytes(bool compact, bool nullable);
  records_view records(bool compact);
  std::optional<records_view> nullable_records(bool compact, bool nullable);

  // An array's element count, or -1 for a null array. Fails when the count could not fit in
  // the remaining bytes given each element takes at least `min_element_size` bytes.
  int32_t array_length(bool compact, size_t min_element_size);

  // The next n bytes, consumed, as a view (empty on failure).
  std::span<const uint8_t> raw(size_t n);
  // A reader over the next n bytes, which this reader skips.
  reader sub(size_t n);
  // Everything left, copied; consumes it.
  std::vector<uint8_t> rest();
  // Fails with trailing_bytes unless everything was read.
  void expect_end() {
    if (ok() && p_ != end_) fail(decode_error::trailing_bytes);
  }

 private:
  template <typename T>
  T fixed() {
    if (remaining() < sizeof(T)) {
      fail(decode_error::truncated);
      return 0;
    }
    T v = base::load_be<T>(p_);
    p_ += sizeof(T);
    return v;
  }
  // Reads a length prefix; returns -1 for null, fails on other negatives or lengths past the end.
  int64_t length(bool compact, bool wide);

  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
  decode_error err_ = decode_error::none;
  size_t own_memory_left_ = memory_base;
  size_t* memory_left_ = &own_memory_left_;  // own_memory_left_, or a parent reader's
};

}  // namespace silt::protocol
