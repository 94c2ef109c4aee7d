// Listening sockets: a host name is served on every address it resolves to, on one port.
#include "net/listener.h"

#include <set>
#include <string>

#include <boost/asio/connect.hpp>
#include <gtest/gtest.h>

namespace silt::net {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

TEST(Listener, ANameIsServedOnEveryAddressItResolvesTo) {
  asio::io_context io;
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  const auto resolved = resolver.resolve("localhost", "0", ec);
  ASSERT_FALSE(ec) << ec.message();
  std::set<asio::ip::address> addresses;
  for (const auto& r : resolved) addresses.insert(r.endpoint().address());

  auto acc = open_listener(io, io.get_executor(), "localhost", 0, "listener");
  ASSERT_TRUE(acc) << acc.error();
  const uint16_t port = acc->front().local_endpoint().port();
  std::set<asio::ip::address> bound;
  for (const auto& a : *acc) {
    EXPECT_EQ(a.local_endpoint().port(), port) << "one port for every address";
    bound.insert(a.local_endpoint().address());
  }
  // Each address a client may try answers (an address this machine cannot bind, such as ::1
  // without IPv6, is left out).
  for (const auto& addr : addresses) {
    tcp::socket s(io);
    s.connect(tcp::endpoint(addr, port), ec);
    if (bound.count(addr) != 0) {
      EXPECT_FALSE(ec) << addr.to_string() << ": " << ec.message();
    }
  }
  EXPECT_TRUE(bound.count(asio::ip::make_address("127.0.0.1")) != 0)
      << "localhost is served on 127.0.0.1, which IPv4-only clients use";
}

TEST(Listener, ALiteralAddressGetsOneSocketAndABadNameAClearError) {
  asio::io_context io;
  auto one = open_listener(io, io.get_executor(), "127.0.0.1", 0, "listener");
  ASSERT_TRUE(one) << one.error();
  EXPECT_EQ(one->size(), 1u);
  auto bad = open_listener(io, io.get_executor(), "no-such-host.invalid", 0, "metrics");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("no-such-host.invalid"), std::string::npos) << bad.error();
}

}  // namespace
}  // namespace silt::net
