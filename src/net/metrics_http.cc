#include "net/metrics_http.h"

#include <chrono>
#include <list>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "net/listener.h"

namespace silt::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr size_t max_connections = 64;
constexpr uint32_t max_header_bytes = 8192;
constexpr auto request_timeout = std::chrono::seconds(10);
}  // namespace

struct metrics_http::impl : std::enable_shared_from_this<impl> {
  impl(asio::io_context& io, std::string path, render r, std::shared_ptr<tls_context_source> tls)
      : io(io), path(std::move(path)), renderer(std::move(r)), tls(std::move(tls)) {}

  asio::io_context& io;
  const std::string path;
  const render renderer;
  const std::shared_ptr<tls_context_source> tls;  // null: plain HTTP
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  std::list<beast::tcp_stream*> open;  // the connections being served
  bool stopping = false;

  http::response<http::string_body> answer(const http::request<http::empty_body>& req) const {
    http::response<http::string_body> res;
    res.version(req.version());
    res.keep_alive(req.keep_alive());
    const std::string_view target(req.target().data(), req.target().size());
    const std::string_view wanted = target.substr(0, target.find('?'));
    if (wanted != path) {
      res.result(http::status::not_found);
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      res.body() = "not found: the metrics are at " + path + "\n";
    } else if (req.method() != http::verb::get && req.method() != http::verb::head) {
      res.result(http::status::method_not_allowed);
      res.set(http::field::allow, "GET, HEAD");
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      res.body() = "only GET and HEAD\n";
    } else {
      res.result(http::status::ok);
      res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      res.body() = renderer();
    }
    res.prepare_payload();
    if (req.method() == http::verb::head) res.body().clear();
    return res;
  }

  asio::awaitable<void> serve(tcp::socket socket) {
    auto self = shared_from_this();
    if (tls) {
      const auto ctx = tls->get();
      beast::ssl_stream<beast::tcp_stream> stream(beast::tcp_stream(std::move(socket)), *ctx);
      auto& lowest = beast::get_lowest_layer(stream);
      const auto me = open.insert(open.end(), &lowest);
      lowest.expires_after(request_timeout);
      auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server, use_tuple);
      if (!ec) co_await exchange(stream);
      open.erase(me);
      close(lowest);
      co_return;
    }
    beast::tcp_stream stream(std::move(socket));
    const auto me = open.insert(open.end(), &stream);
    co_await exchange(stream);
    open.erase(me);
    close(stream);
  }

  static void close(beast::tcp_stream& stream) {
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream.socket().close(ignored);
  }

  // Requests and their answers, until the client is done or the endpoint stops.
  template <typename Stream>
  asio::awaitable<void> exchange(Stream& stream) {
    beast::flat_buffer buffer;
    while (!stopping) {
      http::request_parser<http::empty_body> parser;
      parser.header_limit(max_header_bytes);
      beast::get_lowest_layer(stream).expires_after(request_timeout);
      auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_tuple);
      if (ec || stopping) break;
      const auto& req = parser.get();
      auto res = answer(req);
      const bool keep = res.keep_alive();
      if (req.method() == http::verb::head) {
        http::response_serializer<http::string_body> sr(res);
        sr.split(true);
        auto [werr, w] = co_await http::async_write_header(stream, sr, use_tuple);
        if (werr) break;
      } else {
        auto [werr, w] = co_await http::async_write(stream, res, use_tuple);
        if (werr) break;
      }
      if (!keep) break;
    }
  }

  asio::awaitable<void> accept(tcp::acceptor& a) {
    auto self = shared_from_this();
    while (!stopping) {
      auto [ec, socket] = co_await a.async_accept(use_tuple);
      if (stopping || ec == asio::error::operation_aborted) break;
      if (ec) {
        asio::steady_timer t(io, std::chrono::milliseconds(50));
        co_await t.async_wait(use_tuple);
        continue;
      }
      if (open.size() >= max_connections) {
        boost::system::error_code ignored;
        socket.close(ignored);
        continue;
      }
      asio::co_spawn(io, serve(std::move(socket)), asio::detached);
    }
  }
};

metrics_http::metrics_http(asio::io_context& io, std::string path, render r,
                           std::shared_ptr<tls_context_source> tls)
    : impl_(std::make_shared<impl>(io, std::move(path), std::move(r), std::move(tls))) {}

metrics_http::~metrics_http() {
  stop();
}

tl::expected<uint16_t, std::string> metrics_http::listen(const std::string& host, uint16_t port) {
  auto acc = open_listener(impl_->io, impl_->io.get_executor(), host, port, "metrics");
  if (!acc) return tl::unexpected(acc.error());
  const uint16_t bound = acc->front().local_endpoint().port();
  for (auto& a : *acc) impl_->acceptors.push_back(std::make_unique<tcp::acceptor>(std::move(a)));
  return bound;
}

void metrics_http::start() {
  for (auto& a : impl_->acceptors) {
    asio::co_spawn(impl_->io, impl_->accept(*a), asio::detached);
  }
}

void metrics_http::stop() {
  if (impl_->stopping) return;
  impl_->stopping = true;
  boost::system::error_code ignored;
  for (auto& a : impl_->acceptors) a->close(ignored);
  for (auto* s : impl_->open) s->socket().cancel(ignored);
}

}  // namespace silt::net
