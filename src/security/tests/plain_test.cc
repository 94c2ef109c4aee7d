#include "security/plain.h"

#include <gtest/gtest.h>

namespace silt::security {
namespace {

std::span<const uint8_t> bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

sasl_result once(const plain_mechanism& m, std::string_view message) {
  return m.start()->step(bytes(message));
}

const plain_mechanism& mechanism() {
  static const plain_mechanism m(plain_mechanism::users_of(
      {{"username", "admin"}, {"user_admin", "admin-secret"}, {"user_alice", "alice-pw"}}));
  return m;
}

TEST(Plain, UsersComeFromUserOptions) {
  const auto users = plain_mechanism::users_of(
      {{"username", "admin"}, {"password", "x"}, {"user_admin", "a"}, {"user_", "b"}});
  ASSERT_EQ(users.size(), 1U);
  EXPECT_EQ(users.at("admin"), "a");
}

TEST(Plain, RightPasswordAuthenticatesTheUser) {
  using namespace std::string_view_literals;
  auto r = once(mechanism(), "\0alice\0alice-pw"sv);
  ASSERT_EQ(r.status, sasl_result::state::done) << r.detail;
  EXPECT_EQ(r.principal, "alice");
  EXPECT_TRUE(r.reply.empty());
  EXPECT_FALSE(r.expires);
  r = once(mechanism(), "admin\0admin\0admin-secret"sv);
  ASSERT_EQ(r.status, sasl_result::state::done) << r.detail;
  EXPECT_EQ(r.principal, "admin");
}

TEST(Plain, EveryRefusalLooksTheSame) {
  using namespace std::string_view_literals;
  const std::string_view refused[] = {
      "\0alice\0wrong"sv,          // wrong password
      "\0bob\0alice-pw"sv,         // unknown user
      "admin\0alice\0alice-pw"sv,  // another authorization id
      "\0alice\0"sv,               // no password
      "\0\0alice-pw"sv,            // no user
      "alice\0alice-pw"sv,         // one NUL
      "\0alice\0alice-pw\0x"sv,    // three
      ""sv,
  };
  for (const auto m : refused) {
    auto r = once(mechanism(), m);
    ASSERT_EQ(r.status, sasl_result::state::failed);
    EXPECT_EQ(r.error, "Authentication failed: Invalid username or password");
    EXPECT_EQ(r.detail.find("alice-pw"), std::string::npos) << r.detail;
  }
}

TEST(Plain, OneMessageOnly) {
  using namespace std::string_view_literals;
  auto x = mechanism().start();
  ASSERT_EQ(x->step(bytes("\0alice\0alice-pw"sv)).status, sasl_result::state::done);
  EXPECT_EQ(x->step(bytes("\0alice\0alice-pw"sv)).status, sasl_result::state::failed);
}

}  // namespace
}  // namespace silt::security
