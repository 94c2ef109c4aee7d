// The compression codecs of Kafka record batches, and the errors of the record batch layer.
//
// A compressed batch carries its records (everything after the 61-byte header) as one
// compressed stream in the codec's container format, as the Java client writes it:
//
//   gzip    RFC 1952 members
//   snappy  xerial framing: 0x82 "SNAPPY" 0x00, int32 version, int32 minimum compatible
//           version, then blocks of int32 compressed length + raw snappy block. librdkafka
//           sends one raw snappy block without framing; both are accepted.
//   lz4     LZ4 frames (not the raw LZ4 block format)
//   zstd    zstd frames, the content size possibly absent (the Java client streams)
//
// Concatenated members, streams or frames decompress to the concatenation, as the Java
// client's input streams read them.
//
// Decompression treats its input as hostile: it never reads outside `in`, and stops with
// decompressed_too_large as soon as the output would pass `max_out`, so a small batch cannot
// make the broker allocate more than the caller allows. Functions are stateless and
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

namespace silt::protocol {

// The codec id in bits 0-2 of a batch's attributes. Ids 5-7 are unassigned.
enum class compression_codec : uint8_t { none = 0, gzip = 1, snappy = 2, lz4 = 3, zstd = 4 };

// Kafka's name of the codec ("none", "gzip", ...); "unknown" for an unassigned id.
[[nodiscard]] std::string_view compression_codec_name(compression_codec c);

// Why a record batch (or its compressed records) was rejected. to_error_code() in
// record_batch.h gives the Kafka error code a broker answers with.
enum class batch_error : uint8_t {
  truncated,               // the buffer ends inside a batch
  invalid_length,          // batch length negative or shorter than the v2 header
  legacy_magic,            // magic 0 or 1: a message set of the pre-0.11 formats
  unknown_magic,           // magic other than 0, 1 or 2
  crc_mismatch,            // CRC32C of attributes..end differs from the header's
  unknown_codec,           // compression id 5, 6 or 7
  decompression_failed,    // the compressed records are corrupt or cut short
  decompressed_too_large,  // the records would decompress to more than the allowed bytes
  invalid_record,          // a record's fields do not fit or do not fill its length
  record_count_mismatch,   // the records do not number records_count
};

[[nodiscard]] std::string_view batch_error_name(batch_error e);

// The decompressed content of `in`, or decompressed_too_large when it would exceed `max_out`
// bytes, or decompression_failed when `in` is not a complete, valid stream of the codec.
// An unassigned codec id gives unknown_codec; `none` returns a copy of `in`. The output is
// built in `reuse` (a previous output, say), so that its capacity saves allocations.
[[nodiscard]] tl::expected<std::vector<uint8_t>, batch_error> decompress(
    compression_codec codec, std::span<const uint8_t> in, size_t max_out,
    std::vector<uint8_t> reuse = {});

// `in` compressed in the format the Java client writes (see above), at each library's default
// level. Compressing cannot fail; `codec` must be an assigned id.
[[nodiscard]] std::vector<uint8_t> compress(compression_codec codec, std::span<const uint8_t> in);

}  // namespace silt::protocol
