// The metrics endpoint over real sockets: GET of its path, 404, 405, HEAD, keep-alive, and a
// stop that closes what is open.
#include "net/metrics_http.h"

#include <string>
#include <thread>

#include <arpa/inet.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/tests/connect.h"

namespace silt::net {
namespace {

namespace asio = boost::asio;

using testing::connect_to;

// Sends `request` and reads one response whose body has Content-Length bytes (none for HEAD).
std::string exchange(int fd, const std::string& request, bool head = false) {
  EXPECT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string got;
  char buf[4096];
  for (;;) {
    const auto end = got.find("\r\n\r\n");
    if (end != std::string::npos) {
      const auto cl = got.find("Content-Length: ");
      const size_t length = cl == std::string::npos ? 0 : std::stoul(got.substr(cl + 16));
      if (head || got.size() >= end + 4 + length) return got;
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return got;
    got.append(buf, static_cast<size_t>(n));
  }
}

class MetricsHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = endpoint_.listen("127.0.0.1", 0);
    ASSERT_TRUE(p) << p.error();
    port_ = *p;
    endpoint_.start();
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    asio::post(io_, [this] { endpoint_.stop(); });
    work_.reset();
    thread_.join();
  }
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  int renders_ = 0;
  metrics_http endpoint_{io_, "/metrics", [this] {
                           ++renders_;
                           return "# TYPE up gauge\nup 1\n";
                         }};
  uint16_t port_ = 0;
  std::thread thread_;
};

TEST_F(MetricsHttp, GetOfThePathAnswersTheRenderedTextInPrometheusFormat) {
  const int fd = connect_to(port_);
  const auto r = exchange(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(r.starts_with("HTTP/1.1 200 OK\r\n")) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4; charset=utf-8"), std::string::npos);
  EXPECT_TRUE(r.ends_with("\r\n\r\n# TYPE up gauge\nup 1\n")) << r;
  // Keep-alive: a second request on the same connection, with a query string.
  const auto again = exchange(fd, "GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(again.starts_with("HTTP/1.1 200 OK\r\n")) << again;
  ::close(fd);
}

TEST_F(MetricsHttp, OtherPathsAndMethodsAreRefused) {
  const int fd = connect_to(port_);
  EXPECT_TRUE(exchange(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 404"));
  const auto post = exchange(fd, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  EXPECT_TRUE(post.starts_with("HTTP/1.1 405")) << post;
  EXPECT_NE(post.find("Allow: GET, HEAD"), std::string::npos) << post;
  const auto head = exchange(fd, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n", true);
  EXPECT_TRUE(head.starts_with("HTTP/1.1 200")) << head;
  EXPECT_TRUE(head.ends_with("\r\n\r\n")) << head;
  ::close(fd);
}

TEST_F(MetricsHttp, GarbageClosesTheConnection) {
  const int fd = connect_to(port_);
  const auto r = exchange(fd, "NOT HTTP AT ALL\r\n\r\n");
  EXPECT_EQ(r, "");  // closed without an answer
  ::close(fd);
  const int again = connect_to(port_);
  EXPECT_TRUE(exchange(again, "GET /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 200"));
  ::close(again);
}

}  // namespace
}  // namespace silt::net
