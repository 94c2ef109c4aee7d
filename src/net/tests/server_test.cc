// The network server over real sockets: in-order answers to concurrent requests, frame size
// limits, idle reaping, and a stop that answers what is in flight.
#include "net/server.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/endian.h"
#include "net/io_pool.h"
#include "net/tests/connect.h"

namespace silt::net {
namespace {

namespace asio = boost::asio;

// Answers each request with its correlation id, after a delay that is longest for the first
// requests, so that later requests finish first.
class delaying_handler : public request_handler {
 public:
  asio::awaitable<response> handle(request req) override {
    const int32_t id = req.header.header.correlation_id;
    asio::steady_timer t(co_await asio::this_coro::executor,
                         std::chrono::milliseconds(std::max(0, 50 - 5 * id)));
    co_await t.async_wait(asio::use_awaitable);
    response r;
    r.bytes.resize(8);
    base::store_be<int32_t>(r.bytes.data(), 4);
    base::store_be<int32_t>(r.bytes.data() + 4, id);
    co_return r;
  }
};

using testing::connect_to;
std::vector<uint8_t> frame(int32_t correlation_id) {
  return testing::api_versions_frame(correlation_id);
}
void send_all(int fd, const std::vector<uint8_t>& b) {
  ASSERT_EQ(::send(fd, b.data(), b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(b.size()));
}
// The next response's correlation id, or -1 when the connection closed.
int32_t read_response(int fd) {
  uint8_t buf[8];
  size_t got = 0;
  while (got < sizeof buf) {
    const ssize_t n = ::recv(fd, buf + got, sizeof buf - got, 0);
    if (n <= 0) return -1;
    got += static_cast<size_t>(n);
  }
  return base::load_be<int32_t>(buf + 4);
}

class ServerTest : public ::testing::Test {
 protected:
  void start(const server_options& o = {}) {
    server_ = std::make_unique<server>(io_, o, handler_);
    auto p = server_->listen("127.0.0.1", 0);
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
  int connect_client() const { return connect_to(port_); }

  asio::io_context io_;
  delaying_handler handler_;
  std::unique_ptr<server> server_;
  uint16_t port_ = 0;
  std::thread thread_;
};

TEST_F(ServerTest, ConcurrentRequestsAreAnsweredInOrder) {
  start();
  const int fd = connect_client();
  std::vector<uint8_t> all;
  for (int i = 0; i < 10; ++i) {
    auto f = frame(i);
    all.insert(all.end(), f.begin(), f.end());
  }
  const auto t0 = std::chrono::steady_clock::now();
  send_all(fd, all);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(read_response(fd), i);
  // They ran concurrently: far less than the sum of the delays (275 ms).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250));
  ::close(fd);
}

TEST_F(ServerTest, FramesArrivingInPiecesAreReadWhole) {
  start();
  std::vector<uint8_t> all;
  for (int i = 0; i < 10; ++i) {
    auto f = frame(i);
    all.insert(all.end(), f.begin(), f.end());
  }
  // Pieces of 1 to 6 bytes, each its own segment: frames and their sizes split at every
  // offset, and a piece that ends one frame carries part of the next one's size.
  for (size_t piece = 1; piece <= 6; ++piece) {
    const int fd = connect_client();
    const int one = 1;
    ASSERT_EQ(::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), 0);
    for (size_t at = 0; at < all.size(); at += piece) {
      const size_t n = std::min(piece, all.size() - at);
      ASSERT_EQ(::send(fd, all.data() + at, n, MSG_NOSIGNAL), static_cast<ssize_t>(n));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    for (int i = 0; i < 10; ++i) EXPECT_EQ(read_response(fd), i) << "pieces of " << piece;
    ::close(fd);
  }
}

TEST_F(ServerTest, RequestTimingIsRecordedPerApi) {
  start();
  const int fd = connect_client();
  for (int i = 0; i < 10; ++i) send_all(fd, frame(i));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(read_response(fd), i);
  ::close(fd);
  auto* t = server_->metrics().of(18);
  ASSERT_NE(t, nullptr);
  // A request's times are recorded once its write has completed on the server's side, which
  // may be a moment after the client has read the response.
  for (int i = 0; i < 500 && t->send.snapshot().count() < 10; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Request 0 is handled in 50 ms at least; the later ones, handled sooner, wait behind it.
  const auto handle = t->handle.snapshot();
  EXPECT_EQ(handle.count(), 10U);
  EXPECT_GE(handle.quantile(1.0), 50000U);
  EXPECT_GE(t->total.snapshot().quantile(1.0), 50000U);
  EXPECT_EQ(t->queue.snapshot().count(), 10U);
  EXPECT_EQ(t->send.snapshot().count(), 10U);
  EXPECT_EQ(server_->metrics().of(0)->total.snapshot().count(), 0U);
  // A report covers what happened since the previous one.
  EXPECT_NE(server_->metrics().report().find("ApiVersions n=10 total"), std::string::npos);
  EXPECT_EQ(server_->metrics().report(), "");
}

TEST_F(ServerTest, OversizedFrameClosesTheConnectionAndOthersCarryOn) {
  server_options o;
  o.max_request_bytes = 1024;
  start(o);
  const int bad = connect_client();
  std::vector<uint8_t> big(4);
  base::store_be<int32_t>(big.data(), 4096);
  send_all(bad, big);
  EXPECT_EQ(read_response(bad), -1);
  const int good = connect_client();
  send_all(good, frame(7));
  EXPECT_EQ(read_response(good), 7);
  ::close(bad);
  ::close(good);
  EXPECT_EQ(server_->stats().oversized_frames, 1u);
}

TEST_F(ServerTest, NegativeSizeAndUnknownApiKeyClose) {
  start();
  const int a = connect_client();
  std::vector<uint8_t> neg(4);
  base::store_be<int32_t>(neg.data(), -5);
  send_all(a, neg);
  EXPECT_EQ(read_response(a), -1);
  const int b = connect_client();
  auto f = frame(3);
  base::store_be<int16_t>(f.data() + 4, 999);
  send_all(b, frame(1));
  send_all(b, f);
  EXPECT_EQ(read_response(b), 1);  // the earlier request is still answered
  EXPECT_EQ(read_response(b), -1);
  ::close(a);
  ::close(b);
}

TEST_F(ServerTest, IdleConnectionsAreReaped) {
  server_options o;
  o.idle_timeout = std::chrono::milliseconds(100);
  start(o);
  const int fd = connect_client();
  send_all(fd, frame(1));
  EXPECT_EQ(read_response(fd), 1);
  EXPECT_EQ(read_response(fd), -1);  // closed by the server once idle
  ::close(fd);
  EXPECT_EQ(server_->stats().idle_closed, 1u);
}

TEST_F(ServerTest, StopAnswersRequestsInFlight) {
  start();
  const int fd = connect_client();
  send_all(fd, frame(0));  // answered after 50 ms
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  server_->stop([this] { io_.stop(); });
  EXPECT_EQ(read_response(fd), 0);
  EXPECT_EQ(read_response(fd), -1);
  thread_.join();
  ::close(fd);
}

TEST_F(ServerTest, InflightLimitAppliesBackpressureWithoutLosingRequests) {
  server_options o;
  o.max_inflight = 2;
  o.queued_max_bytes = 64;  // about four requests' worth
  start(o);
  const int fd = connect_client();
  std::vector<uint8_t> all;
  for (int i = 0; i < 40; ++i) {
    auto f = frame(i);
    all.insert(all.end(), f.begin(), f.end());
  }
  send_all(fd, all);
  for (int i = 0; i < 40; ++i) ASSERT_EQ(read_response(fd), i);
  ::close(fd);
}

// Answers each request at once with a response of `size` bytes (its correlation id first).
class big_response_handler : public request_handler {
 public:
  explicit big_response_handler(size_t size) : size_(size) {}
  asio::awaitable<response> handle(request req) override {
    response r;
    r.bytes.resize(size_);
    base::store_be<int32_t>(r.bytes.data(), static_cast<int32_t>(size_ - 4));
    base::store_be<int32_t>(r.bytes.data() + 4, req.header.header.correlation_id);
    co_return r;
  }

 private:
  size_t size_;
};

// A server answering with big_response_handler, run by a thread of its own until destroyed.
struct running_server {
  running_server(size_t response_size, const server_options& o)
      : handler(response_size), srv(io, o, handler) {
    auto p = srv.listen("127.0.0.1", 0);
    EXPECT_TRUE(p) << p.error();
    port = p.value_or(0);
    srv.start();
    runner = std::thread([this] { io.run(); });
  }
  ~running_server() {
    srv.stop([this] { io.stop(); });
    runner.join();
  }
  running_server(const running_server&) = delete;
  running_server& operator=(const running_server&) = delete;

  big_response_handler handler;
  asio::io_context io;
  server srv;
  uint16_t port = 0;
  std::thread runner;
};

// Reads one response of `size` bytes; its correlation id, or -1 when the connection closed.
int32_t read_big_response(int fd, size_t size) {
  std::vector<uint8_t> buf(size);
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::recv(fd, buf.data() + got, size - got, 0);
    if (n <= 0) return -1;
    got += static_cast<size_t>(n);
  }
  return base::load_be<int32_t>(buf.data() + 4);
}

// A client that sends many requests and reads none of its responses stops being read once
// its unsent responses pass a sixteenth of queued_max_response_bytes: the broker holds a
// bounded amount of them, and every request is still answered, in order, once it reads.
TEST(ServerResponses, AClientThatDoesNotReadStopsBeingReadAndLosesNothing) {
  constexpr size_t kSize = 256 << 10;
  constexpr int kRequests = 400;  // 100 MiB of responses
  server_options o;
  o.queued_max_response_bytes = int64_t{32} << 20;  // 2 MiB per connection
  running_server rs(kSize, o);
  auto& srv = rs.srv;
  const int fd = connect_to(rs.port);
  std::vector<uint8_t> all;
  for (int i = 0; i < kRequests; ++i) {
    auto f = frame(i);
    all.insert(all.end(), f.begin(), f.end());
  }
  send_all(fd, all);  // 6 KiB: the kernel takes it whether or not the server reads
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto held = srv.stats();
  EXPECT_LT(held.requests, static_cast<uint64_t>(kRequests));
  EXPECT_GT(held.reads_held_for_responses, 0U);
  // A sixteenth of the budget, plus the responses of the requests read before it was
  // passed (64 in flight at most).
  EXPECT_LE(held.unsent_response_bytes, (int64_t{2} << 20) + 64 * int64_t{kSize});
  for (int i = 0; i < kRequests; ++i) ASSERT_EQ(read_big_response(fd, kSize), i);
  EXPECT_EQ(srv.stats().requests, static_cast<uint64_t>(kRequests));
  for (int i = 0; i < 100 && srv.stats().unsent_response_bytes != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(srv.stats().unsent_response_bytes, 0);
  ::close(fd);
}

// A connection whose responses are never taken is closed as idle, and what it held is let go.
TEST(ServerResponses, UnreadResponsesDoNotKeepAConnectionOpenPastTheIdleTimeout) {
  constexpr size_t kSize = 1 << 20;
  server_options o;
  o.idle_timeout = std::chrono::milliseconds(300);
  running_server rs(kSize, o);
  auto& srv = rs.srv;
  const int fd = connect_to(rs.port);
  for (int i = 0; i < 64; ++i) send_all(fd, frame(i));
  for (int i = 0; i < 300 && srv.stats().idle_closed == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(srv.stats().idle_closed, 1U);
  for (int i = 0; i < 100 && srv.stats().unsent_response_bytes != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(srv.stats().unsent_response_bytes, 0);
  ::close(fd);
}

// A client that sends its request a byte now and then is closed as idle; others are served.
TEST_F(ServerTest, AFrameDribbledSlowerThanTheIdleTimeoutIsClosed) {
  server_options o;
  o.idle_timeout = std::chrono::milliseconds(200);
  start(o);
  const int slow = connect_client();
  const auto f = frame(1);
  bool closed = false;
  for (size_t i = 0; i < f.size() && !closed; ++i) {
    closed = ::send(slow, f.data() + i, 1, MSG_NOSIGNAL) != 1;
    const int good = connect_client();
    send_all(good, frame(2));
    EXPECT_EQ(read_response(good), 2);
    ::close(good);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(read_response(slow), -1);
  EXPECT_GE(server_->stats().idle_closed, 1U);
  ::close(slow);
}

// Connections dealt to worker io_contexts (one thread each, as the broker runs them) are
// served there, in order per connection; a shutdown with requests in flight and clients still
// connected answers them, closes the connections and lets every context run dry before any is
// destroyed (under ASan, a socket outliving its io_context fails here).
TEST(ServerWorkers, ConnectionsOnWorkerContextsAreAnsweredAndStopped) {
  io_pool pool(2);
  ASSERT_EQ(pool.workers().size(), 2u);
  delaying_handler handler;
  auto srv = std::make_unique<server>(pool.main(), pool.workers(), server_options{}, handler);
  auto port = srv->listen("127.0.0.1", 0);
  ASSERT_TRUE(port) << port.error();
  srv->start();
  std::thread runner([&] { pool.run([] {}); });
  std::vector<int> fds(4);
  for (int& fd : fds) fd = connect_to(*port);
  for (int fd : fds) {
    for (int i = 0; i < 10; ++i) {
      send_all(fd, frame(i));
    }
  }
  for (int fd : fds) {
    for (int i = 0; i < 10; ++i) EXPECT_EQ(read_response(fd), i);
  }
  EXPECT_EQ(srv->stats().connections_accepted, 4u);
  // One request (50 ms) in flight on every connection when the server stops.
  for (int fd : fds) {
    send_all(fd, frame(0));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  srv->stop([&] { pool.finish(std::chrono::seconds(10)); });
  const auto t0 = std::chrono::steady_clock::now();
  runner.join();
  // The contexts ran dry rather than being stopped at the end of the grace period.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  for (int fd : fds) {
    EXPECT_EQ(read_response(fd), 0);   // answered
    EXPECT_EQ(read_response(fd), -1);  // then closed
    ::close(fd);
  }
  srv.reset();
}

// Parks requests of API key 1 (Fetch) for `park`, after releasing their bytes when `release`;
// answers the others at once with their correlation id.
class parking_handler : public request_handler {
 public:
  parking_handler(bool release, std::chrono::milliseconds park) : release_(release), park_(park) {}
  asio::awaitable<response> handle(request req) override {
    const int32_t id = req.header.header.correlation_id;
    if (req.header.header.request_api_key == 1) {
      if (release_) req.release_frame();
      asio::steady_timer t(co_await asio::this_coro::executor, park_);
      co_await t.async_wait(asio::use_awaitable);
    }
    response r;
    r.bytes.resize(8);
    base::store_be<int32_t>(r.bytes.data(), 4);
    base::store_be<int32_t>(r.bytes.data() + 4, id);
    co_return r;
  }

 private:
  bool release_;
  std::chrono::milliseconds park_;
};

// A Fetch frame of `size` bytes in all (header v1, client id "t", then filler).
std::vector<uint8_t> fetch_frame(int32_t correlation_id, size_t size) {
  std::vector<uint8_t> f = frame(correlation_id);
  base::store_be<int16_t>(f.data() + 4, 1);
  base::store_be<int16_t>(f.data() + 6, 4);
  f.resize(size, 0);
  base::store_be<int32_t>(f.data(), static_cast<int32_t>(size - 4));
  return f;
}

// How long an ApiVersions request on a new connection waits while another connection's
// request holds the whole queued_max_bytes in a long poll.
std::chrono::milliseconds api_versions_wait_behind_a_parked_request(bool release) {
  parking_handler handler(release, std::chrono::milliseconds(1500));
  asio::io_context io;
  server_options o;
  o.queued_max_bytes = 64 << 10;
  server srv(io, o, handler);
  const uint16_t port = srv.listen("127.0.0.1", 0).value();
  srv.start();
  std::thread runner([&] { io.run(); });
  const int parked = connect_to(port);
  send_all(parked, fetch_frame(1, 64 << 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int fresh = connect_to(port);
  const auto t0 = std::chrono::steady_clock::now();
  send_all(fresh, frame(2));
  EXPECT_EQ(read_response(fresh), 2);
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_EQ(read_response(parked), 1);
  ::close(parked);
  ::close(fresh);
  srv.stop([&] { io.stop(); });
  runner.join();
  return waited;
}

// A handler that releases a parked request's bytes lets other connections be read at once;
// one that does not holds them until it answers.
TEST(ServerBudget, AParkedRequestThatReleasesItsBytesHoldsNoOtherConnectionUp) {
  EXPECT_LT(api_versions_wait_behind_a_parked_request(true), std::chrono::milliseconds(1000));
  EXPECT_GE(api_versions_wait_behind_a_parked_request(false), std::chrono::milliseconds(1000));
}

}  // namespace
}  // namespace silt::net
