#include "net/sasl_session.h"

#include <algorithm>

#include "base/endian.h"
#include "protocol/generated/api_versions_request.h"
#include "protocol/generated/error_code.h"
#include "protocol/generated/sasl_authenticate_request.h"
#include "protocol/generated/sasl_authenticate_response.h"
#include "protocol/generated/sasl_handshake_request.h"
#include "protocol/generated/sasl_handshake_response.h"
#include "protocol/request_header.h"
#include "protocol/writer.h"

namespace silt::net {

namespace {

using protocol::error_code;

// A response frame: size, correlation id, the header's tagged fields when flexible, the body.
template <typename Resp>
std::vector<uint8_t> encode(int32_t correlation_id, int16_t version, const Resp& r) {
  protocol::writer w(r.encoded_size(version) + 16);
  w.int32(0);
  w.int32(correlation_id);
  if (protocol::response_header_version(Resp::api_key, version) >= 1) w.uvarint(0);
  r.encode(w, version);
  if (!w.ok()) return {};
  auto out = std::move(w.buffer());
  base::store_be<int32_t>(out.data(), static_cast<int32_t>(out.size() - 4));
  return out;
}

std::vector<uint8_t> bare_token(const std::vector<uint8_t>& bytes) {
  std::vector<uint8_t> out(4 + bytes.size());
  base::store_be<int32_t>(out.data(), static_cast<int32_t>(bytes.size()));
  std::copy(bytes.begin(), bytes.end(), out.begin() + 4);
  return out;
}

sasl_session::step refuse(std::string detail) {
  return {.what = sasl_session::action::refuse, .detail = std::move(detail)};
}

}  // namespace

sasl_session::sasl_session(std::shared_ptr<const sasl_options> options)
    : options_(std::move(options)) {}

bool sasl_session::begin_reauthentication(std::chrono::steady_clock::time_point now) {
  if (state_ != state::done || !can_reauthenticate_ || !expiry_) return false;
  if (last_reauthentication_ && now - *last_reauthentication_ < std::chrono::seconds(1)) {
    return false;
  }
  last_reauthentication_ = now;
  state_ = state::handshake;
  reauthenticating_ = true;
  exchange_.reset();
  return true;
}

sasl_session::step sasl_session::on_frame(std::span<const uint8_t> frame,
                                          std::chrono::system_clock::time_point now) {
  if (state_ == state::tokens) return token(frame, now);
  if (state_ == state::done || state_ == state::over) {
    return refuse("a SASL frame after the authentication ended");
  }
  auto h = protocol::parse_request_header(frame);
  if (!h) return refuse("a request header that does not parse during SASL authentication");
  const auto& header = h->header;
  const int32_t id = header.correlation_id;
  const int16_t version = header.request_api_version;
  switch (header.request_api_key) {
    case protocol::api_versions_request::api_key:
      if (state_ != state::handshake || reauthenticating_) {
        return refuse("ApiVersions after SaslHandshake");
      }
      return {.what = action::api_versions};
    case protocol::sasl_handshake_request::api_key:
      if (state_ != state::handshake) return refuse("a second SaslHandshake");
      return handshake(frame, id, version, h->header_size);
    case protocol::sasl_authenticate_request::api_key:
      if (state_ != state::authenticate) return refuse("SaslAuthenticate before SaslHandshake");
      return authenticate(frame, id, version, h->header_size, now);
    default:
      return refuse("a request of API key " + std::to_string(header.request_api_key) +
                    " before the client authenticated (Kafka closes such a connection)");
  }
}

sasl_session::step sasl_session::handshake(std::span<const uint8_t> frame, int32_t id,
                                           int16_t version, size_t header_size) {
  if (version < 0 || version > protocol::sasl_handshake_request::max_version) {
    return refuse("SaslHandshake v" + std::to_string(version));
  }
  protocol::sasl_handshake_request req;
  protocol::reader r(frame.subspan(header_size));
  req.decode(r, version);
  if (!r.ok()) return refuse("a SaslHandshake request that does not decode");
  protocol::sasl_handshake_response resp;
  const security::sasl_mechanism* chosen = nullptr;
  for (const auto& m : options_->mechanisms) {
    resp.mechanisms.emplace_back(m->name());
    if (m->name() == req.mechanism) chosen = m.get();
  }
  if (chosen == nullptr || (reauthenticating_ && req.mechanism != mechanism_)) {
    resp.error_code = static_cast<int16_t>(error_code::unsupported_sasl_mechanism);
    state_ = state::over;
    std::string shown = req.mechanism.substr(0, 64);
    return {.what = action::failed,
            .frame = encode(id, version, resp),
            .detail = reauthenticating_ && chosen != nullptr
                          ? "re-authentication with another mechanism (" + shown + ")"
                          : "unsupported SASL mechanism '" + shown + "'"};
  }
  mechanism_ = req.mechanism;
  exchange_ = chosen->start();
  state_ = version == 0 ? state::tokens : state::authenticate;
  return {.what = action::reply, .frame = encode(id, version, resp)};
}

bool sasl_session::same_principal(const security::sasl_result& r) const {
  return !reauthenticating_ || r.principal == principal_;
}

int64_t sasl_session::start_session(const security::sasl_result& r,
                                    std::chrono::system_clock::time_point now) {
  // Kafka's rule: the shorter of connections.max.reauth.ms (when set) and the credential's
  // remaining life (when it expires).
  std::optional<int64_t> lifetime;
  const auto it = options_->max_reauth.find(mechanism_);
  if (it != options_->max_reauth.end() && it->second.count() > 0) lifetime = it->second.count();
  if (r.expires) {
    const int64_t left = std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(*r.expires - now).count());
    lifetime = lifetime ? std::min(*lifetime, left) : left;
  }
  principal_ = r.principal;
  state_ = state::done;
  reauthenticating_ = false;
  exchange_.reset();
  if (!lifetime) {
    expiry_.reset();
    return 0;
  }
  expiry_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(*lifetime);
  return *lifetime;
}

sasl_session::step sasl_session::authenticate(std::span<const uint8_t> frame, int32_t id,
                                              int16_t version, size_t header_size,
                                              std::chrono::system_clock::time_point now) {
  if (version < 0 || version > protocol::sasl_authenticate_request::max_version) {
    return refuse("SaslAuthenticate v" + std::to_string(version));
  }
  protocol::sasl_authenticate_request req;
  protocol::reader r(frame.subspan(header_size));
  req.decode(r, version);
  if (!r.ok()) return refuse("a SaslAuthenticate request that does not decode");
  auto result = exchange_->step(req.auth_bytes);
  protocol::sasl_authenticate_response resp;  // error_message "" but on failure, as Kafka's
  if (result.status == security::sasl_result::state::done && !same_principal(result)) {
    result = security::sasl_result::fail(
        "Cannot change principals during re-authentication",
        "re-authentication as User:" + result.principal + " of a connection of User:" + principal_);
  }
  switch (result.status) {
    case security::sasl_result::state::more:
      resp.auth_bytes = std::move(result.reply);
      return {.what = action::reply, .frame = encode(id, version, resp)};
    case security::sasl_result::state::done:
      resp.auth_bytes = std::move(result.reply);
      resp.session_lifetime_ms = start_session(result, now);
      can_reauthenticate_ = version >= 1;
      return {.what = action::authenticated, .frame = encode(id, version, resp)};
    case security::sasl_result::state::failed:
      break;
  }
  state_ = state::over;
  resp.error_code = static_cast<int16_t>(error_code::sasl_authentication_failed);
  resp.error_message = result.error;
  return {.what = action::failed, .frame = encode(id, version, resp), .detail = result.detail};
}

sasl_session::step sasl_session::token(std::span<const uint8_t> frame,
                                       std::chrono::system_clock::time_point now) {
  auto result = exchange_->step(frame);
  if (result.status == security::sasl_result::state::done && !same_principal(result)) {
    result = security::sasl_result::fail("", "re-authentication as another principal");
  }
  switch (result.status) {
    case security::sasl_result::state::more:
      return {.what = action::reply, .frame = bare_token(result.reply)};
    case security::sasl_result::state::done: {
      auto reply = bare_token(result.reply);
      (void)start_session(result, now);
      can_reauthenticate_ = false;
      return {.what = action::authenticated, .frame = std::move(reply)};
    }
    case security::sasl_result::state::failed:
      break;
  }
  state_ = state::over;
  // Kafka answers a failed bare-token exchange with nothing: the connection just closes.
  return {.what = action::failed, .detail = result.detail};
}

}  // namespace silt::net
