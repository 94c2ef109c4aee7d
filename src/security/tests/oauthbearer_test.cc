// SASL/OAUTHBEARER as Kafka's OAuthBearerSaslServer runs it: the client message's grammar
// (OAuthBearerClientInitialResponseTest's cases), the exchange's steps, and a key rotated in
// at the identity provider.
#include "security/oauthbearer.h"

#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "security/tests/test_keys.h"

namespace silt::security {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::good_claims;
using testing::jwks_document;
using testing::make_token;
using testing::signing_key;

const signing_key& key() {
  static const signing_key k = signing_key::rsa(2048);
  return k;
}
const signing_key& rotated_key() {
  static const signing_key k = signing_key::ec("P-256");
  return k;
}

std::vector<uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

std::string client_message(const std::string& token, const std::string& authzid = "",
                           const std::string& extensions = "") {
  return "n," + (authzid.empty() ? "" : "a=" + authzid) + ",\x01" + "auth=Bearer " + token +
         "\x01" + extensions + "\x01";
}

tl::expected<oauthbearer_message, std::string> parse(std::string_view m) {
  return parse_oauthbearer_message(bytes(m));
}

TEST(OauthbearerMessage, ParsesKafkasClientMessages) {
  auto m = parse(
      "n,,\x01"
      "auth=Bearer 123.345.567\x01\x01");
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->token, "123.345.567");
  EXPECT_EQ(m->authzid, "");
  EXPECT_TRUE(m->extensions.empty());

  m = parse(
      "n,a=myuser,\x01"
      "auth=Bearer 123.345.567\x01\x01");
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->authzid, "myuser");

  // Extensions, the scheme in any case, spaces before the token, padding after it.
  m = parse(
      "n,,\x01"
      "propA=valueA1, valueA2\x01"
      "auth=BEARER   abc-_~+/.9==\x01"
      "propB=valueB\x01\x01");
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->token, "abc-_~+/.9==");
  ASSERT_EQ(m->extensions.size(), 2u);
  EXPECT_EQ(m->extensions[0], (std::pair<std::string, std::string>("propA", "valueA1, valueA2")));
  EXPECT_EQ(m->extensions[1].first, "propB");

  // =2C and =3D escape ',' and '=' in the authorization id (kept as sent).
  m = parse(
      "n,a=a=2Cb=3Dc,\x01"
      "auth=Bearer t\x01\x01");
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->authzid, "a=2Cb=3Dc");

  // A key given twice counts once, with its last value.
  m = parse(
      "n,,\x01"
      "auth=Bearer first\x01"
      "x=1\x01"
      "auth=Bearer second\x01"
      "x=2\x01\x01");
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->token, "second");
  ASSERT_EQ(m->extensions.size(), 1u);
  EXPECT_EQ(m->extensions[0].second, "2");
}

TEST(OauthbearerMessage, RefusesWhatKafkaRefuses) {
  for (const std::string& bad : {
           std::string(),
           std::string("\x01"),
           std::string("y,,\x01"
                       "auth=Bearer t\x01\x01"),  // GS2 channel binding flag
           std::string("n,\x01"
                       "auth=Bearer t\x01\x01"),  // one comma
           std::string("n,a=,\x01"
                       "auth=Bearer t\x01\x01"),  // empty authzid
           std::string("n,a=x=2D,\x01"
                       "auth=Bearer t\x01\x01"),  // bad escape
           std::string("n,a=\xc3\xa9,\x01"
                       "auth=Bearer t\x01\x01"),
           std::string("n,,auth=Bearer t\x01\x01"),  // no separator
           std::string("n,,\x01"
                       "auth=Bearer t\x01"),  // no final separator
           std::string("n,,\x01"
                       "auth=Bearer t\x01\x01x"),  // bytes after it
           std::string("n,,\x01\x01"),             // no auth
           std::string("n,,\x01"
                       "x=1\x01\x01"),  // no auth
           std::string("n,,\x01"
                       "auth=\x01\x01"),  // empty value
           std::string("n,,\x01"
                       "auth=Bearer\x01\x01"),  // no token
           std::string("n,,\x01"
                       "auth=Bearer \x01\x01"),  // no token
           std::string("n,,\x01"
                       "auth=Basic dXNlcjpwYXNz\x01\x01"),
           std::string("n,,\x01"
                       "auth=Bearer a b\x01\x01"),  // space in the token
           std::string("n,,\x01"
                       "auth=Bearer a=b\x01\x01"),  // '=' inside the token
           std::string("n,,\x01"
                       "auth=Bearer t\x01"
                       "k1=v\x01\x01"),  // digit in a key
           std::string("n,,\x01"
                       "auth=Bearer t\x01"
                       "=v\x01\x01"),  // empty key
           std::string("n,,\x01"
                       "auth=Bearer t\x01"
                       "k=\x01\x01"),  // empty value
           std::string("n,,\x01"
                       "auth=Bearer t\x01"
                       "k=v\x7f\x01\x01"),
           std::string("n,,\x01"
                       "auth=Bearer t\x01"
                       "k=v\xc3\xa9\x01\x01"),
           std::string("n,,\x01"
                       "auth=Bearer t\x01"
                       "k=\0\x01\x01",
                       23),
       }) {
    EXPECT_FALSE(parse(bad)) << ::testing::PrintToString(bad);
  }
}

class OauthbearerExchange : public ::testing::Test {
 protected:
  OauthbearerExchange() {
    auto keys = jwks_source::fixed(jwks_document({key().jwk("k1")}));
    EXPECT_TRUE(keys) << keys.error();
    jwt_options o;
    o.expected_audience = {"kafka"};
    o.expected_issuer = "https://idp.example";
    mechanism_ = std::make_unique<oauthbearer_mechanism>(std::move(*keys), o);
  }

  static std::string token(const json& claims = good_claims()) {
    return make_token(key(), jws_alg::rs256, "k1", claims);
  }

  std::unique_ptr<oauthbearer_mechanism> mechanism_;
};

TEST_F(OauthbearerExchange, AValidTokenAuthenticatesItsSubjectUntilItExpires) {
  EXPECT_EQ(mechanism_->name(), "OAUTHBEARER");
  json claims = good_claims();
  claims["exp"] = 4'000'000'000;
  auto exchange = mechanism_->start();
  const sasl_result r = exchange->step(bytes(client_message(token(claims))));
  ASSERT_EQ(r.status, sasl_result::state::done) << r.detail;
  EXPECT_EQ(r.principal, "alice");
  EXPECT_TRUE(r.reply.empty());
  ASSERT_TRUE(r.expires);
  EXPECT_EQ(r.expires->time_since_epoch(), 4'000'000'000s);
  // The exchange is over.
  EXPECT_EQ(exchange->step(bytes(client_message(token()))).status, sasl_result::state::failed);
}

TEST_F(OauthbearerExchange, AnInvalidTokenIsAChallengeThenAFailure) {
  json claims = good_claims();
  claims["exp"] = testing::epoch_seconds(-1h);
  auto exchange = mechanism_->start();
  const sasl_result challenge = exchange->step(bytes(client_message(token(claims))));
  ASSERT_EQ(challenge.status, sasl_result::state::more);
  EXPECT_EQ(std::string(challenge.reply.begin(), challenge.reply.end()),
            R"({"status":"invalid_token"})");
  const sasl_result failed = exchange->step(bytes("\x01"));
  ASSERT_EQ(failed.status, sasl_result::state::failed);
  EXPECT_EQ(failed.error, R"({"status":"invalid_token"})");
  EXPECT_NE(failed.detail.find("expired"), std::string::npos) << failed.detail;
  EXPECT_EQ(exchange->step(bytes("\x01")).status, sasl_result::state::failed);
}

TEST_F(OauthbearerExchange, EveryTokenFailureLooksTheSameToTheClient) {
  json wrong_aud = good_claims();
  wrong_aud["aud"] = "other";
  json wrong_iss = good_claims();
  wrong_iss["iss"] = "https://evil.example";
  std::string bad_sig = token();
  bad_sig[bad_sig.size() - 3] = bad_sig[bad_sig.size() - 3] == 'A' ? 'B' : 'A';
  for (const std::string& t : {token(wrong_aud), token(wrong_iss), bad_sig,
                               make_token(key(), jws_alg::rs256, "k9", good_claims()),
                               std::string("a.b.c"), std::string("e30.e30.e30")}) {
    auto exchange = mechanism_->start();
    const sasl_result r = exchange->step(bytes(client_message(t)));
    ASSERT_EQ(r.status, sasl_result::state::more) << r.detail;
    EXPECT_EQ(std::string(r.reply.begin(), r.reply.end()), oauthbearer_invalid_token);
    const sasl_result f = exchange->step(bytes("\x01"));
    EXPECT_EQ(f.error, oauthbearer_invalid_token);
    EXPECT_EQ(f.detail.find(t), std::string::npos) << "the log line quotes the token";
  }
}

TEST_F(OauthbearerExchange, AnotherMessageAfterTheChallengeStartsOver) {
  json claims = good_claims();
  claims["aud"] = "other";
  auto exchange = mechanism_->start();
  ASSERT_EQ(exchange->step(bytes(client_message(token(claims)))).status, sasl_result::state::more);
  const sasl_result r = exchange->step(bytes(client_message(token())));
  EXPECT_EQ(r.status, sasl_result::state::done) << r.detail;
}

TEST_F(OauthbearerExchange, AMalformedMessageFailsAtOnce) {
  for (const std::string& m :
       {std::string("\x01"), std::string("n,,\x01\x01"), std::string("auth=Bearer ") + token()}) {
    auto exchange = mechanism_->start();
    const sasl_result r = exchange->step(bytes(m));
    ASSERT_EQ(r.status, sasl_result::state::failed);
    EXPECT_EQ(r.error, invalid_credentials_message("OAUTHBEARER"));
  }
  // Longer than any token allowed: not even parsed.
  auto exchange = mechanism_->start();
  const sasl_result r = exchange->step(bytes(client_message(std::string(200'000, 'a'))));
  EXPECT_EQ(r.status, sasl_result::state::failed);
}

TEST_F(OauthbearerExchange, TheAuthorizationIdMustBeThePrincipal) {
  auto exchange = mechanism_->start();
  EXPECT_EQ(exchange->step(bytes(client_message(token(), "alice"))).status,
            sasl_result::state::done);
  exchange = mechanism_->start();
  const sasl_result r = exchange->step(bytes(client_message(token(), "bob")));
  ASSERT_EQ(r.status, sasl_result::state::failed);
  EXPECT_EQ(r.error,
            "Authentication failed: Client requested an authorization id (bob) that is different "
            "from the token's principal name (alice)");
}

TEST_F(OauthbearerExchange, ExtensionsAreAcceptedAndIgnored) {
  auto exchange = mechanism_->start();
  const sasl_result r =
      exchange->step(bytes(client_message(token(), "", "logicalCluster=lkc-1\x01")));
  EXPECT_EQ(r.status, sasl_result::state::done) << r.detail;
}

TEST_F(OauthbearerExchange, AnExchangeOutlivesItsMechanism) {
  auto exchange = mechanism_->start();
  mechanism_.reset();
  EXPECT_EQ(exchange->step(bytes(client_message(token()))).status, sasl_result::state::done);
}

TEST(OauthbearerMechanism, AKeyRotatedInIsFetchedWhenATokenNamesIt) {
  const fs::path dir = fs::temp_directory_path() / ("silt-oauth-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "jwks.json";
  std::ofstream(file) << jwks_document({key().jwk("k1")});
  oauthbearer_options o;
  o.jwks.url = "file://" + file.string();
  o.token.expected_audience = {"kafka"};
  auto mechanism = oauthbearer_mechanism::open(o);
  ASSERT_TRUE(mechanism) << mechanism.error();

  // The identity provider starts signing with a new key, published with the old one.
  std::ofstream(dir / "next.json") << jwks_document({key().jwk("k1"), rotated_key().jwk("k2")});
  fs::rename(dir / "next.json", file);
  const std::string rotated = make_token(rotated_key(), jws_alg::es256, "k2", good_claims());
  auto first = (*mechanism)->start();
  const sasl_result refused = first->step(bytes(client_message(rotated)));
  EXPECT_EQ(refused.status, sasl_result::state::more);  // not known yet: no wait on the file

  const auto until = std::chrono::steady_clock::now() + 5s;
  while ((*mechanism)->keys()->loads() < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(5ms);
  }
  auto second = (*mechanism)->start();
  const sasl_result r = second->step(bytes(client_message(rotated)));
  EXPECT_EQ(r.status, sasl_result::state::done) << r.detail;
  EXPECT_EQ(r.principal, "alice");
  fs::remove_all(dir);
}

TEST(OauthbearerMechanism, OpenFailsWithoutKeys) {
  oauthbearer_options o;
  o.jwks.url = "/nonexistent/jwks.json";
  o.jwks.retry_backoff_max = 0ms;
  auto mechanism = oauthbearer_mechanism::open(o);
  ASSERT_FALSE(mechanism);
  EXPECT_NE(mechanism.error().find("/nonexistent/jwks.json"), std::string::npos);
}

}  // namespace
}  // namespace silt::security
