// Reloads the TLS contexts of SSL listeners when their key store or trust store files change,
// as Kafka reloads them: every `period` a thread of its own (never a network thread) looks at
// each file's modification time, size and inode; when one changed, the listener's context is
// built anew and new connections use it, while open connections keep theirs. A new context
// that fails (a half-written file, a wrong password) is logged and the old one kept, until the
// files change again.
//
// Lifecycle: watch() each listener, then start(); the destructor stops the thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/tls_context.h"

namespace silt::net {

class tls_reloader {
 public:
  explicit tls_reloader(std::chrono::milliseconds period) : period_(period) {}
  ~tls_reloader();
  tls_reloader(const tls_reloader&) = delete;
  tls_reloader& operator=(const tls_reloader&) = delete;

  // Rebuilds `source`'s context from `options` when their files change; `listener` names it in
  // log lines. Before start() only.
  void watch(std::string listener, tls_options options, std::shared_ptr<tls_context_source> source);
  void start();
  // Looks at the files once, at once (tests; start() does this every period).
  void check_now();

 private:
  struct file_state {
    std::filesystem::file_time_type mtime{};
    uintmax_t size = 0;
    uint64_t inode = 0;
    bool exists = false;
    bool operator==(const file_state&) const = default;
  };
  struct watched {
    std::string listener;
    tls_options options;
    std::shared_ptr<tls_context_source> source;
    std::vector<std::string> files;
    std::vector<file_state> states;
  };
  static file_state state_of(const std::string& path);

  const std::chrono::milliseconds period_;
  std::vector<watched> watched_;  // owned by the thread once started
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace silt::net
