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
// Thread-safe: no mutable state but a counter; several processes may share the directory.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "storage/object/object_store.h"

namespace silt::storage {

class local_store final : public object_store {
 public:
  // Opens the directory `root`, creating it (and its parents) if missing, and deletes
  // temporary files older than an hour that crashed puts left behind.
  [[nodiscard]] static tl::expected<std::unique_ptr<local_store>, std::string> open(
      const std::filesystem::path& root);

  [[nodiscard]] tl::expected<void, store_error> put(std::string_view key,
                                                    std::span<const uint8_t> data) override;
  [[nodiscard]] tl::expected<std::vector<uint8_t>, store_error> get(std::string_view key,
                                                                    uint64_t offset,
                                                                    uint64_t length) override;
  [[nodiscard]] tl::expected<uint64_t, store_error> head(std::string_view key) override;
  [[nodiscard]] tl::expected<void, store_error> remove(std::string_view key) override;
  [[nodiscard]] tl::expected<std::vector<object_info>, store_error> list(
      std::string_view prefix) override;
  [[nodiscard]] std::string describe() const override;

  // Whether `key` is one this store accepts.
  [[nodiscard]] static bool valid_key(std::string_view key);

 private:
  local_store(std::filesystem::path root, uint64_t temp_salt);

  // Creates the missing parent directories of `key`, fsyncing the directory each was made in.
  [[nodiscard]] tl::expected<void, store_error> make_parents(std::string_view key) const;
  [[nodiscard]] std::string temp_path();

  const std::filesystem::path root_;
  const uint64_t temp_salt_;  // tells this store's temporary files from other processes'
  std::atomic<uint64_t> next_temp_{0};
};

}  // namespace silt::storage
