// The public keys of a JSON Web Key Set (RFC 7517) and the JWS signatures they verify
// (RFC 7515, algorithms of RFC 7518): RSA keys for RS256/384/512 and PS256/384/512, EC keys on
// P-256, P-384 and P-521 for ES256/384/512. Other key types (oct, OKP) and keys that do not
// parse are left out of the set, as jose4j leaves them out of Kafka's; "none" and the HMAC
// algorithms (HS*) are no algorithm here at all: a token naming them is refused before any
// key is looked at.
//
// A jwk_set is immutable once parsed and shared between threads by shared_ptr (jwks.h swaps
// in a new one on refresh); verify() may run on any number of threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <openssl/types.h>
#include <tl/expected.hpp>

namespace silt::security {

enum class jws_alg : uint8_t { rs256, rs384, rs512, ps256, ps384, ps512, es256, es384, es512 };

// The algorithm a JWS header's "alg" names; nullopt for "none", HS256/384/512 and anything
// unknown.
[[nodiscard]] std::optional<jws_alg> parse_jws_alg(std::string_view name);
[[nodiscard]] std::string_view name_of(jws_alg alg);

// One verification key.
class jwk {
 public:
  enum class kind : uint8_t { rsa, p256, p384, p521 };

  // The key a JWKS entry describes; the error says why it is not usable (never quoting key
  // material, which is public anyway, at length).
  [[nodiscard]] static tl::expected<jwk, std::string> from_json(const nlohmann::json& entry);

  [[nodiscard]] const std::string& kid() const { return kid_; }
  [[nodiscard]] kind type() const { return kind_; }
  // Whether this key may verify a signature made with `alg`: its type and curve fit, its
  // "use" is absent or "sig", its "alg" is absent or the same.
  [[nodiscard]] bool fits(jws_alg alg) const;
  // Whether `signature` (as the JWS carries it: raw r||s for ECDSA) signs `input` (the
  // header and payload as sent, with the dot) with `alg`. False for any malformed signature.
  [[nodiscard]] bool verify(jws_alg alg, std::string_view input, std::string_view signature) const;

 private:
  jwk() = default;

  std::string kid_;
  std::string use_;
  std::string alg_;
  kind kind_ = kind::rsa;
  std::shared_ptr<EVP_PKEY> key_;
};

// The keys of one JWKS document.
class jwk_set {
 public:
  // At most this many entries are read from a document; a larger one is refused.
  static constexpr size_t max_entries = 1024;

  jwk_set() = default;
  // The usable keys of `document` ({"keys": [...]}, nested at most `max_depth` deep); refused
  // when it is not such a document. Entries that are no usable key are skipped (skipped()
  // says why).
  [[nodiscard]] static tl::expected<jwk_set, std::string> parse(std::string_view document,
                                                                size_t max_depth = 32);

  // The key to verify a token signed with `alg`: the first that fits it and, when the token
  // names a key id, has that id; null when none does.
  [[nodiscard]] const jwk* find(jws_alg alg, std::optional<std::string_view> kid) const;
  [[nodiscard]] size_t size() const { return keys_.size(); }
  [[nodiscard]] bool contains(std::string_view kid) const;
  [[nodiscard]] const std::vector<std::string>& skipped() const { return skipped_; }

 private:
  std::vector<jwk> keys_;
  std::vector<std::string> skipped_;
};

}  // namespace silt::security
