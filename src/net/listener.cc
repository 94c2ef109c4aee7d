#include "net/listener.h"

#include <algorithm>

#include <boost/asio/ip/v6_only.hpp>

namespace silt::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

tl::expected<tcp::acceptor, std::string> open_one(const asio::any_io_executor& executor,
                                                  const asio::ip::address& addr, bool every,
                                                  uint16_t port, const std::string& where) {
  boost::system::error_code ec;
  tcp::acceptor acc(executor);
  const tcp::endpoint ep(addr, port);
  acc.open(ep.protocol(), ec);
  if (!ec) acc.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec && addr.is_v6() && every) acc.set_option(asio::ip::v6_only(false), ec);
  if (!ec) acc.bind(ep, ec);
  if (!ec) acc.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return tl::unexpected(where + ": " + ec.message());
  return acc;
}

}  // namespace

tl::expected<std::vector<tcp::acceptor>, std::string> open_listener(
    asio::io_context& io, const asio::any_io_executor& executor, const std::string& host,
    uint16_t port, const std::string& what) {
  const std::string where = "cannot listen" +
                            (what == "listener" ? std::string() : " for " + what) + " on " +
                            (host.empty() ? std::string("*") : host) + ":" + std::to_string(port);
  boost::system::error_code ec;
  std::vector<asio::ip::address> addrs;
  if (host.empty()) {
    addrs.push_back(asio::ip::address_v6::any());
  } else if (auto literal = asio::ip::make_address(host, ec); !ec) {
    addrs.push_back(literal);
  } else {
    // A name: every address it resolves to (localhost is ::1 and 127.0.0.1 on Debian), so that
    // clients reach the broker whichever of them they try.
    tcp::resolver resolver(io);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty()) {
      return tl::unexpected("cannot resolve " + what + " host '" + host + "': " + ec.message());
    }
    for (const auto& r : results) {
      const auto a = r.endpoint().address();
      if (std::find(addrs.begin(), addrs.end(), a) == addrs.end()) addrs.push_back(a);
    }
  }
  std::vector<tcp::acceptor> out;
  std::string first_error;
  for (const auto& a : addrs) {
    // Port 0: the first socket takes a free port, the others the same one.
    const uint16_t p = out.empty() ? port : out.front().local_endpoint().port();
    auto acc = open_one(executor, a, host.empty(), p, where);
    if (acc) {
      out.push_back(std::move(*acc));
    } else if (first_error.empty()) {
      first_error = acc.error();
    }
  }
  // A name some of whose addresses cannot be bound here (an IPv6 address on a machine without
  // IPv6) is served on the others.
  if (out.empty()) return tl::unexpected(first_error);
  return out;
}

}  // namespace silt::net
