#include "net/tls_reloader.h"

#include <sys/stat.h>

#include "base/log.h"

namespace silt::net {

tls_reloader::~tls_reloader() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

tls_reloader::file_state tls_reloader::state_of(const std::string& path) {
  file_state s;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return s;
  std::error_code ec;
  s.mtime = std::filesystem::last_write_time(path, ec);
  s.size = static_cast<uintmax_t>(st.st_size);
  s.inode = st.st_ino;
  s.exists = true;
  return s;
}

void tls_reloader::watch(std::string listener, tls_options options,
                         std::shared_ptr<tls_context_source> source) {
  watched w{std::move(listener), std::move(options), std::move(source), {}, {}};
  w.files = tls_files(w.options);
  if (w.files.empty()) return;  // inline PEM only: nothing to watch
  for (const auto& f : w.files) w.states.push_back(state_of(f));
  watched_.push_back(std::move(w));
}

void tls_reloader::start() {
  if (watched_.empty()) return;
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!wake_.wait_for(lock, period_, [this] { return stop_; })) {
      lock.unlock();
      check_now();
      lock.lock();
    }
  });
}

void tls_reloader::check_now() {
  for (auto& w : watched_) {
    std::vector<file_state> now;
    for (const auto& f : w.files) now.push_back(state_of(f));
    if (now == w.states) continue;
    w.states = std::move(now);
    auto ctx = make_tls_context(w.options);
    if (!ctx) {
      SILT_LOG(warn,
               "silt: listener %s: TLS files changed but cannot be used (%s); keeping "
               "the previous certificates",
               w.listener.c_str(), ctx.error().c_str());
      continue;
    }
    w.source->set(std::move(*ctx));
    SILT_LOG(info, "silt: listener %s: TLS key store or trust store reloaded", w.listener.c_str());
  }
}

}  // namespace silt::net
