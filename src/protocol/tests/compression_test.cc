// The codecs: round trips, the container formats Kafka clients use (xerial and raw snappy,
// LZ4 frames, multi-member gzip, zstd with and without a content size), output limits, and
// corrupt or truncated input.
#include "protocol/compression.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <snappy.h>
#include <zstd.h>

#include "base/endian.h"

namespace silt::protocol {
namespace {

constexpr compression_codec compressed_codecs[] = {compression_codec::gzip,
                                                   compression_codec::snappy,
                                                   compression_codec::lz4, compression_codec::zstd};

// Text-like bytes: compressible, but not trivially.
std::vector<uint8_t> sample(size_t n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  static constexpr char words[][8] = {"kafka", "silt", "record", "batch", "offset", "topic"};
  std::vector<uint8_t> out;
  out.reserve(n + 8);
  while (out.size() < n) {
    const char* w = words[rng() % std::size(words)];
    out.insert(out.end(), w, w + std::strlen(w));
    out.push_back(static_cast<uint8_t>(rng()));
  }
  out.resize(n);
  return out;
}

std::vector<uint8_t> concat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class Codec : public testing::TestWithParam<compression_codec> {};

TEST_P(Codec, RoundTripsAtEverySize) {
  // Sizes around the xerial (32 KiB) and LZ4 (64 KiB) block sizes.
  for (size_t n : {0, 1, 100, 32 * 1024 - 1, 32 * 1024, 32 * 1024 + 1, 64 * 1024 + 7, 300000}) {
    const std::vector<uint8_t> in = sample(n);
    const std::vector<uint8_t> packed = compress(GetParam(), in);
    auto out = decompress(GetParam(), packed, in.size());
    ASSERT_TRUE(out.has_value()) << n << ": " << batch_error_name(out.error());
    EXPECT_EQ(*out, in) << n;
  }
}

TEST_P(Codec, OutputLimitIsExact) {
  const std::vector<uint8_t> in = sample(50000);
  const std::vector<uint8_t> packed = compress(GetParam(), in);
  auto fits = decompress(GetParam(), packed, in.size());
  ASSERT_TRUE(fits.has_value());
  EXPECT_EQ(fits->size(), in.size());
  auto over = decompress(GetParam(), packed, in.size() - 1);
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error(), batch_error::decompressed_too_large);
  auto none = decompress(GetParam(), packed, 0);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error(), batch_error::decompressed_too_large);
}

TEST_P(Codec, BombIsStoppedAtTheLimit) {
  const std::vector<uint8_t> zeros(32 << 20, 0);
  const std::vector<uint8_t> packed = compress(GetParam(), zeros);
  EXPECT_LT(packed.size(), zeros.size() / 10);
  auto out = decompress(GetParam(), packed, 1 << 20);
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error(), batch_error::decompressed_too_large);
}

TEST_P(Codec, ConcatenatedStreamsDecompressToTheConcatenation) {
  const std::vector<uint8_t> a = sample(1000, 1);
  const std::vector<uint8_t> b = sample(70000, 2);
  const std::vector<uint8_t> packed = concat(compress(GetParam(), a), compress(GetParam(), b));
  auto out = decompress(GetParam(), packed, 1 << 20);
  ASSERT_TRUE(out.has_value()) << batch_error_name(out.error());
  EXPECT_EQ(*out, concat(a, b));
}

TEST_P(Codec, EmptyInputIsNotAStream) {
  auto out = decompress(GetParam(), {}, 1 << 20);
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error(), batch_error::decompression_failed);
}

TEST_P(Codec, EveryTruncationIsRejectedOrAWholeBlockPrefix) {
  const std::vector<uint8_t> in = sample(40000);
  const std::vector<uint8_t> packed = compress(GetParam(), in);
  for (size_t n = 0; n < packed.size(); ++n) {
    // Exactly n bytes, so that ASan sees any read past them.
    const std::vector<uint8_t> cut(packed.begin(), packed.begin() + static_cast<ptrdiff_t>(n));
    auto out = decompress(GetParam(), cut, 1 << 20);
    if (!out) {
      EXPECT_EQ(out.error(), batch_error::decompression_failed) << n;
      continue;
    }
    // Only xerial framing has boundaries where a stream may end: after its header or a block.
    EXPECT_EQ(GetParam(), compression_codec::snappy) << n;
    EXPECT_LT(out->size(), in.size()) << n;
    EXPECT_TRUE(std::equal(out->begin(), out->end(), in.begin())) << n;
  }
}

TEST_P(Codec, CorruptInputNeverReadsOutOfBounds) {
  const std::vector<uint8_t> in = sample(3000);
  const std::vector<uint8_t> packed = compress(GetParam(), in);
  std::mt19937 rng(7);
  for (size_t i = 0; i < packed.size(); ++i) {
    for (uint8_t x : {uint8_t{0x01}, uint8_t{0x80}, static_cast<uint8_t>(rng() | 1)}) {
      std::vector<uint8_t> bad = packed;
      bad[i] ^= x;
      auto out = decompress(GetParam(), bad, 1 << 20);
      if (out) {
        EXPECT_LE(out->size(), size_t{1} << 20);
      }
    }
  }
}

TEST_P(Codec, OutputIsBuiltInTheReusedBuffer) {
  const auto in = sample(10000);
  const std::vector<uint8_t> packed = compress(GetParam(), in);
  std::vector<uint8_t> reuse;
  reuse.reserve(1 << 20);
  const uint8_t* const storage = reuse.data();
  auto out = decompress(GetParam(), packed, 1 << 20, std::move(reuse));
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, in);
  EXPECT_EQ(out->data(), storage);  // no allocation: the reused capacity held it
}

TEST_P(Codec, AFailedStreamLeavesNothingForTheNext) {
  // The decompression contexts are kept per thread: a stream cut short must not leave state
  // that the next one would continue.
  const auto in = sample(5000);
  const std::vector<uint8_t> packed = compress(GetParam(), in);
  const std::span<const uint8_t> cut(packed.data(), packed.size() / 2);
  EXPECT_FALSE(decompress(GetParam(), cut, 1 << 20));
  auto out = decompress(GetParam(), packed, 1 << 20);
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, in);
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, Codec, testing::ValuesIn(compressed_codecs),
                         [](const testing::TestParamInfo<compression_codec>& info) {
                           return std::string(compression_codec_name(info.param));
                         });

TEST(Compression, NoneCopiesWithinTheLimit) {
  const std::vector<uint8_t> in = sample(100);
  EXPECT_EQ(compress(compression_codec::none, in), in);
  auto out = decompress(compression_codec::none, in, 100);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(*out, in);
  auto over = decompress(compression_codec::none, in, 99);
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error(), batch_error::decompressed_too_large);
}

TEST(Compression, UnassignedCodecIdsAreRejected) {
  for (uint8_t id : {5, 6, 7, 255}) {
    auto out = decompress(static_cast<compression_codec>(id), sample(10), 100);
    ASSERT_FALSE(out.has_value());
    EXPECT_EQ(out.error(), batch_error::unknown_codec);
    EXPECT_EQ(compression_codec_name(static_cast<compression_codec>(id)), "unknown");
  }
}

TEST(Compression, SnappyIsXerialFramedLikeTheJavaClient) {
  const std::vector<uint8_t> in = sample(80000);
  const std::vector<uint8_t> packed = compress(compression_codec::snappy, in);
  ASSERT_GE(packed.size(), 16u);
  const uint8_t magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
  EXPECT_EQ(std::memcmp(packed.data(), magic, 8), 0);
  EXPECT_EQ(base::load_be<int32_t>(packed.data() + 8), 1);
  EXPECT_EQ(base::load_be<int32_t>(packed.data() + 12), 1);
  // Blocks of 32 KiB input, each an int32 length and a raw snappy block.
  size_t at = 16;
  size_t blocks = 0;
  size_t total = 0;
  while (at < packed.size()) {
    const auto n = static_cast<size_t>(base::load_be<int32_t>(packed.data() + at));
    size_t block = 0;
    ASSERT_TRUE(snappy::GetUncompressedLength(reinterpret_cast<const char*>(packed.data() + at + 4),
                                              n, &block));
    EXPECT_LE(block, 32u * 1024);
    total += block;
    at += 4 + n;
    ++blocks;
  }
  EXPECT_EQ(at, packed.size());
  EXPECT_EQ(blocks, 3u);
  EXPECT_EQ(total, in.size());
}

// librdkafka sends one raw snappy block, without xerial framing.
TEST(Compression, RawSnappyBlockIsAccepted) {
  const std::vector<uint8_t> in = sample(100000);
  std::string packed;
  snappy::Compress(reinterpret_cast<const char*>(in.data()), in.size(), &packed);
  const std::vector<uint8_t> bytes(packed.begin(), packed.end());
  auto out = decompress(compression_codec::snappy, bytes, in.size());
  ASSERT_TRUE(out.has_value()) << batch_error_name(out.error());
  EXPECT_EQ(*out, in);
  // The length a raw block announces is checked before anything is allocated.
  auto over = decompress(compression_codec::snappy, bytes, in.size() - 1);
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error(), batch_error::decompressed_too_large);
}

TEST(Compression, XerialBlockLengthsBeyondTheInputAreRejected) {
  std::vector<uint8_t> packed = compress(compression_codec::snappy, sample(1000));
  for (int32_t length :
       {-1, std::numeric_limits<int32_t>::min(), 1 << 30, static_cast<int32_t>(packed.size())}) {
    std::vector<uint8_t> bad = packed;
    base::store_be(bad.data() + 16, length);
    auto out = decompress(compression_codec::snappy, bad, 1 << 20);
    ASSERT_FALSE(out.has_value()) << length;
    EXPECT_EQ(out.error(), batch_error::decompression_failed);
  }
}

TEST(Compression, ZstdFramesHaveNoContentSizeLikeTheJavaClient) {
  const std::vector<uint8_t> packed = compress(compression_codec::zstd, sample(5000));
  EXPECT_EQ(ZSTD_getFrameContentSize(packed.data(), packed.size()), ZSTD_CONTENTSIZE_UNKNOWN);
}

TEST(Compression, ZstdFramesWithAContentSizeDecompress) {
  const std::vector<uint8_t> in = sample(5000);
  std::vector<uint8_t> packed(ZSTD_compressBound(in.size()));
  const size_t n = ZSTD_compress(packed.data(), packed.size(), in.data(), in.size(), 3);
  ASSERT_FALSE(ZSTD_isError(n));
  packed.resize(n);
  ASSERT_EQ(ZSTD_getFrameContentSize(packed.data(), packed.size()), in.size());
  auto out = decompress(compression_codec::zstd, packed, in.size());
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(*out, in);
  auto over = decompress(compression_codec::zstd, packed, in.size() - 1);
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error(), batch_error::decompressed_too_large);
}

// Java's GZIPInputStream, and so the Kafka broker, ignores bytes after the last member.
TEST(Compression, BytesAfterTheLastGzipMemberAreIgnored) {
  const std::vector<uint8_t> in = sample(2000);
  const std::vector<uint8_t> packed =
      concat(compress(compression_codec::gzip, in), std::vector<uint8_t>{0, 0, 0, 0});
  auto out = decompress(compression_codec::gzip, packed, 1 << 20);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(*out, in);
}

TEST(Compression, GzipMemberCutShortAfterAWholeOneIsRejected) {
  const std::vector<uint8_t> one = compress(compression_codec::gzip, sample(2000, 1));
  std::vector<uint8_t> two = compress(compression_codec::gzip, sample(2000, 2));
  two.resize(two.size() / 2);
  auto out = decompress(compression_codec::gzip, concat(one, two), 1 << 20);
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error(), batch_error::decompression_failed);
}

TEST(Compression, TrailingGarbageAfterAnLz4OrZstdFrameIsRejected) {
  for (compression_codec c : {compression_codec::lz4, compression_codec::zstd}) {
    const std::vector<uint8_t> packed =
        concat(compress(c, sample(2000)), std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8});
    auto out = decompress(c, packed, 1 << 20);
    ASSERT_FALSE(out.has_value()) << compression_codec_name(c);
    EXPECT_EQ(out.error(), batch_error::decompression_failed);
  }
}

}  // namespace
}  // namespace silt::protocol
