// The file or block device under a WAL: opening it (creating and pre-zeroing a new file), its
// size, and the synchronous aligned reads and writes that open() and recovery use.
//
// Owned by the WAL. Until the I/O thread starts, open() uses it directly; after that the I/O
// thread submits its own requests on fd() and nothing else writes through it.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <tl/expected.hpp>

#include "storage/wal/wal.h"

namespace silt::storage::wal {

class ring_file {
 public:
  // Opens options.path for reading and writing (O_DIRECT, and O_DSYNC in dsync mode). A path
  // that does not exist becomes a new WAL file: header plus options.capacity bytes of zeros,
  // written in full so that later writes overwrite allocated blocks, with a first header slot;
  // it is built under a temporary name and renamed, so a crash never leaves half a file.
  [[nodiscard]] static tl::expected<ring_file, wal_error> open(const wal_options& options);

  // Opens `path`, which must hold a WAL already, for reading only (O_DIRECT where the file
  // system has it): another broker's WAL, read while that broker is dead.
  [[nodiscard]] static tl::expected<ring_file, wal_error> open_read_only(const std::string& path);

  ring_file(ring_file&& other) noexcept;
  ring_file& operator=(ring_file&& other) noexcept;
  ring_file(const ring_file&) = delete;
  ring_file& operator=(const ring_file&) = delete;
  ~ring_file();

  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] bool block_device() const { return block_device_; }
  // Bytes of the file or device.
  [[nodiscard]] uint64_t size() const { return size_; }
  [[nodiscard]] bool dsync() const { return dsync_; }

  // Reads or writes all of `data` at `offset`; both must be block-aligned.
  [[nodiscard]] tl::expected<void, wal_error> read(uint64_t offset, std::span<uint8_t> data) const;
  [[nodiscard]] tl::expected<void, wal_error> write(uint64_t offset,
                                                    std::span<const uint8_t> data) const;

  // Makes completed writes durable: fdatasync, or nothing when writes are O_DSYNC.
  [[nodiscard]] tl::expected<void, wal_error> sync() const;

  // Closes the descriptor now (the destructor would otherwise).
  void close();

 private:
  ring_file(int fd, bool block_device, uint64_t size, bool dsync)
      : fd_(fd), block_device_(block_device), size_(size), dsync_(dsync) {}

  int fd_ = -1;
  bool block_device_ = false;
  uint64_t size_ = 0;
  bool dsync_ = false;
};

}  // namespace silt::storage::wal
