// The wire primitives: varints at their edges, sticky errors, bounds on hostile lengths.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "protocol/generated/describe_configs_request.h"
#include "protocol/generated/metadata_request.h"
#include "protocol/generated/produce_request.h"
#include "protocol/reader.h"
#include "protocol/request_header.h"
#include "protocol/writer.h"

namespace silt::protocol {
namespace {

std::vector<uint8_t> bytes(std::initializer_list<int> list) {
  std::vector<uint8_t> out;
  for (int b : list) out.push_back(static_cast<uint8_t>(b));
  return out;
}

TEST(Varint, UnsignedValuesRoundTripWithTheirExpectedSizes) {
  for (uint32_t v : {0u, 1u, 127u, 128u, 16383u, 16384u, 0x0fffffffu, 0x10000000u, UINT32_MAX}) {
    writer w;
    w.uvarint(v);
    EXPECT_EQ(w.size(), wire_size::uvarint(v)) << v;
    reader r(w.buffer());
    EXPECT_EQ(r.uvarint(), v);
    r.expect_end();
    EXPECT_TRUE(r.ok());
  }
}

TEST(Varint, ZigZagValuesRoundTrip) {
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1}, int64_t{-64}, int64_t{63}, int64_t{64},
                    std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}) {
    writer w;
    w.varlong(v);
    EXPECT_EQ(w.size(), wire_size::varlong(v));
    reader r(w.buffer());
    EXPECT_EQ(r.varlong(), v);
    EXPECT_TRUE(r.ok());
  }
  for (int32_t v :
       {0, -1, 1, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()}) {
    writer w;
    w.varint(v);
    reader r(w.buffer());
    EXPECT_EQ(r.varint(), v);
    EXPECT_TRUE(r.ok());
  }
  // Zig-zag maps -1 to 1 and 1 to 2, as Kafka's record format expects.
  writer w;
  w.varint(-1);
  w.varint(1);
  EXPECT_EQ(w.buffer(), bytes({1, 2}));
}

TEST(Varint, OverlongEncodingsAreRejected) {
  const auto r5_bytes = bytes({0xff, 0xff, 0xff, 0xff, 0x1f});
  reader r5(r5_bytes);  // 5th byte carries more than 4 bits
  r5.uvarint();
  EXPECT_EQ(r5.error(), decode_error::varint_too_long);
  const auto r6_bytes = bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x01});
  reader r6(r6_bytes);
  r6.uvarint();
  EXPECT_EQ(r6.error(), decode_error::varint_too_long);
  std::vector<uint8_t> eleven(10, 0x80);
  eleven.push_back(0x01);
  reader r11(eleven);
  r11.uvarlong();
  EXPECT_EQ(r11.error(), decode_error::varint_too_long);
}

TEST(Reader, ErrorsAreStickyAndNothingIsReadPastTheEnd) {
  const auto buf = bytes({0x00, 0x01, 0x02});
  reader r(buf);
  EXPECT_EQ(r.int32(), 0);
  EXPECT_EQ(r.error(), decode_error::truncated);
  EXPECT_EQ(r.int8(), 0);  // stays failed even though a byte was left
  EXPECT_EQ(r.error(), decode_error::truncated);
  EXPECT_EQ(r.remaining(), 0u);
}

TEST(Reader, StringLengthsBeyondTheBufferFail) {
  const auto classic_bytes = bytes({0x00, 0x10, 'a', 'b'});
  reader classic(classic_bytes);
  EXPECT_EQ(classic.string(false), "");
  EXPECT_EQ(classic.error(), decode_error::length_exceeds_remaining);
  const auto compact_bytes = bytes({0x7f, 'a'});
  reader compact(compact_bytes);
  compact.string(true);
  EXPECT_EQ(compact.error(), decode_error::length_exceeds_remaining);
  const auto negative_bytes = bytes({0xff, 0xfe});
  reader negative(negative_bytes);
  negative.string(false);
  EXPECT_EQ(negative.error(), decode_error::invalid_length);
}

TEST(Reader, StringsLongerThanKafkasLimitFailInEveryEncoding) {
  // Compact strings could announce any length; Kafka's readers take at most 32,767 bytes.
  for (const bool nullable : {false, true}) {
    writer w;
    w.string(std::string(max_string_bytes, 'a'), true);
    w.string(std::string(max_string_bytes + 1, 'b'), true);
    const auto buf = w.take();
    reader r(buf);
    EXPECT_EQ(r.nullable_string(true, nullable)->size(), max_string_bytes);
    EXPECT_TRUE(r.ok());
    r.nullable_string(true, nullable);
    EXPECT_EQ(r.error(), decode_error::string_too_long);
  }
  // A classic length past it is negative as an int16: refused too.
  const auto classic_bytes = bytes({0x80, 0x00});
  reader classic(classic_bytes);
  classic.string(false);
  EXPECT_EQ(classic.error(), decode_error::invalid_length);
}

TEST(Reader, NullIsAcceptedOnlyWhereNullable) {
  const auto ok_bytes = bytes({0xff, 0xff});
  reader ok(ok_bytes);
  EXPECT_FALSE(ok.nullable_string(false, true).has_value());
  EXPECT_TRUE(ok.ok());
  const auto bad_bytes = bytes({0xff, 0xff});
  reader bad(bad_bytes);
  bad.string(false);
  EXPECT_EQ(bad.error(), decode_error::null_in_non_nullable_field);
  const auto compact_null_bytes = bytes({0x00});
  reader compact_null(compact_null_bytes);
  EXPECT_FALSE(compact_null.nullable_bytes(true, true).has_value());
  EXPECT_TRUE(compact_null.ok());
}

TEST(Reader, ArrayCountsLargerThanTheBytesLeftFail) {
  // 0x7fffffff elements announced in 4 bytes: must fail fast, not allocate.
  const auto r_bytes = bytes({0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0});
  reader r(r_bytes);
  EXPECT_EQ(r.array_length(false, 4), 0);
  EXPECT_EQ(r.error(), decode_error::length_exceeds_remaining);
  metadata_request m;
  const auto r2_bytes = bytes({0x7f, 0xff, 0xff, 0xff, 0, 0});
  reader r2(r2_bytes);
  m.decode(r2, 1);
  EXPECT_EQ(r2.error(), decode_error::length_exceeds_remaining);
}

TEST(Reader, RecordDataIsAViewIntoTheBuffer) {
  const auto buf = bytes({0, 0, 0, 3, 7, 8, 9});
  reader r(buf);
  records_view v = r.records(false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(v.data(), buf.data() + 4);
  EXPECT_EQ(v.size(), 3u);
}

produce_request sample_produce(const std::vector<uint8_t>& records) {
  produce_request p;
  p.transactional_id = "tx";
  p.acks = -1;
  p.timeout_ms = 30000;
  auto& t = p.topic_data.emplace_back();
  t.name = "topic";
  auto& part = t.partition_data.emplace_back();
  part.index = 3;
  part.records = records_view(records);
  return p;
}

TEST(Reader, EveryTruncationOfAMessageFailsCleanly) {
  const std::vector<uint8_t> records(100, 0xab);
  for (int16_t version : {int16_t{3}, int16_t{9}}) {
    writer w;
    sample_produce(records).encode(w, version);
    const auto full = w.take();
    for (size_t n = 0; n < full.size(); ++n) {
      reader r(std::span<const uint8_t>(full).first(n));
      produce_request p;
      p.decode(r, version);
      EXPECT_FALSE(r.ok()) << "version " << version << " cut at " << n;
    }
  }
}

TEST(Writer, NullInANonNullableVersionIsAnError) {
  produce_request p = sample_produce({});
  p.topic_data[0].partition_data[0].records.reset();  // records are nullable: fine
  writer ok;
  p.encode(ok, 3);
  EXPECT_TRUE(ok.ok());
  metadata_request m;
  m.topics.reset();  // null topics ("all topics") exists from v1 on, not in v0
  writer w0;
  m.encode(w0, 0);
  EXPECT_EQ(w0.error(), encode_error::null_in_non_nullable_field);
  writer w1;
  m.encode(w1, 1);
  EXPECT_TRUE(w1.ok());
}

TEST(Writer, LargeRecordsCanBeReferencedInsteadOfCopied) {
  const std::vector<uint8_t> records(4096, 0x5a);
  const produce_request p = sample_produce(records);
  writer copied;
  p.encode(copied, 9);
  writer referenced;
  referenced.set_zero_copy_threshold(1024);
  p.encode(referenced, 9);
  ASSERT_EQ(referenced.segments().size(), 1u);
  EXPECT_EQ(referenced.segments()[0].data.data(), records.data());
  EXPECT_EQ(referenced.size() + records.size(), copied.size());
  EXPECT_EQ(referenced.take(), copied.take());
}

TEST(Writer, RecordsInPiecesAreWrittenInOrderLargeOnesReferenced) {
  std::vector<uint8_t> whole(4096 + 100 + 2048);
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<uint8_t>(i * 7);
  // Three buffers: large, small (copied), large.
  const std::vector<uint8_t> a(whole.begin(), whole.begin() + 4096);
  const std::vector<uint8_t> b(whole.begin() + 4096, whole.begin() + 4196);
  const std::vector<uint8_t> c(whole.begin() + 4196, whole.end());
  produce_request in_pieces = sample_produce({});
  in_pieces.topic_data[0].partition_data[0].records =
      records_view(std::vector<std::span<const uint8_t>>{a, b, c});
  EXPECT_EQ(in_pieces.topic_data[0].partition_data[0].records->size(), whole.size());
  EXPECT_EQ(in_pieces.topic_data[0].partition_data[0].records, records_view(whole));

  writer copied;
  sample_produce(whole).encode(copied, 9);
  writer referenced;
  referenced.set_zero_copy_threshold(1024);
  in_pieces.encode(referenced, 9);
  ASSERT_TRUE(referenced.ok());
  ASSERT_EQ(referenced.segments().size(), 2u);
  EXPECT_EQ(referenced.segments()[0].data.data(), a.data());
  EXPECT_EQ(referenced.segments()[1].data.data(), c.data());
  EXPECT_EQ(referenced.size() + a.size() + c.size(), copied.size());
  EXPECT_EQ(referenced.take(), copied.take());
}

TEST(TaggedFields, UnknownTagsArePreservedInOrderAroundKnownOnes) {
  // FetchResponse partition data (v12+) has known tags 0, 1 and 2.
  produce_request p = sample_produce({});
  p.unknown_tagged_fields = {{5, bytes({1, 2, 3})}, {90000, bytes({})}};
  writer w;
  p.encode(w, 9);
  const auto encoded = w.take();
  reader r(encoded);
  produce_request back;
  back.decode(r, 9);
  r.expect_end();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(back.unknown_tagged_fields, p.unknown_tagged_fields);
}

TEST(RequestHeader, VersionFollowsTheApisFlexibleVersions) {
  EXPECT_EQ(request_header_version(0, 8), 1);   // Produce v8: classic
  EXPECT_EQ(request_header_version(0, 9), 2);   // Produce v9: flexible
  EXPECT_EQ(request_header_version(18, 3), 2);  // ApiVersions v3
  EXPECT_EQ(request_header_version(18, 99), 2);
  EXPECT_EQ(request_header_version(9999, 0), -1);
  EXPECT_EQ(response_header_version(18, 3), 0);  // ApiVersions responses always use v0
  EXPECT_EQ(response_header_version(0, 9), 1);
  EXPECT_EQ(response_header_version(0, 8), 0);
}

TEST(RequestHeader, UnknownApiKeysAndTruncatedHeadersAreErrors) {
  EXPECT_EQ(parse_request_header(bytes({0x27, 0x0f, 0, 0, 0, 0, 0, 1})).error(),
            decode_error::unknown_api_key);
  EXPECT_EQ(parse_request_header(bytes({0, 0, 0})).error(), decode_error::truncated);
  EXPECT_EQ(parse_request_header(bytes({0, 0, 0, 9, 0, 0, 0, 1, 0})).error(),
            decode_error::truncated);
}

// A message of empty elements decodes to tens of times its size: its decoding fails past the
// budget (memory_base plus memory_per_byte per byte) instead of allocating it, while ordinary
// messages of the same API decode.
TEST(Reader, DecodingStopsAtTheMessagesMemoryBudget) {
  // DescribeConfigs v4 (flexible): resources of 4 bytes each (type, empty name, null keys, no
  // tags), each a struct of a hundred bytes or so in memory.
  auto request_of = [](size_t resources, const std::string& name) {
    writer w;
    w.uvarint(static_cast<uint32_t>(resources + 1));
    for (size_t i = 0; i < resources; ++i) {
      w.int8(2);  // TOPIC
      w.string(name, true);
      w.uvarint(0);  // null configuration_keys
      w.uvarint(0);  // no tagged fields
    }
    w.boolean(false);  // include_synonyms
    w.boolean(false);  // include_documentation
    w.uvarint(0);
    return w.take();
  };
  ASSERT_GT(sizeof(describe_configs_request_types::DescribeConfigsResource), memory_per_byte * 4);
  const auto hostile = request_of(1 << 20, "");
  describe_configs_request bad;
  reader r(hostile);
  bad.decode(r, 4);
  EXPECT_EQ(r.error(), decode_error::too_much_memory);
  EXPECT_LT(bad.resources.size(), size_t{1} << 20);

  const auto ordinary = request_of(2000, "orders-by-customer-region");
  describe_configs_request good;
  reader g(ordinary);
  good.decode(g, 4);
  EXPECT_TRUE(g.ok()) << decode_error_name(g.error());
  EXPECT_EQ(good.resources.size(), 2000u);
}

// Known tagged fields are read through sub-readers, which share the message's budget.
TEST(Reader, SubReadersShareTheBudget) {
  std::vector<uint8_t> b(64, 'x');
  reader r(b);
  reader inner = r.sub(32);
  EXPECT_TRUE(inner.charge(memory_base));
  EXPECT_FALSE(r.charge(memory_per_byte * 64 + 1)) << "the budget left is the parent's";
  EXPECT_EQ(r.error(), decode_error::too_much_memory);
}

}  // namespace
}  // namespace silt::protocol
