// Opening a listening TCP socket, for the Kafka listeners (server.h) and the metrics endpoint
// (metrics_http.h) alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <tl/expected.hpp>

namespace silt::net {

// Sockets listening on host:port for `executor`: an empty host is every interface (IPv6 and
// IPv4, one socket), a name is resolved (blocking, with `io`) and each of its addresses gets a
// socket (those that cannot be bound are left out unless none can), port 0 takes a free port,
// the same for every socket. The error names what failed, after `what` (e.g. "listener").
[[nodiscard]] tl::expected<std::vector<boost::asio::ip::tcp::acceptor>, std::string> open_listener(
    boost::asio::io_context& io, const boost::asio::any_io_executor& executor,
    const std::string& host, uint16_t port, const std::string& what);

}  // namespace silt::net
