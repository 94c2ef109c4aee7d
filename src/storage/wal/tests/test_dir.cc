#include <chrono>
#include <filesystem>
#include <random>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "storage/wal/tests/test_util.h"
#include "storage/wal/wal_format.h"

extern char** environ;

namespace silt::storage::wal::testing {

namespace {

bool takes_o_direct(const std::string& dir) {
  const std::string probe = dir + "/.o_direct_probe";
  const int fd = ::open(probe.c_str(), O_CREAT | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

std::string scratch_base() {
  std::error_code ec;
  const auto tmp = std::filesystem::temp_directory_path(ec).string();  // $TMPDIR or /tmp
  return !ec && takes_o_direct(tmp) ? tmp : std::string(SILT_WAL_FALLBACK_TMP);
}

}  // namespace

test_dir::test_dir() {
  static const std::string base = scratch_base();
  std::random_device rd;
  for (;;) {
    dir_ = base + "/silt-wal-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    if (std::filesystem::create_directory(dir_)) break;
  }
}

test_dir::~test_dir() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::vector<uint8_t> payload_for(uint64_t stream, int64_t offset, size_t size) {
  std::vector<uint8_t> p(size);
  uint64_t x = stream * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(offset) + size;
  for (auto& b : p) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  return p;
}

opened open_wal(const wal_options& options) {
  opened o{tl::unexpected(wal_error::closed), {}};
  o.log = wal::open(options, [&](const replayed_record& r) {
    o.records.push_back(replayed{r.position, r.end, r.stream_id, r.offset,
                                 std::vector<uint8_t>(r.payload.begin(), r.payload.end())});
  });
  return o;
}

tl::expected<wal_position, wal_error> append_and_wait(wal& w, uint64_t stream, int64_t offset,
                                                      const std::vector<uint8_t>& payload) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  tl::expected<wal_position, wal_error> result = tl::unexpected(wal_error::closed);
  w.append(base::stream_id(stream), base::offset(offset), payload,
           [&](tl::expected<wal_position, wal_error> r) {
             std::lock_guard lock(mu);
             result = r;
             done = true;
             cv.notify_one();
           });
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done; });
  return result;
}

void callback_counter::add() {
  std::lock_guard lock(mu_);
  ++count_;
  cv_.notify_all();
}

bool callback_counter::wait_for(uint64_t n, int timeout_ms) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return count_ >= n; });
}

uint64_t callback_counter::count() {
  std::lock_guard lock(mu_);
  return count_;
}

std::vector<uint8_t> read_bytes(const std::string& path, uint64_t offset, size_t len) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("open " + path);
  std::vector<uint8_t> out(len);
  const ssize_t n = ::pread(fd, out.data(), len, static_cast<off_t>(offset));
  ::close(fd);
  if (n != static_cast<ssize_t>(len)) throw std::runtime_error("short read " + path);
  return out;
}

void write_bytes(const std::string& path, uint64_t offset, const std::vector<uint8_t>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("open " + path);
  const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (n != static_cast<ssize_t>(bytes.size()) || rc != 0) {
    throw std::runtime_error("write " + path);
  }
}

void flip_byte(const std::string& path, uint64_t offset) {
  auto b = read_bytes(path, offset, 1);
  b[0] ^= 0x5a;
  write_bytes(path, offset, b);
}

uint64_t file_offset(wal_position pos, uint64_t capacity) {
  return format::file_offset(pos, capacity);
}

run_result run_and_kill(const std::vector<std::string>& args, std::chrono::milliseconds lifetime) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw std::runtime_error("spawn");
  }
  run_result result;
  char buf[65536];
  const auto deadline = std::chrono::steady_clock::now() + lifetime;
  bool killed = false;
  for (;;) {
    int timeout = -1;
    if (!killed) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        ::kill(pid, SIGKILL);
        killed = true;
      } else {
        timeout = static_cast<int>(left.count());
      }
    }
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, timeout) <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;  // every writer of the pipe is gone
    result.output.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  ::waitpid(pid, &result.status, 0);
  return result;
}

}  // namespace silt::storage::wal::testing
