// Tokens checked as Kafka's broker checks them (BrokerJwtValidator on jose4j), with keys made
// at test time: every algorithm, every claim rule, and tokens built to break the parser.
#include "security/jwt.h"

#include <gtest/gtest.h>

#include "security/base64url.h"
#include "security/tests/test_keys.h"

namespace silt::security {
namespace {

using testing::epoch_seconds;
using testing::good_claims;
using testing::make_token;
using testing::signing_key;
using json = nlohmann::json;
using std::chrono::hours;
using std::chrono::seconds;

// Keys are slow to make: one of each kind for the whole suite.
const signing_key& rsa_key() {
  static const signing_key k = signing_key::rsa(2048);
  return k;
}
const signing_key& other_rsa_key() {
  static const signing_key k = signing_key::rsa(2048);
  return k;
}
const signing_key& ec_key(const char* curve) {
  static const signing_key p256 = signing_key::ec("P-256");
  static const signing_key p384 = signing_key::ec("P-384");
  static const signing_key p521 = signing_key::ec("P-521");
  return std::string_view(curve) == "P-256"   ? p256
         : std::string_view(curve) == "P-384" ? p384
                                              : p521;
}

jwk_set keys_of(const std::vector<json>& entries) {
  auto set = jwk_set::parse(testing::jwks_document(entries));
  EXPECT_TRUE(set) << set.error();
  return set ? std::move(*set) : jwk_set();
}

const jwk_set& default_keys() {
  static const jwk_set set = keys_of({rsa_key().jwk("rsa-1"), ec_key("P-256").jwk("ec-1")});
  return set;
}

jwt_options expecting() {
  jwt_options o;
  o.expected_audience = {"kafka"};
  o.expected_issuer = "https://idp.example";
  return o;
}

tl::expected<verified_jwt, jwt_error> check(const std::string& token,
                                            const jwt_options& o = expecting(),
                                            const jwk_set& keys = default_keys()) {
  return validate_jwt(token, keys, o, std::chrono::system_clock::now());
}

std::string rs256(const json& claims, const std::string& kid = "rsa-1") {
  return make_token(rsa_key(), jws_alg::rs256, kid, claims);
}

jwt_error_kind failure(const tl::expected<verified_jwt, jwt_error>& r) {
  EXPECT_FALSE(r) << "the token validated";
  return r ? jwt_error_kind::malformed : r.error().kind;
}

TEST(Jwt, AGoodTokenGivesItsPrincipalScopeAndExpiry) {
  json claims = good_claims();
  claims["exp"] = 4'000'000'000;
  claims["iat"] = 1'700'000'000;
  auto t = check(rs256(claims));
  ASSERT_TRUE(t) << t.error().detail;
  EXPECT_EQ(t->principal, "alice");
  EXPECT_EQ(t->scope, std::vector<std::string>{"produce"});
  EXPECT_EQ(t->expires.time_since_epoch(), seconds(4'000'000'000));
  EXPECT_EQ(t->issued_at.time_since_epoch(), seconds(1'700'000'000));
}

TEST(Jwt, EveryAlgorithmVerifies) {
  const jwk_set keys = keys_of({rsa_key().jwk("rsa"), ec_key("P-256").jwk("p256"),
                                ec_key("P-384").jwk("p384"), ec_key("P-521").jwk("p521")});
  const struct {
    jws_alg alg;
    const signing_key& key;
    const char* kid;
  } cases[] = {
      {jws_alg::rs256, rsa_key(), "rsa"},        {jws_alg::rs384, rsa_key(), "rsa"},
      {jws_alg::rs512, rsa_key(), "rsa"},        {jws_alg::ps256, rsa_key(), "rsa"},
      {jws_alg::ps384, rsa_key(), "rsa"},        {jws_alg::ps512, rsa_key(), "rsa"},
      {jws_alg::es256, ec_key("P-256"), "p256"}, {jws_alg::es384, ec_key("P-384"), "p384"},
      {jws_alg::es512, ec_key("P-521"), "p521"},
  };
  for (const auto& c : cases) {
    const std::string token = make_token(c.key, c.alg, c.kid, good_claims());
    auto t = check(token, expecting(), keys);
    EXPECT_TRUE(t) << name_of(c.alg) << ": " << (t ? "" : t.error().detail);
    // Without a kid, the first key that fits the alg is used.
    EXPECT_TRUE(check(make_token(c.key, c.alg, "", good_claims()), expecting(), keys))
        << name_of(c.alg);
  }
}

TEST(Jwt, ExpiredTokensAreRefusedBeyondTheClockSkew) {
  json claims = good_claims();
  claims["iat"] = epoch_seconds(seconds(-100));
  claims["exp"] = epoch_seconds(seconds(-10));  // within the 30 s skew
  EXPECT_TRUE(check(rs256(claims)));
  claims["exp"] = epoch_seconds(seconds(-31));
  EXPECT_EQ(failure(check(rs256(claims))), jwt_error_kind::expired);
  jwt_options no_skew = expecting();
  no_skew.clock_skew = seconds(0);
  claims["exp"] = epoch_seconds(seconds(-1));
  EXPECT_EQ(failure(check(rs256(claims), no_skew)), jwt_error_kind::expired);
}

TEST(Jwt, TokensNotYetValidAreRefusedBeyondTheClockSkew) {
  json claims = good_claims();
  claims["nbf"] = epoch_seconds(seconds(20));
  EXPECT_TRUE(check(rs256(claims)));
  claims["nbf"] = epoch_seconds(seconds(120));
  EXPECT_EQ(failure(check(rs256(claims))), jwt_error_kind::not_yet_valid);
}

TEST(Jwt, ExpBeforeIatIsRefused) {
  // As jose4j refuses it under Kafka's BrokerJwtValidator, even when neither is in the past.
  json claims = good_claims();
  claims["iat"] = epoch_seconds(seconds(300));
  claims["exp"] = epoch_seconds(seconds(200));
  EXPECT_EQ(failure(check(rs256(claims))), jwt_error_kind::claims);
}

TEST(Jwt, ExpAndIatAreRequired) {
  for (const char* name : {"exp", "iat"}) {
    json claims = good_claims();
    claims.erase(name);
    EXPECT_EQ(failure(check(rs256(claims))), jwt_error_kind::claims) << name;
    claims[name] = -5;
    EXPECT_EQ(failure(check(rs256(claims))), jwt_error_kind::claims) << name;
    claims[name] = "soon";
    EXPECT_EQ(failure(check(rs256(claims))), jwt_error_kind::malformed) << name;
    claims[name] = 1e300;
    EXPECT_EQ(failure(check(rs256(claims))), jwt_error_kind::malformed) << name;
  }
}

TEST(Jwt, FractionalDatesAreCutToWholeSeconds) {
  json claims = good_claims();
  claims["exp"] = 4'000'000'000.9;
  auto t = check(rs256(claims));
  ASSERT_TRUE(t) << t.error().detail;
  EXPECT_EQ(t->expires.time_since_epoch(), seconds(4'000'000'000));
}

TEST(Jwt, AudienceMustMatchOneExpected) {
  json claims = good_claims();
  claims["aud"] = "other";
  EXPECT_EQ(failure(check(rs256(claims))), jwt_error_kind::audience);
  claims["aud"] = {"other", "kafka"};
  EXPECT_TRUE(check(rs256(claims)));
  claims["aud"] = json::array();
  EXPECT_EQ(failure(check(rs256(claims))), jwt_error_kind::audience);
  claims["aud"] = {"kafka", 7};
  EXPECT_EQ(failure(check(rs256(claims))), jwt_error_kind::malformed);
  claims.erase("aud");
  EXPECT_EQ(failure(check(rs256(claims))), jwt_error_kind::audience);
}

TEST(Jwt, AnAudienceWithNoneExpectedIsRefusedAsJose4jRefusesIt) {
  jwt_options o = expecting();
  o.expected_audience.clear();
  EXPECT_EQ(failure(check(rs256(good_claims()), o)), jwt_error_kind::audience);
  json claims = good_claims();
  claims.erase("aud");
  EXPECT_TRUE(check(rs256(claims), o));
}

TEST(Jwt, IssuerMustBeTheExpectedOne) {
  json claims = good_claims();
  claims["iss"] = "https://evil.example";
  EXPECT_EQ(failure(check(rs256(claims))), jwt_error_kind::issuer);
  claims.erase("iss");
  EXPECT_EQ(failure(check(rs256(claims))), jwt_error_kind::issuer);
  jwt_options any_issuer = expecting();
  any_issuer.expected_issuer.reset();
  EXPECT_TRUE(check(rs256(claims), any_issuer));
  claims["iss"] = 5;
  EXPECT_EQ(failure(check(rs256(claims), any_issuer)), jwt_error_kind::malformed);
}

TEST(Jwt, UnknownKidIsNoKeyAndNamesIt) {
  auto r = check(rs256(good_claims(), "rotated-in"));
  ASSERT_EQ(failure(r), jwt_error_kind::no_key);
  EXPECT_EQ(r.error().kid, "rotated-in");
  // A kid whose key is of another type fits no key either.
  EXPECT_EQ(failure(check(make_token(rsa_key(), jws_alg::rs256, "ec-1", good_claims()))),
            jwt_error_kind::no_key);
}

TEST(Jwt, BadSignaturesAreRefused) {
  // Signed by another key under the known kid.
  EXPECT_EQ(failure(check(make_token(other_rsa_key(), jws_alg::rs256, "rsa-1", good_claims()))),
            jwt_error_kind::signature);
  // A flipped bit in the signature, and claims changed after signing.
  std::string token = rs256(good_claims());
  const size_t dot = token.rfind('.');
  std::string sig = *base64url_decode(token.substr(dot + 1));
  sig[10] ^= 1;
  EXPECT_EQ(failure(check(token.substr(0, dot + 1) + base64url_encode(sig))),
            jwt_error_kind::signature);
  json claims = good_claims();
  claims["sub"] = "mallory";
  const size_t first = token.find('.');
  const std::string forged =
      token.substr(0, first + 1) + base64url_encode(claims.dump()) + token.substr(dot);
  EXPECT_EQ(failure(check(forged)), jwt_error_kind::signature);
  // A signature a byte short (RSA), and an ECDSA signature of the wrong size.
  auto shortened = [](const std::string& t) {
    const size_t d = t.rfind('.');
    const std::string bytes = *base64url_decode(t.substr(d + 1));
    return t.substr(0, d + 1) + base64url_encode(bytes.substr(0, bytes.size() - 1));
  };
  EXPECT_EQ(failure(check(shortened(token))), jwt_error_kind::signature);
  const std::string es = make_token(ec_key("P-256"), jws_alg::es256, "ec-1", good_claims());
  EXPECT_TRUE(check(es));
  EXPECT_EQ(failure(check(shortened(es))), jwt_error_kind::signature);
  EXPECT_EQ(
      failure(check(es.substr(0, es.rfind('.') + 1) + base64url_encode(std::string(64, '\0')))),
      jwt_error_kind::signature);
  // PS256 verified as RS256 (the header says RS256, the signature is PSS).
  const std::string header = R"({"alg":"RS256","kid":"rsa-1"})";
  const std::string input = base64url_encode(header) + "." + base64url_encode(good_claims().dump());
  EXPECT_EQ(failure(check(input + "." + base64url_encode(rsa_key().sign(jws_alg::ps256, input)))),
            jwt_error_kind::signature);
}

TEST(Jwt, UnsignedAndHmacTokensAreRefused) {
  const std::string claims = base64url_encode(good_claims().dump());
  for (const char* header :
       {R"({"alg":"none"})", R"({"alg":"HS256","kid":"rsa-1"})", R"({"alg":"HS512"})",
        R"({"alg":"RS1"})", R"({"alg":"rs256","kid":"rsa-1"})", R"({"kid":"rsa-1"})",
        R"({"alg":null})", R"({"alg":"RS256","kid":"rsa-1","crit":["exp"]})"}) {
    const std::string token = base64url_encode(header) + "." + claims + ".c2ln";
    EXPECT_EQ(failure(check(token)), jwt_error_kind::algorithm) << header;
    EXPECT_FALSE(read_jwt_header(token, expecting())) << header;
  }
  // alg none with an empty signature part is refused before anything else.
  EXPECT_EQ(failure(check(base64url_encode(R"({"alg":"none"})") + "." + claims + ".")),
            jwt_error_kind::malformed);
}

TEST(Jwt, HeaderReadsAlgAndKid) {
  auto h = read_jwt_header(rs256(good_claims()), expecting());
  ASSERT_TRUE(h) << h.error().detail;
  EXPECT_EQ(h->alg, jws_alg::rs256);
  EXPECT_EQ(h->kid, "rsa-1");
}

TEST(Jwt, MalformedTokensAreRefused) {
  const std::string good = rs256(good_claims());
  const size_t first = good.find('.');
  const size_t second = good.find('.', first + 1);
  const std::string header = good.substr(0, first);
  const std::string payload = good.substr(first + 1, second - first - 1);
  const std::string sig = good.substr(second + 1);
  // Each case is its pieces, concatenated.
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"."},
      {".."},
      {header, ".", payload},
      {header, ".", payload, ".", sig, "."},
      {header, "..", sig},
      {".", payload, ".", sig},
      {header, "=.", payload, ".", sig},           // padding
      {header, ".", payload, ".", sig, "="},       // padding
      {header, ".", payload, ".", sig, "+"},       // another alphabet
      {header, ".", payload, ".", sig.substr(1)},  // 4k+1 characters
      {"e30.", payload, ".", sig},                 // {} as the header: no alg
      {base64url_encode("[]"), ".", payload, ".", sig},
      {base64url_encode("{\"alg\":\"RS256\""), ".", payload, ".", sig},
      {header, " .", payload, ".", sig},
  };
  for (const auto& pieces : cases) {
    std::string bad;
    for (const auto& piece : pieces) bad += piece;
    EXPECT_FALSE(check(bad)) << bad;
  }
}

TEST(Jwt, PayloadsThatAreNotJsonObjectsAreRefusedEvenWhenSigned) {
  for (const std::string& claims :
       std::vector<std::string>{"[]", "\"alice\"", "{\"sub\":\"alice\"",
                                "{\"sub\":\"a\",\"sub\":\"b\"}", "{\"sub\":\"\xff\"}"}) {
    const std::string token =
        make_token(rsa_key(), jws_alg::rs256, R"({"alg":"RS256","kid":"rsa-1"})", claims);
    EXPECT_EQ(failure(check(token)), jwt_error_kind::malformed) << claims;
  }
}

TEST(Jwt, HugeTokensAreRefusedBeforeDecoding) {
  jwt_options o = expecting();
  json claims = good_claims();
  claims["padding"] = std::string(o.max_token_bytes, 'x');
  auto r = check(rs256(claims), o);
  ASSERT_EQ(failure(r), jwt_error_kind::malformed);
  EXPECT_NE(r.error().detail.find("longer"), std::string::npos);
  o.max_token_bytes = 1 << 20;
  EXPECT_TRUE(check(rs256(claims), o));
}

TEST(Jwt, DeeplyNestedJsonIsRefused) {
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  // In the header (never verified: refused while reading it).
  const std::string token = base64url_encode("{\"alg\":\"RS256\",\"x\":" + deep + "}") + "." +
                            base64url_encode(good_claims().dump()) + ".c2ln";
  EXPECT_EQ(failure(check(token)), jwt_error_kind::malformed);
  // In signed claims.
  std::string claims = good_claims().dump();
  claims.insert(claims.size() - 1, ",\"x\":" + deep);
  const std::string signed_deep =
      make_token(rsa_key(), jws_alg::rs256, R"({"alg":"RS256","kid":"rsa-1"})", claims);
  EXPECT_EQ(failure(check(signed_deep)), jwt_error_kind::malformed);
  // Nesting within the bound is fine (Keycloak's resource_access.client.roles).
  json nested = good_claims();
  nested["resource_access"] = {{"kafka", {{"roles", {"admin"}}}}};
  EXPECT_TRUE(check(rs256(nested)));
}

TEST(Jwt, ThePrincipalComesFromTheConfiguredClaimTrimmed) {
  jwt_options o = expecting();
  o.sub_claim_name = "preferred_username";
  json claims = good_claims();
  claims["preferred_username"] = "  bob\t";
  auto t = check(rs256(claims), o);
  ASSERT_TRUE(t) << t.error().detail;
  EXPECT_EQ(t->principal, "bob");
  claims["preferred_username"] = "   ";
  EXPECT_EQ(failure(check(rs256(claims), o)), jwt_error_kind::claims);
  claims["preferred_username"] = 42;
  EXPECT_EQ(failure(check(rs256(claims), o)), jwt_error_kind::claims);
  claims.erase("preferred_username");
  EXPECT_EQ(failure(check(rs256(claims), o)), jwt_error_kind::claims);
  // The standard sub, when present, must still be a string.
  claims["preferred_username"] = "bob";
  claims["sub"] = {"x"};
  EXPECT_EQ(failure(check(rs256(claims), o)), jwt_error_kind::malformed);
}

TEST(Jwt, ScopeAsKafkaReadsIt) {
  jwt_options o = expecting();
  o.scope_claim_name = "scp";
  json claims = good_claims();
  claims["scp"] = {"read", " write "};
  auto t = check(rs256(claims), o);
  ASSERT_TRUE(t) << t.error().detail;
  EXPECT_EQ(t->scope, (std::vector<std::string>{"read", "write"}));
  claims["scp"] = "read write";  // a string is one scope, as Kafka reads it
  t = check(rs256(claims), o);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->scope, std::vector<std::string>{"read write"});
  claims["scp"] = 12;  // neither string nor array: no scope
  t = check(rs256(claims), o);
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->scope.empty());
  for (const json& bad : {json{"read", "read"}, json{"read", ""}, json{"read", 1}, json("  ")}) {
    claims["scp"] = bad;
    EXPECT_EQ(failure(check(rs256(claims), o)), jwt_error_kind::claims) << bad.dump();
  }
}

TEST(JwkSet, KeepsUsableKeysAndSaysWhyOthersAreLeftOut) {
  json small_rsa = signing_key::rsa(1024).jwk("small");
  json off_curve = ec_key("P-256").jwk("off");
  std::string y = *base64url_decode(off_curve["y"].get<std::string>());
  y[31] ^= 1;
  off_curve["y"] = base64url_encode(y);
  json short_x = ec_key("P-256").jwk("short");
  short_x["x"] = base64url_encode(std::string(31, 'x'));
  auto set = jwk_set::parse(testing::jwks_document(
      {rsa_key().jwk("rsa-1"), small_rsa, off_curve, short_x,
       json{{"kty", "oct"}, {"k", "c2VjcmV0"}}, json{{"kty", "RSA"}, {"n", 5}}, json("x"),
       ec_key("P-384").jwk("ec-2")}));
  ASSERT_TRUE(set) << set.error();
  EXPECT_EQ(set->size(), 2u);
  EXPECT_EQ(set->skipped().size(), 6u);
  EXPECT_TRUE(set->contains("rsa-1"));
  EXPECT_TRUE(set->contains("ec-2"));
  EXPECT_FALSE(set->contains("small"));
  for (const auto& why : set->skipped()) EXPECT_EQ(why.find("c2VjcmV0"), std::string::npos);
}

TEST(JwkSet, UseAndAlgOfAKeyLimitWhatItVerifies) {
  const jwk_set set = keys_of({rsa_key().jwk("enc", "", "enc"), rsa_key().jwk("ps", "PS256"),
                               rsa_key().jwk("sig", "RS256", "sig")});
  EXPECT_EQ(set.find(jws_alg::rs256, "enc"), nullptr);
  EXPECT_EQ(set.find(jws_alg::rs256, "ps"), nullptr);
  EXPECT_NE(set.find(jws_alg::ps256, "ps"), nullptr);
  EXPECT_NE(set.find(jws_alg::rs256, "sig"), nullptr);
  EXPECT_EQ(set.find(jws_alg::rs256, std::nullopt)->kid(), "sig");
  EXPECT_EQ(set.find(jws_alg::es256, std::nullopt), nullptr);
}

TEST(JwkSet, RefusesDocumentsThatAreNoKeySet) {
  for (const char* bad :
       {"", "[]", "{}", R"({"keys":{}})", R"({"keys":[],"keys":[]})", "{\"keys\":["}) {
    EXPECT_FALSE(jwk_set::parse(bad)) << bad;
  }
  EXPECT_TRUE(jwk_set::parse(R"({"keys":[]})"));
  std::string many = "{\"keys\":[";
  for (size_t i = 0; i <= jwk_set::max_entries; ++i) many += (i ? ",{}" : "{}");
  EXPECT_FALSE(jwk_set::parse(many + "]}"));
}

}  // namespace
}  // namespace silt::security
