#pragma once
// A server-side TLS connection over a TCP socket: OpenSSL driven through a BIO of Silt's own, so
// that the socket is read and written in large chunks, not one TLS record (16 KiB) per system
// call and asynchronous operation as asio::ssl::stream does.
//
// Reads: one socket read takes up to 64 KiB of records at a time into a buffer the BIO hands
// OpenSSL from (made at the first read; asio's stream holds as much in its four 17 KiB
// buffers); SSL_read decrypts them into the caller's buffers. Writes: SSL_write encrypts the
// buffers of a write into an output buffer, sent with one socket write per 256 KiB; trim()
// frees the output buffers of a quiet connection. Renegotiation is refused (as Kafka does).
//
// One reader and one writer may run at once, on one strand: the reader never writes to the
// socket; what SSL_read has to send (an alert, a key update) leaves with the next write.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <tuple>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>
#include <openssl/ssl.h>

namespace silt::net {

class tls_socket {
 public:
  tls_socket(boost::asio::ip::tcp::socket s, boost::asio::ssl::context& ctx);
  tls_socket(tls_socket&&) noexcept;
  tls_socket& operator=(tls_socket&&) = delete;
  tls_socket(const tls_socket&) = delete;
  tls_socket& operator=(const tls_socket&) = delete;
  ~tls_socket();

  boost::asio::ip::tcp::socket& next_layer() { return sock_; }
  SSL* native_handle() { return ssl_.get(); }

  // The server's side of the handshake; an error: the connection is to close.
  boost::asio::awaitable<boost::system::error_code> handshake();

  // Decrypted bytes into `bufs`, in order: at least one byte, as many as have arrived.
  boost::asio::awaitable<std::tuple<boost::system::error_code, size_t>> read_some(
      std::span<const boost::asio::mutable_buffer> bufs);
  boost::asio::awaitable<std::tuple<boost::system::error_code, size_t>> read_some(
      boost::asio::mutable_buffer buf);

  // Frees the output buffers unless a write is under way (for a connection gone quiet).
  void trim();

  // Encrypts and sends all of `bufs`.
  boost::asio::awaitable<std::tuple<boost::system::error_code, size_t>> write(
      std::span<const boost::asio::const_buffer> bufs);

  // The buffers between the socket and OpenSSL, behind a pointer that moves stay valid.
  struct io_buffers {
    std::unique_ptr<uint8_t[]> in;  // bytes read from the socket; [in_pos, in_end) not taken
    size_t in_pos = 0;
    size_t in_end = 0;
    bool eof = false;          // the socket ended
    std::vector<uint8_t> out;  // records for the socket
  };

 private:
  struct ssl_free {
    void operator()(SSL* s) const { SSL_free(s); }
  };

  // One socket read of what has arrived, for OpenSSL to take.
  boost::asio::awaitable<boost::system::error_code> fill();
  // Sends every record waiting in io_->out.
  boost::asio::awaitable<boost::system::error_code> flush();
  // The error of an SSL call that returned `ret`, the OpenSSL error queue cleared.
  boost::system::error_code ssl_error(int ret);

  boost::asio::ip::tcp::socket sock_;
  std::unique_ptr<io_buffers> io_;
  std::unique_ptr<SSL, ssl_free> ssl_;
  std::vector<uint8_t> sending_;  // the records of the socket write under way
  bool flushing_ = false;         // a socket write is under way
};

}  // namespace silt::net
