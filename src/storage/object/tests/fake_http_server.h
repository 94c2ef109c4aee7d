// A scripted HTTP/1.1 server on 127.0.0.1 for tests of the S3 store's retry loop and response
// handling: it answers requests in arrival order with the next scripted reply (200 and an
// empty body once the script runs out) and records each request.
//
// A thread accepts connections and one thread per connection serves it (keep-alive included).
// Concurrent requests are answered in the order they arrive. Stopped and joined by the
// destructor.
#pragma once

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace silt::storage::testing {

struct fake_reply {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Fault modes instead of a well-formed reply:
  bool hang = false;  // read the request, answer nothing until the client gives up
  size_t cut_body_at = std::string::npos;  // send Content-Length of the full body, then only
                                           // this many bytes, and close the connection
};

struct recorded_request {
  std::string method;
  std::string target;                                        // path and query
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;

  [[nodiscard]] std::string header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n == name) return v;
    }
    return {};
  }
};

class fake_http_server {
 public:
  fake_http_server() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    const int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_, 16) != 0) {
      std::abort();
    }
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_http_server() {
    stop_ = true;
    thread_.join();
    for (auto& t : connections_) t.join();
    ::close(listener_);
  }
  fake_http_server(const fake_http_server&) = delete;
  fake_http_server& operator=(const fake_http_server&) = delete;

  [[nodiscard]] std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void script(std::vector<fake_reply> replies) {
    std::lock_guard lock(mu_);
    for (auto& r : replies) script_.push_back(std::move(r));
  }
  [[nodiscard]] std::vector<recorded_request> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  // Waits until `fd` is readable or the server stops; false on stop.
  bool wait_readable(int fd) const {
    while (!stop_) {
      pollfd p{fd, POLLIN, 0};
      const int n = ::poll(&p, 1, 20);
      if (n > 0) return true;
    }
    return false;
  }

  void serve() {
    while (wait_readable(listener_)) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      connections_.emplace_back([this, fd] {
        serve_connection(fd);
        ::close(fd);
      });
    }
  }

  // Reads more bytes into `buffer`; false when the peer closed or the server stops.
  bool read_more(int fd, std::string& buffer) const {
    if (!wait_readable(fd)) return false;
    char chunk[65536];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buffer.append(chunk, static_cast<size_t>(n));
    return true;
  }

  void serve_connection(int fd) {
    std::string buffer;
    while (true) {
      size_t end;
      while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
        if (!read_more(fd, buffer)) return;
      }
      recorded_request req;
      const std::string head = buffer.substr(0, end);
      buffer.erase(0, end + 4);
      size_t line_end = head.find("\r\n");
      const std::string request_line = head.substr(0, line_end);
      const size_t sp1 = request_line.find(' ');
      const size_t sp2 = request_line.rfind(' ');
      req.method = request_line.substr(0, sp1);
      req.target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
      size_t content_length = 0;
      bool expect_continue = false;
      while (line_end != std::string::npos && line_end < head.size()) {
        const size_t next = head.find("\r\n", line_end + 2);
        const std::string line = head.substr(line_end + 2, next - line_end - 2);
        line_end = next;
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        std::string value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        if (name == "content-length") content_length = std::stoul(value);
        if (name == "expect") expect_continue = true;
        req.headers.emplace_back(std::move(name), std::move(value));
      }
      if (expect_continue) send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n");
      while (buffer.size() < content_length) {
        if (!read_more(fd, buffer)) return;
      }
      req.body = buffer.substr(0, content_length);
      buffer.erase(0, content_length);
      fake_reply reply;
      {
        std::lock_guard lock(mu_);
        requests_.push_back(req);
        if (!script_.empty()) {
          reply = std::move(script_.front());
          script_.pop_front();
        }
      }
      if (reply.hang) {
        // Hold the connection without answering until the client closes it.
        std::string ignored;
        while (read_more(fd, ignored)) {
        }
        return;
      }
      std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " Scripted\r\n";
      for (const auto& [n, v] : reply.headers) out += n + ": " + v + "\r\n";
      // A HEAD reply has the headers of the GET reply: the body's length, without the body.
      out += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n\r\n";
      if (req.method != "HEAD") {
        out += reply.body.substr(0, std::min(reply.cut_body_at, reply.body.size()));
      }
      send_all(fd, out);
      if (reply.cut_body_at != std::string::npos) return;  // the connection closes mid-body
    }
  }

  static void send_all(int fd, std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::deque<fake_reply> script_;           // guarded by mu_
  std::vector<recorded_request> requests_;  // guarded by mu_
  std::vector<std::thread> connections_;    // owned by the accepting thread until it ends
  std::thread thread_;
};

}  // namespace silt::storage::testing
