#include "storage/offset_map.h"

#include <algorithm>
#include <cstring>

#include <openssl/evp.h>

#include "base/endian.h"

namespace silt::storage {

namespace {

const EVP_MD* sha256() {
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

}  // namespace

offset_map::offset_map(size_t memory_bytes, double load_factor) {
  const size_t n = std::max<size_t>(memory_bytes / sizeof(slot), 16);
  slots_.resize(n);
  max_entries_ = std::max<size_t>(
      1, static_cast<size_t>(static_cast<double>(n) * std::clamp(load_factor, 0.1, 0.95)));
}

offset_map::digest offset_map::digest_of(std::span<const uint8_t> key) {
  std::array<uint8_t, EVP_MAX_MD_SIZE> full{};
  unsigned int len = 0;
  EVP_Digest(key.data(), key.size(), full.data(), &len, sha256(), nullptr);
  digest d;
  std::memcpy(d.data(), full.data(), d.size());
  return d;
}

size_t offset_map::find(const digest& d) const {
  size_t i = base::load_be<uint64_t>(d.data()) % slots_.size();
  while (slots_[i].offset >= 0 && slots_[i].key != d) i = (i + 1) % slots_.size();
  return i;
}

bool offset_map::put(std::span<const uint8_t> key, int64_t offset) {
  const digest d = digest_of(key);
  slot& s = slots_[find(d)];
  if (s.offset < 0) {
    if (size_ >= max_entries_) return false;
    s.key = d;
    ++size_;
  }
  s.offset = std::max(s.offset, offset);
  latest_ = std::max(latest_, offset);
  return true;
}

std::optional<int64_t> offset_map::get(std::span<const uint8_t> key) const {
  const slot& s = slots_[find(digest_of(key))];
  if (s.offset < 0) return std::nullopt;
  return s.offset;
}

void offset_map::clear() {
  std::fill(slots_.begin(), slots_.end(), slot{});
  size_ = 0;
  latest_ = -1;
}

}  // namespace silt::storage
