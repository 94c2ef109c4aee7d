#include "net/tls_socket.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <openssl/bio.h>
#include <openssl/err.h>

namespace silt::net {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
// One socket read: up to this many bytes of records (a TLS record is at most 16 KiB and some).
constexpr size_t read_chunk = size_t{64} << 10;
// A write is encrypted and sent this many bytes at a time: the client receives the first
// records while the next are encrypted, and the output buffers stay this small.
constexpr size_t write_chunk = size_t{256} << 10;

tls_socket::io_buffers& buffers_of(BIO* b) {
  return *static_cast<tls_socket::io_buffers*>(BIO_get_data(b));
}

int bio_write(BIO* b, const char* data, int len) {
  BIO_clear_retry_flags(b);
  if (len <= 0) return 0;
  auto& out = buffers_of(b).out;
  // Of one type with the vector's elements, so that the copy is one memmove.
  const auto* bytes = reinterpret_cast<const uint8_t*>(data);
  out.insert(out.end(), bytes, bytes + len);
  return len;
}

int bio_read(BIO* b, char* data, int len) {
  BIO_clear_retry_flags(b);
  auto& io = buffers_of(b);
  const size_t have = io.in_end - io.in_pos;
  if (have == 0) {
    if (io.eof) return 0;
    BIO_set_retry_read(b);
    return -1;
  }
  if (len <= 0) return 0;
  const size_t n = std::min(have, static_cast<size_t>(len));
  std::memcpy(data, io.in.get() + io.in_pos, n);
  io.in_pos += n;
  return static_cast<int>(n);
}

long bio_ctrl(BIO* b, int cmd, long /*num*/, void* /*ptr*/) {
  const auto& io = buffers_of(b);
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;
    case BIO_CTRL_PENDING:
      return static_cast<long>(io.in_end - io.in_pos);
    case BIO_CTRL_WPENDING:
      return static_cast<long>(io.out.size());
    case BIO_CTRL_EOF:
      return io.eof && io.in_pos == io.in_end ? 1 : 0;
    default:
      return 0;
  }
}

int bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

int bio_destroy(BIO* /*b*/) {
  return 1;
}

// The BIO between OpenSSL and a tls_socket's buffers, made once.
BIO_METHOD* bio_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "silt tls_socket");
    if (m == nullptr) throw std::bad_alloc();
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    BIO_meth_set_create(m, bio_create);
    BIO_meth_set_destroy(m, bio_destroy);
    return m;
  }();
  return method;
}

}  // namespace

tls_socket::tls_socket(asio::ip::tcp::socket s, asio::ssl::context& ctx)
    : sock_(std::move(s)), io_(std::make_unique<io_buffers>()), ssl_(SSL_new(ctx.native_handle())) {
  if (!ssl_) throw std::bad_alloc();
  BIO* bio = BIO_new(bio_method());
  if (bio == nullptr) throw std::bad_alloc();
  BIO_set_data(bio, io_.get());
  SSL_set_bio(ssl_.get(), bio, bio);  // one reference, for both directions
  SSL_set_accept_state(ssl_.get());
  SSL_set_mode(ssl_.get(), SSL_MODE_RELEASE_BUFFERS);
  SSL_set_options(ssl_.get(), SSL_OP_NO_RENEGOTIATION);
}

tls_socket::tls_socket(tls_socket&& o) noexcept
    : sock_(std::move(o.sock_)),
      io_(std::move(o.io_)),
      ssl_(std::move(o.ssl_)),
      sending_(std::move(o.sending_)) {}

tls_socket::~tls_socket() = default;

error_code tls_socket::ssl_error(int ret) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e != 0) return {static_cast<int>(e), asio::error::get_ssl_category()};
  if (io_->eof || ret == 0) return asio::ssl::error::stream_truncated;
  return asio::error::connection_aborted;
}

asio::awaitable<error_code> tls_socket::fill() {
  auto& io = *io_;
  if (io.in_pos == io.in_end) {
    io.in_pos = io.in_end = 0;
  } else if (io.in_pos > 0) {
    std::memmove(io.in.get(), io.in.get() + io.in_pos, io.in_end - io.in_pos);
    io.in_end -= io.in_pos;
    io.in_pos = 0;
  }
  if (!io.in) io.in = std::make_unique_for_overwrite<uint8_t[]>(read_chunk);
  auto [ec, n] = co_await sock_.async_read_some(
      asio::buffer(io.in.get() + io.in_end, read_chunk - io.in_end), use_tuple);
  if (ec) {
    if (ec == asio::error::eof) io.eof = true;
    co_return ec;
  }
  io.in_end += n;
  co_return error_code{};
}

asio::awaitable<error_code> tls_socket::flush() {
  flushing_ = true;
  while (!io_->out.empty()) {
    sending_.clear();
    std::swap(sending_, io_->out);
    auto [ec, n] = co_await asio::async_write(sock_, asio::buffer(sending_), use_tuple);
    if (ec) {
      flushing_ = false;
      co_return ec;
    }
  }
  flushing_ = false;
  co_return error_code{};
}

void tls_socket::trim() {
  if (flushing_) return;
  if (io_->out.empty()) io_->out = {};
  sending_ = {};
}

asio::awaitable<error_code> tls_socket::handshake() {
  for (;;) {
    ERR_clear_error();
    const int r = SSL_do_handshake(ssl_.get());
    const int err = r == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl_.get(), r);
    const error_code failed =
        err == SSL_ERROR_NONE || err == SSL_ERROR_WANT_READ ? error_code{} : ssl_error(r);
    // What the handshake has to send goes first, an alert included.
    if (auto ec = co_await flush(); ec && !failed) co_return ec;
    if (failed) co_return failed;
    if (err == SSL_ERROR_NONE) co_return error_code{};
    if (auto ec = co_await fill()) co_return ec;
  }
}

asio::awaitable<std::tuple<error_code, size_t>> tls_socket::read_some(
    std::span<const asio::mutable_buffer> bufs) {
  size_t i = 0;
  size_t off = 0;
  size_t total = 0;
  for (;;) {
    while (i < bufs.size()) {
      const auto& b = bufs[i];
      if (off == b.size()) {
        ++i;
        off = 0;
        continue;
      }
      const int want = static_cast<int>(std::min<size_t>(b.size() - off, INT_MAX));
      ERR_clear_error();
      const int n = SSL_read(ssl_.get(), static_cast<char*>(b.data()) + off, want);
      if (n > 0) {
        off += static_cast<size_t>(n);
        total += static_cast<size_t>(n);
        continue;
      }
      const int err = SSL_get_error(ssl_.get(), n);
      if (err == SSL_ERROR_WANT_READ) break;
      // Bytes read before the error are the caller's; the error comes again on the next call.
      if (total > 0) co_return std::tuple{error_code{}, total};
      if (err == SSL_ERROR_ZERO_RETURN) co_return std::tuple{error_code(asio::error::eof), 0};
      co_return std::tuple{ssl_error(n), 0};
    }
    if (total > 0 || i == bufs.size()) co_return std::tuple{error_code{}, total};
    if (auto ec = co_await fill()) co_return std::tuple{ec, 0};
  }
}

asio::awaitable<std::tuple<error_code, size_t>> tls_socket::read_some(asio::mutable_buffer buf) {
  // A coroutine of its own: `buf` lives in its frame while the read runs.
  co_return co_await read_some(std::span<const asio::mutable_buffer>(&buf, 1));
}

asio::awaitable<std::tuple<error_code, size_t>> tls_socket::write(
    std::span<const asio::const_buffer> bufs) {
  // Room for a chunk and the records that pass it (each adds a header and tag: 22 bytes in
  // TLS 1.3, 29 in TLS 1.2).
  io_->out.reserve(write_chunk + (size_t{32} << 10));
  size_t total = 0;
  for (const auto& b : bufs) {
    const auto* p = static_cast<const char*>(b.data());
    size_t left = b.size();
    while (left > 0) {
      ERR_clear_error();
      const int n = SSL_write(ssl_.get(), p, static_cast<int>(std::min(left, write_chunk)));
      if (n <= 0) co_return std::tuple{ssl_error(n), total};
      p += n;
      left -= static_cast<size_t>(n);
      total += static_cast<size_t>(n);
      if (io_->out.size() >= write_chunk) {
        if (auto ec = co_await flush()) co_return std::tuple{ec, total};
      }
    }
  }
  if (auto ec = co_await flush()) co_return std::tuple{ec, total};
  co_return std::tuple{error_code{}, total};
}

}  // namespace silt::net
