// Record batches: framing, CRC and corruption, legacy formats, in-place rewrites, builder round
// trips for every codec, walking records without collecting them, and the batches real clients
// sent (tests/data/captures).
#include "protocol/record_batch.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/crc32c.h"
#include "base/endian.h"
#include "protocol/generated/produce_request.h"
#include "protocol/reader.h"

namespace silt::protocol {
namespace {

using json = nlohmann::json;

std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string text(std::span<const uint8_t> b) {
  return {b.begin(), b.end()};
}

constexpr compression_codec all_codecs[] = {compression_codec::none, compression_codec::gzip,
                                            compression_codec::snappy, compression_codec::lz4,
                                            compression_codec::zstd};

// A small uncompressed batch of three records.
std::vector<uint8_t> sample_batch(compression_codec codec = compression_codec::none) {
  record_batch_builder b;
  b.codec(codec).producer(7, 1, 42).partition_leader_epoch(3);
  b.add(1000, as_bytes("k0"), as_bytes("v0"));
  b.add(1001, std::nullopt, as_bytes("v1"));
  b.add(1002, as_bytes("k2"), std::nullopt);
  return b.build();
}

tl::expected<std::optional<record_batch>, batch_error> read_one(std::span<const uint8_t> bytes) {
  batch_reader r(bytes);
  return r.next();
}

// The error of reading `bytes` as one batch, or nullopt if it is read fine.
std::optional<batch_error> read_error(std::span<const uint8_t> bytes) {
  auto b = read_one(bytes);
  if (b) return std::nullopt;
  return b.error();
}

TEST(RecordBatch, BuilderFieldsAreReadBack) {
  record_batch_builder b;
  b.codec(compression_codec::lz4)
      .base_offset(100)
      .partition_leader_epoch(9)
      .producer(123456789, 5, 77)
      .transactional();
  b.add(5000, as_bytes("a"), as_bytes("b"));
  b.add(4000, as_bytes("c"), as_bytes("d"));
  b.add(6000, as_bytes("e"), as_bytes("f"));
  const std::vector<uint8_t> bytes = b.build();

  batch_reader r(bytes);
  auto next = r.next();
  ASSERT_TRUE(next.has_value()) << batch_error_name(next.error());
  ASSERT_TRUE(next->has_value());
  const record_batch_header& h = (*next)->header;
  EXPECT_EQ(h.base_offset, 100);
  EXPECT_EQ(h.batch_length, static_cast<int32_t>(bytes.size() - 12));
  EXPECT_EQ(h.partition_leader_epoch, 9);
  EXPECT_EQ(h.magic, 2);
  EXPECT_EQ(h.crc, base::crc32c(std::span(bytes).subspan(21)));
  EXPECT_EQ(h.codec(), compression_codec::lz4);
  EXPECT_TRUE(h.is_transactional());
  EXPECT_FALSE(h.is_control());
  EXPECT_FALSE(h.log_append_time());
  EXPECT_EQ(h.last_offset_delta, 2);
  EXPECT_EQ(h.last_offset(), 102);
  EXPECT_EQ(h.base_timestamp, 5000);
  EXPECT_EQ(h.max_timestamp, 6000);
  EXPECT_EQ(h.producer_id, 123456789);
  EXPECT_EQ(h.producer_epoch, 5);
  EXPECT_EQ(h.base_sequence, 77);
  EXPECT_EQ(h.records_count, 3);
  EXPECT_EQ(h.size(), bytes.size());
  EXPECT_EQ((*next)->bytes.data(), bytes.data());
  EXPECT_EQ((*next)->bytes.size(), bytes.size());

  auto end = r.next();
  ASSERT_TRUE(end.has_value());
  EXPECT_FALSE(end->has_value());
}

TEST(RecordBatch, RecordsAddedAtChosenDeltasLeaveGapsAndSetTheLastDelta) {
  record_batch_builder b;
  b.base_offset(10);
  b.add_at(0, 1000, as_bytes("a"), as_bytes("1"));
  b.add_at(3, 1000, as_bytes("b"), std::nullopt);
  b.add(1000, as_bytes("c"), as_bytes("3"));  // the next delta: 4
  const std::vector<uint8_t> bytes = b.build();
  batch_reader r(bytes);
  auto next = r.next();
  ASSERT_TRUE(next.has_value() && next->has_value());
  EXPECT_EQ((*next)->header.records_count, 3);
  EXPECT_EQ((*next)->header.last_offset_delta, 4);
  EXPECT_EQ((*next)->header.last_offset(), 14);
  auto records = decode_records(**next);
  ASSERT_TRUE(records.has_value());
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[0].offset_delta, 0);
  EXPECT_EQ((*records)[1].offset_delta, 3);
  EXPECT_FALSE((*records)[1].value.has_value());
  EXPECT_EQ((*records)[2].offset_delta, 4);
}

TEST(RecordBatch, DefaultsAreThoseOfAPlainProducer) {
  const std::vector<uint8_t> bytes = record_batch_builder().build();
  auto b = read_one(bytes);
  ASSERT_TRUE(b.has_value());
  const record_batch_header& h = (*b)->header;
  EXPECT_EQ(h.producer_id, -1);
  EXPECT_EQ(h.producer_epoch, -1);
  EXPECT_EQ(h.base_sequence, -1);
  EXPECT_EQ(h.partition_leader_epoch, -1);
  EXPECT_EQ(h.records_count, 0);
  EXPECT_EQ(bytes.size(), record_batch_header_size);
  auto d = decode_records(**b);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->size(), 0u);
}

TEST(RecordBatch, ControlAndLogAppendTimeFlagsAreSet) {
  record_batch_builder b;
  b.control().log_append_time(99999);
  b.add(10, as_bytes("key"), as_bytes("value"));
  const std::vector<uint8_t> bytes = b.build();
  auto r = read_one(bytes);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE((*r)->header.is_control());
  EXPECT_TRUE((*r)->header.log_append_time());
  EXPECT_EQ((*r)->header.max_timestamp, 99999);
  EXPECT_EQ((*r)->header.base_timestamp, 10);
}

class RecordBatchCodec : public testing::TestWithParam<compression_codec> {};

TEST_P(RecordBatchCodec, RecordsWithHeadersAndNullsRoundTrip) {
  const std::string big(100 * 1024, 'x');
  const record_header headers0[] = {{as_bytes("trace"), as_bytes("abc")},
                                    {as_bytes("nothing"), std::nullopt}};
  const record_header headers3[] = {{as_bytes(""), as_bytes("")}};

  record_batch_builder b;
  b.codec(GetParam());
  b.add(1000, as_bytes("k0"), as_bytes("v0"), headers0);
  b.add(1005, std::nullopt, as_bytes("only a value"));
  b.add(999, as_bytes("tombstone"), std::nullopt);  // earlier than the first: negative delta
  b.add(2000, as_bytes(""), as_bytes(""), headers3);
  b.add(1500, std::nullopt, as_bytes(big));
  EXPECT_EQ(b.record_count(), 5);
  const std::vector<uint8_t> bytes = b.build();

  auto batch = read_one(bytes);
  ASSERT_TRUE(batch.has_value()) << batch_error_name(batch.error());
  ASSERT_TRUE(batch->has_value());
  EXPECT_EQ((*batch)->header.codec(), GetParam());
  EXPECT_EQ((*batch)->header.base_timestamp, 1000);
  EXPECT_EQ((*batch)->header.max_timestamp, 2000);
  EXPECT_EQ((*batch)->header.last_offset_delta, 4);
  if (GetParam() != compression_codec::none) {
    EXPECT_LT(bytes.size(), big.size());
  }

  auto decoded = decode_records(**batch);
  ASSERT_TRUE(decoded.has_value()) << batch_error_name(decoded.error());
  ASSERT_EQ(decoded->size(), 5u);
  EXPECT_EQ(decoded->decompressed().empty(), GetParam() == compression_codec::none);
  const auto& recs = decoded->records();
  for (int32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(recs[static_cast<size_t>(i)].offset_delta, i);
    EXPECT_EQ(recs[static_cast<size_t>(i)].attributes, 0);
  }

  EXPECT_EQ(recs[0].timestamp_delta, 0);
  ASSERT_TRUE(recs[0].key && recs[0].value);
  EXPECT_EQ(text(*recs[0].key), "k0");
  EXPECT_EQ(text(*recs[0].value), "v0");
  ASSERT_EQ(recs[0].headers.size(), 2u);
  EXPECT_EQ(text(recs[0].headers[0].key), "trace");
  ASSERT_TRUE(recs[0].headers[0].value.has_value());
  EXPECT_EQ(text(*recs[0].headers[0].value), "abc");
  EXPECT_EQ(text(recs[0].headers[1].key), "nothing");
  EXPECT_FALSE(recs[0].headers[1].value.has_value());

  EXPECT_EQ(recs[1].timestamp_delta, 5);
  EXPECT_FALSE(recs[1].key.has_value());
  ASSERT_TRUE(recs[1].value.has_value());
  EXPECT_EQ(text(*recs[1].value), "only a value");
  EXPECT_TRUE(recs[1].headers.empty());

  EXPECT_EQ(recs[2].timestamp_delta, -1);
  ASSERT_TRUE(recs[2].key.has_value());
  EXPECT_EQ(text(*recs[2].key), "tombstone");
  EXPECT_FALSE(recs[2].value.has_value());

  // Empty is not null.
  ASSERT_TRUE(recs[3].key && recs[3].value);
  EXPECT_TRUE(recs[3].key->empty());
  EXPECT_TRUE(recs[3].value->empty());
  ASSERT_EQ(recs[3].headers.size(), 1u);
  EXPECT_TRUE(recs[3].headers[0].key.empty());
  ASSERT_TRUE(recs[3].headers[0].value.has_value());

  ASSERT_TRUE(recs[4].value.has_value());
  EXPECT_EQ(text(*recs[4].value), big);
}

// The log cleaner's rebuild: the records kept keep their offsets, timestamps, keys, values and
// headers; the header keeps its offsets, producer, leader epoch and codec; a delete horizon
// becomes the base timestamp with the flag set; the CRC is valid.
TEST_P(RecordBatchCodec, FilteredBatchKeepsOffsetsAndTimestamps) {
  const record_header headers[] = {{as_bytes("h"), as_bytes("x")}};
  record_batch_builder b;
  b.codec(GetParam()).producer(7, 1, 42).partition_leader_epoch(3).base_offset(100);
  b.add(1000, as_bytes("a"), as_bytes("1"), headers);
  b.add(1005, as_bytes("b"), as_bytes("2"));
  b.add(990, as_bytes("c"), std::nullopt);
  b.add(2000, as_bytes("d"), as_bytes("4"));
  const std::vector<uint8_t> bytes = b.build();
  auto batch = read_one(bytes);
  ASSERT_TRUE(batch && *batch);
  std::vector<uint8_t> scratch;
  std::vector<int64_t> seen;
  bool told_tombstone = false;
  auto filtered = filter_batch(
      **batch,
      [&](int64_t offset, const record_view&) {
        seen.push_back(offset);
        return offset == 100 || offset == 102;
      },
      [&](bool kept_tombstone) -> std::optional<int64_t> {
        told_tombstone = kept_tombstone;
        return 5000;
      },
      scratch, size_t{1} << 20);
  ASSERT_TRUE(filtered);
  EXPECT_EQ(seen, (std::vector<int64_t>{100, 101, 102, 103}));
  EXPECT_TRUE(told_tombstone);
  EXPECT_EQ(filtered->kept, 2);
  auto rebuilt = read_one(filtered->bytes);  // checks the CRC
  ASSERT_TRUE(rebuilt.has_value()) << batch_error_name(rebuilt.error());
  ASSERT_TRUE(rebuilt->has_value());
  const auto& h = (*rebuilt)->header;
  EXPECT_EQ(h.base_offset, 100);
  EXPECT_EQ(h.last_offset_delta, 3);
  EXPECT_EQ(h.records_count, 2);
  EXPECT_EQ(h.codec(), GetParam());
  EXPECT_EQ(h.producer_id, 7);
  EXPECT_EQ(h.producer_epoch, 1);
  EXPECT_EQ(h.base_sequence, 42);
  EXPECT_EQ(h.partition_leader_epoch, 3);
  EXPECT_EQ(h.max_timestamp, 2000);
  EXPECT_TRUE(h.has_delete_horizon());
  EXPECT_EQ(h.base_timestamp, 5000);
  auto decoded = decode_records(**rebuilt);
  ASSERT_TRUE(decoded);
  ASSERT_EQ(decoded->size(), 2u);
  const auto& recs = decoded->records();
  EXPECT_EQ(recs[0].offset_delta, 0);
  EXPECT_EQ(h.base_timestamp + recs[0].timestamp_delta, 1000);
  EXPECT_EQ(text(*recs[0].key), "a");
  EXPECT_EQ(text(*recs[0].value), "1");
  ASSERT_EQ(recs[0].headers.size(), 1u);
  EXPECT_EQ(text(recs[0].headers[0].key), "h");
  EXPECT_EQ(recs[1].offset_delta, 2);
  EXPECT_EQ(h.base_timestamp + recs[1].timestamp_delta, 990);
  EXPECT_FALSE(recs[1].value);
  // Nothing kept: a header only, still ending at the batch's last offset.
  auto none = filter_batch(
      **batch, [](int64_t, const record_view&) { return false; },
      [](bool) -> std::optional<int64_t> { return std::nullopt; }, scratch, size_t{1} << 20);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->kept, 0);
  EXPECT_EQ(none->bytes.size(), record_batch_header_size);
  auto empty = read_one(none->bytes);
  ASSERT_TRUE(empty && *empty);
  EXPECT_EQ((*empty)->header.last_offset(), 103);
  EXPECT_EQ((*empty)->header.base_timestamp, 1000);
  EXPECT_FALSE((*empty)->header.has_delete_horizon());
  EXPECT_EQ((*empty)->header.codec(), compression_codec::none);
  EXPECT_TRUE(decode_records(**empty));
}

TEST_P(RecordBatchCodec, DecodedRecordsStayValidWhenMoved) {
  const std::vector<uint8_t> bytes = sample_batch(GetParam());
  auto batch = read_one(bytes);
  ASSERT_TRUE(batch.has_value());
  auto decoded = decode_records(**batch);
  ASSERT_TRUE(decoded.has_value());
  decoded_records moved = std::move(*decoded);
  ASSERT_EQ(moved.size(), 3u);
  EXPECT_EQ(text(*moved[0].key), "k0");
  EXPECT_EQ(text(*moved[1].value), "v1");
  EXPECT_EQ(text(*moved[2].key), "k2");
}

TEST_P(RecordBatchCodec, DecompressionBombIsStoppedAtTheLimit) {
  const std::vector<uint8_t> zeros(4 << 20, 0);
  record_batch_builder b;
  b.codec(GetParam());
  b.add(0, std::nullopt, zeros);
  const std::vector<uint8_t> bytes = b.build();
  auto batch = read_one(bytes);
  ASSERT_TRUE(batch.has_value());

  auto small = decode_records(**batch, 1 << 20);
  if (GetParam() == compression_codec::none) {
    // Already in memory: the limit is on what decompression allocates.
    EXPECT_TRUE(small.has_value());
    return;
  }
  ASSERT_FALSE(small.has_value());
  EXPECT_EQ(small.error(), batch_error::decompressed_too_large);
  EXPECT_EQ(to_error_code(small.error()), error_code::message_too_large);

  auto fits = decode_records(**batch, 5 << 20);
  ASSERT_TRUE(fits.has_value()) << batch_error_name(fits.error());
  EXPECT_EQ(fits->records()[0].value->size(), zeros.size());
}

// Whatever the compressed bytes hold (the CRC recomputed, as a careless or hostile client
// would), decoding returns a result and never reads outside its buffers.
TEST_P(RecordBatchCodec, CorruptRecordsAreRejectedWithoutReadingOutOfBounds) {
  const std::vector<uint8_t> original = sample_batch(GetParam());
  for (size_t i = record_batch_header_size; i < original.size(); ++i) {
    for (uint8_t x : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> bytes = original;
      bytes[i] ^= x;
      update_crc(bytes);
      auto batch = read_one(bytes);
      ASSERT_TRUE(batch.has_value()) << i;
      auto decoded = decode_records(**batch);
      // A flip inside a key or value can leave the structure intact.
      if (decoded) {
        EXPECT_EQ(decoded->size(), 3u);
      }
    }
  }
}

// Records cut short, in a batch whose length and CRC were made to match.
TEST_P(RecordBatchCodec, TruncatedRecordsAreRejected) {
  const std::vector<uint8_t> original = sample_batch(GetParam());
  for (size_t n = record_batch_header_size; n < original.size(); ++n) {
    std::vector<uint8_t> bytes(original.begin(), original.begin() + static_cast<ptrdiff_t>(n));
    base::store_be<int32_t>(bytes.data() + 8, static_cast<int32_t>(n - 12));
    update_crc(bytes);
    auto batch = read_one(bytes);
    ASSERT_TRUE(batch.has_value()) << n;
    auto decoded = decode_records(**batch);
    EXPECT_FALSE(decoded.has_value()) << n;
  }
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, RecordBatchCodec, testing::ValuesIn(all_codecs),
                         [](const testing::TestParamInfo<compression_codec>& info) {
                           return std::string(compression_codec_name(info.param));
                         });

TEST(RecordBatch, CorruptCrcIsRejected) {
  const std::vector<uint8_t> original = sample_batch();
  // Every byte the CRC covers, and the CRC itself.
  for (size_t i = 17; i < original.size(); ++i) {
    for (uint8_t x : {0x01, 0x80}) {
      std::vector<uint8_t> bytes = original;
      bytes[i] ^= x;
      EXPECT_EQ(read_error(bytes), batch_error::crc_mismatch) << "byte " << i;
    }
  }
  EXPECT_EQ(to_error_code(batch_error::crc_mismatch), error_code::corrupt_message);
}

TEST(RecordBatch, BaseOffsetAndLeaderEpochAreOutsideTheCrc) {
  const std::vector<uint8_t> original = sample_batch();
  for (size_t i : {0, 7, 12, 15}) {
    std::vector<uint8_t> bytes = original;
    bytes[i] ^= 0x5a;
    EXPECT_EQ(read_error(bytes), std::nullopt) << "byte " << i;
  }
}

TEST(RecordBatch, SetBaseOffsetKeepsTheCrcValid) {
  std::vector<uint8_t> bytes = sample_batch();
  set_base_offset(bytes, 0x0102030405060708);
  auto b = read_one(bytes);
  ASSERT_TRUE(b.has_value()) << batch_error_name(b.error());
  EXPECT_EQ((*b)->header.base_offset, 0x0102030405060708);
  EXPECT_EQ((*b)->header.last_offset(), 0x0102030405060708 + 2);
  auto d = decode_records(**b);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->size(), 3u);
}

TEST(RecordBatch, SetPartitionLeaderEpochKeepsTheCrcValid) {
  std::vector<uint8_t> bytes = sample_batch();
  set_partition_leader_epoch(bytes, 12345);
  auto b = read_one(bytes);
  ASSERT_TRUE(b.has_value()) << batch_error_name(b.error());
  EXPECT_EQ((*b)->header.partition_leader_epoch, 12345);
}

TEST(RecordBatch, RewritingOneBatchLeavesItsNeighboursAlone) {
  std::vector<uint8_t> bytes = sample_batch();
  const size_t first = bytes.size();
  const std::vector<uint8_t> second = sample_batch(compression_codec::zstd);
  bytes.insert(bytes.end(), second.begin(), second.end());
  set_base_offset(std::span(bytes).subspan(first), 3);
  set_partition_leader_epoch(std::span(bytes).subspan(first), 4);

  batch_reader r(bytes);
  auto a = r.next();
  ASSERT_TRUE(a.has_value() && a->has_value());
  EXPECT_EQ((*a)->header.base_offset, 0);
  auto b = r.next();
  ASSERT_TRUE(b.has_value() && b->has_value());
  EXPECT_EQ((*b)->header.base_offset, 3);
  EXPECT_EQ((*b)->header.partition_leader_epoch, 4);
}

TEST(RecordBatch, ConcatenatedBatchesAreReadInOrderThenEndCleanly) {
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 4; ++i) {
    record_batch_builder b;
    b.base_offset(i * 10).codec(all_codecs[static_cast<size_t>(i)]);
    b.add(i, as_bytes("k"), as_bytes(std::to_string(i)));
    const std::vector<uint8_t> one = b.build();
    bytes.insert(bytes.end(), one.begin(), one.end());
  }
  batch_reader r(bytes);
  for (int i = 0; i < 4; ++i) {
    auto b = r.next();
    ASSERT_TRUE(b.has_value() && b->has_value()) << i;
    EXPECT_EQ((*b)->header.base_offset, i * 10);
    auto d = decode_records(**b);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(text(*d->records()[0].value), std::to_string(i));
  }
  for (int again = 0; again < 2; ++again) {
    auto end = r.next();
    ASSERT_TRUE(end.has_value());
    EXPECT_FALSE(end->has_value());
  }
  EXPECT_TRUE(r.remaining().empty());
}

TEST(RecordBatch, EmptyRecordsEndCleanly) {
  batch_reader r(std::span<const uint8_t>{});
  auto end = r.next();
  ASSERT_TRUE(end.has_value());
  EXPECT_FALSE(end->has_value());
}

TEST(RecordBatch, TruncationAtEveryLengthIsReportedNotRead) {
  const std::vector<uint8_t> original = sample_batch(compression_codec::gzip);
  for (size_t n = 1; n < original.size(); ++n) {
    // A copy of exactly n bytes, so that ASan sees any read past them.
    const std::vector<uint8_t> bytes(original.begin(),
                                     original.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_EQ(read_error(bytes), batch_error::truncated) << n;
  }
}

// A Fetch response may end with a partial batch: the whole ones before it are still read.
TEST(RecordBatch, PartialBatchAfterWholeOnesIsTruncated) {
  std::vector<uint8_t> bytes = sample_batch();
  const size_t first = bytes.size();
  const std::vector<uint8_t> second = sample_batch();
  bytes.insert(bytes.end(), second.begin(), second.begin() + 30);
  batch_reader r(bytes);
  auto a = r.next();
  ASSERT_TRUE(a.has_value() && a->has_value());
  auto b = r.next();
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error(), batch_error::truncated);
  EXPECT_EQ(r.remaining().size(), bytes.size() - first);
}

TEST(RecordBatch, ErrorsAreSticky) {
  std::vector<uint8_t> bytes = sample_batch();
  bytes.back() ^= 1;
  const std::vector<uint8_t> good = sample_batch();
  bytes.insert(bytes.end(), good.begin(), good.end());
  batch_reader r(bytes);
  for (int i = 0; i < 3; ++i) {
    auto b = r.next();
    ASSERT_FALSE(b.has_value());
    EXPECT_EQ(b.error(), batch_error::crc_mismatch);
  }
}

// A v0 message (offset, size, crc, magic, attributes, key, value) or v1 message (with a
// timestamp) as pre-0.11 clients send them.
std::vector<uint8_t> legacy_message(int8_t magic) {
  writer body;
  body.int8(magic);
  body.int8(0);                               // attributes
  if (magic == 1) body.int64(1700000000000);  // timestamp
  body.int32(3);
  body.raw(as_bytes("key"));
  body.int32(5);
  body.raw(as_bytes("value"));
  writer w;
  w.int64(0);
  w.int32(static_cast<int32_t>(4 + body.size()));
  w.uint32(0x12345678);  // a legacy CRC32, unchecked: the format is refused before that
  w.raw(body.buffer());
  return w.take();
}

TEST(RecordBatch, LegacyMagicIsRejectedAsInvalidRecord) {
  for (int8_t magic : {0, 1}) {
    const std::vector<uint8_t> bytes = legacy_message(magic);
    EXPECT_EQ(read_error(bytes), batch_error::legacy_magic) << int{magic};
  }
  // Kafka 4 answers a magic 0/1 batch in Produce v3+ with INVALID_RECORD.
  EXPECT_EQ(to_error_code(batch_error::legacy_magic), error_code::invalid_record);
}

TEST(RecordBatch, UnknownMagicIsCorrupt) {
  for (uint8_t magic : {3, 0x7f, 0x80, 0xff}) {
    std::vector<uint8_t> bytes = sample_batch();
    bytes[16] = magic;
    EXPECT_EQ(read_error(bytes), batch_error::unknown_magic) << int{magic};
  }
  EXPECT_EQ(to_error_code(batch_error::unknown_magic), error_code::corrupt_message);
}

TEST(RecordBatch, LengthsOutsideTheBatchBoundsAreRejected) {
  const std::vector<uint8_t> original = sample_batch();
  const auto with_length = [&](int32_t length) {
    std::vector<uint8_t> bytes = original;
    base::store_be<int32_t>(bytes.data() + 8, length);
    return read_error(bytes);
  };
  EXPECT_EQ(with_length(-1), batch_error::invalid_length);
  EXPECT_EQ(with_length(std::numeric_limits<int32_t>::min()), batch_error::invalid_length);
  EXPECT_EQ(with_length(0), batch_error::invalid_length);
  EXPECT_EQ(with_length(48), batch_error::invalid_length);
  EXPECT_EQ(with_length(static_cast<int32_t>(original.size() - 12 + 1)), batch_error::truncated);
  EXPECT_EQ(with_length(std::numeric_limits<int32_t>::max()), batch_error::truncated);
  // Shorter but within bounds: the CRC no longer covers the same bytes.
  EXPECT_EQ(with_length(static_cast<int32_t>(original.size() - 12 - 1)), batch_error::crc_mismatch);
  EXPECT_EQ(to_error_code(batch_error::invalid_length), error_code::corrupt_message);
}

std::vector<uint8_t> with_attributes(std::vector<uint8_t> bytes, int16_t attributes) {
  base::store_be(bytes.data() + 21, attributes);
  update_crc(bytes);
  return bytes;
}

TEST(RecordBatch, UnknownCodecIsRejected) {
  for (int16_t codec : {5, 6, 7}) {
    const std::vector<uint8_t> bytes = with_attributes(sample_batch(), codec);
    auto b = read_one(bytes);
    ASSERT_TRUE(b.has_value());
    auto d = decode_records(**b);
    ASSERT_FALSE(d.has_value());
    EXPECT_EQ(d.error(), batch_error::unknown_codec);
  }
  EXPECT_EQ(to_error_code(batch_error::unknown_codec), error_code::unsupported_compression_type);
}

TEST(RecordBatch, UncompressedRecordsMarkedCompressedFailToDecompress) {
  const std::vector<uint8_t> bytes = with_attributes(sample_batch(), 1);
  auto b = read_one(bytes);
  ASSERT_TRUE(b.has_value());
  auto d = decode_records(**b);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error(), batch_error::decompression_failed);
  // What Kafka 4.1.1 answers (see to_error_code).
  EXPECT_EQ(to_error_code(batch_error::decompression_failed), error_code::unknown_server_error);
}

std::vector<uint8_t> with_records_count(std::vector<uint8_t> bytes, int32_t count) {
  base::store_be(bytes.data() + 57, count);
  update_crc(bytes);
  return bytes;
}

TEST(RecordBatch, RecordCountMismatchIsRejected) {
  for (compression_codec codec : {compression_codec::none, compression_codec::zstd}) {
    for (int32_t count : {0, 2, 4, 1000000, std::numeric_limits<int32_t>::max(), -1,
                          std::numeric_limits<int32_t>::min()}) {
      const std::vector<uint8_t> bytes = with_records_count(sample_batch(codec), count);
      auto b = read_one(bytes);
      ASSERT_TRUE(b.has_value());
      auto d = decode_records(**b);
      ASSERT_FALSE(d.has_value()) << count;
      EXPECT_EQ(d.error(), batch_error::record_count_mismatch) << count;
    }
  }
  EXPECT_EQ(to_error_code(batch_error::record_count_mismatch), error_code::invalid_record);
}

// One uncompressed record whose body is given, after its length varint.
std::vector<uint8_t> batch_with_record(int32_t declared_length, std::span<const uint8_t> body) {
  record_batch_builder b;
  b.add(0, std::nullopt, std::nullopt);
  std::vector<uint8_t> bytes = b.build();
  bytes.resize(record_batch_header_size);
  writer w;
  w.varint(declared_length);
  w.raw(body);
  bytes.insert(bytes.end(), w.buffer().begin(), w.buffer().end());
  base::store_be<int32_t>(bytes.data() + 8, static_cast<int32_t>(bytes.size() - 12));
  update_crc(bytes);
  return bytes;
}

std::optional<batch_error> decode_error_of(const std::vector<uint8_t>& bytes) {
  auto b = read_one(bytes);
  EXPECT_TRUE(b.has_value());
  if (!b) return b.error();
  auto d = decode_records(**b);
  if (d) return std::nullopt;
  return d.error();
}

TEST(RecordBatch, RecordLengthMustMatchItsContent) {
  writer body;
  body.int8(0);     // attributes
  body.varlong(0);  // timestamp delta
  body.varint(0);   // offset delta
  body.varint(1);   // key length
  body.raw(as_bytes("k"));
  body.varint(-1);  // null value
  body.varint(0);   // no headers
  const auto n = static_cast<int32_t>(body.size());

  EXPECT_EQ(decode_error_of(batch_with_record(n, body.buffer())), std::nullopt);
  // Declared longer than the body: it runs past the records.
  EXPECT_EQ(decode_error_of(batch_with_record(n + 1, body.buffer())), batch_error::invalid_record);
  // Declared shorter: the fields run past the record.
  EXPECT_EQ(decode_error_of(batch_with_record(n - 1, body.buffer())), batch_error::invalid_record);
  EXPECT_EQ(decode_error_of(batch_with_record(-1, body.buffer())), batch_error::invalid_record);
  // Bytes left inside the declared length.
  std::vector<uint8_t> padded = body.buffer();
  padded.push_back(0);
  EXPECT_EQ(decode_error_of(batch_with_record(n + 1, padded)), batch_error::invalid_record);
  EXPECT_EQ(to_error_code(batch_error::invalid_record), error_code::invalid_record);
}

TEST(RecordBatch, InvalidFieldLengthsInARecordAreRejected) {
  const auto record_with = [](int32_t key_length, int32_t header_count, int32_t header_key) {
    writer body;
    body.int8(0);
    body.varlong(0);
    body.varint(0);
    body.varint(key_length);
    if (key_length > 0) body.raw(as_bytes(std::string(static_cast<size_t>(key_length), 'k')));
    body.varint(-1);
    body.varint(header_count);
    if (header_count > 0) {
      body.varint(header_key);
      body.varint(-1);
    }
    return batch_with_record(static_cast<int32_t>(body.size()), body.buffer());
  };
  EXPECT_EQ(decode_error_of(record_with(2, 0, 0)), std::nullopt);
  EXPECT_EQ(decode_error_of(record_with(-1, 1, 0)), std::nullopt);
  EXPECT_EQ(decode_error_of(record_with(-2, 0, 0)), batch_error::invalid_record);
  EXPECT_EQ(decode_error_of(record_with(-1, -1, 0)), batch_error::invalid_record);
  EXPECT_EQ(decode_error_of(record_with(-1, 2, 0)), batch_error::invalid_record);
  EXPECT_EQ(decode_error_of(record_with(-1, std::numeric_limits<int32_t>::max(), 0)),
            batch_error::invalid_record);
  // A header key is never null.
  EXPECT_EQ(decode_error_of(record_with(-1, 1, -1)), batch_error::invalid_record);
}

TEST(RecordBatch, TimestampsAtTheExtremesRoundTrip) {
  constexpr int64_t lo = std::numeric_limits<int64_t>::min();
  constexpr int64_t hi = std::numeric_limits<int64_t>::max();
  record_batch_builder b;
  b.add(hi, std::nullopt, std::nullopt);
  b.add(lo, std::nullopt, std::nullopt);
  const std::vector<uint8_t> bytes = b.build();
  auto batch = read_one(bytes);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ((*batch)->header.base_timestamp, hi);
  auto d = decode_records(**batch);
  ASSERT_TRUE(d.has_value());
  // Deltas wrap, as Java's long arithmetic does.
  EXPECT_EQ(static_cast<int64_t>(static_cast<uint64_t>(hi) +
                                 static_cast<uint64_t>(d->records()[1].timestamp_delta)),
            lo);
}

TEST(RecordBatch, ErrorNamesAreDistinct) {
  std::vector<std::string_view> names;
  for (int e = 0; e <= static_cast<int>(batch_error::record_count_mismatch); ++e) {
    names.push_back(batch_error_name(static_cast<batch_error>(e)));
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
  EXPECT_EQ(std::count(names.begin(), names.end(), "unknown"), 0);
}

// record_walker and records_section: the records of a batch checked one at a time, without
// collecting them.

// A batch whose records section is `section` (compressed with `codec`), counting `count`
// records; the header's offsets agree with the count.
std::vector<uint8_t> batch_of_section(std::span<const uint8_t> section, int32_t count,
                                      compression_codec codec = compression_codec::none) {
  std::vector<uint8_t> bytes = record_batch_builder().build();
  const std::vector<uint8_t> payload = codec == compression_codec::none
                                           ? std::vector<uint8_t>(section.begin(), section.end())
                                           : compress(codec, section);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  base::store_be<int32_t>(bytes.data() + 8, static_cast<int32_t>(bytes.size() - 12));
  base::store_be<int16_t>(bytes.data() + 21, static_cast<int16_t>(codec));
  base::store_be<int32_t>(bytes.data() + 23, std::max(count - 1, 0));
  base::store_be<int32_t>(bytes.data() + 57, count);
  update_crc(bytes);
  return bytes;
}

// One encoded record (length and body) with the given offset delta and value.
std::vector<uint8_t> encoded_record(int32_t offset_delta, std::string_view value) {
  writer body;
  body.int8(0);
  body.varlong(0);
  body.varint(offset_delta);
  body.varint(-1);
  body.varint(static_cast<int32_t>(value.size()));
  body.raw(as_bytes(value));
  body.varint(0);
  writer w;
  w.varint(static_cast<int32_t>(body.size()));
  w.raw(body.buffer());
  return w.take();
}

std::optional<std::string> opt_text(const std::optional<std::span<const uint8_t>>& b) {
  if (!b) return std::nullopt;
  return text(*b);
}

std::vector<uint8_t> concat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Walks every record of `bytes` (one batch); the error, or the offset deltas of the records.
tl::expected<std::vector<int32_t>, record_error> walk(const std::vector<uint8_t>& bytes) {
  auto b = read_one(bytes);
  EXPECT_TRUE(b.has_value() && b->has_value());
  std::vector<uint8_t> scratch;
  auto section = records_section(**b, scratch, size_t{1} << 20);
  EXPECT_TRUE(section.has_value());
  record_walker w(*section, (*b)->header.records_count);
  std::vector<int32_t> deltas;
  for (;;) {
    auto next = w.next();
    if (!next) return tl::make_unexpected(next.error());
    if (!*next) return deltas;
    deltas.push_back((*next)->offset_delta);
  }
}

TEST_P(RecordBatchCodec, WalkerYieldsEveryRecordAsTheDecoderDoes) {
  const record_header headers[] = {{as_bytes("h1"), as_bytes("x")}, {as_bytes("h2"), std::nullopt}};
  record_batch_builder builder;
  builder.codec(GetParam());
  builder.add(100, as_bytes("k0"), as_bytes("v0"), headers);
  builder.add(90, std::nullopt, as_bytes("v1"));
  builder.add(150, as_bytes("k2"), std::nullopt);
  const std::vector<uint8_t> bytes = builder.build();
  auto b = read_one(bytes);
  ASSERT_TRUE(b.has_value() && b->has_value());

  std::vector<uint8_t> scratch;
  auto section = records_section(**b, scratch, size_t{1} << 20);
  ASSERT_TRUE(section.has_value()) << batch_error_name(section.error());
  if (GetParam() == compression_codec::none) {
    // Viewed in place: nothing decompressed.
    EXPECT_EQ(section->data(), bytes.data() + record_batch_header_size);
    EXPECT_TRUE(scratch.empty());
  } else {
    EXPECT_EQ(section->data(), scratch.data());
  }

  auto decoded = decode_records(**b);
  ASSERT_TRUE(decoded.has_value());
  record_walker w(*section, (*b)->header.records_count);
  for (size_t i = 0; i < decoded->size(); ++i) {
    EXPECT_EQ(w.index(), static_cast<int32_t>(i));
    auto next = w.next();
    ASSERT_TRUE(next.has_value()) << next.error().what;
    ASSERT_TRUE(next->has_value());
    const record_view& v = **next;
    const record& r = (*decoded)[i];
    EXPECT_EQ(v.offset_delta, static_cast<int32_t>(i));
    EXPECT_EQ(v.offset_delta, r.offset_delta);
    EXPECT_EQ(v.timestamp_delta, r.timestamp_delta);
    EXPECT_EQ(v.attributes, r.attributes);
    EXPECT_EQ(opt_text(v.key), opt_text(r.key));
    EXPECT_EQ(opt_text(v.value), opt_text(r.value));
    EXPECT_EQ(v.header_count, static_cast<int32_t>(r.headers.size()));
  }
  const record_view first = [&] {
    record_walker again(*section, 3);
    return **again.next();
  }();
  EXPECT_EQ(first.timestamp_delta, 0);
  EXPECT_EQ(first.header_count, 2);
  // Headers stay encoded: key length, key, value length, value, for each.
  EXPECT_EQ(first.headers.size(), 1 + 2 + 1 + 1 + 1 + 2 + 1);
  auto end = w.next();
  ASSERT_TRUE(end.has_value());
  EXPECT_FALSE(end->has_value());
  auto again = w.next();
  ASSERT_TRUE(again.has_value());
  EXPECT_FALSE(again->has_value());
}

TEST_P(RecordBatchCodec, OneScratchServesManyBatches) {
  const std::vector<uint8_t> first = sample_batch(GetParam());
  const std::vector<uint8_t> second =
      batch_of_section(concat({encoded_record(0, "a"), encoded_record(1, "b")}), 2, GetParam());
  std::vector<uint8_t> scratch;
  for (const auto* bytes : {&first, &second, &first}) {
    auto b = read_one(*bytes);
    ASSERT_TRUE(b.has_value() && b->has_value());
    auto section = records_section(**b, scratch, size_t{1} << 20);
    ASSERT_TRUE(section.has_value());
    record_walker w(*section, (*b)->header.records_count);
    int32_t n = 0;
    for (auto next = w.next(); next && *next; next = w.next()) ++n;
    EXPECT_EQ(n, (*b)->header.records_count);
  }
}

TEST_P(RecordBatchCodec, WalkerRejectsACountThatDoesNotMatchTheRecords) {
  const std::vector<uint8_t> section =
      concat({encoded_record(0, "a"), encoded_record(1, "b"), encoded_record(2, "c")});
  // More counted than there are.
  auto more = walk(batch_of_section(section, 4, GetParam()));
  ASSERT_FALSE(more.has_value());
  EXPECT_EQ(more.error().error, batch_error::record_count_mismatch);
  EXPECT_EQ(more.error().index, 3);
  EXPECT_NE(more.error().what.find("end before the count"), std::string_view::npos);
  // Fewer counted: the rest are bytes after the last record.
  auto fewer = walk(batch_of_section(section, 2, GetParam()));
  ASSERT_FALSE(fewer.has_value());
  EXPECT_EQ(fewer.error().error, batch_error::record_count_mismatch);
  EXPECT_EQ(fewer.error().index, 2);
  EXPECT_NE(fewer.error().what.find("left after the last record"), std::string_view::npos);
}

TEST_P(RecordBatchCodec, WalkerRejectsBytesAfterTheLastRecord) {
  for (const std::vector<uint8_t>& tail :
       {std::vector<uint8_t>{0}, std::vector<uint8_t>{0xff}, encoded_record(3, "d")}) {
    const std::vector<uint8_t> section =
        concat({encoded_record(0, "a"), encoded_record(1, "b"), encoded_record(2, "c"), tail});
    auto r = walk(batch_of_section(section, 3, GetParam()));
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().error, batch_error::record_count_mismatch);
    EXPECT_EQ(r.error().index, 3);
  }
}

TEST_P(RecordBatchCodec, WalkerRejectsATruncatedRecord) {
  const std::vector<uint8_t> whole = concat({encoded_record(0, "a"), encoded_record(1, "bcd")});
  for (size_t cut = 1; cut < 7; ++cut) {
    const std::vector<uint8_t> section(whole.begin(), whole.end() - static_cast<ptrdiff_t>(cut));
    auto r = walk(batch_of_section(section, 2, GetParam()));
    ASSERT_FALSE(r.has_value()) << cut;
    EXPECT_EQ(r.error().error, batch_error::invalid_record) << cut;
    EXPECT_EQ(r.error().index, 1) << cut;
    EXPECT_EQ(r.error().what, "the record length runs past the end of the records") << cut;
  }
}

TEST_P(RecordBatchCodec, WalkerRejectsBadVarints) {
  // A record length of five bytes with continuation bits all through.
  const std::vector<uint8_t> long_length = {0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  auto r = walk(batch_of_section(concat({encoded_record(0, "a"), long_length}), 2, GetParam()));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().error, batch_error::invalid_record);
  EXPECT_EQ(r.error().index, 1);
  EXPECT_EQ(r.error().what, "the record length is not a valid varint");

  // An offset delta that never ends inside the record.
  writer body;
  body.int8(0);
  body.varlong(0);
  body.raw(std::vector<uint8_t>{0x80, 0x80, 0x80, 0x80, 0x80, 0x80});
  writer rec;
  rec.varint(static_cast<int32_t>(body.size()));
  rec.raw(body.buffer());
  auto delta = walk(batch_of_section(rec.buffer(), 1, GetParam()));
  ASSERT_FALSE(delta.has_value());
  EXPECT_EQ(delta.error().error, batch_error::invalid_record);
  EXPECT_EQ(delta.error().index, 0);
  EXPECT_EQ(delta.error().what, "the record's offset delta is not a valid varint");

  // A negative length.
  writer negative;
  negative.varint(-3);
  auto n = walk(batch_of_section(negative.buffer(), 1, GetParam()));
  ASSERT_FALSE(n.has_value());
  EXPECT_EQ(n.error().what, "the record length is negative");
}

// Offset deltas are reported as written: checking them is the broker's business (a compacted
// batch has gaps; a Produce must not).
TEST_P(RecordBatchCodec, WalkerReportsOffsetDeltasAsWritten) {
  const std::vector<uint8_t> section =
      concat({encoded_record(0, "a"), encoded_record(2, "b"), encoded_record(1, "c")});
  auto r = walk(batch_of_section(section, 3, GetParam()));
  ASSERT_TRUE(r.has_value()) << r.error().what;
  EXPECT_EQ(*r, (std::vector<int32_t>{0, 2, 1}));
}

TEST_P(RecordBatchCodec, CorruptCompressedRecordsAreNotDecompressed) {
  if (GetParam() == compression_codec::none) GTEST_SKIP() << "nothing to decompress";
  const std::vector<uint8_t> good = sample_batch(GetParam());
  const size_t payload = good.size() - record_batch_header_size;
  std::vector<std::vector<uint8_t>> bad;
  // Not the codec's format at all.
  bad.push_back(with_attributes(sample_batch(), static_cast<int16_t>(GetParam())));
  // The codec's stream cut short.
  for (size_t keep : {size_t{1}, payload / 2, payload - 1}) {
    std::vector<uint8_t> cut(
        good.begin(), good.begin() + static_cast<ptrdiff_t>(record_batch_header_size + keep));
    base::store_be<int32_t>(cut.data() + 8, static_cast<int32_t>(cut.size() - 12));
    update_crc(cut);
    bad.push_back(std::move(cut));
  }
  for (const auto& bytes : bad) {
    auto b = read_one(bytes);
    ASSERT_TRUE(b.has_value() && b->has_value());
    std::vector<uint8_t> scratch;
    auto section = records_section(**b, scratch, size_t{1} << 20);
    ASSERT_FALSE(section.has_value());
    EXPECT_EQ(section.error(), batch_error::decompression_failed);
  }
}

TEST_P(RecordBatchCodec, RecordsSectionIsBoundedByTheLimit) {
  const std::vector<uint8_t> zeros(2 << 20, 0);
  record_batch_builder builder;
  builder.codec(GetParam());
  builder.add(0, std::nullopt, zeros);
  const std::vector<uint8_t> bytes = builder.build();
  auto b = read_one(bytes);
  ASSERT_TRUE(b.has_value() && b->has_value());
  std::vector<uint8_t> scratch;
  auto small = records_section(**b, scratch, 1 << 20);
  if (GetParam() == compression_codec::none) {
    EXPECT_TRUE(small.has_value());
    return;
  }
  ASSERT_FALSE(small.has_value());
  EXPECT_EQ(small.error(), batch_error::decompressed_too_large);
}

// One uncompressed record whose body is given, checked by the walker.
record_error walker_error(std::span<const uint8_t> body) {
  writer rec;
  rec.varint(static_cast<int32_t>(body.size()));
  rec.raw(body);
  auto r = walk(batch_of_section(rec.buffer(), 1));
  EXPECT_FALSE(r.has_value());
  return r ? record_error{} : r.error();
}

TEST(RecordWalker, MalformedFieldsAreNamed) {
  const auto body = [](int32_t key_length, int32_t header_count, int32_t header_key,
                       bool trailing) {
    writer w;
    w.int8(0);
    w.varlong(0);
    w.varint(0);
    w.varint(key_length);
    w.varint(-1);
    w.varint(header_count);
    if (header_count > 0) {
      w.varint(header_key);
      w.varint(-1);
    }
    if (trailing) w.int8(0);
    return w.take();
  };
  EXPECT_EQ(walker_error(body(-2, 0, 0, false)).what, "the record's key length is below -1");
  EXPECT_EQ(walker_error(body(5, 0, 0, false)).what, "the record's key runs past its length");
  EXPECT_EQ(walker_error(body(-1, -1, 0, false)).what,
            "the record's header count is negative or more than its length can hold");
  EXPECT_EQ(walker_error(body(-1, 1, -1, false)).what,
            "a record header's key is null or its value length is below -1");
  EXPECT_EQ(walker_error(body(-1, 1, 3, false)).what,
            "a record header runs past the record's length");
  EXPECT_EQ(walker_error(body(-1, 0, 0, true)).what,
            "the record's fields end before its length does");
  const std::vector<uint8_t> only_attributes = {0};
  EXPECT_EQ(walker_error(only_attributes).what,
            "the record's timestamp delta runs past its length");
  EXPECT_EQ(walker_error(std::vector<uint8_t>{}).what,
            "the record's attributes run past its length");
}

TEST(RecordWalker, ErrorsAreSticky) {
  const std::vector<uint8_t> section = concat({encoded_record(0, "a"), {0xff}});
  record_walker w(section, 2);
  ASSERT_TRUE(w.next().has_value());
  for (int i = 0; i < 3; ++i) {
    auto next = w.next();
    ASSERT_FALSE(next.has_value());
    EXPECT_EQ(next.error().index, 1);
  }
}

TEST(RecordWalker, NegativeCountIsRejected) {
  record_walker w(std::span<const uint8_t>{}, -1);
  auto next = w.next();
  ASSERT_FALSE(next.has_value());
  EXPECT_EQ(next.error().error, batch_error::record_count_mismatch);
}

TEST(RecordWalker, EmptySectionWithNoRecordsEndsCleanly) {
  record_walker w(std::span<const uint8_t>{}, 0);
  auto next = w.next();
  ASSERT_TRUE(next.has_value());
  EXPECT_FALSE(next->has_value());
}

// The captures of tests/data/captures: what real clients sent and a real Kafka returned.

constexpr std::string_view captures = SILT_TEST_DATA "/captures";

std::vector<uint8_t> read_capture(const std::string& name) {
  std::ifstream in(std::string(captures) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

json manifest() {
  std::ifstream in(std::string(captures) + "/manifest.json");
  return json::parse(in);
}

std::vector<json> entries_with_batches(std::string_view api, std::string_view kind) {
  std::vector<json> out;
  for (const json& e : manifest()) {
    if (e["api_name"] == api && e["kind"] == kind && e["expect"].contains("batches") &&
        !e["expect"]["batches"].empty()) {
      out.push_back(e);
    }
  }
  return out;
}

compression_codec codec_named(std::string_view name) {
  for (compression_codec c : all_codecs) {
    if (compression_codec_name(c) == name) return c;
  }
  ADD_FAILURE() << "unknown codec " << name;
  return compression_codec::none;
}

std::optional<std::string> text_or_null(const std::optional<std::span<const uint8_t>>& b) {
  if (!b) return std::nullopt;
  return text(*b);
}

std::optional<std::string> json_text_or_null(const json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<std::string>();
}

// Reads every batch of `records`, checking each against the manifest's expectations.
void check_batches(std::span<const uint8_t> records, const json& expected) {
  batch_reader reader(records);
  for (const json& eb : expected) {
    auto next = reader.next();
    ASSERT_TRUE(next.has_value()) << batch_error_name(next.error());
    ASSERT_TRUE(next->has_value()) << "fewer batches than the manifest lists";
    const record_batch& b = **next;
    const record_batch_header& h = b.header;
    EXPECT_EQ(h.base_offset, eb["base_offset"].get<int64_t>());
    EXPECT_EQ(h.batch_length, eb["batch_length"].get<int32_t>());
    EXPECT_EQ(h.magic, eb["magic"].get<int8_t>());
    EXPECT_EQ(h.crc, eb["crc"].get<uint32_t>());
    EXPECT_EQ(h.attributes, eb["attributes"].get<int16_t>());
    EXPECT_EQ(h.codec(), codec_named(eb["codec"].get<std::string>()));
    EXPECT_EQ(h.last_offset_delta, eb["last_offset_delta"].get<int32_t>());
    EXPECT_EQ(h.producer_id, eb["producer_id"].get<int64_t>());
    EXPECT_EQ(h.producer_epoch, eb["producer_epoch"].get<int16_t>());
    EXPECT_EQ(h.base_sequence, eb["base_sequence"].get<int32_t>());
    EXPECT_EQ(h.base_timestamp, eb["base_timestamp"].get<int64_t>());
    EXPECT_EQ(h.max_timestamp, eb["max_timestamp"].get<int64_t>());
    EXPECT_EQ(h.records_count, eb["record_count"].get<int32_t>());

    if (eb.contains("snappy_framing")) {
      const std::span<const uint8_t> payload = b.bytes.subspan(record_batch_header_size);
      const bool xerial = payload.size() >= 8 && payload[0] == 0x82 &&
                          text(payload.subspan(1, 6)) == "SNAPPY" && payload[7] == 0;
      EXPECT_EQ(xerial, eb["snappy_framing"] == "xerial");
    }

    auto decoded = decode_records(b);
    ASSERT_TRUE(decoded.has_value()) << batch_error_name(decoded.error());
    if (eb.contains("uncompressed_size")) {
      EXPECT_EQ(decoded->decompressed().size(), eb["uncompressed_size"].get<size_t>());
    }
    const auto& recs = decoded->records();
    ASSERT_EQ(recs.size(), eb["keys"].size());
    ASSERT_EQ(recs.size(), eb["values"].size());
    for (size_t i = 0; i < recs.size(); ++i) {
      EXPECT_EQ(recs[i].offset_delta, static_cast<int32_t>(i));
      EXPECT_EQ(text_or_null(recs[i].key), json_text_or_null(eb["keys"][i])) << i;
      EXPECT_EQ(text_or_null(recs[i].value), json_text_or_null(eb["values"][i])) << i;
    }
  }
  auto end = reader.next();
  ASSERT_TRUE(end.has_value()) << batch_error_name(end.error());
  EXPECT_FALSE(end->has_value()) << "more batches than the manifest lists";
}

// Skips a request header: v1 (api key, api version, correlation id, nullable client id) and,
// for v2, the tagged fields after it.
void skip_request_header(reader& r, bool flexible) {
  r.int16();
  r.int16();
  r.int32();
  r.nullable_string(false, true);
  if (!flexible) return;
  const uint32_t tags = r.uvarint();
  for (uint32_t i = 0; i < tags && r.ok(); ++i) {
    r.uvarint();
    r.raw(r.uvarint());
  }
}

// The records field of a captured Produce request with one topic and one partition.
std::vector<uint8_t> produce_records(const json& e) {
  const auto version = e["api_version"].get<int16_t>();
  EXPECT_LE(version, produce_request::max_version);
  const std::vector<uint8_t> frame = read_capture(e["file"].get<std::string>());
  reader r(frame);
  skip_request_header(r, version >= produce_request::first_flexible_version);
  produce_request p;
  p.decode(r, version);
  r.expect_end();
  EXPECT_TRUE(r.ok()) << decode_error_name(r.error());
  if (!r.ok() || p.topic_data.size() != 1 || p.topic_data[0].partition_data.size() != 1 ||
      !p.topic_data[0].partition_data[0].records) {
    ADD_FAILURE() << "not one partition with records";
    return {};
  }
  const std::span<const uint8_t> records = p.topic_data[0].partition_data[0].records->bytes();
  return {records.begin(), records.end()};
}

TEST(RecordBatchGolden, ProduceRequestsDecodeToTheClientsRecords) {
  const std::vector<json> entries = entries_with_batches("Produce", "request");
  ASSERT_FALSE(entries.empty());
  std::vector<std::string> seen;
  for (const json& e : entries) {
    SCOPED_TRACE(e["file"].get<std::string>());
    const std::vector<uint8_t> records = produce_records(e);
    EXPECT_EQ(records.size(), e["expect"]["records_size"].get<size_t>());
    check_batches(records, e["expect"]["batches"]);
    for (const json& b : e["expect"]["batches"]) {
      seen.push_back(b["codec"].get<std::string>() + "/" + b.value("snappy_framing", ""));
    }
  }
  // Every codec, and snappy in both framings.
  for (const char* want : {"none/", "gzip/", "snappy/raw", "snappy/xerial", "lz4/", "zstd/"}) {
    EXPECT_NE(std::find(seen.begin(), seen.end(), want), seen.end()) << want;
  }
}

// Fetch responses are not decoded here: their batches are found by their known header.
TEST(RecordBatchGolden, FetchResponsesCarryTheProducedBatches) {
  const std::vector<json> entries = entries_with_batches("Fetch", "response");
  ASSERT_FALSE(entries.empty());
  for (const json& e : entries) {
    SCOPED_TRACE(e["file"].get<std::string>());
    const std::vector<uint8_t> frame = read_capture(e["file"].get<std::string>());
    const json& first = e["expect"]["batches"][0];
    const auto records_size = e["expect"]["records_size"].get<size_t>();
    std::optional<size_t> at;
    for (size_t i = 0; i + record_batch_header_size <= frame.size(); ++i) {
      const uint8_t* p = frame.data() + i;
      if (base::load_be<int64_t>(p) == first["base_offset"].get<int64_t>() &&
          base::load_be<int32_t>(p + 8) == first["batch_length"].get<int32_t>() && p[16] == 2 &&
          base::load_be<uint32_t>(p + 17) == first["crc"].get<uint32_t>()) {
        at = i;
        break;
      }
    }
    ASSERT_TRUE(at.has_value());
    ASSERT_LE(*at + records_size, frame.size());
    check_batches(std::span(frame).subspan(*at, records_size), e["expect"]["batches"]);
  }
}

TEST(RecordBatchGolden, EveryCorruptionOfARealBatchIsCaught) {
  const std::vector<json> entries = entries_with_batches("Produce", "request");
  ASSERT_FALSE(entries.empty());
  for (const json& e : entries) {
    SCOPED_TRACE(e["file"].get<std::string>());
    const std::vector<uint8_t> original = produce_records(e);
    ASSERT_FALSE(original.empty());
    ASSERT_EQ(read_error(original), std::nullopt);
    for (size_t i = 17; i < original.size(); ++i) {
      std::vector<uint8_t> bytes = original;
      bytes[i] ^= 0x10;
      EXPECT_EQ(read_error(bytes), batch_error::crc_mismatch) << i;
    }
    for (size_t n = 1; n < original.size(); ++n) {
      const std::vector<uint8_t> cut(original.begin(),
                                     original.begin() + static_cast<ptrdiff_t>(n));
      EXPECT_EQ(read_error(cut), batch_error::truncated) << n;
    }
  }
}

}  // namespace
}  // namespace silt::protocol
