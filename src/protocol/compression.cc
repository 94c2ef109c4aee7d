#include "protocol/compression.h"

#include <algorithm>
#include <cassert>
#include <climits>
#include <cstring>
#include <memory>
#include <new>

#include <lz4frame.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include "base/endian.h"
#include "protocol/reader.h"

namespace silt::protocol {

namespace {

using result = tl::expected<std::vector<uint8_t>, batch_error>;

tl::unexpected<batch_error> fail(batch_error e) {
  return tl::make_unexpected(e);
}

// The output of a streaming decompressor, grown on demand up to one byte past the limit:
// producing that byte proves the stream is too large without decompressing any further, and
// never allocating beyond it keeps a decompression bomb from costing more than the limit.
class bounded_output {
 public:
  // `reuse`: a buffer whose capacity is used first (its content is dropped).
  bounded_output(size_t max_out, size_t input_size, std::vector<uint8_t>&& reuse)
      : buf_(std::move(reuse)), max_(max_out), limit_(max_out == SIZE_MAX ? max_out : max_out + 1) {
    // Records compress a few times at most; start near that and double from there (within
    // the reused capacity, without allocating).
    const size_t guess = std::max<size_t>(input_size, 1024) * 4;
    buf_.clear();
    buf_.resize(std::min(limit_, guess));
  }

  // Free space at the end, grown when there is none; empty only when the limit is reached.
  std::span<uint8_t> space() {
    if (size_ == buf_.size() && buf_.size() < limit_) {
      buf_.resize(buf_.size() > limit_ / 2
                      ? limit_
                      : std::min(limit_, std::max<size_t>(buf_.size() * 2, 1024)));
    }
    return std::span<uint8_t>(buf_).subspan(size_);
  }
  void commit(size_t n) { size_ += n; }
  [[nodiscard]] bool exceeded() const { return size_ > max_; }

  std::vector<uint8_t> take() {
    buf_.resize(size_);
    return std::move(buf_);
  }

 private:
  std::vector<uint8_t> buf_;
  size_t size_ = 0;
  size_t max_;
  size_t limit_;
};

// zlib counts in uInt; larger buffers go in pieces.
uInt zlib_chunk(size_t n) {
  return static_cast<uInt>(std::min<size_t>(n, UINT_MAX));
}

constexpr uint8_t gzip_magic[2] = {0x1f, 0x8b};

result gzip_decompress(std::span<const uint8_t> in, size_t max_out, std::vector<uint8_t>&& reuse) {
  z_stream zs{};
  // 16 + MAX_WBITS: gzip wrapper only, as Java's GZIPInputStream.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw std::bad_alloc();
  const std::unique_ptr<z_stream, decltype(&inflateEnd)> guard(&zs, &inflateEnd);

  bounded_output out(max_out, in.size(), std::move(reuse));
  const uint8_t* next = in.data();
  size_t left = in.size();
  for (;;) {
    const std::span<uint8_t> space = out.space();
    if (out.exceeded()) return fail(batch_error::decompressed_too_large);
    zs.next_in = const_cast<Bytef*>(next);
    zs.avail_in = zlib_chunk(left);
    zs.next_out = space.data();
    zs.avail_out = zlib_chunk(space.size());
    const uInt in_before = zs.avail_in;
    const uInt out_before = zs.avail_out;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    next += in_before - zs.avail_in;
    left -= in_before - zs.avail_in;
    out.commit(out_before - zs.avail_out);
    if (out.exceeded()) return fail(batch_error::decompressed_too_large);

    if (rc == Z_STREAM_END) {
      if (left >= 2 && next[0] == gzip_magic[0] && next[1] == gzip_magic[1]) {
        // Another member: concatenated gzip members decompress to the concatenation.
        if (inflateReset(&zs) != Z_OK) return fail(batch_error::decompression_failed);
        continue;
      }
      // Bytes after the last member that do not start one are ignored, as Java's
      // GZIPInputStream (and so the Kafka broker) ignores them.
      break;
    }
    if (rc == Z_MEM_ERROR) throw std::bad_alloc();
    // Z_BUF_ERROR here means the input ended inside the stream: there was output space.
    if (rc != Z_OK) return fail(batch_error::decompression_failed);
  }
  return out.take();
}

std::vector<uint8_t> gzip_compress(std::span<const uint8_t> in) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    throw std::bad_alloc();
  }
  const std::unique_ptr<z_stream, decltype(&deflateEnd)> guard(&zs, &deflateEnd);

  std::vector<uint8_t> out(deflateBound(&zs, static_cast<uLong>(in.size())));
  size_t produced = 0;
  const uint8_t* next = in.data();
  size_t left = in.size();
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (produced == out.size()) out.resize(out.size() * 2);
    zs.next_in = const_cast<Bytef*>(next);
    zs.avail_in = zlib_chunk(left);
    zs.next_out = out.data() + produced;
    zs.avail_out = zlib_chunk(out.size() - produced);
    const uInt in_before = zs.avail_in;
    const uInt out_before = zs.avail_out;
    rc = deflate(&zs, left == zs.avail_in ? Z_FINISH : Z_NO_FLUSH);
    next += in_before - zs.avail_in;
    left -= in_before - zs.avail_in;
    produced += out_before - zs.avail_out;
    assert(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR);
  }
  out.resize(produced);
  return out;
}

// The xerial snappy-java stream header: magic, then int32 version and minimum compatible
// version (both 1 in every release).
constexpr uint8_t xerial_magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
constexpr size_t xerial_header_size = 16;
// snappy-java's default block size, which Kafka's Java client keeps.
constexpr size_t xerial_block_size = 32 * 1024;

bool is_xerial(std::span<const uint8_t> in) {
  return in.size() >= sizeof(xerial_magic) &&
         std::memcmp(in.data(), xerial_magic, sizeof(xerial_magic)) == 0;
}

// Appends one raw snappy block to `out` unless it would pass max_out.
tl::expected<void, batch_error> snappy_block(std::span<const uint8_t> block,
                                             std::vector<uint8_t>& out, size_t max_out) {
  const char* src = reinterpret_cast<const char*>(block.data());
  size_t n = 0;
  if (!snappy::GetUncompressedLength(src, block.size(), &n)) {
    return fail(batch_error::decompression_failed);
  }
  if (n > max_out - out.size()) return fail(batch_error::decompressed_too_large);
  const size_t at = out.size();
  out.resize(at + n);
  if (!snappy::RawUncompress(src, block.size(), reinterpret_cast<char*>(out.data() + at))) {
    return fail(batch_error::decompression_failed);
  }
  return {};
}

result snappy_decompress(std::span<const uint8_t> in, size_t max_out,
                         std::vector<uint8_t>&& reuse) {
  std::vector<uint8_t> out = std::move(reuse);
  out.clear();
  if (!is_xerial(in)) {
    // A raw block announces its length up front, so the limit is checked before allocating.
    auto ok = snappy_block(in, out, max_out);
    if (!ok) return fail(ok.error());
    return out;
  }
  reader r(in);
  while (r.remaining() > 0) {
    if (is_xerial(std::span(r.position(), r.remaining()))) {
      // A stream header; a later one starts a concatenated stream, as snappy-java reads it.
      r.raw(sizeof(xerial_magic));
      r.int32();  // version: snappy-java itself does not check it
      r.int32();  // minimum compatible version
      if (!r.ok()) return fail(batch_error::decompression_failed);
      continue;
    }
    const int32_t n = r.int32();
    if (n < 0) return fail(batch_error::decompression_failed);
    const std::span<const uint8_t> block = r.raw(static_cast<size_t>(n));
    if (!r.ok()) return fail(batch_error::decompression_failed);
    auto ok = snappy_block(block, out, max_out);
    if (!ok) return fail(ok.error());
  }
  return out;
}

std::vector<uint8_t> snappy_compress(std::span<const uint8_t> in) {
  std::vector<uint8_t> out(xerial_header_size);
  std::memcpy(out.data(), xerial_magic, sizeof(xerial_magic));
  base::store_be<int32_t>(out.data() + 8, 1);
  base::store_be<int32_t>(out.data() + 12, 1);
  for (size_t at = 0; at < in.size(); at += xerial_block_size) {
    const size_t n = std::min(xerial_block_size, in.size() - at);
    const size_t header = out.size();
    out.resize(header + 4 + snappy::MaxCompressedLength(n));
    size_t written = 0;
    snappy::RawCompress(reinterpret_cast<const char*>(in.data() + at), n,
                        reinterpret_cast<char*>(out.data() + header + 4), &written);
    base::store_be<int32_t>(out.data() + header, static_cast<int32_t>(written));
    out.resize(header + 4 + written);
  }
  return out;
}

result lz4_decompress(std::span<const uint8_t> in, size_t max_out, std::vector<uint8_t>&& reuse) {
  // One context per thread, reset for each batch: creating one costs an allocation.
  static thread_local const std::unique_ptr<LZ4F_dctx, decltype(&LZ4F_freeDecompressionContext)>
      ctx = [] {
        LZ4F_dctx* raw = nullptr;
        if (LZ4F_isError(LZ4F_createDecompressionContext(&raw, LZ4F_VERSION))) {
          throw std::bad_alloc();
        }
        return std::unique_ptr<LZ4F_dctx, decltype(&LZ4F_freeDecompressionContext)>(
            raw, &LZ4F_freeDecompressionContext);
      }();
  LZ4F_resetDecompressionContext(ctx.get());

  if (in.empty()) return fail(batch_error::decompression_failed);
  bounded_output out(max_out, in.size(), std::move(reuse));
  const uint8_t* next = in.data();
  size_t left = in.size();
  for (;;) {
    const std::span<uint8_t> space = out.space();
    if (out.exceeded()) return fail(batch_error::decompressed_too_large);
    size_t dst = space.size();
    size_t src = left;
    const size_t hint = LZ4F_decompress(ctx.get(), space.data(), &dst, next, &src, nullptr);
    if (LZ4F_isError(hint)) return fail(batch_error::decompression_failed);
    next += src;
    left -= src;
    out.commit(dst);
    if (out.exceeded()) return fail(batch_error::decompressed_too_large);
    if (hint == 0) {
      // A frame ended; the context starts over on the next one, if any.
      if (left == 0) break;
      continue;
    }
    // The frame wants more input; with output space left over, all it had is flushed.
    if (left == 0 && dst < space.size()) return fail(batch_error::decompression_failed);
    if (src == 0 && dst == 0) return fail(batch_error::decompression_failed);
  }
  return out.take();
}

std::vector<uint8_t> lz4_compress(std::span<const uint8_t> in) {
  // Independent 64 KiB blocks without checksums, as Kafka's KafkaLZ4BlockOutputStream.
  LZ4F_preferences_t prefs{};
  prefs.frameInfo.blockSizeID = LZ4F_max64KB;
  prefs.frameInfo.blockMode = LZ4F_blockIndependent;
  std::vector<uint8_t> out(LZ4F_compressFrameBound(in.size(), &prefs));
  const size_t n = LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), &prefs);
  if (LZ4F_isError(n)) throw std::bad_alloc();  // the bound makes any other error impossible
  out.resize(n);
  return out;
}

result zstd_decompress(std::span<const uint8_t> in, size_t max_out, std::vector<uint8_t>&& reuse) {
  // zstd's default window limit (128 MiB) bounds the memory a frame header can ask for. One
  // context per thread, reset for each batch: creating one costs allocations.
  static thread_local const std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> ctx(
      ZSTD_createDCtx(), &ZSTD_freeDCtx);
  if (!ctx) throw std::bad_alloc();
  ZSTD_DCtx_reset(ctx.get(), ZSTD_reset_session_only);

  if (in.empty()) return fail(batch_error::decompression_failed);
  bounded_output out(max_out, in.size(), std::move(reuse));
  ZSTD_inBuffer ib{in.data(), in.size(), 0};
  for (;;) {
    const std::span<uint8_t> space = out.space();
    if (out.exceeded()) return fail(batch_error::decompressed_too_large);
    ZSTD_outBuffer ob{space.data(), space.size(), 0};
    const size_t in_before = ib.pos;
    const size_t rc = ZSTD_decompressStream(ctx.get(), &ob, &ib);
    if (ZSTD_isError(rc)) return fail(batch_error::decompression_failed);
    out.commit(ob.pos);
    if (out.exceeded()) return fail(batch_error::decompressed_too_large);
    if (rc == 0) {
      // A frame is decoded and flushed; concatenated frames decode to the concatenation.
      if (ib.pos == ib.size) break;
      continue;
    }
    if (ib.pos == ib.size && ob.pos < ob.size) return fail(batch_error::decompression_failed);
    if (ib.pos == in_before && ob.pos == 0) return fail(batch_error::decompression_failed);
  }
  return out.take();
}

std::vector<uint8_t> zstd_compress(std::span<const uint8_t> in) {
  const std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> ctx(ZSTD_createCCtx(), &ZSTD_freeCCtx);
  if (!ctx) throw std::bad_alloc();
  // No content size in the frame header, as the Java client's streaming compressor writes it,
  // so that Silt's own batches exercise the same decoding path as the Java client's.
  ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_contentSizeFlag, 0);
  std::vector<uint8_t> out(ZSTD_compressBound(in.size()));
  const size_t n = ZSTD_compress2(ctx.get(), out.data(), out.size(), in.data(), in.size());
  if (ZSTD_isError(n)) throw std::bad_alloc();  // the bound makes any other error impossible
  out.resize(n);
  return out;
}

}  // namespace

std::string_view compression_codec_name(compression_codec c) {
  switch (c) {
    case compression_codec::none:
      return "none";
    case compression_codec::gzip:
      return "gzip";
    case compression_codec::snappy:
      return "snappy";
    case compression_codec::lz4:
      return "lz4";
    case compression_codec::zstd:
      return "zstd";
  }
  return "unknown";
}

std::string_view batch_error_name(batch_error e) {
  switch (e) {
    case batch_error::truncated:
      return "truncated";
    case batch_error::invalid_length:
      return "invalid length";
    case batch_error::legacy_magic:
      return "legacy magic (message format v0/v1)";
    case batch_error::unknown_magic:
      return "unknown magic";
    case batch_error::crc_mismatch:
      return "CRC mismatch";
    case batch_error::unknown_codec:
      return "unknown compression codec";
    case batch_error::decompression_failed:
      return "decompression failed";
    case batch_error::decompressed_too_large:
      return "decompressed records too large";
    case batch_error::invalid_record:
      return "invalid record";
    case batch_error::record_count_mismatch:
      return "record count mismatch";
  }
  return "unknown";
}

tl::expected<std::vector<uint8_t>, batch_error> decompress(compression_codec codec,
                                                           std::span<const uint8_t> in,
                                                           size_t max_out,
                                                           std::vector<uint8_t> reuse) {
  switch (codec) {
    case compression_codec::none:
      if (in.size() > max_out) return fail(batch_error::decompressed_too_large);
      reuse.assign(in.begin(), in.end());
      return reuse;
    case compression_codec::gzip:
      return gzip_decompress(in, max_out, std::move(reuse));
    case compression_codec::snappy:
      return snappy_decompress(in, max_out, std::move(reuse));
    case compression_codec::lz4:
      return lz4_decompress(in, max_out, std::move(reuse));
    case compression_codec::zstd:
      return zstd_decompress(in, max_out, std::move(reuse));
  }
  return fail(batch_error::unknown_codec);
}

std::vector<uint8_t> compress(compression_codec codec, std::span<const uint8_t> in) {
  switch (codec) {
    case compression_codec::none:
      return std::vector<uint8_t>(in.begin(), in.end());
    case compression_codec::gzip:
      return gzip_compress(in);
    case compression_codec::snappy:
      return snappy_compress(in);
    case compression_codec::lz4:
      return lz4_compress(in);
    case compression_codec::zstd:
      return zstd_compress(in);
  }
  assert(false && "compress() with an unassigned codec id");
  return {};
}

}  // namespace silt::protocol
