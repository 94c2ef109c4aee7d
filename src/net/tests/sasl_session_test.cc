#include "net/sasl_session.h"

#include <gtest/gtest.h>

#include "net/tests/sasl_frames.h"
#include "protocol/generated/error_code.h"
#include "security/plain.h"

namespace silt::net {
namespace {

using namespace std::chrono_literals;
using namespace std::string_view_literals;
using action = sasl_session::action;

using testing::response_of;

std::vector<uint8_t> handshake(std::string mechanism, int16_t version = 1, int32_t id = 1) {
  return testing::handshake_body(std::move(mechanism), version, id);
}
std::vector<uint8_t> authenticate(std::string_view bytes, int16_t version = 2, int32_t id = 2) {
  return testing::authenticate_body(bytes, version, id);
}

std::shared_ptr<const sasl_options> options(std::chrono::milliseconds reauth = 0ms) {
  auto o = std::make_shared<sasl_options>();
  o->mechanisms.push_back(std::make_shared<security::plain_mechanism>(
      std::map<std::string, std::string>{{"alice", "alice-pw"}, {"bob", "bob-pw"}}));
  o->max_reauth["PLAIN"] = reauth;
  return o;
}

const auto now = std::chrono::system_clock::now();

TEST(SaslSession, PlainThroughSaslAuthenticate) {
  sasl_session s(options());
  auto step = s.on_frame(handshake("PLAIN"), now);
  ASSERT_EQ(step.what, action::reply) << step.detail;
  auto hs = response_of<protocol::sasl_handshake_response>(step.frame, 1, 1);
  EXPECT_EQ(hs.error_code, 0);
  EXPECT_EQ(hs.mechanisms, std::vector<std::string>{"PLAIN"});
  step = s.on_frame(authenticate("\0alice\0alice-pw"sv), now);
  ASSERT_EQ(step.what, action::authenticated) << step.detail;
  auto a = response_of<protocol::sasl_authenticate_response>(step.frame, 2, 2);
  EXPECT_EQ(a.error_code, 0);
  EXPECT_EQ(a.session_lifetime_ms, 0);
  EXPECT_TRUE(s.authenticated());
  EXPECT_EQ(s.principal(), "alice");
  EXPECT_FALSE(s.expiry());
}

TEST(SaslSession, ApiVersionsGoesToTheHandlerBeforeTheHandshakeOnly) {
  sasl_session s(options());
  std::vector<uint8_t> api_versions = {0, 18, 0, 0, 0, 0, 0, 7, 0, 1, 't'};
  EXPECT_EQ(s.on_frame(api_versions, now).what, action::api_versions);
  EXPECT_EQ(s.on_frame(handshake("PLAIN"), now).what, action::reply);
  EXPECT_EQ(s.on_frame(api_versions, now).what, action::refuse);
}

TEST(SaslSession, WrongPasswordFailsWithKafkasErrorAndNoDetail) {
  sasl_session s(options());
  ASSERT_EQ(s.on_frame(handshake("PLAIN"), now).what, action::reply);
  auto step = s.on_frame(authenticate("\0alice\0nope"sv, 1), now);
  ASSERT_EQ(step.what, action::failed);
  auto a = response_of<protocol::sasl_authenticate_response>(step.frame, 1, 2);
  EXPECT_EQ(a.error_code, static_cast<int16_t>(protocol::error_code::sasl_authentication_failed));
  EXPECT_EQ(a.error_message, "Authentication failed: Invalid username or password");
  EXPECT_FALSE(s.authenticated());
  // Nothing more is taken.
  EXPECT_EQ(s.on_frame(authenticate("\0alice\0alice-pw"sv), now).what, action::refuse);
}

TEST(SaslSession, UnknownMechanismListsTheEnabledOnesAndFails) {
  sasl_session s(options());
  auto step = s.on_frame(handshake("GSSAPI"), now);
  ASSERT_EQ(step.what, action::failed);
  auto hs = response_of<protocol::sasl_handshake_response>(step.frame, 1, 1);
  EXPECT_EQ(hs.error_code, static_cast<int16_t>(protocol::error_code::unsupported_sasl_mechanism));
  EXPECT_EQ(hs.mechanisms, std::vector<std::string>{"PLAIN"});
}

TEST(SaslSession, OtherRequestsBeforeAuthenticationAreRefused) {
  sasl_session s(options());
  // Metadata v12 with a header that parses.
  std::vector<uint8_t> metadata = {0, 3, 0, 12, 0, 0, 0, 1, 0, 1, 't', 0, 1, 0, 0};
  EXPECT_EQ(s.on_frame(metadata, now).what, action::refuse);
  sasl_session s2(options());
  EXPECT_EQ(s2.on_frame(authenticate("\0alice\0alice-pw"sv), now).what, action::refuse);
  sasl_session s3(options());
  EXPECT_EQ(s3.on_frame(std::vector<uint8_t>{1, 2, 3}, now).what, action::refuse);
}

TEST(SaslSession, HandshakeV0MeansBareTokens) {
  sasl_session s(options());
  auto step = s.on_frame(handshake("PLAIN", 0), now);
  ASSERT_EQ(step.what, action::reply);
  const auto token = "\0bob\0bob-pw"sv;
  step = s.on_frame(std::span(reinterpret_cast<const uint8_t*>(token.data()), token.size()), now);
  ASSERT_EQ(step.what, action::authenticated) << step.detail;
  EXPECT_EQ(step.frame, (std::vector<uint8_t>{0, 0, 0, 0}));  // an empty token
  EXPECT_EQ(s.principal(), "bob");
  EXPECT_FALSE(s.begin_reauthentication(std::chrono::steady_clock::now()));  // bare tokens
}

TEST(SaslSession, BareTokenFailureAnswersNothing) {
  sasl_session s(options());
  ASSERT_EQ(s.on_frame(handshake("PLAIN", 0), now).what, action::reply);
  const auto token = "\0bob\0wrong"sv;
  auto step =
      s.on_frame(std::span(reinterpret_cast<const uint8_t*>(token.data()), token.size()), now);
  EXPECT_EQ(step.what, action::failed);
  EXPECT_TRUE(step.frame.empty());
}

TEST(SaslSession, SessionLifetimeAndReauthenticationKeepThePrincipal) {
  sasl_session s(options(60000ms));
  ASSERT_EQ(s.on_frame(handshake("PLAIN"), now).what, action::reply);
  auto step = s.on_frame(authenticate("\0alice\0alice-pw"sv), now);
  ASSERT_EQ(step.what, action::authenticated);
  EXPECT_EQ(response_of<protocol::sasl_authenticate_response>(step.frame, 2, 2).session_lifetime_ms,
            60000);
  ASSERT_TRUE(s.expiry());
  // Again as alice: fine.
  auto t = std::chrono::steady_clock::now();
  ASSERT_TRUE(s.begin_reauthentication(t));
  EXPECT_TRUE(s.reauthenticating());
  ASSERT_EQ(s.on_frame(handshake("PLAIN", 1, 9), now).what, action::reply);
  step = s.on_frame(authenticate("\0alice\0alice-pw"sv, 2, 10), now);
  ASSERT_EQ(step.what, action::authenticated) << step.detail;
  EXPECT_FALSE(s.reauthenticating());
  // Not twice within a second, as Kafka.
  EXPECT_FALSE(s.begin_reauthentication(t + 999ms));
  // As bob: refused.
  ASSERT_TRUE(s.begin_reauthentication(t + 1s));
  ASSERT_EQ(s.on_frame(handshake("PLAIN"), now).what, action::reply);
  step = s.on_frame(authenticate("\0bob\0bob-pw"sv), now);
  ASSERT_EQ(step.what, action::failed);
  EXPECT_EQ(response_of<protocol::sasl_authenticate_response>(step.frame, 2, 2).error_message,
            "Cannot change principals during re-authentication");
}

TEST(SaslSession, SaslAuthenticateV0ClientsCannotReauthenticate) {
  sasl_session s(options(60000ms));
  ASSERT_EQ(s.on_frame(handshake("PLAIN"), now).what, action::reply);
  ASSERT_EQ(s.on_frame(authenticate("\0alice\0alice-pw"sv, 0), now).what, action::authenticated);
  EXPECT_FALSE(s.begin_reauthentication(std::chrono::steady_clock::now()));
}

TEST(SaslSession, SessionsThatDoNotExpireAreNotReauthenticated) {
  sasl_session s(options());
  ASSERT_EQ(s.on_frame(handshake("PLAIN"), now).what, action::reply);
  ASSERT_EQ(s.on_frame(authenticate("\0alice\0alice-pw"sv), now).what, action::authenticated);
  EXPECT_FALSE(s.begin_reauthentication(std::chrono::steady_clock::now()));
}

}  // namespace
}  // namespace silt::net
