// SASL/OAUTHBEARER (RFC 7628) on the broker's side, as Kafka's OAuthBearerSaslServer runs it
// with OAuthBearerValidatorCallbackHandler: the client sends a JWT, which is verified against
// the identity provider's JWKS (jwks.h) and checked (jwt.h).
//
// The client's message (Kafka's OAuthBearerClientInitialResponse), in ASCII:
//
//   message = "n," ["a=" saslname] "," %x01 *(key "=" value %x01) %x01
//   saslname = 1*(%x01-2B / %x2D-3C / %x3E-7F / "=2C" / "=3D")    ; no "," nor bare "="
//   key = 1*ALPHA
//   value = 1*(%x21-7E / SP / HTAB / CR / LF)
//
// with a key "auth" whose value is `scheme 1*SP token`, the scheme "Bearer" in any case and the
// token RFC 6750's b64token (1*(ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/") *"="). A key
// given twice counts once, with its last value; keys other than auth are SASL extensions,
// accepted and ignored as Kafka's validator accepts and ignores them.
//
// The exchange, step by step:
// - a valid token: done; the principal is the token's subject claim, `expires` its exp (the
//   connection ends the session then), no reply bytes;
// - a token that does not validate (or no key for it: the JWKS is then refreshed early, see
//   jwks.h): a challenge carrying {"status":"invalid_token"}, the RFC 7628 error; the client
//   answers it with the single byte %x01 and fails with that same JSON as the error message,
//   which is what Kafka's broker sends (a SaslAuthenticationException of that message). Any
//   other answer starts over as a new first message, as in Kafka;
// - a message that does not parse: failed, with the message Kafka gives a SaslException
//   (invalid_credentials_message);
// - an authorization id ("a=") that is not the token's principal: failed, with Kafka's words.
// A validation never waits on the network (the JWKS is in memory) and is bounded by the token's
// size cap (jwt_options::max_token_bytes).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

#include "security/jwks.h"
#include "security/jwt.h"
#include "security/sasl.h"

namespace silt::security {

// The error a client gets in the challenge after a token that does not validate, and then as
// the error message of the failed authentication.
inline constexpr std::string_view oauthbearer_invalid_token = R"({"status":"invalid_token"})";

// A client's message, parsed.
struct oauthbearer_message {
  std::string authzid;  // empty when the client gave none; as sent (=2C and =3D not decoded)
  std::string token;
  std::vector<std::pair<std::string, std::string>> extensions;  // in the order sent
};

// `message` parsed by the grammar above; the error says where it fails (never quoting it).
[[nodiscard]] tl::expected<oauthbearer_message, std::string> parse_oauthbearer_message(
    std::span<const uint8_t> message);

struct oauthbearer_options {
  jwks_options jwks;
  jwt_options token;
};

// Shared by every connection of the listeners that enable OAUTHBEARER; thread-safe.
class oauthbearer_mechanism final : public sasl_mechanism {
 public:
  // A mechanism with its JWKS source opened (the first load happens here, on the caller's
  // thread: a network fetch for an http(s) URL); the error says why it cannot be.
  [[nodiscard]] static tl::expected<std::unique_ptr<oauthbearer_mechanism>, std::string> open(
      oauthbearer_options options);
  // A mechanism over a source already open (listeners with the same JWKS URL may share one, as
  // Kafka shares one key resolver per configuration).
  oauthbearer_mechanism(std::shared_ptr<jwks_source> keys, jwt_options options);

  [[nodiscard]] std::string_view name() const override { return "OAUTHBEARER"; }
  [[nodiscard]] std::unique_ptr<sasl_exchange> start() const override;

  [[nodiscard]] const std::shared_ptr<jwks_source>& keys() const;

  // What every exchange reads (shared with them, so that an exchange may outlive the mechanism).
  struct state {
    std::shared_ptr<jwks_source> keys;
    jwt_options options;
  };

 private:
  std::shared_ptr<const state> state_;
};

}  // namespace silt::security
