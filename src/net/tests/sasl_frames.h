// SaslHandshake and SaslAuthenticate request frames, and their responses decoded, for the SASL
// tests of the connection and of its session.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "base/endian.h"
#include "protocol/generated/sasl_authenticate_request.h"
#include "protocol/generated/sasl_authenticate_response.h"
#include "protocol/generated/sasl_handshake_request.h"
#include "protocol/generated/sasl_handshake_response.h"
#include "protocol/writer.h"

namespace silt::net::testing {

// A request frame without its size prefix: header v1 (v2 for flexible versions), client id "t".
template <typename Req>
std::vector<uint8_t> request_body(const Req& r, int16_t version, int32_t correlation_id) {
  protocol::writer w(256);
  w.int16(Req::api_key);
  w.int16(version);
  w.int32(correlation_id);
  w.int16(1);
  w.int8('t');
  if (Req::first_flexible_version >= 0 && version >= Req::first_flexible_version) w.uvarint(0);
  r.encode(w, version);
  return std::move(w.buffer());
}

inline std::vector<uint8_t> handshake_body(std::string mechanism, int16_t version = 1,
                                           int32_t id = 1) {
  protocol::sasl_handshake_request r;
  r.mechanism = std::move(mechanism);
  return request_body(r, version, id);
}

inline std::vector<uint8_t> authenticate_body(std::string_view bytes, int16_t version = 2,
                                              int32_t id = 2) {
  protocol::sasl_authenticate_request r;
  r.auth_bytes.assign(bytes.begin(), bytes.end());
  return request_body(r, version, id);
}

// `body` with its size prefix.
inline std::vector<uint8_t> sized(const std::vector<uint8_t>& body) {
  std::vector<uint8_t> f(4 + body.size());
  base::store_be<int32_t>(f.data(), static_cast<int32_t>(body.size()));
  std::copy(body.begin(), body.end(), f.begin() + 4);
  return f;
}

// The body of a response frame (size, correlation id, tagged fields when flexible).
template <typename Resp>
Resp response_of(std::span<const uint8_t> frame, int16_t version, int32_t correlation_id) {
  EXPECT_GE(frame.size(), 8U);
  EXPECT_EQ(base::load_be<int32_t>(frame.data()), static_cast<int32_t>(frame.size() - 4));
  EXPECT_EQ(base::load_be<int32_t>(frame.data() + 4), correlation_id);
  size_t at = 8;
  if (Resp::first_flexible_version >= 0 && version >= Resp::first_flexible_version) ++at;
  protocol::reader r(frame.subspan(at));
  Resp out;
  out.decode(r, version);
  EXPECT_TRUE(r.ok());
  return out;
}

}  // namespace silt::net::testing
