// JSON Web Tokens (RFC 7519) in compact JWS form (RFC 7515), checked as Kafka's broker checks
// the token of a SASL/OAUTHBEARER client (BrokerJwtValidator, on jose4j):
//
// - three base64url parts (strict, unpadded), header and claims JSON objects within the size
//   and depth bounds of jwt_options;
// - the header's "alg" one of jwk.h's (never "none" nor HS*), no "crit" header (none is
//   understood), "kid" a string when present;
// - the signature verified with the key of the JWKS the kid (when given) and alg pick;
// - claims, after the signature: "exp" and "iat" required, "nbf" honoured, each a number of
//   seconds, with the clock skew allowed on exp and nbf; "iss" equal to the expected issuer
//   when one is set; "aud" (a string or an array of strings) containing one of the expected
//   audiences when they are set, and absent when none is (jose4j refuses an audience that no
//   expected audience matches, an empty list included); "iss", "sub" and "jti" strings when
//   present; the subject claim (sub.claim.name) a string that is not blank, trimmed, as the
//   principal; the scope claim (scope.claim.name) a string (one scope, as Kafka reads it) or
//   an array of distinct non-blank strings, anything else no scope.
//
// Pure functions over their arguments; never throw. What went wrong goes to jwt_error::detail,
// for the broker's debug log: it names the claim or part, never quotes the token.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "security/jwk.h"

namespace silt::security {

// What a valid token must be; Kafka's sasl.oauthbearer.* settings of the same names.
struct jwt_options {
  std::vector<std::string> expected_audience;  // sasl.oauthbearer.expected.audience
  std::optional<std::string> expected_issuer;  // sasl.oauthbearer.expected.issuer
  std::string sub_claim_name = "sub";          // sasl.oauthbearer.sub.claim.name
  std::string scope_claim_name = "scope";      // sasl.oauthbearer.scope.claim.name
  std::chrono::seconds clock_skew{30};         // sasl.oauthbearer.clock.skew.seconds
  // Silt's own bounds (Kafka has none but the SASL message size): a longer token is refused
  // before any decoding, and its JSON may nest this deep at most.
  size_t max_token_bytes = 64 * 1024;
  size_t max_json_depth = 32;
};

enum class jwt_error_kind : uint8_t {
  malformed,      // not three base64url parts, not JSON objects, a claim of the wrong type
  algorithm,      // "none", HS*, an unknown alg, or a "crit" header
  no_key,         // no key of the set fits the kid and alg: worth refreshing the JWKS
  signature,      // the signature does not verify
  expired,        // exp (plus the skew) has passed
  not_yet_valid,  // nbf (minus the skew) has not come yet
  audience,       // no expected audience in aud, or aud when none is expected
  issuer,         // iss missing or not the expected issuer
  claims,         // exp, iat or the subject claim missing or invalid, or a bad scope
};

struct jwt_error {
  jwt_error_kind kind = jwt_error_kind::malformed;
  std::string detail;  // for the debug log
  std::string kid;     // no_key: the kid the token names (empty when it names none)
};

// The header of a token: how it was signed, by which key.
struct jwt_header {
  jws_alg alg = jws_alg::rs256;
  std::optional<std::string> kid;
};

// A token that passed every check.
struct verified_jwt {
  std::string principal;           // the subject claim, trimmed
  std::vector<std::string> scope;  // the scope claim
  std::chrono::sys_seconds expires;
  std::chrono::sys_seconds issued_at;
};

// The header of `token`, checked (its size, form and alg) but nothing verified yet.
[[nodiscard]] tl::expected<jwt_header, jwt_error> read_jwt_header(std::string_view token,
                                                                  const jwt_options& options);

// `token` verified with `keys` and its claims checked against `options` at time `now`.
[[nodiscard]] tl::expected<verified_jwt, jwt_error> validate_jwt(
    std::string_view token, const jwk_set& keys, const jwt_options& options,
    std::chrono::system_clock::time_point now);

}  // namespace silt::security
