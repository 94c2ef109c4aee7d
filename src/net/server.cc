#include "net/server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "base/endian.h"
#include "base/log.h"
#include "net/listener.h"
#include "net/tls_context.h"
#include "net/tls_socket.h"
#include "net/x509_subject.h"
#include "security/authorizer.h"

namespace silt::net {

namespace asio = boost::asio;
using asio::ip::tcp;
using strand_type = asio::strand<asio::io_context::executor_type>;
using tls_stream = tls_socket;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

size_t response::size() const {
  size_t n = bytes.size();
  for (const auto& s : segments) n += s.data.size();
  return n;
}

namespace {

// Bytes of requests in flight across all connections. A reader that finds no room polls
// (backpressure is rare and short; a waiter list would cost every request a lock).
class byte_budget {
 public:
  explicit byte_budget(int64_t limit) : limit_(limit) {}
  bool try_acquire(int64_t n) {
    int64_t used = used_.load(std::memory_order_relaxed);
    for (;;) {
      // A request bigger than the whole budget may run alone.
      if (used > 0 && used + n > limit_) return false;
      if (used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed)) return true;
    }
  }
  void release(int64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }
  std::atomic<int64_t>& used() { return used_; }

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
};

// A wake-up signal for one coroutine on a strand: wait() until notify(). Callers re-check
// their condition after waking, so a notify with nobody waiting is harmless.
class signal {
 public:
  explicit signal(const strand_type& ex) : timer_(ex) {}
  asio::awaitable<void> wait() {
    timer_.expires_at(asio::steady_timer::time_point::max());
    co_await timer_.async_wait(use_tuple);
  }
  void notify() { timer_.cancel(); }

 private:
  asio::steady_timer timer_;
};

// The address a client is counted under: an IPv4 client of a dual-stack listener as IPv4.
asio::ip::address client_address(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  }
  return a;
}

}  // namespace

// What the server knows of a connection, whatever its stream.
struct connection_base {
  connection_base(const asio::io_context::executor_type& ex, asio::ip::address address)
      : strand(asio::make_strand(ex)), address(std::move(address)) {}
  virtual ~connection_base() = default;
  // Stops reading; what is in flight is still answered. Runs on the strand.
  virtual void stop_reading() = 0;

  strand_type strand;
  const asio::ip::address address;  // the client's, as counted for max_connections_per_ip
};

// A bound listener: its sockets and what it speaks.
struct bound_listener {
  std::unique_ptr<tcp::acceptor> acceptor;
  std::shared_ptr<const listener_options> options;
};

struct server::impl : std::enable_shared_from_this<server::impl> {
  impl(asio::io_context& io, std::vector<asio::io_context*> workers, const server_options& o,
       request_handler& h)
      : io(io),
        workers(std::move(workers)),
        options(o),
        handler(h),
        strand(asio::make_strand(io)),
        budget(o.queued_max_bytes) {}

  // The io_context the next accepted connection runs on.
  asio::io_context& next_context() {
    if (workers.empty()) return io;
    return *workers[next_worker++ % workers.size()];
  }

  void remove(uint64_t id);

  asio::io_context& io;
  const std::vector<asio::io_context*> workers;  // empty: connections run on `io`
  size_t next_worker = 0;                        // owned by `strand`
  const server_options options;
  request_handler& handler;
  strand_type strand;  // owns acceptors and stop state
  byte_budget budget;
  std::vector<bound_listener> acceptors;
  bool stopping = false;
  std::function<void()> on_stopped;

  std::mutex mu;  // guards conns and the counters below
  std::map<uint64_t, std::shared_ptr<connection_base>> conns;
  std::map<asio::ip::address, int32_t> per_ip;  // open connections of each client address
  uint64_t next_id = 1;
  server_stats stats;
  std::atomic<uint64_t> requests{0};
  std::atomic<int64_t> unsent_response_bytes{0};
  std::atomic<uint64_t> reads_held{0};
  std::atomic<uint64_t> throttled{0};
  std::atomic<uint64_t> tls_handshakes{0};
  std::atomic<uint64_t> tls_handshake_failures{0};
  std::atomic<uint64_t> tls_handshake_timeouts{0};
  request_metrics metrics;
};

// One client connection over `Stream`: a tcp::socket (PLAINTEXT) or a tls_stream (SSL).
template <typename Stream>
struct connection final : connection_base, std::enable_shared_from_this<connection<Stream>> {
  using clock = std::chrono::steady_clock;
  static constexpr bool kTls = std::is_same_v<Stream, tls_stream>;
  struct slot {
    bool ready = false;
    response resp;
    std::optional<request_budget> budget;  // the request's bytes, until released
    int64_t unsent_bytes = 0;  // counted in the connection's and the server's unsent bytes
    request_metrics::api_timing* timing = nullptr;  // null: not timed (unparsable header)
    clock::time_point arrived;                      // the request's last byte read
    clock::time_point handled;                      // the handler's end
  };

  // Runs on `ex`, the context `s` was opened on; `ctx`: the TLS context of `s` (SSL only).
  connection(std::shared_ptr<server::impl> srv, const asio::io_context::executor_type& ex, Stream s,
             uint64_t id, std::string peer, asio::ip::address address,
             const listener_options& listener, tls_context_ptr ctx)
      : connection_base(ex, address),
        srv(std::move(srv)),
        sock(std::move(s)),
        tls_context(std::move(ctx)),
        principal_rules(listener.principal_rules),
        sasl(listener.sasl ? std::make_unique<sasl_session>(listener.sasl) : nullptr),
        id(id),
        peer(std::move(peer)),
        writer_wake(strand),
        reader_wake(strand),
        idle_timer(strand),
        mute_timer(strand) {
    identity.listener = listener.name;
    identity.protocol = listener.protocol;
    if (this->address.is_v4()) {
      const auto b = this->address.to_v4().to_bytes();
      identity.host = security::kafka_host_address(b);
    } else {
      const auto v6 = this->address.to_v6();
      const auto b = v6.to_bytes();
      identity.host = security::kafka_host_address(b, static_cast<uint32_t>(v6.scope_id()));
    }
  }

  tcp::socket& socket() {
    if constexpr (kTls) {
      return sock.next_layer();
    } else {
      return sock;
    }
  }

  // Each coroutine holds the connection through its `self` parameter, copied into its frame
  // when it is created: a coroutine that starts after the others finished still finds it.
  void start() {
    asio::co_spawn(strand, reader(this->shared_from_this()), asio::detached);
    asio::co_spawn(strand, writer(this->shared_from_this()), asio::detached);
    asio::co_spawn(strand, watchdog(this->shared_from_this()), asio::detached);
  }

  void stop_reading() override {
    if (read_stopped) return;
    read_stopped = true;
    boost::system::error_code ec;
    socket().shutdown(tcp::socket::shutdown_receive, ec);
    mute_timer.cancel();
    reader_wake.notify();
    writer_wake.notify();
  }

  void close() {
    if (closed) return;
    closed = true;
    read_stopped = true;
    boost::system::error_code ec;
    socket().shutdown(tcp::socket::shutdown_both, ec);
    socket().close(ec);
    idle_timer.cancel();
    mute_timer.cancel();
    reader_wake.notify();
    writer_wake.notify();
  }

  // The TLS handshake, bounded by handshake_timeout; then the client's principal from its
  // certificate. False: the connection is to close.
  asio::awaitable<bool> handshake() {
    // 0: handshaking, 1: done, 2: timed out (the expiry may be queued as the handshake ends).
    auto state = std::make_shared<int>(0);
    asio::steady_timer deadline(strand, srv->options.handshake_timeout);
    deadline.async_wait([self = this->shared_from_this(), state](boost::system::error_code ec) {
      if (ec || *state != 0) return;
      *state = 2;
      self->close();
    });
    const auto ec = co_await sock.handshake();
    const bool timed_out = *state == 2;
    *state = 1;
    deadline.cancel();
    if (!ec && !read_stopped) {
      srv->tls_handshakes.fetch_add(1, std::memory_order_relaxed);
      last_activity = clock::now();
      co_return sasl != nullptr || client_principal();  // SASL_SSL: the SASL user
    }
    srv->tls_handshake_failures.fetch_add(1, std::memory_order_relaxed);
    if (timed_out) srv->tls_handshake_timeouts.fetch_add(1, std::memory_order_relaxed);
    SILT_LOG(debug, "silt: TLS handshake with %s on %s failed: %s", peer.c_str(),
             identity.listener.c_str(), timed_out ? "timed out" : ec.message().c_str());
    co_return false;
  }

  // The principal of a client certificate (none: User:ANONYMOUS). False: no mapping rule
  // applies to its subject.
  bool client_principal() {
    X509* cert = SSL_get1_peer_certificate(sock.native_handle());
    if (cert == nullptr) return true;
    const std::string subject = rfc2253_subject(X509_get_subject_name(cert));
    X509_free(cert);
    auto name = principal_rules ? principal_rules->map(subject) : std::optional(subject);
    if (!name) {
      srv->tls_handshake_failures.fetch_add(1, std::memory_order_relaxed);
      SILT_LOG(debug, "silt: %s on %s: no ssl.principal.mapping.rules rule applies to '%s'",
               peer.c_str(), identity.listener.c_str(), subject.c_str());
      return false;
    }
    identity.who.name = std::move(*name);
    SILT_LOG(debug, "silt: %s on %s is %s", peer.c_str(), identity.listener.c_str(),
             identity.who.to_string().c_str());
    return true;
  }

  // Completes `size_buf` (the next frame's size). False: a read error.
  asio::awaitable<bool> read_size() {
#ifdef __clang_analyzer__
    // clang-analyzer 14 follows asio's awaitable internals here into a null dereference that
    // cannot happen (resume_context_ is set whenever a coroutine is resumed): not analyzed.
    co_return false;
#endif
    while (size_have < sizeof size_buf) {
      const auto rest = asio::buffer(size_buf + size_have, sizeof size_buf - size_have);
      boost::system::error_code ec;
      size_t n = 0;
      if constexpr (kTls) {
        std::tie(ec, n) = co_await sock.read_some(rest);
      } else {
        std::tie(ec, n) = co_await asio::async_read(sock, rest, use_tuple);
      }
      if (ec) co_return false;
      size_have += n;
    }
    co_return true;
  }

  // Reads the next frame, of at most `max` bytes, into a buffer counted against the server's
  // budget (the caller releases it). Null: the connection is to stop reading (a read error, a
  // stop, a frame too large).
  asio::awaitable<std::shared_ptr<frame_bytes>> read_frame(int32_t max) {
    if (!co_await read_size()) co_return nullptr;
    size_have = 0;
    last_activity = clock::now();
    const auto size = base::load_be<int32_t>(size_buf);
    if (size <= 0 || size > max) {
      // Kafka closes the connection on a frame it will not read (InvalidReceiveException).
      std::lock_guard lock(srv->mu);
      ++srv->stats.oversized_frames;
      co_return nullptr;
    }
    for (int wait_ms = 1; !srv->budget.try_acquire(size); wait_ms = std::min(wait_ms * 2, 20)) {
      asio::steady_timer t(strand, std::chrono::milliseconds(wait_ms));
      co_await t.async_wait(use_tuple);
      if (read_stopped) co_return nullptr;
    }
    auto frame = std::make_shared<frame_bytes>(static_cast<size_t>(size));
    // The frame, and whatever of the next frame's size has come with it.
    for (size_t got = 0; got < frame->size();) {
      const std::array<asio::mutable_buffer, 2> bufs{
          asio::buffer(frame->data() + got, frame->size() - got), asio::buffer(size_buf)};
      boost::system::error_code e;
      size_t n = 0;
      if constexpr (kTls) {
        std::tie(e, n) = co_await sock.read_some(bufs);
      } else {
        std::tie(e, n) = co_await sock.async_read_some(bufs, use_tuple);
      }
      if (e) {
        srv->budget.release(size);
        co_return nullptr;
      }
      const size_t body = std::min(n, frame->size() - got);
      got += body;
      size_have = n - body;
    }
    last_activity = clock::now();
    srv->requests.fetch_add(1, std::memory_order_relaxed);
    co_return frame;
  }

  // Waits until the connection may read another request: fewer than max_inflight are
  // unanswered and its responses do not pile up (see server.h).
  asio::awaitable<void> wait_for_room() {
    while (
        (static_cast<int32_t>(slots.size()) >= srv->options.max_inflight || responses_pile_up()) &&
        !read_stopped) {
      if (responses_pile_up()) srv->reads_held.fetch_add(1, std::memory_order_relaxed);
      co_await reader_wake.wait();
    }
  }

  // Waits while the connection is muted: a response throttled its client (KIP-219). A timer on
  // the strand: the thread serves other connections meanwhile. A connection never throttled
  // reads no clock here.
  asio::awaitable<void> wait_unmuted() {
    while (!read_stopped && muted_until != clock::time_point{} && clock::now() < muted_until) {
      mute_timer.expires_at(muted_until);
      co_await mute_timer.async_wait(use_tuple);
    }
  }

  // Queues a response that needs no handler (the SASL exchange's) behind those in flight.
  void push_response(response&& r) {
    auto s = std::make_shared<slot>();
    s->resp = std::move(r);
    s->ready = true;
    slots.push_back(std::move(s));
    writer_wake.notify();
  }

  // Starts the handler of a request read into `frame` (its bytes counted in the budget).
  // False: its header does not parse, and the connection is to close.
  bool dispatch(const std::shared_ptr<connection>& self, std::shared_ptr<frame_bytes> frame) {
    auto s = std::make_shared<slot>();
    s->budget.emplace(srv->budget.used(), static_cast<int64_t>(frame->size()));
    s->arrived = last_activity;
    slots.push_back(s);
    auto header = protocol::parse_request_header(*frame);
    if (!header) {
      // Unknown API key or a header that does not parse: nothing sensible can be answered.
      s->budget->release();
      s->ready = true;
      s->resp = response::close_connection();
      writer_wake.notify();
      return false;
    }
    s->timing = srv->metrics.of(header->header.request_api_key);
    // (The slot outlives the handler's run, which holds it.)
    request req{std::move(frame), *header, id, peer, &*s->budget, &identity};
    ++running;
    asio::co_spawn(strand, run(self, s, std::move(req)), asio::detached);
    return true;
  }

  // The SASL exchange (sasl_session.h), from `first` if it was read already (a
  // re-authentication's SaslHandshake) or from the next frame. True: authenticated; false: the
  // connection is to close (its last answers are queued).
  asio::awaitable<bool> authenticate(const std::shared_ptr<connection>& self,
                                     std::shared_ptr<frame_bytes> first) {
    const auto& options = sasl->options();
    const bool reauth = first != nullptr;
    auto frame = std::move(first);
    for (;;) {
      if (!frame) {
        co_await wait_for_room();
        if (read_stopped) co_return false;
        frame = co_await read_frame(options.max_receive_size);
      }
      if (!frame || read_stopped) co_return false;
      auto step = sasl->on_frame(*frame, std::chrono::system_clock::now());
      if (step.what == sasl_session::action::api_versions) {
        if (!dispatch(self, std::exchange(frame, nullptr))) co_return false;
        continue;
      }
      srv->budget.release(static_cast<int64_t>(frame->size()));
      frame.reset();
      switch (step.what) {
        case sasl_session::action::api_versions:
        case sasl_session::action::reply:
          push_response(response{.bytes = std::move(step.frame)});
          break;
        case sasl_session::action::authenticated: {
          push_response(response{.bytes = std::move(step.frame)});
          identity.who.type = "User";
          identity.who.name = sasl->principal();
          {
            std::lock_guard lock(srv->mu);
            ++srv->stats.sasl_authentications;
            if (reauth) ++srv->stats.sasl_reauthentications;
          }
          SILT_LOG(debug, "silt: %s on %s %s as %s with %s", peer.c_str(),
                   identity.listener.c_str(), reauth ? "re-authenticated" : "authenticated",
                   identity.who.to_string().c_str(), sasl->mechanism().c_str());
          co_return true;
        }
        case sasl_session::action::failed:
        case sasl_session::action::refuse: {
          const bool failed = step.what == sasl_session::action::failed;
          {
            std::lock_guard lock(srv->mu);
            ++srv->stats.sasl_failures;
          }
          SILT_LOG(debug, "silt: SASL authentication of %s on %s failed: %s", peer.c_str(),
                   identity.listener.c_str(), step.detail.c_str());
          if (failed && options.failed_delay.count() > 0) {
            // Kafka's connection.failed.authentication.delay.ms: the answer and the close wait,
            // which slows down whoever guesses passwords.
            asio::steady_timer t(strand, options.failed_delay);
            co_await t.async_wait(use_tuple);
          }
          response last = response::close_connection();
          if (failed && !step.frame.empty()) {
            last = response{.bytes = std::move(step.frame), .close = true};
          }
          push_response(std::move(last));
          co_return false;
        }
      }
    }
  }

  asio::awaitable<void> reader(std::shared_ptr<connection> self) {
    const auto& opt = srv->options;
    if constexpr (kTls) {
      if (!co_await handshake()) {
        reading_done = true;
        writer_wake.notify();
        co_return;
      }
    }
    if (sasl && !co_await authenticate(self, nullptr)) {
      reading_done = true;
      writer_wake.notify();
      co_return;
    }
    while (!read_stopped) {
      co_await wait_for_room();
      co_await wait_unmuted();
      if (read_stopped) break;
      auto frame = co_await read_frame(opt.max_request_bytes);
      if (!frame) break;
      // A throttle that came while the frame was read holds it until the throttle ends.
      co_await wait_unmuted();
      if (read_stopped) {
        srv->budget.release(static_cast<int64_t>(frame->size()));
        break;
      }
      if (sasl && !co_await sasl_gate(self, frame)) break;
      if (frame && !dispatch(self, std::move(frame))) break;
    }
    reading_done = true;
    writer_wake.notify();
  }

  // On an authenticated SASL connection, before a request is dispatched: a SaslHandshake
  // starts a re-authentication (KIP-368; `frame` is then consumed), any other request after
  // the session's end closes the connection, as Kafka does. False: the connection is to close.
  asio::awaitable<bool> sasl_gate(const std::shared_ptr<connection>& self,
                                  std::shared_ptr<frame_bytes>& frame) {
    constexpr int16_t kSaslHandshake = 17;
    const bool handshake =
        frame->size() >= 2 && base::load_be<int16_t>(frame->data()) == kSaslHandshake;
    if (handshake && sasl->begin_reauthentication(clock::now())) {
      co_return co_await authenticate(self, std::move(frame));
    }
    const auto expiry = sasl->expiry();
    if (!expiry || clock::now() < *expiry) co_return true;
    srv->budget.release(static_cast<int64_t>(frame->size()));
    frame.reset();
    {
      std::lock_guard lock(srv->mu);
      ++srv->stats.sasl_expired_sessions;
    }
    SILT_LOG(debug, "silt: closing the connection of %s on %s: its SASL session expired",
             peer.c_str(), identity.listener.c_str());
    push_response(response::close_connection());
    co_return false;
  }

  asio::awaitable<void> run([[maybe_unused]] std::shared_ptr<connection> self,
                            std::shared_ptr<slot> s, request req) {
    try {
      // Moved once: clang-tidy reads the coroutine's expansion in this template as a loop.
      s->resp = co_await srv->handler.handle(std::move(req));  // NOLINT(bugprone-use-after-move)
    } catch (const std::exception&) {
      s->resp = response::close_connection();
    }
    s->budget->release();
    if (s->resp.send && !writer_done) {
      s->unsent_bytes = static_cast<int64_t>(s->resp.size());
      unsent += s->unsent_bytes;
      srv->unsent_response_bytes.fetch_add(s->unsent_bytes, std::memory_order_relaxed);
    }
    s->handled = clock::now();
    if (s->resp.throttle.count() > 0) {
      muted_until = std::max(muted_until, s->handled + s->resp.throttle);
      srv->throttled.fetch_add(1, std::memory_order_relaxed);
    }
    if (s->timing != nullptr) {
      s->timing->handle.record(base::micros(s->handled - s->arrived));
      if (!s->resp.send) s->timing->total.record(base::micros(s->handled - s->arrived));
    }
    s->ready = true;
    --running;
    writer_wake.notify();
    if (writer_done) maybe_remove();
  }

  // Whether this connection's unsent responses hold up its reading (see server.h).
  [[nodiscard]] bool responses_pile_up() const {
    if (unsent == 0) return false;
    const int64_t limit = srv->options.queued_max_response_bytes;
    return unsent > limit / 16 ||
           srv->unsent_response_bytes.load(std::memory_order_relaxed) > limit;
  }

  // Forgets the unsent bytes of `s` (written, or never to be).
  void sent(slot& s) {
    if (s.unsent_bytes == 0) return;
    unsent -= s.unsent_bytes;
    srv->unsent_response_bytes.fetch_sub(s.unsent_bytes, std::memory_order_relaxed);
    s.unsent_bytes = 0;
  }

  // The server forgets the connection once nothing of it runs any more: the stop callback
  // then knows no handler still uses the broker.
  void maybe_remove() {
    if (running == 0 && !removed) {
      removed = true;
      srv->remove(id);
    }
  }

  asio::awaitable<void> writer([[maybe_unused]] std::shared_ptr<connection> self) {
    std::vector<asio::const_buffer> bufs;
    std::vector<std::shared_ptr<slot>> batch;
    while (!closed) {
      if (slots.empty() || !slots.front()->ready) {
        if (reading_done && slots.empty()) break;
        co_await writer_wake.wait();
        continue;
      }
      // Gather every ready response at the front into one write.
      bufs.clear();
      batch.clear();
      bool close_after = false;
      size_t bytes = 0;
      while (!slots.empty() && slots.front()->ready && bytes < (size_t{4} << 20) && !close_after) {
        auto s = std::move(slots.front());
        slots.pop_front();
        if (s->resp.send) {
          add_buffers(s->resp, bufs);
          bytes += s->resp.size();
        }
        close_after = s->resp.close;
        batch.push_back(std::move(s));
      }
      reader_wake.notify();
      if (!bufs.empty()) {
        const auto write_start = clock::now();
        boost::system::error_code ec;
        if constexpr (kTls) {
          coalesce(bufs);
          ec = std::get<0>(co_await sock.write(bufs));
        } else {
          ec = std::get<0>(co_await asio::async_write(sock, bufs, use_tuple));
        }
        for (const auto& s : batch) sent(*s);
        reader_wake.notify();
        if (ec) break;
        last_activity = clock::now();
        for (const auto& s : batch) {
          if (s->timing == nullptr || !s->resp.send) continue;
          s->timing->queue.record(base::micros(write_start - s->handled));
          s->timing->send.record(base::micros(last_activity - write_start));
          s->timing->total.record(base::micros(last_activity - s->arrived));
        }
      }
      batch.clear();
      if (close_after) break;
    }
    // Requests still running answer into slots nobody sends; their budget is released when
    // they finish, and they count no unsent bytes.
    close();
    writer_done = true;
    for (const auto& s : batch) sent(*s);
    for (const auto& s : slots) sent(*s);
    maybe_remove();
  }

  // A TLS stream starts a record for each buffer: runs of small buffers (the size prefixes and
  // headers around zero-copy record segments) are copied into one.
  void coalesce(std::vector<asio::const_buffer>& bufs) {
    constexpr size_t kSmall = 16384;
    size_t small_bytes = 0;
    for (const auto& b : bufs) {
      if (b.size() < kSmall) small_bytes += b.size();
    }
    staging.clear();
    staging.reserve(small_bytes);  // no reallocation below: the buffers into it stay valid
    std::vector<asio::const_buffer> out;
    size_t run_start = 0;  // where the current run of small buffers begins in `staging`
    for (const auto& b : bufs) {
      if (b.size() >= kSmall) {
        if (staging.size() > run_start) {
          out.emplace_back(staging.data() + run_start, staging.size() - run_start);
        }
        run_start = staging.size();
        out.push_back(b);
        continue;
      }
      const auto* p = static_cast<const uint8_t*>(b.data());
      staging.insert(staging.end(), p, p + b.size());
      if (staging.size() - run_start >= kSmall) {
        out.emplace_back(staging.data() + run_start, staging.size() - run_start);
        run_start = staging.size();
      }
    }
    if (staging.size() > run_start) {
      out.emplace_back(staging.data() + run_start, staging.size() - run_start);
    }
    bufs = std::move(out);
  }

  static void add_buffers(const response& r, std::vector<asio::const_buffer>& out) {
    size_t pos = 0;
    for (const auto& seg : r.segments) {
      if (seg.offset > pos) out.emplace_back(r.bytes.data() + pos, seg.offset - pos);
      out.emplace_back(seg.data.data(), seg.data.size());
      pos = seg.offset;
    }
    if (pos < r.bytes.size()) out.emplace_back(r.bytes.data() + pos, r.bytes.size() - pos);
  }

  asio::awaitable<void> watchdog([[maybe_unused]] std::shared_ptr<connection> self) {
    const auto idle = srv->options.idle_timeout;
    const auto period = std::max(std::chrono::milliseconds(10), idle / 4);
    while (!closed) {
      idle_timer.expires_after(period);
      co_await idle_timer.async_wait(use_tuple);
      if (closed) break;
      // Quiet for a period: the TLS output buffers go (the next write makes them again).
      if constexpr (kTls) {
        if (std::chrono::steady_clock::now() - last_activity >= period) sock.trim();
      }
      // Idle: nothing being handled and no byte read or written for `idle`, whether the
      // client sends nothing, dribbles a frame, or leaves its responses unread.
      if (running == 0 && std::chrono::steady_clock::now() - last_activity >= idle) {
        {
          std::lock_guard lock(srv->mu);
          ++srv->stats.idle_closed;
        }
        close();
      }
    }
  }

  std::shared_ptr<server::impl> srv;
  Stream sock;
  const tls_context_ptr tls_context;  // SSL: the context the stream was made with
  const std::shared_ptr<const principal_mapper> principal_rules;
  const std::unique_ptr<sasl_session> sasl;  // SASL_*: the authentication; null otherwise
  const uint64_t id;
  const std::string peer;
  // All below owned by `strand`.
  client_identity identity;      // fixed before the first request is read
  std::vector<uint8_t> staging;  // TLS: small buffers of one write, copied together
  // The next frame's size; its first `size_have` bytes came with the frame before it (a client
  // with several requests in flight has the next one waiting: one receive per request instead
  // of two).
  uint8_t size_buf[4] = {};
  size_t size_have = 0;
  std::deque<std::shared_ptr<slot>> slots;  // requests in arrival order
  signal writer_wake;
  signal reader_wake;
  asio::steady_timer idle_timer;
  asio::steady_timer mute_timer;
  clock::time_point muted_until;  // no request is read before (a quota's throttle)
  std::chrono::steady_clock::time_point last_activity = std::chrono::steady_clock::now();
  bool read_stopped = false;
  bool reading_done = false;
  bool closed = false;
  bool writer_done = false;
  bool removed = false;
  int running = 0;     // handler coroutines not finished
  int64_t unsent = 0;  // bytes of responses handled and not yet written
};

void server::impl::remove(uint64_t id) {
  std::function<void()> done;
  {
    std::lock_guard lock(mu);
    const auto it = conns.find(id);
    if (it == conns.end()) return;
    if (auto n = per_ip.find(it->second->address); n != per_ip.end() && --n->second == 0) {
      per_ip.erase(n);
    }
    conns.erase(it);
    --stats.connections_open;
    if (conns.empty()) done = std::move(on_stopped);
  }
  if (done) asio::post(strand, std::move(done));
}

server::server(asio::io_context& io, const server_options& options, request_handler& handler)
    : server(io, {}, options, handler) {}

server::server(asio::io_context& io, std::vector<asio::io_context*> workers,
               const server_options& options, request_handler& handler)
    : impl_(std::make_shared<impl>(io, std::move(workers), options, handler)) {}

server::~server() = default;

tl::expected<uint16_t, std::string> server::listen(const std::string& host, uint16_t port,
                                                   listener_options listener) {
  assert(!uses_tls(listener.protocol) || listener.tls);
  assert(!uses_sasl(listener.protocol) || listener.sasl);
  auto acc = open_listener(impl_->io, impl_->strand, host, port, "listener");
  if (!acc) return tl::unexpected(acc.error());
  const uint16_t bound = acc->front().local_endpoint().port();
  auto options = std::make_shared<const listener_options>(std::move(listener));
  impl_->acceptors.reserve(impl_->acceptors.size() + acc->size());
  for (auto& a : *acc) {
    bound_listener l;
    l.acceptor = std::make_unique<tcp::acceptor>(std::move(a));
    l.options = options;
    impl_->acceptors.push_back(std::move(l));
  }
  return bound;
}

void server::start() {
  for (auto& l : impl_->acceptors) {
    asio::co_spawn(
        impl_->strand,
        [srv = impl_, a = l.acceptor.get(), listener = l.options]() -> asio::awaitable<void> {
          while (!srv->stopping) {
            auto [ec, accepted] = co_await a->async_accept(use_tuple);
            if (srv->stopping) break;
            if (ec) {
              if (ec == asio::error::operation_aborted) break;
              // Out of file descriptors and the like: back off instead of spinning.
              asio::steady_timer t(srv->strand, std::chrono::milliseconds(50));
              co_await t.async_wait(use_tuple);
              continue;
            }
            boost::system::error_code ignored;
            // The connection runs on the next worker context: its descriptor moves there.
            const auto ex = srv->next_context().get_executor();
            tcp::socket sock(ex);
            {
              const auto protocol = accepted.local_endpoint(ignored).protocol();
              boost::system::error_code moved;
              const auto fd = accepted.release(moved);
              if (!moved) sock.assign(protocol, fd, moved);
              if (moved) {
                if (fd >= 0 && !sock.is_open()) ::close(fd);
                accepted.close(ignored);
                continue;
              }
            }
            sock.set_option(tcp::no_delay(true), ignored);
            auto remote = sock.remote_endpoint(ignored);
            std::string peer = remote.address().to_string() + ":" + std::to_string(remote.port());
            const asio::ip::address address = client_address(remote.address());
            std::shared_ptr<connection_base> c;
            std::function<void()> start;
            {
              std::lock_guard lock(srv->mu);
              if (static_cast<int32_t>(srv->conns.size()) >= srv->options.max_connections) {
                sock.close(ignored);
                continue;
              }
              const auto o = srv->options.max_connections_per_ip_overrides.find(address);
              const int32_t limit = o != srv->options.max_connections_per_ip_overrides.end()
                                        ? o->second
                                        : srv->options.max_connections_per_ip;
              int32_t& from_address = srv->per_ip[address];
              if (from_address >= limit) {
                if (from_address == 0) srv->per_ip.erase(address);
                ++srv->stats.refused_per_ip;
                sock.close(ignored);
                continue;
              }
              ++from_address;
              const uint64_t id = srv->next_id++;
              if (uses_tls(listener->protocol)) {
                auto ctx = listener->tls->get();
                auto conn = std::make_shared<connection<tls_stream>>(
                    srv, ex, tls_stream(std::move(sock), *ctx), id, std::move(peer), address,
                    *listener, ctx);
                start = [conn] { conn->start(); };
                c = std::move(conn);
              } else {
                auto conn = std::make_shared<connection<tcp::socket>>(
                    srv, ex, std::move(sock), id, std::move(peer), address, *listener, nullptr);
                start = [conn] { conn->start(); };
                c = std::move(conn);
              }
              srv->conns.emplace(id, c);
              ++srv->stats.connections_accepted;
              ++srv->stats.connections_open;
            }
            start();
          }
        },
        asio::detached);
  }
}

void server::stop(std::function<void()> done) {
  asio::post(impl_->strand, [srv = impl_, done = std::move(done)]() mutable {
    if (srv->stopping) return;
    srv->stopping = true;
    for (auto& l : srv->acceptors) {
      boost::system::error_code ec;
      l.acceptor->close(ec);
    }
    std::vector<std::shared_ptr<connection_base>> conns;
    {
      std::lock_guard lock(srv->mu);
      if (srv->conns.empty()) {
        asio::post(srv->strand, std::move(done));
        return;
      }
      srv->on_stopped = std::move(done);
      for (auto& [id, c] : srv->conns) conns.push_back(c);
    }
    for (auto& c : conns) asio::post(c->strand, [c] { c->stop_reading(); });
  });
}

server_stats server::stats() const {
  std::lock_guard lock(impl_->mu);
  auto s = impl_->stats;
  s.requests = impl_->requests.load(std::memory_order_relaxed);
  s.unsent_response_bytes = impl_->unsent_response_bytes.load(std::memory_order_relaxed);
  s.reads_held_for_responses = impl_->reads_held.load(std::memory_order_relaxed);
  s.throttled_responses = impl_->throttled.load(std::memory_order_relaxed);
  s.tls_handshakes = impl_->tls_handshakes.load(std::memory_order_relaxed);
  s.tls_handshake_failures = impl_->tls_handshake_failures.load(std::memory_order_relaxed);
  s.tls_handshake_timeouts = impl_->tls_handshake_timeouts.load(std::memory_order_relaxed);
  return s;
}

request_metrics& server::metrics() {
  return impl_->metrics;
}

}  // namespace silt::net
