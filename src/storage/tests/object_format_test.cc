#include "storage/object_format.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/crc32c.h"
#include "base/endian.h"

namespace silt::storage {
namespace {

base::stream_id sid(uint64_t v) {
  return base::stream_id(v);
}

base::offset off(int64_t v) {
  return base::offset(v);
}

using bytes = std::vector<uint8_t>;

bytes random_bytes(std::mt19937_64& rng, size_t n) {
  bytes out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

bytes filled(size_t n, uint8_t value) {
  return bytes(n, value);
}

// An encoder written from docs/formats/object.md, independent of object_writer: it checks the
// writer against the document and builds indexes and footers the writer would never produce.
template <typename T>
void put_be(bytes& out, T v) {
  std::array<uint8_t, sizeof(T)> b;
  base::store_be(b.data(), v);
  out.insert(out.end(), b.begin(), b.end());
}

void seal(bytes& out, size_t from) {
  put_be<uint32_t>(out, base::crc32c(std::span<const uint8_t>(out).subspan(from)));
}

struct index_options {
  uint8_t version = 1;
  uint8_t reserved = 0;
  int64_t count_delta = 0;  // added to the true entry count
};

bytes encode_index(const std::vector<block_entry>& entries, index_options o = {}) {
  bytes out;
  out.push_back(o.version);
  out.insert(out.end(), 3, 0);
  out[1] = o.reserved;
  put_be<uint32_t>(out,
                   static_cast<uint32_t>(static_cast<int64_t>(entries.size()) + o.count_delta));
  for (const block_entry& e : entries) {
    put_be<uint64_t>(out, e.stream_id.value());
    put_be<int64_t>(out, e.start_offset.value());
    put_be<int64_t>(out, e.end_offset.value());
    put_be<uint64_t>(out, e.position);
    put_be<uint32_t>(out, e.size);
    put_be<int64_t>(out, e.max_timestamp);
  }
  seal(out, 0);
  return out;
}

struct footer_options {
  uint16_t version = 1;
  uint8_t reserved = 0;
};

bytes encode_footer(uint64_t index_position, uint32_t index_size, footer_options o = {}) {
  bytes out;
  put_be<uint64_t>(out, index_position);
  put_be<uint32_t>(out, index_size);
  put_be<uint16_t>(out, o.version);
  out.insert(out.end(), 22, 0);
  out[20] = o.reserved;
  seal(out, 0);
  for (char c : std::string_view("SILTOBJ1")) out.push_back(static_cast<uint8_t>(c));
  return out;
}

bytes block_of(std::span<const uint8_t> batches) {
  bytes out(batches.begin(), batches.end());
  put_be<uint32_t>(out, base::crc32c(batches));
  return out;
}

// The reader's path over a whole object: footer, then index, then every block.
struct read_block {
  block_entry entry;
  bytes batches;
};

tl::expected<std::vector<read_block>, object_format_error> read_object(
    std::span<const uint8_t> object) {
  if (object.size() < object_footer_size) return tl::unexpected(object_format_error::bad_footer);
  const auto footer = parse_footer(object.last(object_footer_size));
  if (!footer) return tl::unexpected(footer.error());
  if (footer->index_position + footer->index_size + object_footer_size != object.size()) {
    return tl::unexpected(object_format_error::bad_footer);
  }
  const auto index =
      parse_index(object.subspan(footer->index_position, footer->index_size), *footer);
  if (!index) return tl::unexpected(index.error());
  std::vector<read_block> out;
  for (const block_entry& e : *index) {
    const auto batches = open_block(e, object.subspan(e.position, e.size));
    if (!batches) return tl::unexpected(batches.error());
    out.push_back({e, bytes(batches->begin(), batches->end())});
  }
  return out;
}

// The pieces of a finished object, for corrupting one of them.
struct parsed_object {
  bytes object;
  object_footer footer;
  std::vector<block_entry> index;

  [[nodiscard]] std::span<const uint8_t> footer_bytes() const {
    return std::span(object).last(object_footer_size);
  }
  [[nodiscard]] std::span<const uint8_t> index_bytes() const {
    return std::span(object).subspan(footer.index_position, footer.index_size);
  }
};

parsed_object small_object() {
  std::mt19937_64 rng(7);
  object_writer w(256);
  for (uint64_t stream : {3u, 1u, 2u}) {
    int64_t offset = 100;
    for (int i = 0; i < 5; ++i) {
      EXPECT_TRUE(
          w.add(sid(stream), off(offset), off(offset + 4), 1000 + i, random_bytes(rng, 90)));
      offset += 4;
    }
  }
  parsed_object p;
  p.object = w.finish();
  p.footer = *parse_footer(std::span(p.object).last(object_footer_size));
  p.index = w.index();
  return p;
}

// Random adds to many streams, remembering what each stream got.
struct stream_expectation {
  base::offset start{};
  base::offset end{};
  int64_t max_timestamp = -1;
  bytes data;
};

TEST(ObjectFormat, RoundTripsManyStreamsAndBlocks) {
  std::mt19937_64 rng(42);
  constexpr uint32_t block_size = 8192;
  object_writer w(block_size);
  std::map<uint64_t, stream_expectation> expected;
  for (int i = 0; i < 3000; ++i) {
    const uint64_t stream = rng() % 40 * 1000003;  // spread ids, keep collisions
    const size_t n = rng() % 20 == 0 ? 1 + rng() % 30000 : 1 + rng() % 3000;
    const int64_t count = 1 + static_cast<int64_t>(rng() % 50);
    const int64_t timestamp = static_cast<int64_t>(rng() % 1'000'000'000'000);
    auto [it, inserted] = expected.try_emplace(stream);
    stream_expectation& s = it->second;
    if (inserted) s.start = s.end = off(static_cast<int64_t>(rng() % 1'000'000));
    const bytes data = random_bytes(rng, n);
    ASSERT_TRUE(w.add(sid(stream), s.end, s.end + count, timestamp, data));
    s.end += count;
    s.max_timestamp = std::max(s.max_timestamp, timestamp);
    s.data.insert(s.data.end(), data.begin(), data.end());
  }
  const size_t data_size = w.size();
  const bytes object = w.finish();

  const auto blocks = read_object(object);
  ASSERT_TRUE(blocks) << object_format_error_name(blocks.error());
  ASSERT_EQ(blocks->size(), w.index().size());
  std::map<uint64_t, stream_expectation> got;
  uint64_t position = 0;
  for (size_t i = 0; i < blocks->size(); ++i) {
    const read_block& b = (*blocks)[i];
    EXPECT_EQ(b.entry, w.index()[i]);
    // Blocks tile the data region in index order.
    EXPECT_EQ(b.entry.position, position);
    position += b.entry.size;
    auto [it, inserted] = got.try_emplace(b.entry.stream_id.value());
    stream_expectation& s = it->second;
    if (inserted) s.start = s.end = b.entry.start_offset;
    EXPECT_EQ(b.entry.start_offset, s.end) << "offsets continue from block to block";
    s.end = b.entry.end_offset;
    s.max_timestamp = std::max(s.max_timestamp, b.entry.max_timestamp);
    s.data.insert(s.data.end(), b.batches.begin(), b.batches.end());
  }
  EXPECT_EQ(position, data_size);
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [stream, want] : expected) {
    const stream_expectation& s = got[stream];
    EXPECT_EQ(s.start, want.start) << stream;
    EXPECT_EQ(s.end, want.end) << stream;
    EXPECT_EQ(s.max_timestamp, want.max_timestamp) << stream;
    EXPECT_TRUE(s.data == want.data) << stream;
  }
  EXPECT_GT(blocks->size(), 2 * expected.size()) << "the test should cut many blocks";
}

TEST(ObjectFormat, MatchesTheDocumentedLayout) {
  object_writer w(1024);
  const bytes a = filled(10, 0xaa);
  const bytes b = filled(7, 0xbb);
  ASSERT_TRUE(w.add(sid(9), off(50), off(52), 1700, a));
  ASSERT_TRUE(w.add(sid(4), off(0), off(3), 1600, b));
  const bytes object = w.finish();

  // Stream 4's block comes first: blocks are in (stream, offset) order, not add order.
  const std::vector<block_entry> entries = {
      {.stream_id = sid(4),
       .start_offset = off(0),
       .end_offset = off(3),
       .position = 0,
       .size = 11,
       .max_timestamp = 1600},
      {.stream_id = sid(9),
       .start_offset = off(50),
       .end_offset = off(52),
       .position = 11,
       .size = 14,
       .max_timestamp = 1700},
  };
  bytes want = block_of(b);
  const bytes block_a = block_of(a);
  want.insert(want.end(), block_a.begin(), block_a.end());
  const bytes index = encode_index(entries);
  EXPECT_EQ(index.size(), 8u + 2 * 44 + 4);
  want.insert(want.end(), index.begin(), index.end());
  const bytes footer = encode_footer(25, static_cast<uint32_t>(index.size()));
  want.insert(want.end(), footer.begin(), footer.end());
  EXPECT_EQ(object, want);
  EXPECT_EQ(w.index(), entries);
}

TEST(ObjectFormat, MatchesTheExampleInTheFormatDocument) {
  object_writer w;
  const bytes batches = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(w.add(sid(7), off(100), off(103), 1700000000000, batches));
  const bytes want = {
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x4f, 0x4d, 0xfb, 0xab,        // block
      0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,                    // index header
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07,                    // stream_id
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x64,                    // start_offset
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x67,                    // end_offset
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,                    // position
      0x00, 0x00, 0x00, 0x0a,                                            // size
      0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00,                    // max_timestamp
      0x36, 0x58, 0x5a, 0xfe,                                            // index_crc
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a,                    // index_position
      0x00, 0x00, 0x00, 0x38, 0x00, 0x01,                                // index_size, version
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // reserved: 11 zero bytes
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // and 11 more
      0x8a, 0xef, 0x8f, 0x10,                                            // footer_crc
      'S',  'I',  'L',  'T',  'O',  'B',  'J',  '1',                     // magic
  };
  EXPECT_EQ(w.finish(), want);
}

TEST(ObjectFormat, EmptyObjectHasAnEmptyIndex) {
  object_writer w;
  const bytes object = w.finish();
  EXPECT_EQ(object.size(), 12 + object_footer_size);
  const auto blocks = read_object(object);
  ASSERT_TRUE(blocks);
  EXPECT_TRUE(blocks->empty());
  EXPECT_TRUE(w.index().empty());
}

TEST(ObjectFormatError, EveryErrorHasAName) {
  for (auto e : {object_format_error::bad_footer, object_format_error::bad_index,
                 object_format_error::bad_block, object_format_error::out_of_order,
                 object_format_error::invalid_argument}) {
    EXPECT_NE(object_format_error_name(e), "unknown");
  }
}

// Block cutting.

// The batch bytes of each block of the last finished object.
std::vector<uint32_t> batch_sizes(const object_writer& w) {
  std::vector<uint32_t> out;
  for (const block_entry& e : w.index()) out.push_back(e.size - 4);
  return out;
}

TEST(ObjectWriter, MergesConsecutiveAddsOfAStreamUpToBlockSize) {
  object_writer w(100);
  for (int64_t i = 0; i < 7; ++i)
    ASSERT_TRUE(w.add(sid(1), off(i * 10), off(i * 10 + 10), i, filled(30, 1)));
  (void)w.finish();
  EXPECT_EQ(batch_sizes(w), (std::vector<uint32_t>{90, 90, 30}));
  ASSERT_EQ(w.index().size(), 3u);
  EXPECT_EQ(w.index()[0].start_offset, off(0));
  EXPECT_EQ(w.index()[0].end_offset, off(30));
  EXPECT_EQ(w.index()[1].start_offset, off(30));
  EXPECT_EQ(w.index()[1].end_offset, off(60));
  EXPECT_EQ(w.index()[2].start_offset, off(60));
  EXPECT_EQ(w.index()[2].end_offset, off(70));
}

TEST(ObjectWriter, BlockThatReachesBlockSizeTakesNoMoreAdds) {
  object_writer w(100);
  ASSERT_TRUE(w.add(sid(1), off(0), off(1), 0, filled(50, 1)));
  ASSERT_TRUE(w.add(sid(1), off(1), off(2), 0, filled(50, 2)));
  ASSERT_TRUE(w.add(sid(1), off(2), off(3), 0, filled(1, 3)));
  (void)w.finish();
  EXPECT_EQ(batch_sizes(w), (std::vector<uint32_t>{100, 1}));
}

TEST(ObjectWriter, AddLargerThanBlockSizeIsABlockOfItsOwn) {
  object_writer w(100);
  ASSERT_TRUE(w.add(sid(1), off(0), off(1), 0, filled(10, 1)));
  ASSERT_TRUE(w.add(sid(1), off(1), off(2), 0, filled(250, 2)));
  ASSERT_TRUE(w.add(sid(1), off(2), off(3), 0, filled(10, 3)));
  ASSERT_TRUE(w.add(sid(1), off(3), off(4), 0, filled(10, 4)));
  const bytes object = w.finish();
  EXPECT_EQ(batch_sizes(w), (std::vector<uint32_t>{10, 250, 20}));
  const auto blocks = read_object(object);
  ASSERT_TRUE(blocks);
  EXPECT_EQ((*blocks)[1].batches, filled(250, 2)) << "an add is never split";
}

TEST(ObjectWriter, BlocksNeverMixStreamsAndAreLaidOutByStream) {
  object_writer w(100);
  ASSERT_TRUE(w.add(sid(2), off(0), off(1), 0, filled(10, 0x21)));
  ASSERT_TRUE(w.add(sid(1), off(5), off(6), 0, filled(10, 0x11)));
  ASSERT_TRUE(w.add(sid(2), off(1), off(2), 0, filled(10, 0x22)));
  ASSERT_TRUE(w.add(sid(1), off(6), off(7), 0, filled(10, 0x12)));
  const bytes object = w.finish();
  const auto blocks = read_object(object);
  ASSERT_TRUE(blocks);
  ASSERT_EQ(blocks->size(), 2u);
  // Interleaved adds of a stream still share its block.
  EXPECT_EQ((*blocks)[0].entry.stream_id, sid(1));
  bytes want1 = filled(10, 0x11);
  want1.resize(20, 0x12);
  EXPECT_EQ((*blocks)[0].batches, want1);
  EXPECT_EQ((*blocks)[1].entry.stream_id, sid(2));
  bytes want2 = filled(10, 0x21);
  want2.resize(20, 0x22);
  EXPECT_EQ((*blocks)[1].batches, want2);
}

TEST(ObjectWriter, BlockMaxTimestampIsTheLargestOfItsAdds) {
  object_writer w(100);
  ASSERT_TRUE(w.add(sid(1), off(0), off(1), 500, filled(10, 1)));
  ASSERT_TRUE(w.add(sid(1), off(1), off(2), 900, filled(10, 1)));
  ASSERT_TRUE(w.add(sid(1), off(2), off(3), 700, filled(10, 1)));
  ASSERT_TRUE(w.add(sid(2), off(0), off(1), -1, filled(10, 1)));
  (void)w.finish();
  ASSERT_EQ(w.index().size(), 2u);
  EXPECT_EQ(w.index()[0].max_timestamp, 900);
  EXPECT_EQ(w.index()[1].max_timestamp, -1);
}

TEST(ObjectWriter, SizeCountsBatchesAndBlockChecksums) {
  object_writer w(100);
  EXPECT_EQ(w.size(), 0u);
  ASSERT_TRUE(w.add(sid(1), off(0), off(1), 0, filled(60, 1)));
  EXPECT_EQ(w.size(), 64u);
  ASSERT_TRUE(w.add(sid(1), off(1), off(2), 0, filled(30, 1)));  // same block
  EXPECT_EQ(w.size(), 94u);
  ASSERT_TRUE(w.add(sid(1), off(2), off(3), 0, filled(30, 1)));  // a new block
  EXPECT_EQ(w.size(), 128u);
  const bytes object = w.finish();
  EXPECT_EQ(object.size(), 128 + 8 + 2 * 44 + 4 + object_footer_size);
}

TEST(ObjectWriter, FinishStartsANewObject) {
  object_writer w(100);
  ASSERT_TRUE(w.add(sid(1), off(10), off(20), 0, filled(10, 1)));
  const bytes first = w.finish();
  EXPECT_EQ(w.size(), 0u);
  // A stream's offsets are checked within one object only.
  ASSERT_TRUE(w.add(sid(1), off(0), off(5), 0, filled(10, 2)));
  const bytes second = w.finish();
  ASSERT_EQ(w.index().size(), 1u);
  EXPECT_EQ(w.index()[0].start_offset, off(0));
  const auto blocks = read_object(second);
  ASSERT_TRUE(blocks);
  EXPECT_EQ((*blocks)[0].batches, filled(10, 2));
  EXPECT_TRUE(read_object(first));
}

TEST(ObjectWriter, RejectsAddsThatDoNotContinueTheStream) {
  object_writer w(100);
  ASSERT_TRUE(w.add(sid(1), off(10), off(20), 0, filled(10, 1)));
  ASSERT_TRUE(w.add(sid(2), off(0), off(5), 0, filled(10, 2)));
  const size_t size = w.size();
  EXPECT_EQ(w.add(sid(1), off(21), off(30), 0, filled(10, 3)).error(),
            object_format_error::out_of_order)
      << "a gap";
  EXPECT_EQ(w.add(sid(1), off(19), off(30), 0, filled(10, 3)).error(),
            object_format_error::out_of_order)
      << "an overlap";
  EXPECT_EQ(w.add(sid(1), off(10), off(20), 0, filled(10, 3)).error(),
            object_format_error::out_of_order)
      << "a repeat";
  EXPECT_EQ(w.add(sid(1), off(0), off(10), 0, filled(10, 3)).error(),
            object_format_error::out_of_order)
      << "data before the stream's start";
  EXPECT_EQ(w.size(), size) << "a failed add changes nothing";
  ASSERT_TRUE(w.add(sid(1), off(20), off(30), 0, filled(10, 4)));
  const auto blocks = read_object(w.finish());
  ASSERT_TRUE(blocks);
  ASSERT_EQ(blocks->size(), 2u);
  bytes want = filled(10, 1);
  want.resize(20, 4);
  EXPECT_EQ((*blocks)[0].batches, want);
  EXPECT_EQ((*blocks)[0].entry.end_offset, off(30));
}

TEST(ObjectWriter, RejectsEmptyAndNegativeRanges) {
  object_writer w(100);
  EXPECT_EQ(w.add(sid(1), off(0), off(1), 0, {}).error(), object_format_error::invalid_argument);
  EXPECT_EQ(w.add(sid(1), off(5), off(5), 0, filled(1, 1)).error(),
            object_format_error::invalid_argument);
  EXPECT_EQ(w.add(sid(1), off(5), off(4), 0, filled(1, 1)).error(),
            object_format_error::invalid_argument);
  EXPECT_EQ(w.add(sid(1), off(-1), off(4), 0, filled(1, 1)).error(),
            object_format_error::invalid_argument);
  EXPECT_EQ(w.size(), 0u);
  const auto blocks = read_object(w.finish());
  ASSERT_TRUE(blocks);
  EXPECT_TRUE(blocks->empty()) << "the rejected stream was never started";
}

// Gather finish: the same bytes as finish(), without copying the batches.

// Random adds of views to a few streams, in an interleaved order; `data` keeps the bytes.
void add_random(object_writer& w, std::mt19937_64& rng, std::vector<bytes>& data, bool views) {
  std::map<uint64_t, int64_t> ends;
  for (int i = 0; i < 300; ++i) {
    const uint64_t stream = rng() % 5;
    const int64_t start = ends[stream];
    const int64_t count = 1 + static_cast<int64_t>(rng() % 9);
    data.push_back(random_bytes(rng, 1 + rng() % 3000));
    const auto r = views ? w.add_view(sid(stream), off(start), off(start + count), i, data.back())
                         : w.add(sid(stream), off(start), off(start + count), i, data.back());
    ASSERT_TRUE(r);
    ends[stream] = start + count;
  }
}

TEST(ObjectWriter, FinishPartsIsByteForByteFinish) {
  for (const uint32_t block_size : {1u, 100u, 4096u, 1u << 20}) {
    std::mt19937_64 rng(block_size);
    std::vector<bytes> data;
    object_writer copying(block_size);
    add_random(copying, rng, data, false);
    const bytes want = copying.finish();
    const auto want_index = copying.index();

    rng.seed(block_size);
    std::vector<bytes> kept;
    kept.reserve(300);  // the views must not move
    object_writer viewing(block_size);
    add_random(viewing, rng, kept, true);
    const size_t blocks_size = viewing.size();
    const object_parts got = viewing.finish_parts();
    EXPECT_EQ(viewing.size(), 0u);
    EXPECT_EQ(viewing.index(), want_index);
    EXPECT_EQ(got.size, want.size());
    EXPECT_EQ(got.size, blocks_size + 12 + 44 * want_index.size() + object_footer_size);
    size_t sum = 0;
    for (const auto& part : got.parts) sum += part.size();
    EXPECT_EQ(sum, got.size);
    EXPECT_EQ(got.concatenate(), want) << "block size " << block_size;
    // No batch was copied: every batch lies in the parts where the caller keeps it.
    size_t views = 0;
    for (const auto& part : got.parts) {
      for (const bytes& b : kept) views += part.data() == b.data() ? 1 : 0;
    }
    EXPECT_EQ(views, kept.size()) << "block size " << block_size;
    EXPECT_TRUE(got.owners.empty());
    EXPECT_TRUE(read_object(want));
  }
}

TEST(ObjectWriter, FinishPartsHandsOnTheOwners) {
  object_writer w(64);
  {
    auto a = std::make_shared<const bytes>(filled(100, 1));
    auto b = std::make_shared<const bytes>(filled(30, 2));
    ASSERT_TRUE(w.add_view(sid(1), off(0), off(1), 0, *a, a));
    ASSERT_TRUE(w.add_view(sid(2), off(0), off(1), 0, std::span(*b).first(10), b));
    ASSERT_TRUE(w.add_view(sid(2), off(1), off(2), 0, std::span(*b).subspan(10), b));
    EXPECT_EQ(a.use_count(), 2) << "the writer holds the owner";
  }
  // The writer's owners are all that keep the bytes alive now (ASan checks the reads).
  object_parts p = w.finish_parts();
  EXPECT_EQ(p.owners.size(), 2u) << "one entry per owner in a row";
  object_parts moved = std::move(p);  // a move keeps the views valid
  const bytes object = moved.concatenate();
  const auto blocks = read_object(object);
  ASSERT_TRUE(blocks);
  ASSERT_EQ(blocks->size(), 2u);
  EXPECT_EQ((*blocks)[0].batches, filled(100, 1));
  EXPECT_EQ((*blocks)[1].batches, filled(30, 2));
  // Views that touch are merged: stream 2's two adds, and the last checksum with the index
  // (the owned pieces are checksums, index, footer, back to back).
  EXPECT_EQ(moved.parts.size(), 4u) << "a, crc, b, crc+index+footer";
}

TEST(ObjectWriter, FinishPartsOfAnEmptyObject) {
  object_writer w;
  const object_parts p = w.finish_parts();
  EXPECT_EQ(p.parts.size(), 1u);
  EXPECT_EQ(p.concatenate(), object_writer().finish());
  EXPECT_EQ(p.size, 12 + object_footer_size);
}

// find_blocks.

std::vector<block_entry> sample_index() {
  std::vector<block_entry> index;
  uint64_t position = 0;
  auto add = [&](uint64_t stream, int64_t start, int64_t end, uint32_t size) {
    index.push_back({.stream_id = sid(stream),
                     .start_offset = off(start),
                     .end_offset = off(end),
                     .position = position,
                     .size = size,
                     .max_timestamp = -1});
    position += size;
  };
  add(1, 0, 10, 100);
  add(1, 10, 20, 100);
  add(1, 20, 30, 100);
  add(2, 5, 8, 50);
  add(3, 100, 110, 100);
  add(3, 110, 120, 100);
  return index;
}

std::vector<std::pair<int64_t, int64_t>> ranges(std::span<const block_entry> blocks) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const block_entry& e : blocks)
    out.emplace_back(e.start_offset.value(), e.end_offset.value());
  return out;
}

using range_list = std::vector<std::pair<int64_t, int64_t>>;

TEST(FindBlocks, StartsAtTheBlockHoldingTheOffset) {
  const auto index = sample_index();
  EXPECT_EQ(ranges(find_blocks(index, sid(1), off(0), 1)), (range_list{{0, 10}}));
  EXPECT_EQ(ranges(find_blocks(index, sid(1), off(9), 1)), (range_list{{0, 10}}));
  EXPECT_EQ(ranges(find_blocks(index, sid(1), off(10), 1)), (range_list{{10, 20}}));
  EXPECT_EQ(ranges(find_blocks(index, sid(1), off(29), 1)), (range_list{{20, 30}}));
  EXPECT_EQ(ranges(find_blocks(index, sid(2), off(7), 1)), (range_list{{5, 8}}));
  EXPECT_EQ(ranges(find_blocks(index, sid(3), off(115), 1)), (range_list{{110, 120}}));
}

TEST(FindBlocks, ReturnsOneBlockEvenWhenItExceedsMaxBytes) {
  const auto index = sample_index();
  EXPECT_EQ(ranges(find_blocks(index, sid(1), off(15), 0)), (range_list{{10, 20}}));
  EXPECT_EQ(ranges(find_blocks(index, sid(1), off(15), 99)), (range_list{{10, 20}}));
}

TEST(FindBlocks, AddsBlocksUntilMaxBytesIsReached) {
  const auto index = sample_index();
  EXPECT_EQ(ranges(find_blocks(index, sid(1), off(0), 100)), (range_list{{0, 10}}));
  EXPECT_EQ(ranges(find_blocks(index, sid(1), off(0), 101)), (range_list{{0, 10}, {10, 20}}));
  EXPECT_EQ(ranges(find_blocks(index, sid(1), off(0), 200)), (range_list{{0, 10}, {10, 20}}));
  EXPECT_EQ(ranges(find_blocks(index, sid(1), off(5), 201)),
            (range_list{{0, 10}, {10, 20}, {20, 30}}));
}

TEST(FindBlocks, NeverCrossesIntoAnotherStream) {
  const auto index = sample_index();
  EXPECT_EQ(ranges(find_blocks(index, sid(1), off(15), 1 << 30)), (range_list{{10, 20}, {20, 30}}));
  EXPECT_EQ(ranges(find_blocks(index, sid(2), off(5), 1 << 30)), (range_list{{5, 8}}));
  EXPECT_EQ(ranges(find_blocks(index, sid(3), off(100), 1 << 30)),
            (range_list{{100, 110}, {110, 120}}));
}

TEST(FindBlocks, FindsNothingForOffsetsTheObjectDoesNotHold) {
  const auto index = sample_index();
  EXPECT_TRUE(find_blocks(index, sid(1), off(30), 1000).empty()) << "the stream's end";
  EXPECT_TRUE(find_blocks(index, sid(1), off(-1), 1000).empty());
  EXPECT_TRUE(find_blocks(index, sid(2), off(4), 1000).empty()) << "before the stream's start";
  EXPECT_TRUE(find_blocks(index, sid(2), off(8), 1000).empty());
  EXPECT_TRUE(find_blocks(index, sid(0), off(0), 1000).empty()) << "a stream before all";
  EXPECT_TRUE(find_blocks(index, sid(4), off(0), 1000).empty()) << "a stream after all";
  const std::vector<block_entry> empty;
  EXPECT_TRUE(find_blocks(empty, sid(1), off(0), 1000).empty());
}

TEST(FindBlocks, PointsIntoTheIndexOfARealObject) {
  std::mt19937_64 rng(3);
  object_writer w(4096);
  std::map<uint64_t, int64_t> ends;
  for (int i = 0; i < 500; ++i) {
    const uint64_t stream = rng() % 10;
    int64_t& end = ends[stream];
    const int64_t count = 1 + static_cast<int64_t>(rng() % 20);
    ASSERT_TRUE(
        w.add(sid(stream), off(end), off(end + count), 0, random_bytes(rng, 1 + rng() % 2000)));
    end += count;
  }
  const bytes object = w.finish();
  const auto footer = parse_footer(std::span(object).last(object_footer_size));
  ASSERT_TRUE(footer);
  const auto index =
      parse_index(std::span(object).subspan(footer->index_position, footer->index_size), *footer);
  ASSERT_TRUE(index);
  for (const auto& [stream, end] : ends) {
    for (int64_t offset = 0; offset < end; ++offset) {
      const auto found = find_blocks(*index, sid(stream), off(offset), 10000);
      ASSERT_FALSE(found.empty());
      EXPECT_EQ(found.front().stream_id, sid(stream));
      EXPECT_LE(found.front().start_offset, off(offset));
      EXPECT_GT(found.front().end_offset, off(offset));
      // The blocks found are adjacent in the object: one ranged read fetches them.
      for (size_t i = 1; i < found.size(); ++i) {
        EXPECT_EQ(found[i].position, found[i - 1].position + found[i - 1].size);
        EXPECT_EQ(found[i].start_offset, found[i - 1].end_offset);
      }
    }
    EXPECT_TRUE(find_blocks(*index, sid(stream), off(end), 10000).empty());
  }
}

// Corruption: every single-byte change and every truncation is detected.

TEST(ObjectCorruption, EveryFlippedFooterBitIsABadFooter) {
  const parsed_object p = small_object();
  ASSERT_TRUE(parse_footer(p.footer_bytes()));
  for (size_t i = 0; i < object_footer_size; ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      bytes footer(p.footer_bytes().begin(), p.footer_bytes().end());
      footer[i] ^= static_cast<uint8_t>(1u << bit);
      const auto parsed = parse_footer(footer);
      ASSERT_FALSE(parsed) << "byte " << i << " bit " << bit;
      EXPECT_EQ(parsed.error(), object_format_error::bad_footer);
    }
  }
}

TEST(ObjectCorruption, EveryFlippedIndexBitIsABadIndex) {
  const parsed_object p = small_object();
  ASSERT_EQ(parse_index(p.index_bytes(), p.footer), p.index);
  for (size_t i = 0; i < p.index_bytes().size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      bytes index(p.index_bytes().begin(), p.index_bytes().end());
      index[i] ^= static_cast<uint8_t>(1u << bit);
      const auto parsed = parse_index(index, p.footer);
      ASSERT_FALSE(parsed) << "byte " << i << " bit " << bit;
      EXPECT_EQ(parsed.error(), object_format_error::bad_index);
    }
  }
}

TEST(ObjectCorruption, EveryFlippedBlockBitIsABadBlock) {
  const parsed_object p = small_object();
  ASSERT_GT(p.index.size(), 3u);
  for (const block_entry& e : p.index) {
    const auto good = std::span(p.object).subspan(e.position, e.size);
    ASSERT_TRUE(open_block(e, good));
    for (size_t i = 0; i < good.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        bytes block(good.begin(), good.end());
        block[i] ^= static_cast<uint8_t>(1u << bit);
        const auto opened = open_block(e, block);
        ASSERT_FALSE(opened) << "block at " << e.position << " byte " << i << " bit " << bit;
        EXPECT_EQ(opened.error(), object_format_error::bad_block);
      }
    }
  }
}

TEST(ObjectCorruption, EveryTruncatedObjectIsRejected) {
  const parsed_object p = small_object();
  ASSERT_TRUE(read_object(p.object));
  for (size_t n = 0; n < p.object.size(); ++n) {
    EXPECT_FALSE(read_object(std::span(p.object).first(n))) << "first " << n << " bytes";
    EXPECT_FALSE(read_object(std::span(p.object).last(n))) << "last " << n << " bytes";
  }
}

TEST(ObjectCorruption, EveryTruncatedPartIsRejected) {
  const parsed_object p = small_object();
  for (size_t n = 0; n <= 2 * object_footer_size; ++n) {
    if (n == object_footer_size) continue;
    const bytes footer = n < object_footer_size
                             ? bytes(p.footer_bytes().begin(), p.footer_bytes().begin() + n)
                             : bytes(p.object.end() - static_cast<ptrdiff_t>(n), p.object.end());
    EXPECT_EQ(parse_footer(footer).error(), object_format_error::bad_footer) << n;
  }
  const auto index = p.index_bytes();
  for (size_t n = 0; n < index.size(); ++n) {
    EXPECT_EQ(parse_index(index.first(n), p.footer).error(), object_format_error::bad_index) << n;
    // Also when the footer agrees with the shorter length.
    object_footer f = p.footer;
    f.index_size = static_cast<uint32_t>(n);
    EXPECT_EQ(parse_index(index.first(n), f).error(), object_format_error::bad_index) << n;
    EXPECT_EQ(parse_index(index.last(n), f).error(), object_format_error::bad_index) << n;
  }
  for (const block_entry& e : p.index) {
    const auto block = std::span(p.object).subspan(e.position, e.size);
    for (size_t n = 0; n < block.size(); ++n) {
      EXPECT_EQ(open_block(e, block.first(n)).error(), object_format_error::bad_block) << n;
      block_entry shorter = e;
      shorter.size = static_cast<uint32_t>(n);
      EXPECT_EQ(open_block(shorter, block.first(n)).error(), object_format_error::bad_block) << n;
    }
  }
}

TEST(ObjectCorruption, BlockOfAnotherSizeThanItsEntryIsABadBlock) {
  const parsed_object p = small_object();
  const block_entry& e = p.index[0];
  EXPECT_EQ(open_block(e, std::span(p.object).subspan(e.position, e.size + 1)).error(),
            object_format_error::bad_block);
  const auto empty_batches = block_of({});
  block_entry empty = e;
  empty.size = 4;
  EXPECT_EQ(open_block(empty, empty_batches).error(), object_format_error::bad_block)
      << "a block holds at least one byte of batches";
}

// Checksummed but malformed: what only the structural checks catch.

TEST(ObjectCorruption, FooterWithAValidChecksumIsStillChecked) {
  EXPECT_TRUE(parse_footer(encode_footer(0, 12)));
  EXPECT_EQ(parse_footer(encode_footer(0, 12)), (object_footer{0, 12}));
  EXPECT_FALSE(parse_footer(encode_footer(0, 12, {.version = 2}))) << "unknown version";
  EXPECT_FALSE(parse_footer(encode_footer(0, 12, {.version = 0})));
  EXPECT_FALSE(parse_footer(encode_footer(0, 12, {.reserved = 1}))) << "reserved bits set";
  EXPECT_FALSE(parse_footer(encode_footer(0, 11))) << "too small for any index";
  EXPECT_FALSE(parse_footer(encode_footer(std::numeric_limits<uint64_t>::max() - 20, 12)))
      << "an index past the end of any object";
}

block_entry entry(uint64_t stream, int64_t start, int64_t end, uint64_t position, uint32_t size) {
  return {.stream_id = sid(stream),
          .start_offset = off(start),
          .end_offset = off(end),
          .position = position,
          .size = size,
          .max_timestamp = 0};
}

object_footer footer_for(const bytes& index, uint64_t data_size) {
  return {.index_position = data_size, .index_size = static_cast<uint32_t>(index.size())};
}

TEST(ObjectCorruption, IndexWithAValidChecksumIsStillChecked) {
  const std::vector<block_entry> good = {entry(1, 0, 10, 0, 100), entry(1, 10, 20, 100, 100),
                                         entry(2, 0, 5, 200, 50)};
  const auto parses = [](const std::vector<block_entry>& entries, uint64_t data_size = 250,
                         index_options o = {}) {
    const bytes index = encode_index(entries, o);
    return parse_index(index, footer_for(index, data_size)).has_value();
  };
  EXPECT_TRUE(parses(good));
  EXPECT_TRUE(parses(good, 1000)) << "blocks may leave bytes of the data region unused";
  EXPECT_TRUE(parses({entry(1, 0, 10, 0, 100), entry(1, 15, 20, 150, 100)}))
      << "gaps between blocks, in offsets and in bytes, are allowed";
  EXPECT_TRUE(parses({}, 0));

  EXPECT_FALSE(parses(good, 249)) << "a block past the data region";
  EXPECT_FALSE(parses(good, 0, {.version = 2})) << "unknown version";
  EXPECT_FALSE(parses(good, 250, {.reserved = 1}));
  EXPECT_FALSE(parses(good, 250, {.count_delta = 1})) << "count larger than the entries";
  EXPECT_FALSE(parses(good, 250, {.count_delta = -1})) << "count smaller than the entries";
  EXPECT_FALSE(parses(good, 250, {.count_delta = int64_t{1} << 31}));

  EXPECT_FALSE(parses({entry(2, 0, 5, 0, 50), entry(1, 0, 10, 50, 100)})) << "streams unsorted";
  EXPECT_FALSE(parses({entry(1, 10, 20, 0, 100), entry(1, 0, 10, 100, 100)})) << "offsets unsorted";
  EXPECT_FALSE(parses({entry(1, 0, 10, 0, 100), entry(1, 9, 20, 100, 100)})) << "offsets overlap";
  EXPECT_FALSE(parses({entry(1, 0, 10, 0, 100), entry(1, 0, 10, 100, 100)})) << "a repeated block";
  EXPECT_FALSE(parses({entry(1, 0, 10, 0, 100), entry(2, 0, 10, 99, 100)})) << "bytes overlap";
  EXPECT_FALSE(parses({entry(1, 0, 10, 100, 100), entry(2, 0, 10, 0, 100)}))
      << "blocks not in index order";
  EXPECT_FALSE(parses({entry(1, 0, 10, 0, 4)})) << "a block without batches";
  EXPECT_FALSE(parses({entry(1, 0, 10, 0, 0)}));
  EXPECT_FALSE(parses({entry(1, 5, 5, 0, 100)})) << "an empty offset range";
  EXPECT_FALSE(parses({entry(1, 5, 4, 0, 100)})) << "a reversed offset range";
  EXPECT_FALSE(parses({entry(1, -5, 4, 0, 100)})) << "a negative offset";
  EXPECT_FALSE(parses({entry(1, 0, 10, std::numeric_limits<uint64_t>::max() - 10, 100)},
                      std::numeric_limits<uint64_t>::max() - 1000))
      << "a block whose end overflows";

  const bytes index = encode_index(good);
  object_footer f = footer_for(index, 250);
  f.index_size += 1;
  EXPECT_FALSE(parse_index(index, f)) << "not the size the footer gives";
}

// Random inputs: never a crash or an out-of-bounds read (the sanitizer builds check the
// latter), and whatever parses satisfies the format's invariants.

void expect_valid_index(const std::vector<block_entry>& index, uint64_t data_end) {
  for (size_t i = 0; i < index.size(); ++i) {
    const block_entry& e = index[i];
    ASSERT_GE(e.start_offset, off(0));
    ASSERT_LT(e.start_offset, e.end_offset);
    ASSERT_GT(e.size, 4u);
    ASSERT_LE(e.position + e.size, data_end);
    if (i == 0) continue;
    const block_entry& prev = index[i - 1];
    ASSERT_TRUE(prev.stream_id < e.stream_id ||
                (prev.stream_id == e.stream_id && prev.end_offset <= e.start_offset));
    ASSERT_GE(e.position, prev.position + prev.size);
  }
}

TEST(ObjectFuzz, RandomFootersNeverCrash) {
  std::mt19937_64 rng(11);
  int parsed = 0;
  for (int i = 0; i < 5000; ++i) {
    bytes footer;
    switch (i % 3) {
      case 0:  // garbage
        footer = random_bytes(rng, rng() % 64);
        break;
      case 1:  // garbage behind a valid checksum and magic
        footer = random_bytes(rng, 36);
        seal(footer, 0);
        for (char c : std::string_view("SILTOBJ1")) footer.push_back(static_cast<uint8_t>(c));
        break;
      default:  // plausible fields
        footer = encode_footer(rng() >> (rng() % 64), static_cast<uint32_t>(rng() >> (rng() % 64)),
                               {.version = static_cast<uint16_t>(rng() % 3),
                                .reserved = static_cast<uint8_t>(rng() % 4 == 0)});
        break;
    }
    const auto f = parse_footer(footer);
    if (!f) {
      EXPECT_EQ(f.error(), object_format_error::bad_footer);
      continue;
    }
    ++parsed;
    EXPECT_GE(f->index_size, 12u);
    EXPECT_LE(f->index_position,
              std::numeric_limits<uint64_t>::max() - f->index_size - object_footer_size);
  }
  EXPECT_GT(parsed, 100) << "the inputs should reach past the checksum";
}

// A random index that is often close to valid, so that every check gets exercised.
std::vector<block_entry> random_entries(std::mt19937_64& rng) {
  std::vector<block_entry> entries(rng() % 12);
  uint64_t stream = rng() % 3;
  base::offset offset = off(static_cast<int64_t>(rng() % 100));
  uint64_t position = 0;
  for (block_entry& e : entries) {
    const auto small = [&](uint64_t n) { return rng() % n; };
    if (small(3) == 0) stream += small(3);
    e.stream_id = sid(stream);
    e.start_offset = offset + static_cast<int64_t>(small(3)) - 1;
    e.end_offset = e.start_offset + static_cast<int64_t>(small(20)) - 1;
    offset = e.end_offset;
    e.position = position + small(3) - (small(8) == 0 ? 1 : 0);
    e.size = static_cast<uint32_t>(small(200));
    position = e.position + e.size;
    e.max_timestamp = static_cast<int64_t>(rng());
    if (small(20) == 0) {  // a wild field
      switch (small(6)) {
        case 0:
          e.stream_id = sid(rng());
          break;
        case 1:
          e.start_offset = off(static_cast<int64_t>(rng()));
          break;
        case 2:
          e.end_offset = off(static_cast<int64_t>(rng()));
          break;
        case 3:
          e.position = rng();
          break;
        case 4:
          e.size = static_cast<uint32_t>(rng());
          break;
        default:
          e.start_offset = off(std::numeric_limits<int64_t>::min());
          break;
      }
    }
  }
  return entries;
}

TEST(ObjectFuzz, RandomIndexesNeverCrash) {
  std::mt19937_64 rng(12);
  int parsed = 0;
  for (int i = 0; i < 5000; ++i) {
    bytes index;
    object_footer footer;
    footer.index_position = rng() % 2 == 0 ? rng() % 3000 : rng();
    if (i % 4 == 0) {
      index = random_bytes(rng, rng() % 200);
      if (rng() % 2 == 0) seal(index, 0);
    } else {
      index =
          encode_index(random_entries(rng),
                       {.version = static_cast<uint8_t>(rng() % 10 == 0 ? 2 : 1),
                        .count_delta = rng() % 10 == 0 ? static_cast<int64_t>(rng() % 5) - 2 : 0});
    }
    footer.index_size = static_cast<uint32_t>(rng() % 20 == 0 ? rng() % 300 : index.size());
    const auto entries = parse_index(index, footer);
    if (!entries) {
      EXPECT_EQ(entries.error(), object_format_error::bad_index);
      continue;
    }
    ++parsed;
    expect_valid_index(*entries, footer.index_position);
    // find_blocks on whatever parsed stays inside it.
    for (const block_entry& e : *entries) {
      const auto found = find_blocks(*entries, e.stream_id, e.start_offset, rng() % 500);
      ASSERT_FALSE(found.empty());
      EXPECT_EQ(found.front(), e);
    }
  }
  EXPECT_GT(parsed, 500) << "the inputs should reach past the structural checks";
}

TEST(ObjectFuzz, RandomBlocksNeverCrash) {
  std::mt19937_64 rng(13);
  int opened = 0;
  for (int i = 0; i < 5000; ++i) {
    bytes block = random_bytes(rng, rng() % 64);
    if (i % 2 == 0 && !block.empty()) {
      block = block_of(std::span(block).first(block.size() - 1));
    }
    block_entry e;
    e.size = static_cast<uint32_t>(rng() % 4 == 0 ? rng() % 80 : block.size());
    const auto batches = open_block(e, block);
    if (!batches) {
      EXPECT_EQ(batches.error(), object_format_error::bad_block);
      continue;
    }
    ++opened;
    EXPECT_EQ(batches->data(), block.data());
    EXPECT_EQ(batches->size() + 4, block.size());
  }
  EXPECT_GT(opened, 500);
}

TEST(ObjectFuzz, RandomlyDamagedObjectsNeverCrash) {
  std::mt19937_64 rng(14);
  const parsed_object p = small_object();
  for (int i = 0; i < 3000; ++i) {
    bytes object = p.object;
    const int changes = 1 + static_cast<int>(rng() % 4);
    for (int c = 0; c < changes; ++c) object[rng() % object.size()] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) object.resize(rng() % object.size());
    const auto blocks = read_object(object);
    if (blocks && object != p.object) {
      // A change may hit bytes no check covers only if it left the object as it was.
      ADD_FAILURE() << "a damaged object was read";
    }
  }
}

}  // namespace
}  // namespace silt::storage
