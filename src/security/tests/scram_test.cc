// SCRAM on the broker's side: RFC 7677's example exchange replayed against the mechanism, a
// SHA-512 exchange computed independently (Python's hashlib), wrong passwords and unknown users
// refused alike, and the malformed, replayed or oversized messages a hostile client may send.
#include "security/scram.h"

#include <cctype>
#include <map>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "security/base64.h"

namespace silt::security {
namespace {

std::span<const uint8_t> bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string text(const std::vector<uint8_t>& v) {
  return {v.begin(), v.end()};
}

std::vector<uint8_t> b64(std::string_view s) {
  auto d = base64_decode(s);
  EXPECT_TRUE(d) << s;
  return d.value_or(std::vector<uint8_t>{});
}

class map_source final : public scram_credential_source {
 public:
  void add(const std::string& user, scram_algorithm a, scram_credential c) {
    creds_[{user, a}] = std::move(c);
  }
  std::optional<scram_credential> find(std::string_view user, scram_algorithm a) const override {
    auto it = creds_.find({std::string(user), a});
    if (it == creds_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::map<std::pair<std::string, scram_algorithm>, scram_credential> creds_;
};

scram_options fixed_nonce(const std::string& nonce) {
  return {.server_nonce = [nonce] { return nonce; }};
}

// RFC 7677 section 3: user "user", password "pencil".
constexpr std::string_view rfc_salt = "W22ZaJ0SNY7soEsUEjb6gQ==";
constexpr std::string_view rfc_client_first = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
constexpr std::string_view rfc_server_nonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
constexpr std::string_view rfc_server_first =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
constexpr std::string_view rfc_client_final =
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
constexpr std::string_view rfc_server_final = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

// ClientProof, in base64, of `password` for an AuthMessage (RFC 5802), at 4096 iterations.
std::string client_proof(scram_algorithm a, std::string_view password,
                         const std::vector<uint8_t>& salt, std::string_view auth) {
  const auto salted = scram_salted_password(a, password, salt, 4096);
  const auto client_key = scram_hmac(a, salted, bytes("Client Key"));
  auto proof = scram_hmac(a, scram_hash(a, client_key), bytes(auth));
  for (size_t i = 0; i < proof.size(); ++i) proof[i] ^= client_key[i];
  return base64_encode(proof);
}

// A client's side, for exchanges with other nonces, users and headers.
struct test_client {
  scram_algorithm a;
  std::string password;
  std::string gs2 = "n,,";
  std::string bare;
  std::string server_first;

  std::string first(std::string_view saslname, std::string_view nonce) {
    bare = "n=" + std::string(saslname) + ",r=" + std::string(nonce);
    return gs2 + bare;
  }
  // The client-final message for the server's first message; `expected` receives the server
  // signature the client will check.
  std::string last(std::string_view server, std::string* expected = nullptr) {
    server_first = std::string(server);
    const size_t r = server_first.find("r=") + 2;
    const std::string nonce = server_first.substr(r, server_first.find(',') - r);
    const size_t s = server_first.find("s=") + 2;
    const auto salt = b64(server_first.substr(s, server_first.find(",i=") - s));
    const int iterations = std::stoi(server_first.substr(server_first.find("i=") + 2));
    const auto salted = scram_salted_password(a, password, salt, iterations);
    const auto client_key = scram_hmac(a, salted, bytes("Client Key"));
    const auto stored = scram_hash(a, client_key);
    const std::string without_proof = "c=" + base64_encode(bytes(gs2)) + ",r=" + nonce;
    const std::string auth = bare + "," + server_first + "," + without_proof;
    auto proof = scram_hmac(a, stored, bytes(auth));
    for (size_t i = 0; i < proof.size(); ++i) proof[i] ^= client_key[i];
    if (expected != nullptr) {
      *expected = "v=" + base64_encode(scram_hmac(a, scram_hmac(a, salted, bytes("Server Key")),
                                                  bytes(auth)));
    }
    return without_proof + ",p=" + base64_encode(proof);
  }
};

class ScramTest : public ::testing::Test {
 protected:
  ScramTest() {
    source_.add("user", scram_algorithm::sha256,
                make_scram_credential(scram_algorithm::sha256, "pencil", b64(rfc_salt), 4096));
    source_.add(
        "user", scram_algorithm::sha512,
        make_scram_credential(scram_algorithm::sha512, "pencil", bytes("salt-of-sixteen!"), 4096));
  }
  static sasl_result step(sasl_exchange& e, std::string_view message) {
    return e.step(bytes(message));
  }
  // A full exchange as `c`: the final result (or the first step's, when that one failed).
  sasl_result run(const scram_mechanism& m, test_client& c, std::string_view saslname) {
    auto e = m.start();
    auto first = step(*e, c.first(saslname, "clientnonce"));
    if (first.status != sasl_result::state::more) return first;
    return step(*e, c.last(text(first.reply)));
  }
  map_source source_;
};

TEST_F(ScramTest, Rfc7677Sha256ExampleSucceeds) {
  const scram_mechanism m(scram_algorithm::sha256, source_,
                          fixed_nonce(std::string(rfc_server_nonce)));
  EXPECT_EQ(m.name(), "SCRAM-SHA-256");
  auto e = m.start();
  auto first = step(*e, rfc_client_first);
  ASSERT_EQ(first.status, sasl_result::state::more) << first.detail;
  EXPECT_EQ(text(first.reply), rfc_server_first);
  auto last = step(*e, rfc_client_final);
  ASSERT_EQ(last.status, sasl_result::state::done) << last.detail;
  EXPECT_EQ(text(last.reply), rfc_server_final);
  EXPECT_EQ(last.principal, "user");
  EXPECT_FALSE(last.expires);
}

TEST_F(ScramTest, CredentialsFollowRfc5802) {
  // StoredKey and ServerKey of RFC 7677's example, computed with Python's hashlib.
  const auto c = make_scram_credential(scram_algorithm::sha256, "pencil", b64(rfc_salt), 4096);
  EXPECT_EQ(base64_encode(c.stored_key), "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=");
  EXPECT_EQ(base64_encode(c.server_key), "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=");
  EXPECT_EQ(c.iterations, 4096);
  EXPECT_EQ(c.salt, b64(rfc_salt));
  // From the salted password alone (what AlterUserScramCredentials receives): the same.
  const auto salted = scram_salted_password(scram_algorithm::sha256, "pencil", b64(rfc_salt), 4096);
  EXPECT_EQ(salted.size(), 32u);
  EXPECT_EQ(scram_credential_from_salted(scram_algorithm::sha256, b64(rfc_salt), salted, 4096), c);
  const auto c512 =
      make_scram_credential(scram_algorithm::sha512, "pencil", bytes("salt-of-sixteen!"), 4096);
  EXPECT_EQ(
      base64_encode(c512.stored_key),
      "5IYQjVGOLYFHtPB7wJkTGwFhHCl4owfScK8zM+X5tb1ierKmQQ9lApJsyJZVVhnxb1cJs/Rj/3we2TPni4xilA==");
  EXPECT_EQ(
      base64_encode(c512.server_key),
      "fdsvxT6zWqE3sTSlLuy7AYfDDKTljiYTfWqjyetbkxomRBgxOibLgzctVcqmhfAQb77G9vCY4tSjxNwgpUBTMg==");
}

TEST_F(ScramTest, Sha512ExchangeSucceeds) {
  // Messages computed with Python's hashlib and hmac.
  const scram_mechanism m(scram_algorithm::sha512, source_, fixed_nonce("servernonce512"));
  EXPECT_EQ(m.name(), "SCRAM-SHA-512");
  auto e = m.start();
  auto first = step(*e, "n,,n=user,r=clientnonce512");
  ASSERT_EQ(first.status, sasl_result::state::more) << first.detail;
  EXPECT_EQ(text(first.reply), "r=clientnonce512servernonce512,s=c2FsdC1vZi1zaXh0ZWVuIQ==,i=4096");
  auto last =
      step(*e,
           "c=biws,r=clientnonce512servernonce512,p=bH1S9tDprBwn2VYOvwwCAgAw4itKVT1iyvxDhHxh5"
           "FKXXN4sPhExtyLWaddlwB8v6ErDz1AezhsSsYgIPJQzdQ==");
  ASSERT_EQ(last.status, sasl_result::state::done) << last.detail;
  EXPECT_EQ(text(last.reply),
            "v=f1vJkjxI3hokhpd84dxehnbgMrxVkSr673IfF5jIvMS1rJdbEPFVZCCU693D7dCtWZYyN7Baqsjyh63ZGZGA"
            "+Q==");
  EXPECT_EQ(last.principal, "user");
}

TEST_F(ScramTest, RandomServerNoncesDiffer) {
  const scram_mechanism m(scram_algorithm::sha256, source_);
  test_client c{scram_algorithm::sha256, "pencil"};
  auto a = m.start();
  auto b = m.start();
  const auto ra = text(step(*a, c.first("user", "same")).reply);
  const auto rb = text(step(*b, c.first("user", "same")).reply);
  EXPECT_NE(ra, rb);
  EXPECT_TRUE(ra.starts_with("r=same")) << ra;
  // And the exchange completes with one.
  std::string expected;
  auto last = step(*a, c.last(ra, &expected));
  ASSERT_EQ(last.status, sasl_result::state::done) << last.detail;
  EXPECT_EQ(text(last.reply), expected);
}

TEST_F(ScramTest, WrongPasswordFailsAtTheLastStep) {
  const scram_mechanism m(scram_algorithm::sha256, source_);
  test_client c{scram_algorithm::sha256, "pencil2"};
  auto r = run(m, c, "user");
  ASSERT_EQ(r.status, sasl_result::state::failed);
  EXPECT_EQ(r.error, invalid_credentials_message("SCRAM-SHA-256"));
  EXPECT_TRUE(r.reply.empty());
  EXPECT_TRUE(r.principal.empty());
  // The password of the other mechanism's credential does not matter: each is its own.
  test_client right{scram_algorithm::sha512, "pencil"};
  EXPECT_EQ(run(scram_mechanism(scram_algorithm::sha512, source_), right, "user").status,
            sasl_result::state::done);
}

TEST_F(ScramTest, UnknownUserLooksLikeAWrongPassword) {
  const scram_mechanism m(scram_algorithm::sha256, source_);
  test_client c{scram_algorithm::sha256, "pencil"};
  auto e = m.start();
  auto first = step(*e, c.first("nobody", "n1"));
  // The exchange goes on, with a salt and iterations as a real user's.
  ASSERT_EQ(first.status, sasl_result::state::more) << first.detail;
  const std::string server_first = text(first.reply);
  EXPECT_NE(server_first.find(",i=4096"), std::string::npos) << server_first;
  const auto last = step(*e, c.last(server_first));
  ASSERT_EQ(last.status, sasl_result::state::failed);
  test_client wrong{scram_algorithm::sha256, "nope"};
  EXPECT_EQ(last.error, run(m, wrong, "user").error);
  // The same salt at every attempt and on every listener (another mechanism object), another
  // for another user.
  const auto salt_of = [](const std::string& sf) {
    return sf.substr(sf.find(",s="), sf.find(",i=") - sf.find(",s="));
  };
  const scram_mechanism another(scram_algorithm::sha256, source_);
  auto again = another.start();
  const std::string second = text(step(*again, c.first("nobody", "n2")).reply);
  EXPECT_EQ(salt_of(server_first), salt_of(second));
  auto other = m.start();
  const std::string third = text(step(*other, c.first("somebody", "n3")).reply);
  EXPECT_NE(salt_of(server_first), salt_of(third));
  // Shaped as the salts of Kafka's tools: 26 characters of base 36.
  const auto made_up = m.made_up_credential("nobody");
  EXPECT_EQ(made_up.salt.size(), 26u);
  for (const uint8_t ch : made_up.salt) EXPECT_TRUE(std::isalnum(ch) && !std::isupper(ch));
  EXPECT_EQ(made_up.iterations, 4096);
}

TEST_F(ScramTest, SaslnamesAreDecoded) {
  source_.add("a,b=c", scram_algorithm::sha256,
              make_scram_credential(scram_algorithm::sha256, "pw", bytes("salty"), 4096));
  const scram_mechanism m(scram_algorithm::sha256, source_);
  test_client c{scram_algorithm::sha256, "pw"};
  auto r = run(m, c, "a=2Cb=3Dc");
  ASSERT_EQ(r.status, sasl_result::state::done) << r.detail;
  EXPECT_EQ(r.principal, "a,b=c");
  // UTF-8 names are names too.
  source_.add("Jürgen", scram_algorithm::sha256,
              make_scram_credential(scram_algorithm::sha256, "pw", bytes("salty"), 4096));
  EXPECT_EQ(run(m, c, "Jürgen").principal, "Jürgen");
}

TEST_F(ScramTest, AuthorizationIdMustBeTheUser) {
  const scram_mechanism m(scram_algorithm::sha256, source_);
  test_client same{scram_algorithm::sha256, "pencil", "n,a=user,"};
  auto r = run(m, same, "user");
  ASSERT_EQ(r.status, sasl_result::state::done) << r.detail;
  EXPECT_EQ(r.principal, "user");
  test_client other{scram_algorithm::sha256, "pencil", "n,a=admin,"};
  r = run(m, other, "user");
  ASSERT_EQ(r.status, sasl_result::state::failed);
  EXPECT_EQ(r.error,
            "Authentication failed: Client requested an authorization id that is different from "
            "username");
}

TEST_F(ScramTest, ClientWithoutChannelBindingSupportIsAccepted) {
  // "y": the client could bind but thinks the server cannot; c= then carries "y,,".
  const scram_mechanism m(scram_algorithm::sha256, source_);
  test_client c{scram_algorithm::sha256, "pencil", "y,,"};
  auto r = run(m, c, "user");
  ASSERT_EQ(r.status, sasl_result::state::done) << r.detail;
}

TEST_F(ScramTest, ChannelBindingIsRefused) {
  const scram_mechanism m(scram_algorithm::sha256, source_);
  auto e = m.start();
  auto r = step(*e, "p=tls-unique,,n=user,r=abc");
  ASSERT_EQ(r.status, sasl_result::state::failed);
  EXPECT_EQ(r.error, invalid_credentials_message("SCRAM-SHA-256"));
  // A final message whose channel binding is not the first message's header: "y,," (eSws) sent
  // after "n,," and the other way round.
  for (const auto& [gs2, binding] : {std::pair{"n,,", "eSws"}, std::pair{"y,,", "biws"}}) {
    test_client c{scram_algorithm::sha256, "pencil", gs2};
    auto ex = m.start();
    auto first = step(*ex, c.first("user", "x"));
    ASSERT_EQ(first.status, sasl_result::state::more);
    std::string message = c.last(text(first.reply));
    message.replace(2, 4, binding);
    EXPECT_EQ(step(*ex, message).status, sasl_result::state::failed) << gs2;
  }
}

TEST_F(ScramTest, DelegationTokensAreRefused) {
  const scram_mechanism m(scram_algorithm::sha256, source_);
  auto e = m.start();
  auto r = step(*e, "n,,n=user,r=abc,tokenauth=true");
  ASSERT_EQ(r.status, sasl_result::state::failed);
  EXPECT_EQ(r.error, invalid_credentials_message("SCRAM-SHA-256"));
  // Other extensions are ignored, as Kafka does (and are part of the signed message).
  test_client c{scram_algorithm::sha256, "pencil"};
  auto ex = m.start();
  const std::string first = c.first("user", "abc") + ",foo=bar";
  c.bare += ",foo=bar";
  auto sf = step(*ex, first);
  ASSERT_EQ(sf.status, sasl_result::state::more) << sf.detail;
  EXPECT_EQ(step(*ex, c.last(text(sf.reply))).status, sasl_result::state::done);
}

TEST_F(ScramTest, MalformedClientFirstMessagesFail) {
  const scram_mechanism m(scram_algorithm::sha256, source_);
  const std::string long_name(scram_max_message_bytes, 'u');
  const std::vector<std::string> messages = {"",
                                             "n",
                                             "n,",
                                             "n,,",
                                             "x,,n=user,r=abc",
                                             "n,n=user,r=abc",
                                             "nn,,n=user,r=abc",
                                             "n,,",
                                             "n,,r=abc,n=user",
                                             "n,,n=user",
                                             "n,,n=user,r=",
                                             "n,,n=,r=abc",
                                             "n,,n=us=er,r=abc",
                                             "n,,n=us=2c,r=abc",
                                             "n,,n=user,r=ab c",
                                             "n,,n=user,r=abc,",
                                             "n,,n=user,r=abc,,foo=bar",
                                             "n,,n=user,r=abc,foo",
                                             "n,,n=user,r=abc,foo=",
                                             "n,,n=user,r=abc,f0o=bar",
                                             "n,,n=user,r=abc,p=xyz",
                                             "n,,m=ext,n=user,r=abc",
                                             "n,a=,n=user,r=abc",
                                             "n,a=user",
                                             "n,,n=user,r=abc,foo=b\xc3\xa4r",
                                             std::string("n,,n=us\0er,r=abc", 16),
                                             "n,,n=\xff\xfe,r=abc",
                                             "n,,n=" + long_name + ",r=abc"};
  for (const std::string& bad : messages) {
    auto e = m.start();
    auto r = step(*e, bad);
    EXPECT_EQ(r.status, sasl_result::state::failed) << bad;
    EXPECT_EQ(r.error, invalid_credentials_message("SCRAM-SHA-256")) << bad;
    EXPECT_FALSE(r.detail.empty());
    // Over: nothing more is accepted.
    EXPECT_EQ(step(*e, rfc_client_final).status, sasl_result::state::failed);
  }
}

TEST_F(ScramTest, MalformedClientFinalMessagesFail) {
  const scram_mechanism m(scram_algorithm::sha256, source_,
                          fixed_nonce(std::string(rfc_server_nonce)));
  const std::string nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
  const std::string proof = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
  const std::vector<std::string> messages = {
      std::string(),
      std::string("c=biws"),
      "c=biws,r=" + nonce,
      "c=biws,r=" + nonce + ",p=",
      "c=biws,r=" + nonce + ",p=" + proof.substr(4),
      "c=biws,r=" + nonce + ",p=" + proof + "AAAA",                             // a proof too long
      "c=biws,r=" + nonce + ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVR=",  // non-canonical
      "c=biw,r=" + nonce + ",p=" + proof,
      "c=,r=" + nonce + ",p=" + proof,
      "r=" + nonce + ",c=biws,p=" + proof,
      "c=biws,r=" + nonce + "x,p=" + proof,
      "c=biws,r=rOprNGfwEbeRWgbNEkqO,p=" + proof,  // the client's nonce alone
      "c=biws,r=" + nonce + ",p=" + proof + ",p=" + proof,
      "c=biws,r=" + nonce + ",,p=" + proof,
      "c=biws,r=" + nonce + ",r=" + nonce + ",p=" + proof,
      "c=biws,r=" + nonce + ",p=" + proof + ",x=y",
      "c=biws,r=" + nonce + ",p=" + proof + ","};
  for (const std::string& bad : messages) {
    auto e = m.start();
    ASSERT_EQ(step(*e, rfc_client_first).status, sasl_result::state::more);
    auto r = step(*e, bad);
    EXPECT_EQ(r.status, sasl_result::state::failed) << bad;
    EXPECT_EQ(r.error, invalid_credentials_message("SCRAM-SHA-256")) << bad;
    // A failed exchange cannot be finished with the right message either.
    EXPECT_EQ(step(*e, rfc_client_final).status, sasl_result::state::failed) << bad;
  }
  // An extension before the proof is ignored.
  auto e = m.start();
  ASSERT_EQ(step(*e, rfc_client_first).status, sasl_result::state::more);
  // (It is part of the signed message: the RFC's proof does not cover it.)
  EXPECT_EQ(step(*e, "c=biws,r=" + nonce + ",foo=bar,p=" + proof).status,
            sasl_result::state::failed);
}

// librdkafka before 2.6.1 repeats its nonce in the final message: its own, then the
// server-first message's r=, which begins with it. Kafka 3.8.1 to 3.9 accepted a nonce that
// ends with the server's; Kafka 4 compares it whole again (RFC 5802, CVE-2024-56128), and so
// does Silt: those clients cannot authenticate with SCRAM on either.
TEST_F(ScramTest, AFinalNonceWithMoreThanTheServersIsRefused) {
  const scram_mechanism m(scram_algorithm::sha256, source_, fixed_nonce("SNONCE"));
  for (const std::string_view nonce : {"CNONCECNONCESNONCE", "CNONCESNONCEX", "xCNONCESNONCE"}) {
    auto e = m.start();
    auto first = step(*e, "n,,n=user,r=CNONCE");
    ASSERT_EQ(first.status, sasl_result::state::more) << first.detail;
    const std::string server_first = text(first.reply);
    ASSERT_TRUE(server_first.starts_with("r=CNONCESNONCE,")) << server_first;
    // A proof that is right for the message as sent: only the nonce is wrong.
    const std::string without_proof = "c=biws,r=" + std::string(nonce);
    std::string auth = "n=user,r=CNONCE,";
    auth += server_first;
    auth += ",";
    auth += without_proof;
    auto last = step(*e, without_proof + ",p=" +
                             client_proof(scram_algorithm::sha256, "pencil", b64(rfc_salt), auth));
    EXPECT_EQ(last.status, sasl_result::state::failed) << nonce;
    EXPECT_EQ(last.error, invalid_credentials_message("SCRAM-SHA-256"));
  }
}

TEST_F(ScramTest, OversizedMessagesFail) {
  const scram_mechanism m(scram_algorithm::sha256, source_);
  auto e = m.start();
  const std::string huge = "n,,n=user,r=" + std::string(scram_max_message_bytes, 'x');
  EXPECT_EQ(step(*e, huge).status, sasl_result::state::failed);
}

TEST_F(ScramTest, ReplaysAfterTheEndFail) {
  const scram_mechanism m(scram_algorithm::sha256, source_,
                          fixed_nonce(std::string(rfc_server_nonce)));
  auto e = m.start();
  ASSERT_EQ(step(*e, rfc_client_first).status, sasl_result::state::more);
  ASSERT_EQ(step(*e, rfc_client_final).status, sasl_result::state::done);
  // The same final message again, a new first message, anything: the exchange is over.
  for (const auto msg : {rfc_client_final, rfc_client_first, std::string_view()}) {
    auto r = step(*e, msg);
    EXPECT_EQ(r.status, sasl_result::state::failed);
    EXPECT_TRUE(r.principal.empty());
  }
  // A final message replayed into another exchange meets another server nonce.
  const scram_mechanism random_nonces(scram_algorithm::sha256, source_);
  auto other = random_nonces.start();
  ASSERT_EQ(step(*other, rfc_client_first).status, sasl_result::state::more);
  EXPECT_EQ(step(*other, rfc_client_final).status, sasl_result::state::failed);
}

TEST_F(ScramTest, CredentialsBelowTheMinimumIterationsAreRefused) {
  source_.add("weak", scram_algorithm::sha256,
              make_scram_credential(scram_algorithm::sha256, "pw", bytes("s"), 1000));
  const scram_mechanism m(scram_algorithm::sha256, source_);
  test_client c{scram_algorithm::sha256, "pw"};
  EXPECT_EQ(run(m, c, "weak").status, sasl_result::state::failed);
}

TEST(ScramNames, KafkaMechanismNumbers) {
  EXPECT_EQ(scram_algorithm_of("SCRAM-SHA-256"), scram_algorithm::sha256);
  EXPECT_EQ(scram_algorithm_of("SCRAM-SHA-512"), scram_algorithm::sha512);
  EXPECT_FALSE(scram_algorithm_of("SCRAM-SHA-1"));
  EXPECT_EQ(scram_mechanism_type(scram_algorithm::sha256), 1);
  EXPECT_EQ(scram_mechanism_type(scram_algorithm::sha512), 2);
  EXPECT_EQ(scram_algorithm_of_type(1), scram_algorithm::sha256);
  EXPECT_EQ(scram_algorithm_of_type(2), scram_algorithm::sha512);
  EXPECT_FALSE(scram_algorithm_of_type(0));
  EXPECT_FALSE(scram_algorithm_of_type(3));
  EXPECT_FALSE(scram_algorithm_of_type(-1));
}

TEST(Base64, RoundTripsAndRejectsWhatIsNotCanonical) {
  for (const std::string_view s : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    EXPECT_EQ(text(*base64_decode(base64_encode(bytes(s)))), s);
  }
  EXPECT_EQ(base64_encode(bytes("foobar")), "Zm9vYmFy");
  EXPECT_EQ(base64_encode(bytes("fo")), "Zm8=");
  EXPECT_EQ(base64_encode(bytes("f")), "Zg==");
  EXPECT_EQ(base64_encode(bytes("n,,")), "biws");
  for (const std::string_view bad : {"Zg", "Zg=", "Zh==", "Zm9=", "Z===", "====", "Zg==Zg==",
                                     "Zm 9", "Zm9v\n", "Zm9-", "Zm9_", "=Zm9"}) {
    EXPECT_FALSE(base64_decode(bad)) << bad;
  }
}

}  // namespace
}  // namespace silt::security
