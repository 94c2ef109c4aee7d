#include "metadata/row_key.h"

#include <array>
#include <cstdint>

#include <openssl/sha.h>

namespace silt::metadata {

std::string row_key_digest(std::string_view canonical) {
  std::array<uint8_t, SHA256_DIGEST_LENGTH> d{};
  SHA256(reinterpret_cast<const unsigned char*>(canonical.data()), canonical.size(), d.data());
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * d.size());
  for (const uint8_t x : d) {
    hex += digits[x >> 4];
    hex += digits[x & 0xf];
  }
  return hex;
}

}  // namespace silt::metadata
