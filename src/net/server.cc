#include "net/server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>

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
#include "net/listener.h"

namespace silt::net {

namespace asio = boost::asio;
using asio::ip::tcp;
using strand_type = asio::strand<asio::io_context::executor_type>;
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

}  // namespace

struct connection;

struct server::impl : std::enable_shared_from_this<server::impl> {
  impl(asio::io_context& io, std::vector<asio::io_context*> workers, server_options o,
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
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  bool stopping = false;
  std::function<void()> on_stopped;

  std::mutex mu;  // guards conns and the counters below
  std::map<uint64_t, std::shared_ptr<connection>> conns;
  uint64_t next_id = 1;
  server_stats stats;
  std::atomic<uint64_t> requests{0};
  std::atomic<int64_t> unsent_response_bytes{0};
  std::atomic<uint64_t> reads_held{0};
  request_metrics metrics;
};

struct connection : std::enable_shared_from_this<connection> {
  using clock = std::chrono::steady_clock;
  struct slot {
    bool ready = false;
    response resp;
    int64_t budget_bytes = 0;
    int64_t unsent_bytes = 0;  // counted in the connection's and the server's unsent bytes
    request_metrics::api_timing* timing = nullptr;  // null: not timed (unparsable header)
    clock::time_point arrived;                      // the request's last byte read
    clock::time_point handled;                      // the handler's end
  };

  // Runs on `ex`, the context `s` was opened on.
  connection(std::shared_ptr<server::impl> srv, const asio::io_context::executor_type& ex,
             tcp::socket s, uint64_t id, std::string peer)
      : srv(std::move(srv)),
        strand(asio::make_strand(ex)),
        sock(std::move(s)),
        id(id),
        peer(std::move(peer)),
        writer_wake(strand),
        reader_wake(strand),
        idle_timer(strand) {}

  // Each coroutine holds the connection through its `self` parameter, copied into its frame
  // when it is created: a coroutine that starts after the others finished still finds it.
  void start() {
    asio::co_spawn(strand, reader(shared_from_this()), asio::detached);
    asio::co_spawn(strand, writer(shared_from_this()), asio::detached);
    asio::co_spawn(strand, watchdog(shared_from_this()), asio::detached);
  }

  // Stops reading; what is in flight is still answered. Runs on the strand.
  void stop_reading() {
    if (read_stopped) return;
    read_stopped = true;
    boost::system::error_code ec;
    sock.shutdown(tcp::socket::shutdown_receive, ec);
    reader_wake.notify();
    writer_wake.notify();
  }

  void close() {
    if (closed) return;
    closed = true;
    read_stopped = true;
    boost::system::error_code ec;
    sock.shutdown(tcp::socket::shutdown_both, ec);
    sock.close(ec);
    idle_timer.cancel();
    reader_wake.notify();
    writer_wake.notify();
  }

  asio::awaitable<void> reader(std::shared_ptr<connection> self) {
    const auto& opt = srv->options;
    // The next frame's size; its first `size_have` bytes came with the frame before it (a
    // client with several requests in flight has the next one waiting: one receive per
    // request instead of two).
    uint8_t size_buf[4];
    size_t size_have = 0;
    while (!read_stopped) {
      while ((static_cast<int32_t>(slots.size()) >= opt.max_inflight || responses_pile_up()) &&
             !read_stopped) {
        if (responses_pile_up()) srv->reads_held.fetch_add(1, std::memory_order_relaxed);
        co_await reader_wake.wait();
      }
      if (read_stopped) break;
      if (size_have < sizeof size_buf) {
        auto [ec, n] = co_await asio::async_read(
            sock, asio::buffer(size_buf + size_have, sizeof size_buf - size_have), use_tuple);
        if (ec) break;
      }
      size_have = 0;
      last_activity = std::chrono::steady_clock::now();
      const auto size = base::load_be<int32_t>(size_buf);
      if (size <= 0 || size > opt.max_request_bytes) {
        // Kafka closes the connection on a frame it will not read (InvalidReceiveException).
        std::lock_guard lock(srv->mu);
        ++srv->stats.oversized_frames;
        break;
      }
      for (int wait_ms = 1; !srv->budget.try_acquire(size); wait_ms = std::min(wait_ms * 2, 20)) {
        asio::steady_timer t(strand, std::chrono::milliseconds(wait_ms));
        co_await t.async_wait(use_tuple);
        if (read_stopped) co_return;
      }
      auto frame = std::make_shared<frame_bytes>(static_cast<size_t>(size));
      // The frame, and whatever of the next frame's size has come with it.
      boost::system::error_code ec2;
      for (size_t got = 0; got < frame->size();) {
        const std::array<asio::mutable_buffer, 2> bufs{
            asio::buffer(frame->data() + got, frame->size() - got), asio::buffer(size_buf)};
        auto [e, n] = co_await sock.async_read_some(bufs, use_tuple);
        if (e) {
          ec2 = e;
          break;
        }
        const size_t body = std::min(n, frame->size() - got);
        got += body;
        size_have = n - body;
      }
      if (ec2) {
        srv->budget.release(size);
        break;
      }
      last_activity = clock::now();
      srv->requests.fetch_add(1, std::memory_order_relaxed);
      auto s = std::make_shared<slot>();
      s->budget_bytes = size;
      s->arrived = last_activity;
      slots.push_back(s);
      auto header = protocol::parse_request_header(*frame);
      if (!header) {
        // Unknown API key or a header that does not parse: nothing sensible can be answered.
        srv->budget.release(size);
        s->budget_bytes = 0;
        s->ready = true;
        s->resp = response::close_connection();
        writer_wake.notify();
        break;
      }
      s->timing = srv->metrics.of(header->header.request_api_key);
      request req{std::move(frame), *header, id, peer};
      ++running;
      asio::co_spawn(strand, run(self, s, std::move(req)), asio::detached);
    }
    reading_done = true;
    writer_wake.notify();
  }

  asio::awaitable<void> run([[maybe_unused]] std::shared_ptr<connection> self,
                            std::shared_ptr<slot> s, request req) {
    try {
      s->resp = co_await srv->handler.handle(std::move(req));
    } catch (const std::exception&) {
      s->resp = response::close_connection();
    }
    srv->budget.release(s->budget_bytes);
    s->budget_bytes = 0;
    if (s->resp.send && !writer_done) {
      s->unsent_bytes = static_cast<int64_t>(s->resp.size());
      unsent += s->unsent_bytes;
      srv->unsent_response_bytes.fetch_add(s->unsent_bytes, std::memory_order_relaxed);
    }
    s->handled = clock::now();
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
        auto [ec, n] = co_await asio::async_write(sock, bufs, use_tuple);
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
  strand_type strand;
  tcp::socket sock;
  const uint64_t id;
  const std::string peer;
  // All below owned by `strand`.
  std::deque<std::shared_ptr<slot>> slots;  // requests in arrival order
  signal writer_wake;
  signal reader_wake;
  asio::steady_timer idle_timer;
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
    if (conns.erase(id) == 0) return;
    --stats.connections_open;
    if (conns.empty()) done = std::move(on_stopped);
  }
  if (done) asio::post(strand, std::move(done));
}

server::server(asio::io_context& io, server_options options, request_handler& handler)
    : server(io, {}, options, handler) {}

server::server(asio::io_context& io, std::vector<asio::io_context*> workers, server_options options,
               request_handler& handler)
    : impl_(std::make_shared<impl>(io, std::move(workers), options, handler)) {}

server::~server() = default;

tl::expected<uint16_t, std::string> server::listen(const std::string& host, uint16_t port) {
  auto acc = open_listener(impl_->io, impl_->strand, host, port, "listener");
  if (!acc) return tl::unexpected(acc.error());
  const uint16_t bound = acc->local_endpoint().port();
  impl_->acceptors.push_back(std::make_unique<tcp::acceptor>(std::move(*acc)));
  return bound;
}

void server::start() {
  for (auto& acc : impl_->acceptors) {
    asio::co_spawn(
        impl_->strand,
        [srv = impl_, a = acc.get()]() -> asio::awaitable<void> {
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
            std::shared_ptr<connection> c;
            {
              std::lock_guard lock(srv->mu);
              if (static_cast<int32_t>(srv->conns.size()) >= srv->options.max_connections) {
                sock.close(ignored);
                continue;
              }
              const uint64_t id = srv->next_id++;
              c = std::make_shared<connection>(srv, ex, std::move(sock), id, std::move(peer));
              srv->conns.emplace(id, c);
              ++srv->stats.connections_accepted;
              ++srv->stats.connections_open;
            }
            c->start();
          }
        },
        asio::detached);
  }
}

void server::stop(std::function<void()> done) {
  asio::post(impl_->strand, [srv = impl_, done = std::move(done)]() mutable {
    if (srv->stopping) return;
    srv->stopping = true;
    for (auto& acc : srv->acceptors) {
      boost::system::error_code ec;
      acc->close(ec);
    }
    std::vector<std::shared_ptr<connection>> conns;
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
  return s;
}

request_metrics& server::metrics() {
  return impl_->metrics;
}

}  // namespace silt::net
