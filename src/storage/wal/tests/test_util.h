// Helpers shared by the WAL tests: a scratch directory on a file system that takes O_DIRECT,
// deterministic payloads, replay collection, synchronous appends and raw file edits.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "base/ids.h"
#include "storage/wal/wal.h"

namespace silt::storage::wal::testing {

// A fresh directory, removed with its contents when the test ends. Under $TMPDIR (or /tmp)
// when that file system takes O_DIRECT, else under the build directory.
class test_dir {
 public:
  test_dir();
  test_dir(const test_dir&) = delete;
  test_dir& operator=(const test_dir&) = delete;
  ~test_dir();

  [[nodiscard]] std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

inline base::offset off(int64_t v) {
  return base::offset(v);
}

// Bytes that depend only on (stream, offset, size), so a replayed payload can be checked.
[[nodiscard]] std::vector<uint8_t> payload_for(uint64_t stream, int64_t offset, size_t size);

// The payload size of record (stream, offset) in the crash test: mostly small, sometimes
// several blocks.
[[nodiscard]] inline size_t crash_record_size(uint64_t stream, int64_t offset) {
  const auto k = static_cast<uint64_t>(offset) * 7919 + stream * 131;
  return k % 61 == 0 ? 30000 + k % 10000 : k % 5000;
}

// A replayed record with its payload copied out.
struct replayed {
  wal_position position = 0;
  wal_position end = 0;
  base::stream_id stream_id{};
  base::offset offset{};
  std::vector<uint8_t> payload;
};

struct opened {
  tl::expected<std::unique_ptr<wal>, wal_error> log;
  std::vector<replayed> records;
};

[[nodiscard]] opened open_wal(const wal_options& options);

// Appends and waits for the callback.
[[nodiscard]] tl::expected<wal_position, wal_error> append_and_wait(
    wal& w, uint64_t stream, int64_t offset, const std::vector<uint8_t>& payload);

// Counts callbacks and lets a test wait for a number of them.
class callback_counter {
 public:
  void add();
  // Waits until `n` callbacks have fired; false after `timeout_ms`.
  [[nodiscard]] bool wait_for(uint64_t n, int timeout_ms = 20000);
  [[nodiscard]] uint64_t count();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t count_ = 0;
};

// Raw edits of a (closed) WAL file, through the page cache.
[[nodiscard]] std::vector<uint8_t> read_bytes(const std::string& path, uint64_t offset, size_t len);
// What a process printed before it was killed, and how it ended.
struct run_result {
  std::string output;
  int status = 0;
};

// Runs args[0] with args until `lifetime` has passed, then SIGKILLs it and returns what it
// printed on stdout (for crash tests).
run_result run_and_kill(const std::vector<std::string>& args, std::chrono::milliseconds lifetime);

void write_bytes(const std::string& path, uint64_t offset, const std::vector<uint8_t>& bytes);
void flip_byte(const std::string& path, uint64_t offset);

// The file offset of ring position `pos` in a WAL of `capacity`.
[[nodiscard]] uint64_t file_offset(wal_position pos, uint64_t capacity);

}  // namespace silt::storage::wal::testing
