#include "storage/wal/ring_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "storage/wal/aligned_buffer.h"
#include "storage/wal/wal_format.h"

namespace silt::storage::wal {

namespace {

constexpr size_t zero_chunk = 1u << 20;

tl::expected<void, wal_error> pwrite_all(int fd, uint64_t offset, std::span<const uint8_t> data) {
  while (!data.empty()) {
    const ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return tl::unexpected(wal_error::io);
    data = data.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return {};
}

tl::expected<void, wal_error> pread_all(int fd, uint64_t offset, std::span<uint8_t> data) {
  while (!data.empty()) {
    const ssize_t n = ::pread(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return tl::unexpected(wal_error::io);
    data = data.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return {};
}

// Logs which call failed on `path` and why (errno), for the operator: wal_error alone says "io".
wal_error io_failure(const char* call, const std::string& path) {
  const int err = errno;
  const std::string why =
      err != 0 ? std::error_code(err, std::generic_category()).message() : "short transfer";
  SILT_LOG(error, "silt: WAL %s: %s failed: %s", path.c_str(), call, why.c_str());
  return err == EINVAL ? wal_error::bad_options : wal_error::io;
}

std::string parent_directory(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Builds a new WAL file at `path`: zeros over header and ring, then the first header slot.
// The rename makes the file appear complete or not at all.
tl::expected<void, wal_error> create_file(const std::string& path, uint64_t capacity, bool direct) {
  const std::string tmp = path + ".creating";
  const int fd =
      ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | (direct ? O_DIRECT : 0), 0644);
  if (fd < 0) return tl::unexpected(io_failure("open", tmp));
  auto fail = [&](const char* call) {
    const wal_error e = io_failure(call, tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return tl::unexpected(e);
  };
  const uint64_t total = format::header_bytes + capacity;
  {
    aligned_buffer zeros(zero_chunk);
    std::memset(zeros.data(), 0, zeros.size());
    for (uint64_t at = 0; at < total; at += zero_chunk) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(zero_chunk, total - at));
      errno = 0;
      if (!pwrite_all(fd, at, std::span<const uint8_t>(zeros.data(), n))) return fail("write");
    }
  }
  aligned_buffer block(format::block_size);
  format::header_slot first;
  first.sequence = 1;
  first.capacity = capacity;
  format::encode_header_slot(first, block.span());
  errno = 0;
  if (!pwrite_all(fd, 0, block.span())) return fail("write");
  // fsync, not fdatasync: the file's size and blocks are new metadata.
  if (::fsync(fd) != 0) return fail("fsync");
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const wal_error e = io_failure("rename", tmp);
    ::unlink(tmp.c_str());
    return tl::unexpected(e);
  }
  const std::string parent = parent_directory(path);
  const int dir = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return tl::unexpected(io_failure("open", parent));
  const int rc = ::fsync(dir);
  if (rc != 0) {
    const wal_error e = io_failure("fsync", parent);
    ::close(dir);
    return tl::unexpected(e);
  }
  ::close(dir);
  return {};
}

}  // namespace

tl::expected<ring_file, wal_error> ring_file::open(const wal_options& options) {
  struct stat st {};
  if (::stat(options.path.c_str(), &st) != 0) {
    if (errno != ENOENT) return tl::unexpected(io_failure("stat", options.path));
    auto created = create_file(options.path, format::align_down(options.capacity), options.direct);
    if (!created) return tl::unexpected(created.error());
  } else if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return tl::unexpected(wal_error::bad_options);
  }
  const bool dsync = options.sync == sync_mode::dsync;
  const int flags = O_RDWR | O_CLOEXEC | (options.direct ? O_DIRECT : 0) | (dsync ? O_DSYNC : 0);
  const int fd = ::open(options.path.c_str(), flags);
  if (fd < 0) return tl::unexpected(io_failure("open", options.path));
  ring_file file(fd, false, 0, dsync);
  if (::fstat(fd, &st) != 0) return tl::unexpected(io_failure("fstat", options.path));
  if (S_ISBLK(st.st_mode)) {
    uint64_t bytes = 0;
    int logical_block = 0;
    if (::ioctl(fd, BLKGETSIZE64, &bytes) != 0 || ::ioctl(fd, BLKSSZGET, &logical_block) != 0) {
      return tl::unexpected(io_failure("ioctl", options.path));
    }
    // Writes are 4 KiB-aligned; a device with larger logical blocks cannot take them.
    if (logical_block <= 0 || format::block_size % static_cast<uint32_t>(logical_block) != 0) {
      return tl::unexpected(wal_error::bad_options);
    }
    file.block_device_ = true;
    file.size_ = bytes;
  } else {
    file.size_ = static_cast<uint64_t>(st.st_size);
  }
  return file;
}

tl::expected<ring_file, wal_error> ring_file::open_read_only(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  if (fd < 0 && errno == EINVAL) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return tl::unexpected(errno == ENOENT ? wal_error::bad_options : wal_error::io);
  ring_file file(fd, false, 0, false);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return tl::unexpected(wal_error::io);
  if (S_ISBLK(st.st_mode)) {
    uint64_t bytes = 0;
    if (::ioctl(fd, BLKGETSIZE64, &bytes) != 0) return tl::unexpected(wal_error::io);
    file.block_device_ = true;
    file.size_ = bytes;
  } else if (S_ISREG(st.st_mode)) {
    file.size_ = static_cast<uint64_t>(st.st_size);
  } else {
    return tl::unexpected(wal_error::bad_options);
  }
  return file;
}

ring_file::ring_file(ring_file&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      block_device_(other.block_device_),
      size_(other.size_),
      dsync_(other.dsync_) {}

ring_file& ring_file::operator=(ring_file&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    block_device_ = other.block_device_;
    size_ = other.size_;
    dsync_ = other.dsync_;
  }
  return *this;
}

ring_file::~ring_file() {
  close();
}

void ring_file::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

tl::expected<void, wal_error> ring_file::read(uint64_t offset, std::span<uint8_t> data) const {
  return pread_all(fd_, offset, data);
}

tl::expected<void, wal_error> ring_file::write(uint64_t offset,
                                               std::span<const uint8_t> data) const {
  return pwrite_all(fd_, offset, data);
}

tl::expected<void, wal_error> ring_file::sync() const {
  if (dsync_) return {};
  if (::fdatasync(fd_) != 0) return tl::unexpected(wal_error::io);
  return {};
}

}  // namespace silt::storage::wal
