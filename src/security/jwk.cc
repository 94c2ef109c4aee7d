#include "security/jwk.h"

#include <array>
#include <cctype>

#include <nlohmann/json.hpp>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>

#include "security/base64url.h"
#include "security/json_reader.h"

namespace silt::security {
namespace {

using nlohmann::json;

// jose4j's floor for RSA keys (Kafka refuses smaller ones through it), and a ceiling that
// keeps one verification under a few milliseconds.
constexpr int min_rsa_bits = 2048;
constexpr int max_rsa_bits = 8192;

template <typename T, void (*Free)(T*)>
struct deleter {
  void operator()(T* p) const { Free(p); }
};
void free_bn(BIGNUM* p) {
  BN_free(p);
}
void free_params(OSSL_PARAM* p) {
  OSSL_PARAM_free(p);
}
using pkey_ctx_ptr = std::unique_ptr<EVP_PKEY_CTX, deleter<EVP_PKEY_CTX, EVP_PKEY_CTX_free>>;
using param_bld_ptr = std::unique_ptr<OSSL_PARAM_BLD, deleter<OSSL_PARAM_BLD, OSSL_PARAM_BLD_free>>;
using params_ptr = std::unique_ptr<OSSL_PARAM, deleter<OSSL_PARAM, free_params>>;
using bn_ptr = std::unique_ptr<BIGNUM, deleter<BIGNUM, free_bn>>;
using md_ctx_ptr = std::unique_ptr<EVP_MD_CTX, deleter<EVP_MD_CTX, EVP_MD_CTX_free>>;
using ecdsa_sig_ptr = std::unique_ptr<ECDSA_SIG, deleter<ECDSA_SIG, ECDSA_SIG_free>>;

// OpenSSL's error queue is per thread and grows until read: a failed call leaves nothing
// behind for a later, unrelated one to trip over.
struct clear_errors_on_exit {
  ~clear_errors_on_exit() { ERR_clear_error(); }
};

struct alg_info {
  std::string_view name;
  const char* digest;
  bool pss;
  std::optional<jwk::kind> curve;  // ECDSA: the only curve it signs on
};

alg_info info(jws_alg alg) {
  switch (alg) {
    case jws_alg::rs256:
      return {"RS256", "SHA256", false, std::nullopt};
    case jws_alg::rs384:
      return {"RS384", "SHA384", false, std::nullopt};
    case jws_alg::rs512:
      return {"RS512", "SHA512", false, std::nullopt};
    case jws_alg::ps256:
      return {"PS256", "SHA256", true, std::nullopt};
    case jws_alg::ps384:
      return {"PS384", "SHA384", true, std::nullopt};
    case jws_alg::ps512:
      return {"PS512", "SHA512", true, std::nullopt};
    case jws_alg::es256:
      return {"ES256", "SHA256", false, jwk::kind::p256};
    case jws_alg::es384:
      return {"ES384", "SHA384", false, jwk::kind::p384};
    case jws_alg::es512:
      return {"ES512", "SHA512", false, jwk::kind::p521};
  }
  return {"RS256", "SHA256", false, std::nullopt};
}

// The size in bytes of a coordinate (and of r and s) on the curve.
size_t coordinate_bytes(jwk::kind k) {
  switch (k) {
    case jwk::kind::p256:
      return 32;
    case jwk::kind::p384:
      return 48;
    case jwk::kind::p521:
      return 66;
    case jwk::kind::rsa:
      break;
  }
  return 0;
}

// A member that must be a string when present; nullopt when it is absent, an error when it is
// something else.
tl::expected<std::optional<std::string>, std::string> optional_string(const json& entry,
                                                                      const char* name) {
  const auto it = entry.find(name);
  if (it == entry.end()) return std::nullopt;
  if (!it->is_string()) return tl::unexpected(std::string(name) + " is not a string");
  return it->get<std::string>();
}

tl::expected<std::string, std::string> required_bytes(const json& entry, const char* name) {
  const auto it = entry.find(name);
  if (it == entry.end() || !it->is_string()) {
    return tl::unexpected(std::string(name) + " is missing or not a string");
  }
  auto bytes = base64url_decode(it->get_ref<const std::string&>());
  if (!bytes || bytes->empty()) return tl::unexpected(std::string(name) + " is not base64url");
  return std::move(*bytes);
}

// `s` for a log line when it is a short word (a kty such as "oct" or "OKP"), else "?".
std::string printable(const std::string& s) {
  if (s.empty() || s.size() > 16) return "?";
  for (const char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return "?";
  }
  return s;
}

bn_ptr to_bn(std::string_view bytes) {
  return bn_ptr(BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()), nullptr));
}

// A public key from OpenSSL parameters (`type` "RSA" or "EC").
std::shared_ptr<EVP_PKEY> from_params(const char* type, OSSL_PARAM_BLD* bld) {
  const params_ptr params(OSSL_PARAM_BLD_to_param(bld));
  const pkey_ctx_ptr ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1) return nullptr;
  EVP_PKEY* key = nullptr;
  if (EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) return nullptr;
  return {key, EVP_PKEY_free};
}

tl::expected<std::shared_ptr<EVP_PKEY>, std::string> rsa_key(const json& entry) {
  auto n = required_bytes(entry, "n");
  if (!n) return tl::unexpected(n.error());
  auto e = required_bytes(entry, "e");
  if (!e) return tl::unexpected(e.error());
  const bn_ptr bn_n = to_bn(*n);
  const bn_ptr bn_e = to_bn(*e);
  if (!bn_n || !bn_e) return tl::unexpected(std::string("out of memory"));
  const int bits = BN_num_bits(bn_n.get());
  if (bits < min_rsa_bits || bits > max_rsa_bits) {
    return tl::unexpected("an RSA modulus of " + std::to_string(bits) + " bits (" +
                          std::to_string(min_rsa_bits) + " to " + std::to_string(max_rsa_bits) +
                          " are accepted)");
  }
  if (BN_num_bits(bn_e.get()) > 64 || !BN_is_odd(bn_e.get()) || BN_is_one(bn_e.get())) {
    return tl::unexpected(std::string("an RSA exponent that is not odd, above 1 and 64 bits"));
  }
  const param_bld_ptr bld(OSSL_PARAM_BLD_new());
  if (!bld || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()) != 1) {
    return tl::unexpected(std::string("out of memory"));
  }
  auto key = from_params("RSA", bld.get());
  if (!key) return tl::unexpected(std::string("OpenSSL refuses the RSA key"));
  return key;
}

tl::expected<std::shared_ptr<EVP_PKEY>, std::string> ec_key(const json& entry, jwk::kind& kind) {
  auto crv = optional_string(entry, "crv");
  if (!crv) return tl::unexpected(crv.error());
  if (!*crv) return tl::unexpected(std::string("an EC key without crv"));
  const char* group = nullptr;
  if (**crv == "P-256") {
    kind = jwk::kind::p256;
    group = "P-256";
  } else if (**crv == "P-384") {
    kind = jwk::kind::p384;
    group = "P-384";
  } else if (**crv == "P-521") {
    kind = jwk::kind::p521;
    group = "P-521";
  } else {
    return tl::unexpected(std::string("an EC key on an unsupported curve"));
  }
  auto x = required_bytes(entry, "x");
  if (!x) return tl::unexpected(x.error());
  auto y = required_bytes(entry, "y");
  if (!y) return tl::unexpected(y.error());
  // RFC 7518 section 6.2.1.2: each coordinate is exactly the curve's size, leading zeros kept.
  const size_t size = coordinate_bytes(kind);
  if (x->size() != size || y->size() != size) {
    return tl::unexpected(std::string("EC coordinates of the wrong size for the curve"));
  }
  std::string point = "\x04" + *x + *y;  // uncompressed (SEC 1 section 2.3.3)
  const param_bld_ptr bld(OSSL_PARAM_BLD_new());
  if (!bld ||
      OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, group, 0) != 1 ||
      OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                       point.size()) != 1) {
    return tl::unexpected(std::string("out of memory"));
  }
  auto key = from_params("EC", bld.get());
  if (!key) return tl::unexpected(std::string("an EC point not on the curve"));
  const pkey_ctx_ptr check(EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(), nullptr));
  if (!check || EVP_PKEY_public_check(check.get()) != 1) {
    return tl::unexpected(std::string("an EC point not on the curve"));
  }
  return key;
}

// The DER form OpenSSL verifies of a JWS ECDSA signature (r and s, each `size` bytes).
std::optional<std::string> ecdsa_der(std::string_view raw, size_t size) {
  if (raw.size() != 2 * size) return std::nullopt;
  ecdsa_sig_ptr sig(ECDSA_SIG_new());
  bn_ptr r = to_bn(raw.substr(0, size));
  bn_ptr s = to_bn(raw.substr(size));
  if (!sig || !r || !s || ECDSA_SIG_set0(sig.get(), r.get(), s.get()) != 1) return std::nullopt;
  (void)r.release();  // owned by sig now
  (void)s.release();
  const int length = i2d_ECDSA_SIG(sig.get(), nullptr);
  if (length <= 0) return std::nullopt;
  std::string der(static_cast<size_t>(length), '\0');
  auto* out = reinterpret_cast<unsigned char*>(der.data());
  if (i2d_ECDSA_SIG(sig.get(), &out) != length) return std::nullopt;
  return der;
}

}  // namespace

std::optional<jws_alg> parse_jws_alg(std::string_view name) {
  for (const jws_alg a :
       {jws_alg::rs256, jws_alg::rs384, jws_alg::rs512, jws_alg::ps256, jws_alg::ps384,
        jws_alg::ps512, jws_alg::es256, jws_alg::es384, jws_alg::es512}) {
    if (info(a).name == name) return a;
  }
  return std::nullopt;
}

std::string_view name_of(jws_alg alg) {
  return info(alg).name;
}

tl::expected<jwk, std::string> jwk::from_json(const json& entry) {
  if (!entry.is_object()) return tl::unexpected(std::string("an entry that is not an object"));
  jwk k;
  auto kty = optional_string(entry, "kty");
  auto kid = optional_string(entry, "kid");
  auto use = optional_string(entry, "use");
  auto alg = optional_string(entry, "alg");
  for (const auto* member : {&kty, &kid, &use, &alg}) {
    if (!*member) return tl::unexpected(member->error());
  }
  k.kid_ = kid->value_or("");
  k.use_ = use->value_or("");
  k.alg_ = alg->value_or("");
  if (!*kty) return tl::unexpected(std::string("an entry without kty"));
  tl::expected<std::shared_ptr<EVP_PKEY>, std::string> key;
  if (**kty == "RSA") {
    k.kind_ = kind::rsa;
    key = rsa_key(entry);
  } else if (**kty == "EC") {
    key = ec_key(entry, k.kind_);
  } else {
    return tl::unexpected("a key of type " + printable(**kty) + ", not RSA or EC");
  }
  ERR_clear_error();
  if (!key) return tl::unexpected(key.error());
  k.key_ = std::move(*key);
  return k;
}

bool jwk::fits(jws_alg alg) const {
  const alg_info i = info(alg);
  if (i.curve ? kind_ != *i.curve : kind_ != kind::rsa) return false;
  if (!use_.empty() && use_ != "sig") return false;
  return alg_.empty() || alg_ == i.name;
}

bool jwk::verify(jws_alg alg, std::string_view input, std::string_view signature) const {
  const clear_errors_on_exit clear;
  if (!fits(alg)) return false;
  const alg_info i = info(alg);
  std::string der;
  if (i.curve) {
    auto d = ecdsa_der(signature, coordinate_bytes(*i.curve));
    if (!d) return false;
    der = std::move(*d);
    signature = der;
  } else if (signature.size() != static_cast<size_t>(EVP_PKEY_get_size(key_.get()))) {
    return false;
  }
  const md_ctx_ptr md(EVP_MD_CTX_new());
  EVP_PKEY_CTX* pctx = nullptr;  // owned by md
  if (!md || EVP_DigestVerifyInit_ex(md.get(), &pctx, i.digest, nullptr, nullptr, key_.get(),
                                     nullptr) != 1) {
    return false;
  }
  if (i.pss && (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1 ||
                EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) != 1 ||
                EVP_PKEY_CTX_set_rsa_mgf1_md_name(pctx, i.digest, nullptr) != 1)) {
    return false;
  }
  return EVP_DigestVerify(md.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(input.data()),
                          input.size()) == 1;
}

tl::expected<jwk_set, std::string> jwk_set::parse(std::string_view document, size_t max_depth) {
  auto doc = read_json(document, max_depth);
  if (!doc) return tl::unexpected("the JWKS is " + doc.error());
  if (!doc->is_object()) return tl::unexpected(std::string("the JWKS is not a JSON object"));
  const auto keys = doc->find("keys");
  if (keys == doc->end() || !keys->is_array()) {
    return tl::unexpected(std::string("the JWKS has no \"keys\" array"));
  }
  if (keys->size() > max_entries) {
    return tl::unexpected("the JWKS has more than " + std::to_string(max_entries) + " keys");
  }
  jwk_set set;
  for (size_t i = 0; i < keys->size(); ++i) {
    auto k = jwk::from_json((*keys)[i]);
    if (k) {
      set.keys_.push_back(std::move(*k));
    } else {
      set.skipped_.push_back("key " + std::to_string(i) + ": " + k.error());
    }
  }
  return set;
}

const jwk* jwk_set::find(jws_alg alg, std::optional<std::string_view> kid) const {
  for (const jwk& k : keys_) {
    if (kid && k.kid() != *kid) continue;
    if (k.fits(alg)) return &k;
  }
  return nullptr;
}

bool jwk_set::contains(std::string_view kid) const {
  for (const jwk& k : keys_) {
    if (k.kid() == kid) return true;
  }
  return false;
}

}  // namespace silt::security
