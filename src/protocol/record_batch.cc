#include "protocol/record_batch.h"

#include <algorithm>
#include <cassert>
#include <climits>

#include "base/crc32c.h"
#include "base/endian.h"
#include "protocol/reader.h"

namespace silt::protocol {

namespace {

constexpr size_t magic_offset = 16;
constexpr size_t crc_offset = 17;
constexpr size_t attributes_offset = 21;  // the CRC covers from here to the end
constexpr size_t partition_leader_epoch_offset = 12;
// batch_length of a batch without records.
constexpr int32_t min_batch_length = record_batch_header_size - record_batch_log_overhead;
// length, attributes, timestamp delta, offset delta, key and value lengths, header count.
constexpr size_t min_record_size = 7;

tl::unexpected<batch_error> fail(batch_error e) {
  return tl::make_unexpected(e);
}

record_batch_header parse_header(std::span<const uint8_t> batch) {
  reader r(batch.first(record_batch_header_size));
  record_batch_header h;
  h.base_offset = r.int64();
  h.batch_length = r.int32();
  h.partition_leader_epoch = r.int32();
  h.magic = r.int8();
  h.crc = r.uint32();
  h.attributes = r.int16();
  h.last_offset_delta = r.int32();
  h.base_timestamp = r.int64();
  h.max_timestamp = r.int64();
  h.producer_id = r.int64();
  h.producer_epoch = r.int16();
  h.base_sequence = r.int32();
  h.records_count = r.int32();
  assert(r.ok() && r.remaining() == 0);
  return h;
}

// A key or value: a varint length, -1 for null, then the bytes. Errors stick to r.
std::optional<std::span<const uint8_t>> nullable_bytes(reader& r) {
  const int32_t n = r.varint();
  if (n == -1) return std::nullopt;
  if (n < -1) {
    r.fail(decode_error::invalid_length);
    return std::nullopt;
  }
  return r.raw(static_cast<size_t>(n));
}

// A record header: a key, never null, and a nullable value. Errors stick to r.
record_header read_header(reader& r) {
  record_header h;
  const int32_t key_length = r.varint();
  if (key_length < 0) {
    r.fail(decode_error::invalid_length);
    return h;
  }
  h.key = r.raw(static_cast<size_t>(key_length));
  h.value = nullable_bytes(r);
  return h;
}

// The fields of a record, for error messages.
enum class field : uint8_t {
  length,
  attributes,
  timestamp_delta,
  offset_delta,
  key,
  value,
  header_count,
  header,
};

// What is wrong with `f`, which a reader failed to read with `e`.
std::string_view field_problem(field f, decode_error e) {
  const bool varint = e == decode_error::varint_too_long;
  const bool length = e == decode_error::invalid_length;
  switch (f) {
    case field::length:
      if (varint) return "the record length is not a valid varint";
      if (length) return "the record length is negative";
      return "the record length runs past the end of the records";
    case field::attributes:
      return "the record's attributes run past its length";
    case field::timestamp_delta:
      if (varint) return "the record's timestamp delta is not a valid varlong";
      return "the record's timestamp delta runs past its length";
    case field::offset_delta:
      if (varint) return "the record's offset delta is not a valid varint";
      return "the record's offset delta runs past its length";
    case field::key:
      if (varint) return "the record's key length is not a valid varint";
      if (length) return "the record's key length is below -1";
      return "the record's key runs past its length";
    case field::value:
      if (varint) return "the record's value length is not a valid varint";
      if (length) return "the record's value length is below -1";
      return "the record's value runs past its length";
    case field::header_count:
      if (varint) return "the record's header count is not a valid varint";
      if (length) return "the record's header count is negative or more than its length can hold";
      return "the record's header count runs past its length";
    case field::header:
      if (varint) return "a record header's key or value length is not a valid varint";
      if (length) return "a record header's key is null or its value length is below -1";
      return "a record header runs past the record's length";
  }
  return "the record is malformed";
}

// Parses a record body (what follows its length), which it must fill exactly; on failure,
// what is wrong with it.
tl::expected<record_view, std::string_view> parse_record(std::span<const uint8_t> body) {
  reader r(body);
  record_view out;
  // The field being read; a failure leaves it at the field that failed, as errors stick to r.
  field at = field::attributes;
  const auto reading = [&r, &at](field f) {
    if (r.ok()) at = f;
  };
  out.attributes = r.int8();
  reading(field::timestamp_delta);
  out.timestamp_delta = r.varlong();
  reading(field::offset_delta);
  out.offset_delta = r.varint();
  reading(field::key);
  out.key = nullable_bytes(r);
  reading(field::value);
  out.value = nullable_bytes(r);
  reading(field::header_count);
  out.header_count = r.varint();
  // Each header takes at least its two lengths, which bounds what a count can claim (and what
  // decode_records() reserves for it).
  if (r.ok() &&
      (out.header_count < 0 || static_cast<size_t>(out.header_count) > r.remaining() / 2)) {
    r.fail(decode_error::invalid_length);
  }
  reading(field::header);
  const uint8_t* headers = r.position();
  for (int32_t i = 0; i < out.header_count && r.ok(); ++i) (void)read_header(r);
  if (!r.ok()) return tl::make_unexpected(field_problem(at, r.error()));
  out.headers = std::span<const uint8_t>(headers, r.position());
  if (r.remaining() != 0) {
    return tl::make_unexpected("the record's fields end before its length does");
  }
  return out;
}

void write_nullable_bytes(writer& w, std::optional<std::span<const uint8_t>> b) {
  if (!b) {
    w.varint(-1);
    return;
  }
  assert(b->size() <= INT32_MAX);
  w.varint(static_cast<int32_t>(b->size()));
  w.raw(*b);
}

size_t nullable_bytes_size(std::optional<std::span<const uint8_t>> b) {
  if (!b) return wire_size::varint(-1);
  return wire_size::varint(static_cast<int32_t>(b->size())) + b->size();
}

}  // namespace

// Kafka's answers, read in Apache Kafka at commit 1eb7644349cb (4.0.0-SNAPSHOT, the specs the
// generated code comes from). Kafka 4 accepts only Produce v3+ (KIP-896), so the v3+ checks
// below apply to every Produce it answers:
//  - ByteBufferLogInputStream.nextBatchSize throws CorruptRecordException for a batch length
//    below the smallest legacy message or a magic outside 0..2, and
//    UnifiedLog.analyzeAndValidateRecords throws it for a CRC mismatch or a batch shorter than
//    the v2 header (DefaultRecordBatch.isValid): CORRUPT_MESSAGE.
//  - ProduceRequest.validateRecords, called by KafkaApis.handleProduceRequest for v3+, throws
//    InvalidRecordException for a magic 0 or 1 batch, and for records holding no whole batch
//    (a truncated one): INVALID_RECORD. Not UNSUPPORTED_FOR_MESSAGE_FORMAT, which Kafka used
//    when converting between formats, nor UNSUPPORTED_VERSION, which is about the request.
//  - DefaultRecord.readFrom and DefaultRecordBatch's record iterator throw
//    InvalidRecordException for records that do not fit or fill their length and for a count
//    that does not match the records ("Incorrect declared batch size, premature EOF reached",
//    "... records still remaining"): INVALID_RECORD. (A record length whose varint is too long
//    escapes readFrom as IllegalArgumentException, UNKNOWN_SERVER_ERROR: an accident that Silt
//    does not copy, INVALID_RECORD as for every other malformed field.)
//  - decompression_failed: DefaultRecordBatch's StreamRecordIterator (and each codec's
//    wrapForInput, for a bad frame header) wraps the decompressor's IOException in a
//    KafkaException, which ReplicaManager.appendToLocalLog does not map: UNKNOWN_SERVER_ERROR,
//    as Kafka 4.1.1 answers a gzip, snappy, lz4 or zstd payload that does not decompress (the
//    black-box tests check it). Silt answers the same, with a message naming the codec, so that
//    clients handle it as they do with Kafka (a retry of the same batch fails again on both).
// Where Kafka's answer is an accident, Silt answers what a client can act on:
//  - unknown_codec: CompressionType.forId throws IllegalArgumentException, again
//    UNKNOWN_SERVER_ERROR; UNSUPPORTED_COMPRESSION_TYPE names the problem.
//  - decompressed_too_large: Kafka has no such limit (it streams records); MESSAGE_TOO_LARGE
//    (Java's RecordTooLargeException) is its answer to a batch larger than it accepts.
error_code to_error_code(batch_error e) {
  switch (e) {
    case batch_error::invalid_length:
    case batch_error::unknown_magic:
    case batch_error::crc_mismatch:
      return error_code::corrupt_message;
    case batch_error::truncated:
    case batch_error::legacy_magic:
    case batch_error::invalid_record:
    case batch_error::record_count_mismatch:
      return error_code::invalid_record;
    case batch_error::decompression_failed:
      return error_code::unknown_server_error;
    case batch_error::unknown_codec:
      return error_code::unsupported_compression_type;
    case batch_error::decompressed_too_large:
      return error_code::message_too_large;
  }
  return error_code::unknown_server_error;
}

tl::expected<std::optional<record_batch>, batch_error> batch_reader::next() {
  if (error_) return fail(*error_);
  if (rest_.empty()) return std::nullopt;
  auto stop = [this](batch_error e) {
    error_ = e;
    return fail(e);
  };

  if (rest_.size() < record_batch_log_overhead) return stop(batch_error::truncated);
  const int32_t length = base::load_be<int32_t>(rest_.data() + 8);
  if (length < 0) return stop(batch_error::invalid_length);
  if (rest_.size() <= magic_offset) return stop(batch_error::truncated);
  // The magic decides the layout, so it is checked before the length is held to v2's minimum:
  // a legacy message set is reported as such whatever its size.
  const auto magic = static_cast<int8_t>(rest_[magic_offset]);
  if (magic == 0 || magic == 1) return stop(batch_error::legacy_magic);
  if (magic != record_batch_magic) return stop(batch_error::unknown_magic);
  if (length < min_batch_length) return stop(batch_error::invalid_length);
  const size_t size = record_batch_log_overhead + static_cast<size_t>(length);
  if (rest_.size() < size) return stop(batch_error::truncated);

  const std::span<const uint8_t> bytes = rest_.first(size);
  record_batch batch{parse_header(bytes), bytes};
  if (base::crc32c(bytes.subspan(attributes_offset)) != batch.header.crc) {
    return stop(batch_error::crc_mismatch);
  }
  rest_ = rest_.subspan(size);
  return batch;
}

tl::expected<std::span<const uint8_t>, batch_error> records_section(const record_batch& batch,
                                                                    std::vector<uint8_t>& scratch,
                                                                    size_t max_decompressed_bytes) {
  const compression_codec codec = batch.header.codec();
  if (codec > compression_codec::zstd) return fail(batch_error::unknown_codec);
  const std::span<const uint8_t> data = batch.bytes.subspan(record_batch_header_size);
  if (codec == compression_codec::none) return data;
  auto d = decompress(codec, data, max_decompressed_bytes, std::move(scratch));
  if (!d) return fail(d.error());
  scratch = std::move(*d);
  return std::span<const uint8_t>(scratch);
}

tl::expected<std::optional<record_view>, record_error> record_walker::next() {
  if (error_) return tl::make_unexpected(*error_);
  const auto stop = [this](batch_error e, std::string_view what) {
    error_ = record_error{e, index_, what};
    return tl::make_unexpected(*error_);
  };
  if (count_ < 0) return stop(batch_error::record_count_mismatch, "records_count is negative");
  if (index_ == count_) {
    if (!rest_.empty()) {
      return stop(batch_error::record_count_mismatch,
                  "bytes are left after the last record the batch header counts");
    }
    return std::nullopt;
  }
  if (rest_.empty()) {
    return stop(batch_error::record_count_mismatch,
                "the records end before the count in the batch header");
  }
  reader r(rest_);
  const int32_t length = r.varint();
  if (r.ok() && length < 0) r.fail(decode_error::invalid_length);
  if (r.ok() && static_cast<size_t>(length) > r.remaining()) r.fail(decode_error::truncated);
  if (!r.ok()) return stop(batch_error::invalid_record, field_problem(field::length, r.error()));
  const std::span<const uint8_t> body = r.raw(static_cast<size_t>(length));
  auto rec = parse_record(body);
  if (!rec) return stop(batch_error::invalid_record, rec.error());
  rest_ = rest_.subspan(static_cast<size_t>(r.position() - rest_.data()));
  ++index_;
  return *rec;
}

tl::expected<decoded_records, batch_error> decode_records(const record_batch& batch,
                                                          size_t max_decompressed_bytes) {
  std::vector<uint8_t> owned;
  auto data = records_section(batch, owned, max_decompressed_bytes);
  if (!data) return fail(data.error());

  std::vector<record> records;
  const auto count = static_cast<size_t>(std::max(batch.header.records_count, 0));
  records.reserve(std::min(count, data->size() / min_record_size));
  record_walker walker(*data, batch.header.records_count);
  for (;;) {
    auto next = walker.next();
    if (!next) return fail(next.error().error);
    if (!*next) break;
    const record_view& v = **next;
    record& rec = records.emplace_back();
    rec.attributes = v.attributes;
    rec.timestamp_delta = v.timestamp_delta;
    rec.offset_delta = v.offset_delta;
    rec.key = v.key;
    rec.value = v.value;
    rec.headers.reserve(static_cast<size_t>(v.header_count));
    reader h(v.headers);
    for (int32_t i = 0; i < v.header_count; ++i) rec.headers.push_back(read_header(h));
    assert(h.ok() && h.remaining() == 0);  // the walker checked them
  }
  // Moving `owned` keeps its heap buffer, so the records' views stay valid.
  return decoded_records(std::move(owned), std::move(records));
}

void set_base_offset(std::span<uint8_t> batch, int64_t base_offset) {
  assert(batch.size() >= record_batch_header_size);
  base::store_be(batch.data(), base_offset);
}

void set_partition_leader_epoch(std::span<uint8_t> batch, int32_t epoch) {
  assert(batch.size() >= record_batch_header_size);
  base::store_be(batch.data() + partition_leader_epoch_offset, epoch);
}

void update_crc(std::span<uint8_t> batch) {
  assert(batch.size() >= record_batch_header_size);
  assert(batch.size() ==
         record_batch_log_overhead + static_cast<size_t>(base::load_be<int32_t>(batch.data() + 8)));
  base::store_be(batch.data() + crc_offset, base::crc32c(batch.subspan(attributes_offset)));
}

record_batch_builder& record_batch_builder::add(int64_t timestamp, std::optional<bytes> key,
                                                std::optional<bytes> value,
                                                std::span<const record_header> headers) {
  return add_at(last_offset_delta_ + 1, timestamp, key, value, headers);
}

record_batch_builder& record_batch_builder::add_at(int32_t offset_delta, int64_t timestamp,
                                                   std::optional<bytes> key,
                                                   std::optional<bytes> value,
                                                   std::span<const record_header> headers) {
  assert(count_ < INT32_MAX);
  assert(offset_delta > last_offset_delta_);
  if (count_ == 0) {
    base_timestamp_ = timestamp;
    max_timestamp_ = timestamp;
  }
  max_timestamp_ = std::max(max_timestamp_, timestamp);
  // Wrapping subtraction: any two timestamps have a delta that round-trips.
  const auto timestamp_delta = static_cast<int64_t>(static_cast<uint64_t>(timestamp) -
                                                    static_cast<uint64_t>(base_timestamp_));

  size_t body = 1 + wire_size::varlong(timestamp_delta) + wire_size::varint(offset_delta) +
                nullable_bytes_size(key) + nullable_bytes_size(value) +
                wire_size::varint(static_cast<int32_t>(headers.size()));
  for (const record_header& h : headers) {
    body += wire_size::varint(static_cast<int32_t>(h.key.size())) + h.key.size() +
            nullable_bytes_size(h.value);
  }
  assert(body <= INT32_MAX);

  records_.varint(static_cast<int32_t>(body));
  records_.int8(0);  // record attributes: none are defined
  records_.varlong(timestamp_delta);
  records_.varint(offset_delta);
  write_nullable_bytes(records_, key);
  write_nullable_bytes(records_, value);
  records_.varint(static_cast<int32_t>(headers.size()));
  for (const record_header& h : headers) {
    write_nullable_bytes(records_, h.key);
    write_nullable_bytes(records_, h.value);
  }
  ++count_;
  last_offset_delta_ = offset_delta;
  return *this;
}

std::vector<uint8_t> record_batch_builder::build() const {
  std::span<const uint8_t> payload = records_.buffer();
  std::vector<uint8_t> compressed;
  if (codec_ != compression_codec::none) {
    compressed = compress(codec_, payload);
    payload = compressed;
  }
  assert(payload.size() <= static_cast<size_t>(INT32_MAX - min_batch_length));

  writer w(record_batch_header_size + payload.size());
  w.int64(base_offset_);
  w.int32(min_batch_length + static_cast<int32_t>(payload.size()));
  w.int32(partition_leader_epoch_);
  w.int8(record_batch_magic);
  w.uint32(0);  // the CRC, filled in below
  w.int16(static_cast<int16_t>(attributes_ | static_cast<int16_t>(codec_)));
  w.int32(count_ > 0 ? last_offset_delta_ : 0);
  w.int64(base_timestamp_);
  w.int64(log_append_time_.value_or(max_timestamp_));
  w.int64(producer_id_);
  w.int16(producer_epoch_);
  w.int32(base_sequence_);
  w.int32(count_);
  w.raw(payload);
  std::vector<uint8_t> out = w.take();
  update_crc(out);
  return out;
}

namespace detail {

filtered_batch rebuild_batch(const record_batch& batch, std::span<const record_view> kept,
                             std::optional<int64_t> delete_horizon) {
  const record_batch_header& h = batch.header;
  const int64_t base_timestamp = delete_horizon.value_or(h.base_timestamp);
  writer records;
  for (const record_view& r : kept) {
    // The record's timestamp stays what it was (deltas wrap, as Java's long arithmetic).
    const auto timestamp_delta = static_cast<int64_t>(static_cast<uint64_t>(h.base_timestamp) +
                                                      static_cast<uint64_t>(r.timestamp_delta) -
                                                      static_cast<uint64_t>(base_timestamp));
    const size_t body = 1 + wire_size::varlong(timestamp_delta) +
                        wire_size::varint(r.offset_delta) + nullable_bytes_size(r.key) +
                        nullable_bytes_size(r.value) + wire_size::varint(r.header_count) +
                        r.headers.size();
    records.varint(static_cast<int32_t>(body));
    records.int8(r.attributes);
    records.varlong(timestamp_delta);
    records.varint(r.offset_delta);
    write_nullable_bytes(records, r.key);
    write_nullable_bytes(records, r.value);
    records.varint(r.header_count);
    records.raw(r.headers);  // headers as they were encoded
  }
  std::span<const uint8_t> payload = records.buffer();
  std::vector<uint8_t> compressed;
  if (h.codec() != compression_codec::none && !kept.empty()) {
    compressed = compress(h.codec(), payload);
    payload = compressed;
  }
  // An empty batch is a header only, uncompressed, as Kafka writes one (writeEmptyHeader).
  auto attributes = static_cast<int16_t>(
      kept.empty() ? h.attributes & ~record_batch_header::codec_mask : h.attributes);
  if (delete_horizon) {
    attributes = static_cast<int16_t>(attributes | record_batch_header::delete_horizon_flag);
  }
  writer w(record_batch_header_size + payload.size());
  w.int64(h.base_offset);
  w.int32(min_batch_length + static_cast<int32_t>(payload.size()));
  w.int32(h.partition_leader_epoch);
  w.int8(record_batch_magic);
  w.uint32(0);  // the CRC, filled in below
  w.int16(attributes);
  w.int32(h.last_offset_delta);
  w.int64(base_timestamp);
  w.int64(h.max_timestamp);
  w.int64(h.producer_id);
  w.int16(h.producer_epoch);
  w.int32(h.base_sequence);
  w.int32(static_cast<int32_t>(kept.size()));
  w.raw(payload);
  filtered_batch out{w.take(), static_cast<int32_t>(kept.size())};
  update_crc(out.bytes);
  return out;
}

}  // namespace detail

}  // namespace silt::protocol
