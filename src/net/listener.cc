#include "net/listener.h"

#include <boost/asio/ip/v6_only.hpp>

namespace silt::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

tl::expected<tcp::acceptor, std::string> open_listener(asio::io_context& io,
                                                       const asio::any_io_executor& executor,
                                                       const std::string& host, uint16_t port,
                                                       const std::string& what) {
  boost::system::error_code ec;
  asio::ip::address addr;
  if (host.empty()) {
    addr = asio::ip::address_v6::any();
  } else {
    addr = asio::ip::make_address(host, ec);
    if (ec) {
      // A name: resolve it (localhost, the machine's name).
      tcp::resolver resolver(io);
      auto results = resolver.resolve(host, std::to_string(port), ec);
      if (ec || results.empty()) {
        return tl::unexpected("cannot resolve " + what + " host '" + host + "': " + ec.message());
      }
      addr = results.begin()->endpoint().address();
    }
  }
  tcp::acceptor acc(executor);
  const tcp::endpoint ep(addr, port);
  acc.open(ep.protocol(), ec);
  if (!ec) acc.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec && addr.is_v6() && host.empty()) acc.set_option(asio::ip::v6_only(false), ec);
  if (!ec) acc.bind(ep, ec);
  if (!ec) acc.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return tl::unexpected("cannot listen" + (what == "listener" ? std::string() : " for " + what) +
                          " on " + (host.empty() ? std::string("*") : host) + ":" +
                          std::to_string(port) + ": " + ec.message());
  }
  return acc;
}

}  // namespace silt::net
