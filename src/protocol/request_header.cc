#include "protocol/request_header.h"

#include "protocol/generated/api_table.h"

namespace silt::protocol {

int16_t request_header_version(int16_t api_key, int16_t api_version) {
  const api_info* api = find_api(api_key);
  if (api == nullptr) return -1;
  const bool flexible =
      api->first_flexible_version >= 0 && api_version >= api->first_flexible_version;
  return flexible ? 2 : 1;
}

int16_t response_header_version(int16_t api_key, int16_t api_version) {
  if (api_key == static_cast<int16_t>(api_key::api_versions)) return 0;
  const api_info* api = find_api(api_key);
  if (api == nullptr) return 0;
  const bool flexible =
      api->first_flexible_version >= 0 && api_version >= api->first_flexible_version;
  return flexible ? 1 : 0;
}

tl::expected<parsed_request_header, decode_error> parse_request_header(
    std::span<const uint8_t> frame) {
  reader peek(frame);
  const int16_t key = peek.int16();
  const int16_t version = peek.int16();
  if (!peek.ok()) return tl::unexpected(decode_error::truncated);
  parsed_request_header out;
  out.header_version = request_header_version(key, version);
  if (out.header_version < 0) return tl::unexpected(decode_error::unknown_api_key);
  reader r(frame);
  out.header.decode(r, out.header_version);
  if (!r.ok()) return tl::unexpected(r.error());
  out.header_size = frame.size() - r.remaining();
  return out;
}

}  // namespace silt::protocol
