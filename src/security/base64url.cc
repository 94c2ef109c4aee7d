#include "security/base64url.h"

#include <array>
#include <cstdint>

namespace silt::security {
namespace {

constexpr std::string_view alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

constexpr std::array<int8_t, 256> decode_table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (size_t i = 0; i < alphabet.size(); ++i) {
    t[static_cast<unsigned char>(alphabet[i])] = static_cast<int8_t>(i);
  }
  return t;
}

constexpr auto table = decode_table();

}  // namespace

std::optional<std::string> base64url_decode(std::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : text) {
    const int8_t v = table[static_cast<unsigned char>(c)];
    if (v < 0) return std::nullopt;
    acc = ((acc << 6) | static_cast<uint32_t>(v)) & 0xfff;  // at most 12 bits are pending
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  // What is left (0, 2 or 4 bits) pads the last character and must be zero.
  if ((acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

std::string base64url_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : bytes) {
    acc = ((acc << 8) | static_cast<unsigned char>(c)) & 0x3fff;  // at most 14 bits pending
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(alphabet[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(alphabet[(acc << (6 - bits)) & 0x3f]);
  return out;
}

}  // namespace silt::security
