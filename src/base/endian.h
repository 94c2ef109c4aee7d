// Big-endian (network order) loads and stores on unaligned memory.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace silt::base {

template <typename T>
[[nodiscard]] inline T byteswap_if_little(T v) {
  static_assert(std::is_integral_v<T>);
  if constexpr (std::endian::native == std::endian::little) {
    if constexpr (sizeof(T) == 2) {
      return static_cast<T>(__builtin_bswap16(static_cast<uint16_t>(v)));
    } else if constexpr (sizeof(T) == 4) {
      return static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(v)));
    } else if constexpr (sizeof(T) == 8) {
      return static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(v)));
    }
  }
  return v;
}

// Reads a big-endian T from p (no alignment needed).
template <typename T>
[[nodiscard]] inline T load_be(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return byteswap_if_little(v);
}

// Writes v big-endian to p (no alignment needed).
template <typename T>
inline void store_be(uint8_t* p, T v) {
  v = byteswap_if_little(v);
  std::memcpy(p, &v, sizeof(T));
}

}  // namespace silt::base
