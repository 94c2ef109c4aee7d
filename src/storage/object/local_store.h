// An object store in a local directory: the embedded default (file://), and the stand-in for a
// bucket in tests. A key is a relative path: "a/b/c" is the file ROOT/a/b/c.
//
// A put writes a temporary file under ROOT/.silt-tmp, fsyncs it, creates (and fsyncs) the
// missing parent directories, renames it into place and fsyncs the target directory: a reader
// sees the old or the new object, and the new one survives a crash once put returns. A remove
// also removes the parent directories it leaves empty, so that a key may later name a file
// where a directory was.
//
// Keys: non-empty relative paths of at most 1024 bytes, without empty, "." or ".." segments,
// not starting with ".silt-tmp/"; other keys give invalid_argument. Unlike S3, a key cannot be
// both an object and a prefix followed by '/' of another ("a" and "a/b"): the second put gives
// invalid_argument.
//
// By default writes bypass the page cache (O_DIRECT): the bytes are copied into a reused,
// aligned chunk buffer and written a chunk at a time, the last chunk padded to the alignment
// and the file then truncated to its size. An object is written once and read back rarely
// (cold reads go through the block cache), so caching it would only cost the memory, and more
// CPU; the block cache's reads (get_shared) are O_DIRECT too, into aligned memory that the
// cached blocks then share. With direct_io false (file://PATH?direct=false), or when the file
// system refuses O_DIRECT, writes are buffered and paced: a chunk is written, its writeback started
// and waited for, then the next, so that the device sees one chunk at a time as with O_DIRECT (not
// a whole object at the fsync, which delays the WAL's writes behind it) while the pages stay in the
// page cache for a reader that catches up soon after.
//
// Thread-safe: no mutable state but a counter, the pool of idle chunk buffers (behind a mutex)
// and whether O_DIRECT works; several processes may share the directory.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "storage/object/object_store.h"

namespace silt::storage {

class local_store final : public object_store {
 public:
  // Opens the directory `root`, creating it (and its parents) if missing, and deletes
  // temporary files older than an hour that crashed puts left behind.
  // direct_io false: buffered writes always (for tests of that path).
  [[nodiscard]] static tl::expected<std::unique_ptr<local_store>, std::string> open(
      const std::filesystem::path& root, bool direct_io = true);

  // The size of the chunks O_DIRECT writes go out in, and their alignment (of memory, file
  // offsets and lengths). The WAL shares the disk: its writes, each with the device's flush,
  // wait for the object write ahead of them in the device, so that write is kept short
  // (512 KiB, against 4 MiB: the WAL's write p99 1.4 ms against 2.8 ms at 50 MiB/s of
  // 64 KiB records, with uploads as fast).
  static constexpr size_t write_chunk_size = size_t{512} << 10;
  static constexpr size_t direct_alignment = 4096;

  [[nodiscard]] tl::expected<void, store_error> put(std::string_view key,
                                                    std::span<const uint8_t> data) override;
  [[nodiscard]] tl::expected<void, store_error> put_parts(
      std::string_view key, std::span<const std::span<const uint8_t>> parts) override;
  // The temporary file is renamed with RENAME_NOREPLACE (a hard link where the file system
  // lacks it), which fails when the key is taken.
  [[nodiscard]] tl::expected<void, store_error> put_if_absent(
      std::string_view key, std::span<const uint8_t> data) override;
  [[nodiscard]] tl::expected<std::vector<uint8_t>, store_error> get(std::string_view key,
                                                                    uint64_t offset,
                                                                    uint64_t length) override;
  // Reads with O_DIRECT when puts do (into aligned memory, a view of the range within it),
  // through the page cache otherwise.
  [[nodiscard]] tl::expected<shared_bytes, store_error> get_shared(std::string_view key,
                                                                   uint64_t offset,
                                                                   uint64_t length) override;
  [[nodiscard]] tl::expected<uint64_t, store_error> head(std::string_view key) override;
  [[nodiscard]] tl::expected<void, store_error> remove(std::string_view key) override;
  [[nodiscard]] tl::expected<std::vector<object_info>, store_error> list(
      std::string_view prefix) override;
  [[nodiscard]] std::string describe() const override;

  // Whether puts write with O_DIRECT (false once the file system refused it).
  [[nodiscard]] bool direct_io() const { return direct_io_.load(std::memory_order_relaxed); }

  // Whether `key` is one this store accepts.
  [[nodiscard]] static bool valid_key(std::string_view key);

 private:
  // Writes `parts` to a temporary file and moves it to `key`: replacing what is there, or
  // failing with already_exists when `replace` is false and the key is taken.
  [[nodiscard]] tl::expected<void, store_error> write_and_install(
      std::string_view key, std::span<const std::span<const uint8_t>> parts, bool replace);

  struct chunk_deleter {
    void operator()(uint8_t* p) const noexcept;
  };
  using chunk = std::unique_ptr<uint8_t[], chunk_deleter>;

  local_store(std::filesystem::path root, uint64_t temp_salt, bool direct_io);

  // Writes `parts` into the new file `path` and fsyncs it; removes the file on failure.
  [[nodiscard]] tl::expected<void, store_error> write_file(
      const std::string& path, std::span<const std::span<const uint8_t>> parts);
  // Writes through O_DIRECT; false with errno set on failure (EINVAL: not supported).
  [[nodiscard]] bool write_direct(int fd, std::span<const std::span<const uint8_t>> parts);
  [[nodiscard]] chunk take_chunk();
  void give_back(chunk c);

  // Creates the missing parent directories of `key`, fsyncing the directory each was made in.
  [[nodiscard]] tl::expected<void, store_error> make_parents(std::string_view key) const;
  [[nodiscard]] std::string temp_path();

  const std::filesystem::path root_;
  const uint64_t temp_salt_;  // tells this store's temporary files from other processes'
  std::atomic<uint64_t> next_temp_{0};
  std::atomic<bool> direct_io_;  // cleared when the file system refuses O_DIRECT
  base::mutex chunks_mu_;
  std::vector<chunk> idle_chunks_ GUARDED_BY(chunks_mu_);
};

}  // namespace silt::storage
