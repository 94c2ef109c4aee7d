// Request and response headers: which header version goes with an API version, and parsing
// the header at the front of a request frame.
#pragma once

#include <cstdint>
#include <span>

#include <tl/expected.hpp>

#include "protocol/generated/request_header.h"
#include "protocol/reader.h"

namespace silt::protocol {

// The request header version of `api_key` at `api_version`: 2 from the API's first flexible
// version on (also for versions above the highest known, as Kafka does), else 1. -1 when the
// API is not in the table.
[[nodiscard]] int16_t request_header_version(int16_t api_key, int16_t api_version);

// The response header version: 1 for flexible versions, else 0; ApiVersions always uses 0 so
// that a client can read the error of a version the broker does not support.
[[nodiscard]] int16_t response_header_version(int16_t api_key, int16_t api_version);

struct parsed_request_header {
  request_header header;
  int16_t header_version = 0;
  size_t header_size = 0;  // the body starts at this offset of the frame
};

// Parses the header of a request frame (the bytes after the 4-byte length). Fails on a
// truncated header or an API key that is not in the table (the broker closes the connection
// then, as Kafka does).
[[nodiscard]] tl::expected<parsed_request_header, decode_error> parse_request_header(
    std::span<const uint8_t> frame);

}  // namespace silt::protocol
