// SASL on a real socket: the connection runs the exchange before any request reaches the
// handler, the handler sees the authenticated principal, failures close after their delay, and
// an expired session closes at the next request.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/endian.h"
#include "net/server.h"
#include "net/tests/connect.h"
#include "net/tests/sasl_frames.h"
#include "protocol/generated/error_code.h"
#include "security/plain.h"

namespace silt::net {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace std::string_view_literals;

// Answers each request with its correlation id and the principal that sent it.
class principal_handler : public request_handler {
 public:
  asio::awaitable<response> handle(request req) override {
    const std::string who = req.identity ? req.identity->who.to_string() : "none";
    response r;
    r.bytes.resize(8 + who.size());
    base::store_be<int32_t>(r.bytes.data(), static_cast<int32_t>(4 + who.size()));
    base::store_be<int32_t>(r.bytes.data() + 4, req.header.header.correlation_id);
    std::copy(who.begin(), who.end(), r.bytes.begin() + 8);
    co_return r;
  }
};

// One response frame, whole; empty when the connection closed first.
std::vector<uint8_t> read_frame(int fd) {
  std::vector<uint8_t> f(4);
  auto fill = [fd](uint8_t* p, size_t n) {
    for (size_t got = 0; got < n;) {
      const ssize_t r = ::recv(fd, p + got, n - got, 0);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  };
  if (!fill(f.data(), 4)) return {};
  const auto size = base::load_be<int32_t>(f.data());
  f.resize(4 + static_cast<size_t>(size));
  if (!fill(f.data() + 4, static_cast<size_t>(size))) return {};
  return f;
}

bool closed(int fd) {
  uint8_t b = 0;
  return ::recv(fd, &b, 1, 0) <= 0;
}

void send_all(int fd, const std::vector<uint8_t>& b) {
  ASSERT_EQ(::send(fd, b.data(), b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(b.size()));
}

class SaslServerTest : public ::testing::Test {
 protected:
  void start(std::chrono::milliseconds reauth = 0ms) {
    auto o = std::make_shared<sasl_options>();
    o->mechanisms.push_back(std::make_shared<security::plain_mechanism>(
        std::map<std::string, std::string>{{"alice", "alice-pw"}, {"bob", "bob-pw"}}));
    o->max_reauth["PLAIN"] = reauth;
    o->failed_delay = 150ms;
    o->max_receive_size = 4096;
    server_ = std::make_unique<server>(io_, server_options{}, handler_);
    listener_options lo;
    lo.name = "SASL";
    lo.protocol = security_protocol::sasl_plaintext;
    lo.sasl = std::move(o);
    auto p = server_->listen("127.0.0.1", 0, lo);
    ASSERT_TRUE(p) << p.error();
    port_ = *p;
    server_->start();
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    if (thread_.joinable()) {
      server_->stop([this] { io_.stop(); });
      thread_.join();
    }
  }
  // Connects and authenticates as `user`; the SaslAuthenticate response.
  protocol::sasl_authenticate_response login(int fd, std::string_view message, int32_t id = 2) {
    send_all(fd, testing::sized(testing::handshake_body("PLAIN", 1, id - 1)));
    auto hs = read_frame(fd);
    EXPECT_FALSE(hs.empty());
    send_all(fd, testing::sized(testing::authenticate_body(message, 2, id)));
    auto a = read_frame(fd);
    if (a.empty()) return {.error_code = -1};
    return testing::response_of<protocol::sasl_authenticate_response>(a, 2, id);
  }

  asio::io_context io_;
  principal_handler handler_;
  std::unique_ptr<server> server_;
  uint16_t port_ = 0;
  std::thread thread_;
};

TEST_F(SaslServerTest, TheHandlerSeesTheAuthenticatedPrincipal) {
  start();
  const int fd = testing::connect_to(port_);
  // ApiVersions before the handshake reaches the handler, as anonymous.
  send_all(fd, testing::api_versions_frame(7));
  auto f = read_frame(fd);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(std::string(f.begin() + 8, f.end()), "User:ANONYMOUS");
  EXPECT_EQ(login(fd, "\0alice\0alice-pw"sv).error_code, 0);
  send_all(fd, testing::api_versions_frame(8));
  f = read_frame(fd);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(base::load_be<int32_t>(f.data() + 4), 8);
  EXPECT_EQ(std::string(f.begin() + 8, f.end()), "User:alice");
  ::close(fd);
  EXPECT_EQ(server_->stats().sasl_authentications, 1U);
}

TEST_F(SaslServerTest, AFailedAuthenticationIsAnsweredAfterTheDelayThenClosed) {
  start();
  const int fd = testing::connect_to(port_);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = login(fd, "\0alice\0bob-pw"sv);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 150ms);
  EXPECT_EQ(r.error_code, static_cast<int16_t>(protocol::error_code::sasl_authentication_failed));
  EXPECT_TRUE(closed(fd));
  ::close(fd);
  EXPECT_EQ(server_->stats().sasl_failures, 1U);
}

TEST_F(SaslServerTest, AnyOtherRequestOrALargeFrameBeforeAuthenticationCloses) {
  start();
  int fd = testing::connect_to(port_);
  // A Metadata v1 request (all topics): never reaches the handler.
  std::vector<uint8_t> metadata = {0, 3, 0, 1, 0, 0, 0, 5, 0, 1, 't', 0xff, 0xff, 0xff, 0xff};
  send_all(fd, testing::sized(metadata));
  EXPECT_TRUE(closed(fd));
  ::close(fd);
  fd = testing::connect_to(port_);
  send_all(fd, testing::sized(std::vector<uint8_t>(5000, 0)));  // over max_receive_size
  EXPECT_TRUE(closed(fd));
  ::close(fd);
}

TEST_F(SaslServerTest, AnExpiredSessionClosesAtItsNextRequestAndARenewedOneGoesOn) {
  start(300ms);
  const int fd = testing::connect_to(port_);
  auto a = login(fd, "\0bob\0bob-pw"sv);
  ASSERT_EQ(a.error_code, 0);
  EXPECT_EQ(a.session_lifetime_ms, 300);
  // Renewed before the end, the session goes on past the first one's end.
  std::this_thread::sleep_for(150ms);
  ASSERT_EQ(login(fd, "\0bob\0bob-pw"sv, 4).error_code, 0);
  std::this_thread::sleep_for(200ms);
  send_all(fd, testing::api_versions_frame(9));
  auto f = read_frame(fd);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(std::string(f.begin() + 8, f.end()), "User:bob");
  // Not renewed: the next request closes the connection.
  std::this_thread::sleep_for(350ms);
  send_all(fd, testing::api_versions_frame(10));
  EXPECT_TRUE(read_frame(fd).empty());
  ::close(fd);
  const auto s = server_->stats();
  EXPECT_EQ(s.sasl_reauthentications, 1U);
  EXPECT_EQ(s.sasl_expired_sessions, 1U);
}

}  // namespace
}  // namespace silt::net
