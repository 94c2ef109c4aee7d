// The network server: accepts Kafka clients, frames their requests and answers them in order.
//
// Each connection runs two coroutines on its own strand: a reader that reads size-prefixed
// frames and starts a handler coroutine per request, and a writer that sends responses in
// request order as they complete. Requests of one connection therefore run concurrently
// (a produce waiting for the WAL does not hold up the next request) but are answered in the
// order they arrived, as Kafka clients require.
//
// Bounds: a frame larger than socket.request.max.bytes closes the connection; at most
// max_inflight requests per connection are read ahead of their responses; the bytes of all
// requests in flight on all connections stay under queued_max_bytes (a reader waits for room:
// backpressure through TCP, never out-of-memory). Responses handled but not yet written count
// too: a connection with unsent responses reads no further request while its own unsent bytes
// exceed a sixteenth of queued_max_response_bytes or everyone's exceed all of it, so that a
// client that never reads its responses holds a bounded amount of memory and stops being read.
// A connection with no handler running and no bytes read or written for idle_timeout is
// closed (one that sends a byte a second, or never takes its responses, included).
//
// TLS: a listener of security protocol SSL serves its connections over OpenSSL (tls_socket,
// which reads and writes the socket in large chunks), with the context its tls_context_source
// holds when the connection is accepted; the handshake runs on the connection's strand and must end
// within handshake_timeout, else the connection is closed. A failed handshake is counted
// (server_stats) and logged at debug level only: a port scanner must not flood the log. The
// connection code is a template over the stream, so PLAINTEXT connections run the same code as
// before over a bare socket, with no indirection per read or write.
//
// Each connection knows its client's identity (principal.h): User:ANONYMOUS on PLAINTEXT and on
// SSL without a client certificate; with one, User: and the certificate's subject as Java prints
// it, mapped by the listener's ssl.principal.mapping.rules (a subject no rule maps closes the
// connection, as Kafka refuses it).
//
// Lifecycle: listen() binds, start() accepts; stop() stops accepting and reading, lets the
// requests in flight finish and be answered, then closes every connection and calls its
// callback. Threads: each io_context may be run by any number of threads, and connections
// may be dealt to several (one thread each, in the broker); all state of a connection is
// owned by its strand, the server's own state by its strand.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <tl/expected.hpp>

#include "net/frame_arena.h"
#include "net/principal.h"
#include "net/principal_mapper.h"
#include "net/request_metrics.h"
#include "net/sasl_session.h"
#include "protocol/request_header.h"
#include "protocol/writer.h"

namespace silt::net {

// The bytes of one request, small ones from the frame arena (frame_arena.h).
using frame_bytes = std::vector<uint8_t, frame_allocator<uint8_t>>;

// One request as a handler sees it. The frame is the request without its 4-byte size; the
// handler may modify it (a produce rewrites base offsets in place) and may keep it alive past
// the response through the shared pointer (the log cache does).
// A request's bytes as counted against queued_max_bytes, from its read until its handler
// returns or releases them.
class request_budget {
 public:
  request_budget(std::atomic<int64_t>& used, int64_t bytes) : used_(&used), bytes_(bytes) {}
  // Gives the bytes back, once (later calls do nothing); any thread.
  void release() noexcept {
    const int64_t n = bytes_.exchange(0, std::memory_order_relaxed);
    if (n != 0) used_->fetch_sub(n, std::memory_order_relaxed);
  }

 private:
  std::atomic<int64_t>* used_;
  std::atomic<int64_t> bytes_;
};

struct request {
  std::shared_ptr<frame_bytes> frame;
  protocol::parsed_request_header header;
  uint64_t connection_id = 0;
  std::string peer;  // address:port of the client
  // The server's count of this request's bytes (null for requests not read by a server).
  request_budget* budget = nullptr;
  // Who sent it (the connection's, valid while the handler runs; null for requests not read by
  // a server: anonymous).
  const client_identity* identity = nullptr;
  [[nodiscard]] std::span<uint8_t> body() const {
    return {frame->data() + header.header_size, frame->size() - header.header_size};
  }
  // A handler that parks a request for long (a fetch's long poll) and no longer needs its bytes
  // gives them back, so that the requests of other connections are read meanwhile (Kafka
  // releases a request's memory once it is parsed). Drops the frame.
  void release_frame() {
    if (budget) budget->release();
    frame.reset();
  }
};

// What goes back: the encoded response (size prefix included) with record data referenced
// in place (zero-copy) where the writer left external segments.
struct response {
  std::vector<uint8_t> bytes;
  std::vector<protocol::external_segment> segments;  // inserted into `bytes` at their offsets
  std::vector<std::shared_ptr<const void>> owners;   // keep the segments' memory alive
  bool send = true;                                  // false: no response (Produce with acks=0)
  bool close = false;  // close the connection after this (after sending, if send)
  // Read nothing more from the connection for this long once the handler returned (a client
  // throttled by its quotas, KIP-219): a timer, no thread waits.
  std::chrono::milliseconds throttle{0};

  [[nodiscard]] size_t size() const;
  static response none() { return response{.send = false}; }
  static response close_connection() { return response{.send = false, .close = true}; }
};

class request_handler {
 public:
  virtual ~request_handler() = default;
  // Handles one request. Runs on the connection's strand; may suspend (WAL durability, fetch
  // long polls). Must not throw.
  virtual boost::asio::awaitable<response> handle(request req) = 0;
};

struct server_options {
  int32_t max_request_bytes = 104857600;
  int64_t queued_max_bytes = 268435456;
  int64_t queued_max_response_bytes = 268435456;
  int32_t max_inflight = 64;
  std::chrono::milliseconds idle_timeout{600000};
  int32_t max_connections = 10000;
  // Open connections from one IP address at most (Kafka's max.connections.per.ip), and the
  // addresses that have another limit (max.connections.per.ip.overrides; an IPv4 client of a
  // dual-stack listener is counted under its IPv4 address).
  int32_t max_connections_per_ip = INT32_MAX;
  std::map<boost::asio::ip::address, int32_t> max_connections_per_ip_overrides;
  // An SSL connection whose handshake has not ended by then is closed.
  std::chrono::milliseconds handshake_timeout{10000};
};

class tls_context_source;

// What a listener speaks: its name (as listener.security.protocol.map names it) and protocol;
// for SSL and SASL_SSL, where its current TLS context comes from; for SSL, how a client
// certificate's subject becomes a principal; for SASL_PLAINTEXT and SASL_SSL, its mechanisms.
struct listener_options {
  std::string name = "PLAINTEXT";
  security_protocol protocol = security_protocol::plaintext;
  std::shared_ptr<tls_context_source> tls;                  // SSL, SASL_SSL: required
  std::shared_ptr<const sasl_options> sasl;                 // SASL_*: required
  std::shared_ptr<const principal_mapper> principal_rules;  // null: DEFAULT (the subject)
};

struct server_stats {
  uint64_t connections_accepted = 0;
  uint64_t connections_open = 0;
  uint64_t requests = 0;
  uint64_t oversized_frames = 0;
  uint64_t idle_closed = 0;
  uint64_t refused_per_ip = 0;        // connections closed at once: their address had its maximum
  int64_t unsent_response_bytes = 0;  // handled, not yet written, over all connections
  uint64_t reads_held_for_responses = 0;  // times a reader waited for its responses to go
  uint64_t tls_handshakes = 0;            // completed
  uint64_t tls_handshake_failures = 0;    // failed, timed out included (not counted twice)
  uint64_t tls_handshake_timeouts = 0;    // not done within handshake_timeout
  uint64_t sasl_authentications = 0;      // succeeded (re-authentications included)
  uint64_t sasl_reauthentications = 0;    // of which re-authentications
  uint64_t sasl_failures = 0;             // failed or refused exchanges
  uint64_t sasl_expired_sessions = 0;     // connections closed: a request after the session ended
  uint64_t throttled_responses = 0;       // responses after which a connection was muted
};

class server {
 public:
  server(boost::asio::io_context& io, const server_options& options, request_handler& handler);
  // The same, with each accepted connection placed on one of `workers` in turn (each run by
  // one thread of its own, so that a connection's work never passes between threads); `io`
  // keeps the listeners and the stop state.
  server(boost::asio::io_context& io, std::vector<boost::asio::io_context*> workers,
         const server_options& options, request_handler& handler);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds a listener on host:port (empty host: all interfaces; port 0: any free port) that
  // speaks what `listener` says (PLAINTEXT by default). Returns the bound port.
  [[nodiscard]] tl::expected<uint16_t, std::string> listen(const std::string& host, uint16_t port,
                                                           listener_options listener = {});
  // Starts accepting on every listener.
  void start();
  // Stops accepting and reading; requests in flight are answered, then connections close
  // and `done` runs (on an io_context thread). Idempotent.
  void stop(std::function<void()> done);

  [[nodiscard]] server_stats stats() const;
  // Per-API request timing (see request_metrics.h).
  [[nodiscard]] request_metrics& metrics();

  struct impl;  // defined in server.cc

 private:
  std::shared_ptr<impl> impl_;
};

}  // namespace silt::net
