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
// Lifecycle: listen() binds, start() accepts; stop() stops accepting and reading, lets the
// requests in flight finish and be answered, then closes every connection and calls its
// callback. Threads: each io_context may be run by any number of threads, and connections
// may be dealt to several (one thread each, in the broker); all state of a connection is
// owned by its strand, the server's own state by its strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <tl/expected.hpp>

#include "net/frame_arena.h"
#include "net/request_metrics.h"
#include "protocol/request_header.h"
#include "protocol/writer.h"

namespace silt::net {

// The bytes of one request, small ones from the frame arena (frame_arena.h).
using frame_bytes = std::vector<uint8_t, frame_allocator<uint8_t>>;

// One request as a handler sees it. The frame is the request without its 4-byte size; the
// handler may modify it (a produce rewrites base offsets in place) and may keep it alive past
// the response through the shared pointer (the log cache does).
struct request {
  std::shared_ptr<frame_bytes> frame;
  protocol::parsed_request_header header;
  uint64_t connection_id = 0;
  std::string peer;  // address:port of the client
  [[nodiscard]] std::span<uint8_t> body() const {
    return {frame->data() + header.header_size, frame->size() - header.header_size};
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
};

struct server_stats {
  uint64_t connections_accepted = 0;
  uint64_t connections_open = 0;
  uint64_t requests = 0;
  uint64_t oversized_frames = 0;
  uint64_t idle_closed = 0;
  int64_t unsent_response_bytes = 0;      // handled, not yet written, over all connections
  uint64_t reads_held_for_responses = 0;  // times a reader waited for its responses to go
};

class server {
 public:
  server(boost::asio::io_context& io, server_options options, request_handler& handler);
  // The same, with each accepted connection placed on one of `workers` in turn (each run by
  // one thread of its own, so that a connection's work never passes between threads); `io`
  // keeps the listeners and the stop state.
  server(boost::asio::io_context& io, std::vector<boost::asio::io_context*> workers,
         server_options options, request_handler& handler);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds a listener on host:port (empty host: all interfaces; port 0: any free port).
  // Returns the bound port.
  [[nodiscard]] tl::expected<uint16_t, std::string> listen(const std::string& host, uint16_t port);
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
