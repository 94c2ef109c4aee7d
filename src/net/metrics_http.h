// The metrics endpoint: a small HTTP/1.1 server (Boost.Beast) that answers GET (and HEAD) of
// one path with the text a callback renders, in Prometheus text format; 404 for other paths,
// 405 for other methods. For scrapers, not clients: one request at a time per connection,
// requests of at most 8 KiB of headers and no body, 10 s to send a request, at most 64
// connections at once (more are closed at once).
//
// TLS: given a context source (metrics.listener=https://...), connections are served over
// TLS with its current context, the handshake within the 10 s a request has.
//
// Threads: everything runs on the io_context given (the broker's main thread); the callback
// runs there too, so it must not block (the broker's counters are atomics and snapshots).
// Lifecycle: listen(), start(), then stop() before the io_context goes (connections close).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <tl/expected.hpp>

#include "net/tls_context.h"

namespace silt::net {

class metrics_http {
 public:
  using render = std::function<std::string()>;

  // `tls`: serve HTTPS with its context (null: plain HTTP).
  metrics_http(boost::asio::io_context& io, std::string path, render r,
               std::shared_ptr<tls_context_source> tls = nullptr);
  ~metrics_http();
  metrics_http(const metrics_http&) = delete;
  metrics_http& operator=(const metrics_http&) = delete;

  // Binds host:port (empty host: all interfaces; port 0: any free port). Returns the port.
  [[nodiscard]] tl::expected<uint16_t, std::string> listen(const std::string& host, uint16_t port);
  void start();
  // Stops accepting and closes open connections. Idempotent.
  void stop();

  struct impl;

 private:
  std::shared_ptr<impl> impl_;
};

}  // namespace silt::net
