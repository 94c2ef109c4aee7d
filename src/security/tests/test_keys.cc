#include "security/tests/test_keys.h"

#include <stdexcept>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include "security/base64url.h"

namespace silt::security::testing {
namespace {

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(what);
}

std::string bn_bytes(const EVP_PKEY* key, const char* name, int pad) {
  BIGNUM* bn = nullptr;
  check(EVP_PKEY_get_bn_param(key, name, &bn) == 1, name);
  const int size = pad > 0 ? pad : BN_num_bytes(bn);
  std::string out(static_cast<size_t>(size), '\0');
  BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()), size);
  BN_free(bn);
  return out;
}

int coordinate_size(const std::string& curve) {
  return curve == "P-256" ? 32 : curve == "P-384" ? 48 : 66;
}

const char* digest_of(jws_alg alg) {
  switch (alg) {
    case jws_alg::rs256:
    case jws_alg::ps256:
    case jws_alg::es256:
      return "SHA256";
    case jws_alg::rs384:
    case jws_alg::ps384:
    case jws_alg::es384:
      return "SHA384";
    default:
      return "SHA512";
  }
}

}  // namespace

signing_key signing_key::rsa(int bits) {
  signing_key k;
  k.key_.reset(EVP_RSA_gen(static_cast<unsigned>(bits)), EVP_PKEY_free);
  check(k.key_ != nullptr, "EVP_RSA_gen");
  return k;
}

signing_key signing_key::ec(const char* curve) {
  signing_key k;
  k.key_.reset(EVP_EC_gen(curve), EVP_PKEY_free);
  check(k.key_ != nullptr, "EVP_EC_gen");
  k.curve_ = curve;
  return k;
}

nlohmann::json signing_key::jwk(const std::string& kid, const std::string& alg,
                                const std::string& use) const {
  nlohmann::json j;
  if (curve_.empty()) {
    j["kty"] = "RSA";
    j["n"] = base64url_encode(bn_bytes(key_.get(), OSSL_PKEY_PARAM_RSA_N, 0));
    j["e"] = base64url_encode(bn_bytes(key_.get(), OSSL_PKEY_PARAM_RSA_E, 0));
  } else {
    const int size = coordinate_size(curve_);
    j["kty"] = "EC";
    j["crv"] = curve_;
    j["x"] = base64url_encode(bn_bytes(key_.get(), OSSL_PKEY_PARAM_EC_PUB_X, size));
    j["y"] = base64url_encode(bn_bytes(key_.get(), OSSL_PKEY_PARAM_EC_PUB_Y, size));
  }
  if (!kid.empty()) j["kid"] = kid;
  if (!alg.empty()) j["alg"] = alg;
  if (!use.empty()) j["use"] = use;
  return j;
}

std::string signing_key::sign(jws_alg alg, std::string_view input) const {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  EVP_PKEY_CTX* pctx = nullptr;
  check(
      EVP_DigestSignInit_ex(md, &pctx, digest_of(alg), nullptr, nullptr, key_.get(), nullptr) == 1,
      "EVP_DigestSignInit_ex");
  if (alg == jws_alg::ps256 || alg == jws_alg::ps384 || alg == jws_alg::ps512) {
    check(EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1 &&
              EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) == 1,
          "PSS");
  }
  size_t size = 0;
  const auto* in = reinterpret_cast<const unsigned char*>(input.data());
  check(EVP_DigestSign(md, nullptr, &size, in, input.size()) == 1, "EVP_DigestSign");
  std::string sig(size, '\0');
  check(EVP_DigestSign(md, reinterpret_cast<unsigned char*>(sig.data()), &size, in, input.size()) ==
            1,
        "EVP_DigestSign");
  sig.resize(size);
  EVP_MD_CTX_free(md);
  if (curve_.empty()) return sig;
  // DER (SEQUENCE of r and s) to JWS's fixed-size r||s.
  const auto* p = reinterpret_cast<const unsigned char*>(sig.data());
  ECDSA_SIG* ecdsa = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
  check(ecdsa != nullptr, "d2i_ECDSA_SIG");
  const int n = coordinate_size(curve_);
  std::string raw(static_cast<size_t>(2 * n), '\0');
  BN_bn2binpad(ECDSA_SIG_get0_r(ecdsa), reinterpret_cast<unsigned char*>(raw.data()), n);
  BN_bn2binpad(ECDSA_SIG_get0_s(ecdsa), reinterpret_cast<unsigned char*>(raw.data()) + n, n);
  ECDSA_SIG_free(ecdsa);
  return raw;
}

std::string jwks_document(const std::vector<nlohmann::json>& entries) {
  return nlohmann::json{{"keys", entries}}.dump();
}

std::string make_token(const signing_key& key, jws_alg alg, const std::string& header,
                       const std::string& claims) {
  const std::string input = base64url_encode(header) + "." + base64url_encode(claims);
  return input + "." + base64url_encode(key.sign(alg, input));
}

std::string make_token(const signing_key& key, jws_alg alg, const std::string& kid,
                       const nlohmann::json& claims) {
  nlohmann::json header = {{"alg", std::string(name_of(alg))}, {"typ", "JWT"}};
  if (!kid.empty()) header["kid"] = kid;
  return make_token(key, alg, header.dump(), claims.dump());
}

int64_t epoch_seconds(std::chrono::seconds delta) {
  return std::chrono::duration_cast<std::chrono::seconds>(
             (std::chrono::system_clock::now() + delta).time_since_epoch())
      .count();
}

nlohmann::json good_claims() {
  return {{"sub", "alice"},         {"iss", "https://idp.example"},
          {"aud", "kafka"},         {"scope", "produce"},
          {"iat", epoch_seconds()}, {"exp", epoch_seconds(std::chrono::hours(1))}};
}

}  // namespace silt::security::testing
