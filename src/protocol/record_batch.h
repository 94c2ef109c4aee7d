// Kafka record batches (message format v2, magic 2): reading, validating, decoding, building.
//
// The records field of Produce requests and Fetch responses, and Silt's log, hold batches
// back to back. A batch, all integers big-endian:
//
//   offset  size  field
//        0     8  base_offset
//        8     4  batch_length            bytes after this field: the batch is 12 + it
//       12     4  partition_leader_epoch
//       16     1  magic                   2
//       17     4  crc                     CRC32C of bytes 21..end
//       21     2  attributes              bits 0-2 codec, 3 timestamp type (1: log append
//                                         time), 4 transactional, 5 control, 6 delete horizon
//       23     4  last_offset_delta
//       27     8  base_timestamp
//       35     8  max_timestamp
//       43     8  producer_id
//       51     2  producer_epoch
//       53     4  base_sequence
//       57     4  records_count
//       61        records, compressed as one stream by the codec in the attributes
//
// and each record, with zig-zag varints:
//
//   record := length:varint attributes:int8 timestamp_delta:varlong offset_delta:varint
//             key_length:varint key value_length:varint value header_count:varint header*
//   header := key_length:varint key value_length:varint value
//
// where a length of -1 is null (header keys are never null) and `length` counts the bytes
// after itself. base_offset and partition_leader_epoch lie outside the CRC so that the broker
// can assign them without recomputing it.
//
// Batches are kept in wire form: a record_batch is a view of validated bytes, and decoding its
// records copies nothing unless they are compressed. record_walker is the one record parser:
// it checks and yields records one at a time without allocating, and decode_records() builds
// on it. Everything here is a value or a view used by one thread at a time; the caller keeps
// viewed buffers alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "protocol/compression.h"
#include "protocol/generated/error_code.h"
#include "protocol/writer.h"

namespace silt::protocol {

inline constexpr size_t record_batch_header_size = 61;
// base_offset and batch_length: what a batch holds beyond its batch_length.
inline constexpr size_t record_batch_log_overhead = 12;
inline constexpr int8_t record_batch_magic = 2;

// The Kafka error code a broker answers a Produce with when a partition's records fail with
// `e` (see record_batch.cc for the Kafka source each choice follows).
[[nodiscard]] error_code to_error_code(batch_error e);

struct record_batch_header {
  int64_t base_offset = 0;
  int32_t batch_length = 0;
  int32_t partition_leader_epoch = -1;
  int8_t magic = record_batch_magic;
  uint32_t crc = 0;
  int16_t attributes = 0;
  int32_t last_offset_delta = 0;
  int64_t base_timestamp = -1;
  int64_t max_timestamp = -1;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t base_sequence = -1;
  int32_t records_count = 0;

  static constexpr int16_t codec_mask = 0x07;
  static constexpr int16_t log_append_time_flag = 0x08;
  static constexpr int16_t transactional_flag = 0x10;
  static constexpr int16_t control_flag = 0x20;
  static constexpr int16_t delete_horizon_flag = 0x40;

  // May be an unassigned id (5-7), which decode_records() rejects.
  [[nodiscard]] compression_codec codec() const {
    return static_cast<compression_codec>(attributes & codec_mask);
  }
  [[nodiscard]] bool is_transactional() const { return (attributes & transactional_flag) != 0; }
  [[nodiscard]] bool is_control() const { return (attributes & control_flag) != 0; }
  [[nodiscard]] bool log_append_time() const { return (attributes & log_append_time_flag) != 0; }
  // Set by compaction: base_timestamp is then the time tombstones may be removed (KIP-534).
  [[nodiscard]] bool has_delete_horizon() const { return (attributes & delete_horizon_flag) != 0; }
  [[nodiscard]] int64_t last_offset() const { return base_offset + last_offset_delta; }
  // The whole batch's size in bytes.
  [[nodiscard]] size_t size() const {
    return record_batch_log_overhead + static_cast<size_t>(batch_length);
  }

  bool operator==(const record_batch_header&) const = default;
};

// One whole validated batch (header and records) as a view into the caller's buffer.
struct record_batch {
  record_batch_header header;
  std::span<const uint8_t> bytes;
};

// Iterates the batches of a records field, validating each one's framing and CRC but not its
// records (decode_records() does that, at the cost of decompressing them).
class batch_reader {
 public:
  explicit batch_reader(std::span<const uint8_t> records) : rest_(records) {}

  // The next batch; std::nullopt when the records are used up exactly; or an error. A batch
  // cut short by the end of the buffer gives truncated: a Fetch response may legitimately end
  // with a partial batch, and the caller decides whether that is an error. Errors are sticky:
  // once next() fails it returns the same error again.
  [[nodiscard]] tl::expected<std::optional<record_batch>, batch_error> next();

  // The bytes not yet returned as batches (starting at the failed batch after an error).
  [[nodiscard]] std::span<const uint8_t> remaining() const { return rest_; }

 private:
  std::span<const uint8_t> rest_;
  std::optional<batch_error> error_;
};

struct record_header {
  std::span<const uint8_t> key;
  std::optional<std::span<const uint8_t>> value;
};

// The records section of a batch (everything after its header): a view into the batch when it
// is uncompressed, otherwise its records decompressed into `scratch`, which is overwritten and
// which the returned view then points into. A caller checking many batches passes the same
// scratch to each (one buffer alive at a time). Fails with unknown_codec, decompression_failed,
// or decompressed_too_large past max_decompressed_bytes (an uncompressed batch is viewed where
// it lies, whatever its size).
[[nodiscard]] tl::expected<std::span<const uint8_t>, batch_error> records_section(
    const record_batch& batch, std::vector<uint8_t>& scratch, size_t max_decompressed_bytes);

// One record as record_walker yields it: views into the records section. Its headers stay
// encoded (header_count of them in `headers`, already checked well-formed), so reading a
// record allocates nothing.
struct record_view {
  int8_t attributes = 0;
  int64_t timestamp_delta = 0;
  int32_t offset_delta = 0;
  std::optional<std::span<const uint8_t>> key;
  std::optional<std::span<const uint8_t>> value;
  int32_t header_count = 0;
  std::span<const uint8_t> headers;
};

// Why record_walker stopped: invalid_record (a record's length or fields are malformed) or
// record_count_mismatch (fewer records than records_count, or bytes after the last one);
// `index` is the record at fault (records_count for bytes left over) and `what` says what was
// wrong, in words for an error message.
struct record_error {
  batch_error error = batch_error::invalid_record;
  int32_t index = 0;
  std::string_view what;
};

// Walks the records of a records section (see records_section()): exactly `records_count` of
// them, each filling exactly its length, and nothing after the last. Offset deltas and
// timestamps are not checked against the header: compaction leaves gaps, and what a Produce
// must satisfy is the broker's business. Allocates nothing; the section must outlive the walker
// and the records it yields.
class record_walker {
 public:
  record_walker(std::span<const uint8_t> records, int32_t records_count)
      : rest_(records), count_(records_count) {}

  // The next record; std::nullopt after the last one (once the section is known to hold
  // nothing more); or the error, which is sticky.
  [[nodiscard]] tl::expected<std::optional<record_view>, record_error> next();

  // The index of the record next() reads next.
  [[nodiscard]] int32_t index() const { return index_; }

 private:
  std::span<const uint8_t> rest_;
  int32_t count_;
  int32_t index_ = 0;
  std::optional<record_error> error_;
};

// A record as it appears in a batch: offsets and timestamps relative to the batch's.
struct record {
  int8_t attributes = 0;
  int64_t timestamp_delta = 0;
  int32_t offset_delta = 0;
  std::optional<std::span<const uint8_t>> key;
  std::optional<std::span<const uint8_t>> value;
  std::vector<record_header> headers;
};

// The records of one batch. Owns their decompressed bytes when the batch was compressed, and
// otherwise points into the batch, which must then outlive it. Move-only: records point into
// the owned buffer, which a move keeps in place and a copy would not.
class decoded_records {
 public:
  decoded_records(std::vector<uint8_t> owned, std::vector<record> records)
      : owned_(std::move(owned)), records_(std::move(records)) {}
  decoded_records(decoded_records&&) = default;
  decoded_records& operator=(decoded_records&&) = default;
  decoded_records(const decoded_records&) = delete;
  decoded_records& operator=(const decoded_records&) = delete;

  [[nodiscard]] const std::vector<record>& records() const { return records_; }
  [[nodiscard]] size_t size() const { return records_.size(); }
  [[nodiscard]] const record& operator[](size_t i) const { return records_[i]; }
  [[nodiscard]] auto begin() const { return records_.begin(); }
  [[nodiscard]] auto end() const { return records_.end(); }
  // The decompressed records section; empty for an uncompressed batch.
  [[nodiscard]] std::span<const uint8_t> decompressed() const { return owned_; }

 private:
  std::vector<uint8_t> owned_;
  std::vector<record> records_;
};

// Decompresses (to at most max_decompressed_bytes; an uncompressed batch is parsed where it
// lies, whatever its size) and parses the records of a batch from batch_reader, as
// records_section() and record_walker do, collecting them with their headers.
[[nodiscard]] tl::expected<decoded_records, batch_error> decode_records(
    const record_batch& batch, size_t max_decompressed_bytes = size_t{64} << 20);

// Rewrite fields outside the CRC in place, as the broker does when it appends a batch.
// `batch` must hold at least a whole header.
void set_base_offset(std::span<uint8_t> batch, int64_t base_offset);
void set_partition_leader_epoch(std::span<uint8_t> batch, int32_t epoch);
// Recomputes the CRC after a change to bytes it covers (for example max_timestamp when the
// broker sets log append time). `batch` must be exactly one whole batch.
void update_crc(std::span<uint8_t> batch);

// What filter_batch() keeps of a batch, as Kafka's log cleaner rebuilds one
// (MemoryRecords.filterTo): the records `keep` selects, in their order, with their offsets and
// timestamps; the batch's base offset, last offset delta (so that the batch still ends where it
// ended, for the producer's sequence), leader epoch, producer id, epoch, base sequence, max
// timestamp and attributes, compressed again with its codec. With a delete horizon the batch
// gets the delete horizon flag and base_timestamp = the horizon (KIP-534), the records'
// timestamp deltas being taken from it. `kept` is the number of records kept (0: the batch is
// a header only, marked uncompressed).
struct filtered_batch {
  std::vector<uint8_t> bytes;
  int32_t kept = 0;
};

// `keep(offset, record)` is called once per record, in order; then `horizon(kept_tombstone)`
// (kept_tombstone: whether a kept record has a null value) gives the delete horizon to set, or
// nullopt to leave base_timestamp and the flag as they are. Fails as records_section() and
// record_walker do on a batch whose records do not decode.
template <typename Keep, typename Horizon>
[[nodiscard]] tl::expected<filtered_batch, batch_error> filter_batch(const record_batch& batch,
                                                                     Keep&& keep, Horizon&& horizon,
                                                                     std::vector<uint8_t>& scratch,
                                                                     size_t max_decompressed_bytes);

// Builds a v2 batch: records are encoded as they are added, with offset deltas 0, 1, ... and
// timestamps relative to the first record's; build() compresses them and fills in the
// lengths, counts and CRC. Defaults are those of a non-idempotent producer: no producer id,
// epoch or sequence, no leader epoch.
class record_batch_builder {
 public:
  using bytes = std::span<const uint8_t>;

  record_batch_builder& codec(compression_codec c) {
    codec_ = c;
    return *this;
  }
  record_batch_builder& base_offset(int64_t o) {
    base_offset_ = o;
    return *this;
  }
  record_batch_builder& partition_leader_epoch(int32_t e) {
    partition_leader_epoch_ = e;
    return *this;
  }
  record_batch_builder& producer(int64_t id, int16_t epoch, int32_t base_sequence) {
    producer_id_ = id;
    producer_epoch_ = epoch;
    base_sequence_ = base_sequence;
    return *this;
  }
  record_batch_builder& transactional(bool on = true) {
    return flag(on, record_batch_header::transactional_flag);
  }
  record_batch_builder& control(bool on = true) {
    return flag(on, record_batch_header::control_flag);
  }
  // Marks the batch as log-append-time; max_timestamp becomes `append_time`, as the broker
  // writes it.
  record_batch_builder& log_append_time(int64_t append_time) {
    log_append_time_ = append_time;
    return flag(true, record_batch_header::log_append_time_flag);
  }

  record_batch_builder& add(int64_t timestamp, std::optional<bytes> key, std::optional<bytes> value,
                            std::span<const record_header> headers = {});
  // The same at a chosen offset delta, above the previous record's: a batch with gaps, as a
  // compacted log serves them.
  record_batch_builder& add_at(int32_t offset_delta, int64_t timestamp, std::optional<bytes> key,
                               std::optional<bytes> value,
                               std::span<const record_header> headers = {});

  [[nodiscard]] int32_t record_count() const { return count_; }
  // The batch; can be called again (after more add()s, too).
  [[nodiscard]] std::vector<uint8_t> build() const;

 private:
  record_batch_builder& flag(bool on, int16_t bit) {
    attributes_ = static_cast<int16_t>(on ? attributes_ | bit : attributes_ & ~bit);
    return *this;
  }

  compression_codec codec_ = compression_codec::none;
  int16_t attributes_ = 0;  // without the codec
  int64_t base_offset_ = 0;
  int32_t partition_leader_epoch_ = -1;
  int64_t producer_id_ = -1;
  int16_t producer_epoch_ = -1;
  int32_t base_sequence_ = -1;
  std::optional<int64_t> log_append_time_;
  int64_t base_timestamp_ = -1;
  int64_t max_timestamp_ = -1;
  int32_t count_ = 0;
  int32_t last_offset_delta_ = -1;
  writer records_;  // encoded, uncompressed
};

namespace detail {
// The rebuild of filter_batch() once the kept records are known (their views into `section`).
[[nodiscard]] filtered_batch rebuild_batch(const record_batch& batch,
                                           std::span<const record_view> kept,
                                           std::optional<int64_t> delete_horizon);
}  // namespace detail

template <typename Keep, typename Horizon>
tl::expected<filtered_batch, batch_error> filter_batch(const record_batch& batch, Keep&& keep,
                                                       Horizon&& horizon,
                                                       std::vector<uint8_t>& scratch,
                                                       size_t max_decompressed_bytes) {
  auto section = records_section(batch, scratch, max_decompressed_bytes);
  if (!section) return tl::make_unexpected(section.error());
  std::vector<record_view> kept;
  bool kept_tombstone = false;
  record_walker walker(*section, batch.header.records_count);
  for (;;) {
    auto next = walker.next();
    if (!next) return tl::make_unexpected(next.error().error);
    if (!*next) break;
    const record_view& r = **next;
    if (keep(batch.header.base_offset + r.offset_delta, r)) {
      kept.push_back(r);
      kept_tombstone = kept_tombstone || !r.value;
    }
  }
  return detail::rebuild_batch(batch, kept, horizon(kept_tombstone));
}

}  // namespace silt::protocol
