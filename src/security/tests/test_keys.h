// Keys made with OpenSSL at test time, the JWKS documents that publish them, and tokens they
// sign, for the JWT, JWKS and OAUTHBEARER tests (and nothing else).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <openssl/types.h>

#include "security/jwk.h"

namespace silt::security::testing {

class signing_key {
 public:
  // A new RSA key of `bits`, or an EC key on "P-256", "P-384" or "P-521".
  [[nodiscard]] static signing_key rsa(int bits = 2048);
  [[nodiscard]] static signing_key ec(const char* curve);

  // The public key as a JWKS entry; `alg` and `use` added when not empty.
  [[nodiscard]] nlohmann::json jwk(const std::string& kid, const std::string& alg = "",
                                   const std::string& use = "") const;
  // The JWS signature of `input` with `alg` (raw r||s for ECDSA).
  [[nodiscard]] std::string sign(jws_alg alg, std::string_view input) const;

 private:
  std::shared_ptr<EVP_PKEY> key_;
  std::string curve_;  // empty: RSA
};

// {"keys": [entries...]} as text.
[[nodiscard]] std::string jwks_document(const std::vector<nlohmann::json>& entries);

// A compact JWS of `header` and `claims` (each serialized as is), signed with `alg` by `key`.
[[nodiscard]] std::string make_token(const signing_key& key, jws_alg alg, const std::string& header,
                                     const std::string& claims);
// The same with the header {"alg": alg, "kid": kid, "typ": "JWT"}.
[[nodiscard]] std::string make_token(const signing_key& key, jws_alg alg, const std::string& kid,
                                     const nlohmann::json& claims);

// Seconds since the epoch, `delta` from now.
[[nodiscard]] int64_t epoch_seconds(std::chrono::seconds delta = std::chrono::seconds(0));

// Claims valid for an hour: sub, iat, exp (and the issuer and audience the tests expect).
[[nodiscard]] nlohmann::json good_claims();

}  // namespace silt::security::testing
