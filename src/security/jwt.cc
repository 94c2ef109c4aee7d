#include "security/jwt.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "security/base64url.h"
#include "security/json_reader.h"

namespace silt::security {
namespace {

using nlohmann::json;

// NumericDate values (seconds) beyond this many seconds from 1970 either way are refused: they
// are no date (2^53 is where a double stops counting seconds one by one), and sums of them
// with a skew stay far from overflowing.
constexpr int64_t max_seconds = int64_t{1} << 53;

tl::unexpected<jwt_error> fail(jwt_error_kind kind, std::string detail, std::string kid = {}) {
  return tl::unexpected(jwt_error{kind, std::move(detail), std::move(kid)});
}

// The three parts of a compact JWS.
struct parts {
  std::string_view header;
  std::string_view payload;
  std::string_view signature;
  std::string_view signing_input;  // header.payload, as signed
};

tl::expected<parts, jwt_error> split(std::string_view token, const jwt_options& o) {
  if (token.size() > o.max_token_bytes) {
    return fail(jwt_error_kind::malformed,
                "the token is longer than " + std::to_string(o.max_token_bytes) + " bytes");
  }
  const size_t first = token.find('.');
  const size_t second = first == std::string_view::npos ? first : token.find('.', first + 1);
  if (second == std::string_view::npos || token.find('.', second + 1) != std::string_view::npos) {
    return fail(jwt_error_kind::malformed, "the token is not three parts separated by dots");
  }
  parts p{token.substr(0, first), token.substr(first + 1, second - first - 1),
          token.substr(second + 1), token.substr(0, second)};
  if (p.header.empty() || p.payload.empty() || p.signature.empty()) {
    return fail(jwt_error_kind::malformed, "a part of the token is empty");
  }
  return p;
}

tl::expected<json, jwt_error> decode_object(std::string_view part, const char* what,
                                            const jwt_options& o) {
  const auto text = base64url_decode(part);
  if (!text)
    return fail(jwt_error_kind::malformed, std::string("the ") + what + " is not base64url");
  auto doc = read_json(*text, o.max_json_depth);
  if (!doc)
    return fail(jwt_error_kind::malformed, std::string("the ") + what + " is " + doc.error());
  if (!doc->is_object()) {
    return fail(jwt_error_kind::malformed, std::string("the ") + what + " is not a JSON object");
  }
  return std::move(*doc);
}

tl::expected<jwt_header, jwt_error> header_of(const json& h) {
  const auto alg = h.find("alg");
  if (alg == h.end() || !alg->is_string()) {
    return fail(jwt_error_kind::algorithm, "the header has no alg");
  }
  const auto& name = alg->get_ref<const std::string&>();
  const auto parsed = parse_jws_alg(name);
  if (!parsed) {
    if (name == "none") return fail(jwt_error_kind::algorithm, "alg none (an unsigned token)");
    if (name.starts_with("HS")) return fail(jwt_error_kind::algorithm, "an HMAC alg (HS*)");
    return fail(jwt_error_kind::algorithm, "an unsupported alg");
  }
  // RFC 7515 section 4.1.11: a reader must refuse extensions it does not understand.
  if (h.contains("crit")) return fail(jwt_error_kind::algorithm, "a crit header");
  jwt_header out{*parsed, std::nullopt};
  if (const auto kid = h.find("kid"); kid != h.end()) {
    if (!kid->is_string()) return fail(jwt_error_kind::malformed, "the kid is not a string");
    out.kid = kid->get<std::string>();
  }
  return out;
}

// A NumericDate claim: nullopt when absent. Fractions are cut toward zero, as jose4j does.
tl::expected<std::optional<int64_t>, jwt_error> numeric_date(const json& claims, const char* name) {
  const auto it = claims.find(name);
  if (it == claims.end()) return std::nullopt;
  if (it->is_number_integer() && !it->is_number_unsigned()) {
    const auto v = it->get<int64_t>();
    if (v >= -max_seconds && v <= max_seconds) return v;
  } else if (it->is_number_unsigned()) {
    const auto v = it->get<uint64_t>();
    if (v <= static_cast<uint64_t>(max_seconds)) return static_cast<int64_t>(v);
  } else if (it->is_number_float()) {
    const double seconds = std::trunc(it->get<double>());
    if (std::isfinite(seconds) && std::fabs(seconds) <= static_cast<double>(max_seconds)) {
      return static_cast<int64_t>(seconds);
    }
  }
  return fail(jwt_error_kind::malformed, std::string("the ") + name + " claim is not a date");
}

// Java's String.trim(): every character up to U+0020 off both ends.
std::string_view trim(std::string_view s) {
  while (!s.empty() && static_cast<unsigned char>(s.front()) <= 0x20) s.remove_prefix(1);
  while (!s.empty() && static_cast<unsigned char>(s.back()) <= 0x20) s.remove_suffix(1);
  return s;
}

tl::expected<void, jwt_error> check_audience(const json& claims, const jwt_options& o) {
  const auto aud = claims.find("aud");
  if (aud == claims.end()) {
    if (o.expected_audience.empty()) return {};
    return fail(jwt_error_kind::audience, "no aud claim");
  }
  std::vector<std::string_view> audiences;
  if (aud->is_string()) {
    audiences.emplace_back(aud->get_ref<const std::string&>());
  } else if (aud->is_array()) {
    for (const auto& a : *aud) {
      if (!a.is_string()) return fail(jwt_error_kind::malformed, "the aud claim is not strings");
      audiences.emplace_back(a.get_ref<const std::string&>());
    }
  } else {
    return fail(jwt_error_kind::malformed, "the aud claim is not strings");
  }
  for (const auto& expected : o.expected_audience) {
    if (std::find(audiences.begin(), audiences.end(), expected) != audiences.end()) return {};
  }
  return fail(jwt_error_kind::audience, o.expected_audience.empty()
                                            ? "an aud claim, and no expected audience is set"
                                            : "no expected audience in the aud claim");
}

tl::expected<void, jwt_error> check_issuer(const json& claims, const jwt_options& o) {
  const auto iss = claims.find("iss");
  if (iss == claims.end()) {
    if (!o.expected_issuer) return {};
    return fail(jwt_error_kind::issuer, "no iss claim");
  }
  if (!iss->is_string()) return fail(jwt_error_kind::malformed, "the iss claim is not a string");
  if (o.expected_issuer && iss->get_ref<const std::string&>() != *o.expected_issuer) {
    return fail(jwt_error_kind::issuer, "the iss claim is not the expected issuer");
  }
  return {};
}

tl::expected<std::vector<std::string>, jwt_error> scope_of(const json& claims,
                                                           const std::string& name) {
  std::vector<std::string> scope;
  const auto it = claims.find(name);
  if (it == claims.end()) return scope;
  auto add = [&](const json& v) -> tl::expected<void, jwt_error> {
    if (!v.is_string()) return fail(jwt_error_kind::claims, "a scope that is not a string");
    const std::string_view s = trim(v.get_ref<const std::string&>());
    if (s.empty()) return fail(jwt_error_kind::claims, "a blank scope");
    if (std::find(scope.begin(), scope.end(), s) != scope.end()) {
      return fail(jwt_error_kind::claims, "a scope given twice");
    }
    scope.emplace_back(s);
    return {};
  };
  if (it->is_string()) {
    if (auto r = add(*it); !r) return tl::unexpected(r.error());
  } else if (it->is_array()) {
    for (const auto& v : *it) {
      if (auto r = add(v); !r) return tl::unexpected(r.error());
    }
  }
  return scope;
}

tl::expected<verified_jwt, jwt_error> check_claims(const json& claims, const jwt_options& o,
                                                   std::chrono::system_clock::time_point now) {
  if (auto r = check_audience(claims, o); !r) return tl::unexpected(r.error());
  if (auto r = check_issuer(claims, o); !r) return tl::unexpected(r.error());

  const auto exp = numeric_date(claims, "exp");
  if (!exp) return tl::unexpected(exp.error());
  const auto nbf = numeric_date(claims, "nbf");
  if (!nbf) return tl::unexpected(nbf.error());
  const auto iat = numeric_date(claims, "iat");
  if (!iat) return tl::unexpected(iat.error());
  if (!*exp || **exp < 0) return fail(jwt_error_kind::claims, "no exp claim, or a negative one");
  if (!*iat || **iat < 0) return fail(jwt_error_kind::claims, "no iat claim, or a negative one");
  const int64_t skew = std::clamp<int64_t>(o.clock_skew.count(), 0, max_seconds);
  const int64_t now_s = std::chrono::floor<std::chrono::seconds>(now).time_since_epoch().count();
  if (now_s - skew >= **exp) return fail(jwt_error_kind::expired, "the token has expired");
  // jose4j, under Kafka's BrokerJwtValidator: "The Expiration Time claim value cannot be before
  // the Issued At claim value".
  if (**exp < **iat) return fail(jwt_error_kind::claims, "exp is before iat");
  if (*nbf && now_s + skew < **nbf) {
    return fail(jwt_error_kind::not_yet_valid, "the token is not valid yet (nbf)");
  }

  for (const char* name : {"sub", "jti"}) {
    const auto it = claims.find(name);
    if (it != claims.end() && !it->is_string()) {
      return fail(jwt_error_kind::malformed, std::string("the ") + name + " claim is not a string");
    }
  }
  const auto sub = claims.find(o.sub_claim_name);
  if (sub == claims.end() || !sub->is_string()) {
    return fail(jwt_error_kind::claims, "no subject claim (" + o.sub_claim_name + ") string");
  }
  const std::string_view principal = trim(sub->get_ref<const std::string&>());
  if (principal.empty()) return fail(jwt_error_kind::claims, "a blank subject claim");

  auto scope = scope_of(claims, o.scope_claim_name);
  if (!scope) return tl::unexpected(scope.error());
  return verified_jwt{std::string(principal), std::move(*scope),
                      std::chrono::sys_seconds(std::chrono::seconds(**exp)),
                      std::chrono::sys_seconds(std::chrono::seconds(**iat))};
}

}  // namespace

tl::expected<jwt_header, jwt_error> read_jwt_header(std::string_view token,
                                                    const jwt_options& options) {
  try {
    const auto p = split(token, options);
    if (!p) return tl::unexpected(p.error());
    const auto h = decode_object(p->header, "header", options);
    if (!h) return tl::unexpected(h.error());
    return header_of(*h);
  } catch (const std::exception&) {
    return fail(jwt_error_kind::malformed, "out of memory");
  }
}

tl::expected<verified_jwt, jwt_error> validate_jwt(std::string_view token, const jwk_set& keys,
                                                   const jwt_options& options,
                                                   std::chrono::system_clock::time_point now) {
  try {
    const auto p = split(token, options);
    if (!p) return tl::unexpected(p.error());
    const auto h = decode_object(p->header, "header", options);
    if (!h) return tl::unexpected(h.error());
    const auto header = header_of(*h);
    if (!header) return tl::unexpected(header.error());

    const jwk* key = keys.find(header->alg, header->kid);
    if (key == nullptr) {
      return fail(jwt_error_kind::no_key,
                  header->kid ? "no key of the JWKS has the token's kid and fits its alg"
                              : "no key of the JWKS fits the token's alg",
                  header->kid.value_or(""));
    }
    const auto signature = base64url_decode(p->signature);
    if (!signature) return fail(jwt_error_kind::malformed, "the signature is not base64url");
    if (!key->verify(header->alg, p->signing_input, *signature)) {
      return fail(jwt_error_kind::signature, "the signature does not verify");
    }
    // Only a token the identity provider signed gets this far: its claims are parsed last.
    const auto claims = decode_object(p->payload, "payload", options);
    if (!claims) return tl::unexpected(claims.error());
    return check_claims(*claims, options, now);
  } catch (const std::exception&) {
    return fail(jwt_error_kind::malformed, "out of memory");
  }
}

}  // namespace silt::security
