// A heap buffer aligned to the WAL block size, as O_DIRECT needs for its memory.
//
// Owned by whoever holds it; movable, not copyable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <span>
#include <utility>

#include "storage/wal/wal_format.h"

namespace silt::storage::wal {

class aligned_buffer {
 public:
  aligned_buffer() = default;

  // `size` is rounded up to a whole number of blocks; the contents are uninitialized.
  explicit aligned_buffer(size_t size)
      : size_(format::align_up(size)),
        data_(static_cast<uint8_t*>(std::aligned_alloc(format::block_size, size_))) {
    if (data_ == nullptr && size_ > 0) throw std::bad_alloc();
  }

  aligned_buffer(aligned_buffer&& other) noexcept
      : size_(std::exchange(other.size_, 0)), data_(std::exchange(other.data_, nullptr)) {}

  aligned_buffer& operator=(aligned_buffer&& other) noexcept {
    if (this != &other) {
      std::free(data_);
      size_ = std::exchange(other.size_, 0);
      data_ = std::exchange(other.data_, nullptr);
    }
    return *this;
  }

  aligned_buffer(const aligned_buffer&) = delete;
  aligned_buffer& operator=(const aligned_buffer&) = delete;

  ~aligned_buffer() { std::free(data_); }

  [[nodiscard]] uint8_t* data() const { return data_; }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] std::span<uint8_t> span() const { return {data_, size_}; }

 private:
  size_t size_ = 0;
  uint8_t* data_ = nullptr;
};

}  // namespace silt::storage::wal
