#include "storage/object/local_store.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <random>
#include <system_error>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

namespace silt::storage {
namespace {

constexpr std::string_view temp_dir = ".silt-tmp";
constexpr size_t max_key_bytes = 1024;
constexpr size_t max_segment_bytes = 255;  // NAME_MAX of the usual file systems
constexpr auto stale_temp_age = std::chrono::hours(1);
// Idle chunk buffers kept for later puts (puts on more threads at once allocate more).
constexpr size_t max_idle_chunks = 2;

// An open file descriptor, closed on scope exit.
class fd_guard {
 public:
  explicit fd_guard(int fd) : fd_(fd) {}
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  ~fd_guard() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const { return fd_; }
  // Closes now, reporting the error close() gives (it may be a deferred write error).
  [[nodiscard]] int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }
  // Hands the descriptor to the caller, who closes it.
  [[nodiscard]] int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

store_error error_from_errno(int err) {
  switch (err) {
    case ENOENT:
      return store_error::not_found;
    case EACCES:
    case EPERM:
    case EROFS:
      return store_error::access_denied;
    case ENOTDIR:
    case EISDIR:
    case ENAMETOOLONG:
    case ENOTEMPTY:
    case EEXIST:
      return store_error::invalid_argument;
    default:
      return store_error::io;
  }
}

tl::unexpected<store_error> fail_errno() {
  return tl::make_unexpected(error_from_errno(errno));
}

// fsyncs the directory `path`.
bool sync_dir(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  fd_guard guard(fd);
  return ::fsync(fd) == 0;
}

bool write_all(int fd, std::span<const uint8_t> data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data = data.subspan(static_cast<size_t>(n));
  }
  return true;
}

// Buffered (no copy in user space), one chunk at a time: the parts are gathered into chunks
// of `chunk` bytes (an upload's parts are often many small batches), each written with writev
// and its writeback started and waited for before the next, so that the pages stay cached but
// the device sees one chunk in flight at a time (as with O_DIRECT), not a whole object's worth
// at the fsync.
bool write_paced(int fd, std::span<const std::span<const uint8_t>> parts, size_t chunk) {
  off_t at = 0;
  size_t part = 0;
  size_t part_done = 0;  // of parts[part]
  std::vector<iovec> iov;
  while (part < parts.size()) {
    // The next chunk: up to `chunk` bytes from where the last one stopped.
    iov.clear();
    size_t bytes = 0;
    while (part < parts.size() && bytes < chunk && iov.size() < IOV_MAX) {
      const size_t n = std::min(chunk - bytes, parts[part].size() - part_done);
      if (n > 0) iov.push_back({const_cast<uint8_t*>(parts[part].data() + part_done), n});
      bytes += n;
      part_done += n;
      if (part_done == parts[part].size()) {
        ++part;
        part_done = 0;
      }
    }
    size_t next = 0;
    off_t written = 0;
    while (next < iov.size()) {
      const int count = static_cast<int>(iov.size() - next);
      const ssize_t n = ::pwritev(fd, &iov[next], count, at + written);
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      written += n;
      // Skip what was written, resuming inside the piece a short write stopped in.
      auto left = static_cast<size_t>(n);
      while (left > 0 && next < iov.size()) {
        if (left >= iov[next].iov_len) {
          left -= iov[next].iov_len;
          ++next;
        } else {
          iov[next].iov_base = static_cast<uint8_t*>(iov[next].iov_base) + left;
          iov[next].iov_len -= left;
          left = 0;
        }
      }
    }
    if (bytes > 0 && ::sync_file_range(fd, at, static_cast<off_t>(bytes),
                                       SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                           SYNC_FILE_RANGE_WAIT_AFTER) != 0) {
      return false;
    }
    at += static_cast<off_t>(bytes);
  }
  return true;
}

// Whether `prefix` can select keys: a relative path whose complete segments are valid.
bool valid_prefix(std::string_view prefix) {
  if (prefix.starts_with('/')) return false;
  size_t begin = 0;
  for (size_t slash = prefix.find('/'); slash != std::string_view::npos;
       slash = prefix.find('/', begin)) {
    const auto segment = prefix.substr(begin, slash - begin);
    if (segment.empty() || segment == "." || segment == "..") return false;
    begin = slash + 1;
  }
  return prefix.find('\0') == std::string_view::npos;
}

// Appends every regular file under `dir` (the directory of keys starting with `key_dir`)
// whose key starts with `prefix`. Entries that vanish during the walk (a concurrent remove)
// are skipped; other errors fail the listing.
tl::expected<void, store_error> walk(const std::filesystem::path& dir, const std::string& key_dir,
                                     std::string_view prefix, std::vector<object_info>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) return {};
    return fail_errno();
  }
  struct closer {
    DIR* d;
    ~closer() { ::closedir(d); }
  } close_dir{d};
  while (true) {
    errno = 0;
    const dirent* entry = ::readdir(d);  // NOLINT(concurrency-mt-unsafe): one stream per call
    if (entry == nullptr) {
      if (errno != 0) return fail_errno();
      return {};
    }
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (key_dir.empty() && name == temp_dir) continue;
    std::string key = key_dir + std::string(name);
    // Only directories that can hold keys starting with `prefix` are entered.
    const size_t common = std::min(key.size(), prefix.size());
    if (key.compare(0, common, prefix, 0, common) != 0) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      return fail_errno();
    }
    if (S_ISDIR(st.st_mode)) {
      auto r = walk(dir / name, key + "/", prefix, out);
      if (!r) return r;
    } else if (S_ISREG(st.st_mode) && key.starts_with(prefix)) {
      out.push_back({std::move(key), static_cast<uint64_t>(st.st_size)});
    }
  }
}

void remove_stale_temps(const std::filesystem::path& dir) {
  std::error_code ec;
  const auto now = std::filesystem::file_time_type::clock::now();
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    const auto written = it->last_write_time(entry_ec);
    if (!entry_ec && now - written > stale_temp_age) std::filesystem::remove(it->path(), entry_ec);
  }
}

// Opens the object file `path` to read from `offset` (with O_DIRECT when `direct`, which is
// cleared if the file system refuses it): its descriptor, for the caller to close, and size.
// An offset past the end is invalid_range.
tl::expected<std::pair<int, uint64_t>, store_error> open_for_read(const std::filesystem::path& path,
                                                                  uint64_t offset, bool& direct) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (fd < 0 && direct && errno == EINVAL) {
    direct = false;
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) {
    if (errno == ENOTDIR) return tl::make_unexpected(store_error::not_found);
    return fail_errno();
  }
  fd_guard file(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail_errno();
  if (!S_ISREG(st.st_mode)) return tl::make_unexpected(store_error::not_found);
  const auto size = static_cast<uint64_t>(st.st_size);
  if (offset > size) return tl::make_unexpected(store_error::invalid_range);
  return std::pair{file.release(), size};
}

}  // namespace

bool local_store::valid_key(std::string_view key) {
  if (key.empty() || key.size() > max_key_bytes) return false;
  if (key.find('\0') != std::string_view::npos) return false;
  size_t begin = 0;
  while (true) {
    const size_t slash = key.find('/', begin);
    const auto segment = key.substr(begin, slash == std::string_view::npos ? slash : slash - begin);
    if (segment.empty() || segment == "." || segment == ".." || segment.size() > max_segment_bytes)
      return false;
    if (begin == 0 && segment == temp_dir) return false;
    if (slash == std::string_view::npos) return true;
    begin = slash + 1;
  }
}

void local_store::chunk_deleter::operator()(uint8_t* p) const noexcept {
  std::free(p);  // NOLINT(cppcoreguidelines-no-malloc): from std::aligned_alloc
}

local_store::local_store(std::filesystem::path root, uint64_t temp_salt, bool direct_io)
    : root_(std::move(root)), temp_salt_(temp_salt), direct_io_(direct_io) {}

tl::expected<std::unique_ptr<local_store>, std::string> local_store::open(
    const std::filesystem::path& root, bool direct_io) {
  if (root.empty()) return tl::make_unexpected(std::string("empty directory path"));
  std::error_code ec;
  std::filesystem::create_directories(root / temp_dir, ec);
  if (ec) {
    return tl::make_unexpected("cannot create directory " + (root / temp_dir).string() + ": " +
                               ec.message());
  }
  if (!std::filesystem::is_directory(root, ec)) {
    return tl::make_unexpected(root.string() + " is not a directory");
  }
  remove_stale_temps(root / temp_dir);
  std::random_device rd;
  const uint64_t salt =
      (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(::getpid());
  // "dir/" and "dir" name the same root; without the trailing '/', remove() can tell when its
  // pruning reaches the root.
  auto normal = root.lexically_normal();
  if (!normal.has_filename() && normal.has_relative_path()) normal = normal.parent_path();
  return std::unique_ptr<local_store>(new local_store(std::move(normal), salt, direct_io));
}

std::string local_store::temp_path() {
  return (root_ / temp_dir /
          (std::to_string(temp_salt_) + "." + std::to_string(next_temp_.fetch_add(1)) + ".tmp"))
      .string();
}

tl::expected<void, store_error> local_store::make_parents(std::string_view key) const {
  std::filesystem::path dir = root_;
  size_t begin = 0;
  for (size_t slash = key.find('/'); slash != std::string_view::npos;
       slash = key.find('/', begin)) {
    const auto parent = dir;
    dir /= key.substr(begin, slash - begin);
    begin = slash + 1;
    if (::mkdir(dir.c_str(), 0755) == 0) {
      if (!sync_dir(parent)) return fail_errno();
      continue;
    }
    if (errno != EEXIST) return fail_errno();
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return fail_errno();
    if (!S_ISDIR(st.st_mode)) return tl::make_unexpected(store_error::invalid_argument);
  }
  return {};
}

local_store::chunk local_store::take_chunk() {
  {
    base::lock_guard lock(chunks_mu_);
    if (!idle_chunks_.empty()) {
      chunk c = std::move(idle_chunks_.back());
      idle_chunks_.pop_back();
      return c;
    }
  }
  // NOLINTNEXTLINE(cppcoreguidelines-no-malloc): O_DIRECT needs aligned memory
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(direct_alignment, write_chunk_size));
  if (p == nullptr) throw std::bad_alloc();
  return chunk(p);
}

void local_store::give_back(chunk c) {
  base::lock_guard lock(chunks_mu_);
  if (idle_chunks_.size() < max_idle_chunks) idle_chunks_.push_back(std::move(c));
}

bool local_store::write_direct(int fd, std::span<const std::span<const uint8_t>> parts) {
  static_assert(write_chunk_size % direct_alignment == 0);
  struct lease {
    local_store& store;
    chunk c;
    ~lease() { store.give_back(std::move(c)); }
  } buffer{*this, take_chunk()};
  uint8_t* const chunk_data = buffer.c.get();
  size_t fill = 0;
  uint64_t size = 0;
  for (auto part : parts) {
    size += part.size();
    while (!part.empty()) {
      const size_t n = std::min(part.size(), write_chunk_size - fill);
      std::memcpy(chunk_data + fill, part.data(), n);
      fill += n;
      part = part.subspan(n);
      if (fill == write_chunk_size) {
        if (!write_all(fd, {chunk_data, fill})) return false;
        fill = 0;
      }
    }
  }
  if (fill == 0) return true;
  // The tail, padded to the alignment; the padding is cut off again.
  const size_t padded = (fill + direct_alignment - 1) / direct_alignment * direct_alignment;
  std::memset(chunk_data + fill, 0, padded - fill);
  if (!write_all(fd, {chunk_data, padded})) return false;
  return padded == fill || ::ftruncate(fd, static_cast<off_t>(size)) == 0;
}

tl::expected<void, store_error> local_store::write_file(
    const std::string& path, std::span<const std::span<const uint8_t>> parts) {
  for (;;) {
    const bool direct = direct_io_.load(std::memory_order_relaxed);
    const int fd = ::open(path.c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (direct ? O_DIRECT : 0), 0644);
    if (fd < 0) {
      const int err = errno;
      if (direct && err == EINVAL) {
        // The file system refuses O_DIRECT (the file may exist already): buffered from now on.
        ::unlink(path.c_str());
        direct_io_.store(false, std::memory_order_relaxed);
        continue;
      }
      return tl::make_unexpected(error_from_errno(err));
    }
    fd_guard file(fd);
    const bool written =
        direct ? write_direct(fd, parts) : write_paced(fd, parts, write_chunk_size);
    if (written && ::fsync(fd) == 0 && file.close() == 0) return {};
    const int err = errno;
    ::unlink(path.c_str());
    if (direct && !written && err == EINVAL) {
      // Some file systems take O_DIRECT at open but refuse the writes.
      direct_io_.store(false, std::memory_order_relaxed);
      continue;
    }
    return tl::make_unexpected(error_from_errno(err));
  }
}

tl::expected<void, store_error> local_store::put(std::string_view key,
                                                 std::span<const uint8_t> data) {
  const std::span<const uint8_t> parts[] = {data};
  return put_parts(key, parts);
}

tl::expected<void, store_error> local_store::put_parts(
    std::string_view key, std::span<const std::span<const uint8_t>> parts) {
  return write_and_install(key, parts, /*replace=*/true);
}

tl::expected<void, store_error> local_store::put_if_absent(std::string_view key,
                                                           std::span<const uint8_t> data) {
  const std::span<const uint8_t> parts[] = {data};
  auto r = write_and_install(key, parts, /*replace=*/false);
  if (!r && r.error() == store_error::already_exists) return taken_by(key, data);
  return r;
}

namespace {

// Moves `from` to `to`; with `replace` false fails with EEXIST when `to` exists.
int install_file(const char* from, const char* to, bool replace) {
  if (replace) return ::rename(from, to);
  if (::renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
  // No RENAME_NOREPLACE on this file system: link() fails on an existing name as well.
  if (::link(from, to) != 0) return -1;
  ::unlink(from);
  return 0;
}

}  // namespace

tl::expected<void, store_error> local_store::write_and_install(
    std::string_view key, std::span<const std::span<const uint8_t>> parts, bool replace) {
  if (!valid_key(key)) return tl::make_unexpected(store_error::invalid_argument);
  const std::string temp = temp_path();
  if (auto written = write_file(temp, parts); !written) return written;
  const auto target = root_ / key;
  // A concurrent remove may prune a parent directory between its creation and the rename;
  // the rename then fails with ENOENT and the directories are made again.
  constexpr int attempts = 8;
  for (int attempt = 1;; ++attempt) {
    auto parents = make_parents(key);
    if (parents && install_file(temp.c_str(), target.c_str(), replace) == 0) break;
    const int err = errno;
    if (parents && !replace && err == EEXIST) {
      ::unlink(temp.c_str());
      // A directory there means the key is a prefix of other keys: no object can have it.
      struct stat st {};
      const bool directory = ::stat(target.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      return tl::make_unexpected(directory ? store_error::invalid_argument
                                           : store_error::already_exists);
    }
    const store_error e = parents ? error_from_errno(err) : parents.error();
    if (e != store_error::not_found || attempt == attempts) {
      ::unlink(temp.c_str());
      return tl::make_unexpected(e);
    }
  }
  if (!sync_dir(target.parent_path())) return fail_errno();
  return {};
}

tl::expected<std::vector<uint8_t>, store_error> local_store::get(std::string_view key,
                                                                 uint64_t offset, uint64_t length) {
  if (!valid_key(key)) return tl::make_unexpected(store_error::invalid_argument);
  bool direct = false;
  auto opened = open_for_read(root_ / key, offset, direct);
  if (!opened) return tl::make_unexpected(opened.error());
  const auto [fd, size] = *opened;
  fd_guard file(fd);
  // Objects are replaced by rename, never written in place: this descriptor's file is fixed.
  std::vector<uint8_t> out(std::min(length, size - offset));
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n =
        ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail_errno();
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

tl::expected<shared_bytes, store_error> local_store::get_shared(std::string_view key,
                                                                uint64_t offset, uint64_t length) {
  if (!valid_key(key)) return tl::make_unexpected(store_error::invalid_argument);
  // Objects written with O_DIRECT are read the same way: the device writes straight into the
  // buffer the caller keeps, where a read through the page cache costs a copy of every byte
  // (a quarter of the broker's CPU in a catch-up read) and pages nobody reads again.
  bool direct = direct_io();
  auto opened = open_for_read(root_ / key, offset, direct);
  if (!opened) return tl::make_unexpected(opened.error());
  const auto [fd, size] = *opened;
  fd_guard file(fd);
  const uint64_t want = std::min(length, size - offset);
  // The aligned blocks around the range (O_DIRECT reads whole blocks into aligned memory);
  // the result is a view of the range within them.
  constexpr uint64_t a = direct_alignment;
  const uint64_t begin = offset / a * a;
  const uint64_t end = (offset + want + a - 1) / a * a;
  const uint64_t need = offset + want - begin;
  // NOLINTNEXTLINE(cppcoreguidelines-no-malloc): O_DIRECT needs aligned memory
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(a, std::max(end - begin, a)));
  if (p == nullptr) throw std::bad_alloc();
  std::shared_ptr<uint8_t> owner(p, chunk_deleter{});
  uint64_t done = 0;
  while (done < need) {
    const ssize_t n = ::pread(fd, p + done, end - begin - done, static_cast<off_t>(begin + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      // A file system that takes O_DIRECT at open but refuses the reads: through the cache.
      if (errno == EINVAL && direct) {
        direct = false;
        const int flags = ::fcntl(fd, F_GETFL);
        if (flags >= 0 && ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) == 0) continue;
      }
      return fail_errno();
    }
    if (n == 0) break;
    done += static_cast<uint64_t>(n);
    // A direct read that ends inside a block ended at the end of the file.
    if (direct && static_cast<uint64_t>(n) % a != 0) break;
  }
  const uint64_t skip = offset - begin;
  const uint64_t got = done > skip ? std::min(done - skip, want) : 0;
  return shared_bytes{std::move(owner), std::span<const uint8_t>(p + skip, got)};
}

tl::expected<uint64_t, store_error> local_store::head(std::string_view key) {
  if (!valid_key(key)) return tl::make_unexpected(store_error::invalid_argument);
  struct stat st {};
  if (::stat((root_ / key).c_str(), &st) != 0) {
    if (errno == ENOTDIR) return tl::make_unexpected(store_error::not_found);
    return fail_errno();
  }
  if (!S_ISREG(st.st_mode)) return tl::make_unexpected(store_error::not_found);
  return static_cast<uint64_t>(st.st_size);
}

tl::expected<void, store_error> local_store::remove(std::string_view key) {
  if (!valid_key(key)) return tl::make_unexpected(store_error::invalid_argument);
  const auto path = root_ / key;
  if (::unlink(path.c_str()) != 0) {
    // No file under that name (a directory is not an object): nothing to delete.
    if (errno == ENOENT || errno == ENOTDIR || errno == EISDIR) return {};
    return fail_errno();
  }
  // A concurrent remove may already have pruned the emptied directory, and the entry with it.
  if (!sync_dir(path.parent_path()) && errno != ENOENT) return fail_errno();
  // Prune the directories this left empty; the first non-empty one (or any error) stops it.
  for (auto dir = path.parent_path(); dir != root_ && dir.native().size() > root_.native().size();
       dir = dir.parent_path()) {
    if (::rmdir(dir.c_str()) != 0) break;
  }
  return {};
}

tl::expected<std::vector<object_info>, store_error> local_store::list(std::string_view prefix) {
  if (!valid_prefix(prefix)) return tl::make_unexpected(store_error::invalid_argument);
  // Start at the deepest directory the prefix names completely.
  const size_t slash = prefix.rfind('/');
  const std::string key_dir(slash == std::string_view::npos ? "" : prefix.substr(0, slash + 1));
  std::vector<object_info> out;
  auto walked = walk(key_dir.empty() ? root_ : root_ / key_dir, key_dir, prefix, out);
  if (!walked) return tl::make_unexpected(walked.error());
  std::sort(out.begin(), out.end(),
            [](const object_info& a, const object_info& b) { return a.key < b.key; });
  return out;
}

std::string local_store::describe() const {
  return "file://" + root_.string();
}

}  // namespace silt::storage
