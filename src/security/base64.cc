#include "security/base64.h"

#include <array>

namespace silt::security {

namespace {

constexpr std::string_view alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Each byte's value in the alphabet, or -1.
constexpr std::array<int8_t, 256> decoding = [] {
  std::array<int8_t, 256> t{};
  t.fill(-1);
  for (size_t i = 0; i < alphabet.size(); ++i) {
    t[static_cast<uint8_t>(alphabet[i])] = static_cast<int8_t>(i);
  }
  return t;
}();

}  // namespace

std::string base64_encode(std::span<const uint8_t> bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = (uint32_t{bytes[i]} << 16) | (uint32_t{bytes[i + 1]} << 8) | bytes[i + 2];
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest == 1) {
    const uint32_t v = uint32_t{bytes[i]} << 16;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += "==";
  } else if (rest == 2) {
    const uint32_t v = (uint32_t{bytes[i]} << 16) | (uint32_t{bytes[i + 1]} << 8);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::optional<std::vector<uint8_t>> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  size_t padding = 0;
  if (!text.empty() && text.back() == '=') ++padding;
  if (text.size() >= 2 && text[text.size() - 2] == '=') ++padding;
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const size_t digits = last ? 4 - padding : 4;
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      int8_t d = 0;
      if (k < digits) {
        d = decoding[static_cast<uint8_t>(text[i + k])];
        if (d < 0) return std::nullopt;
      }
      v = (v << 6) | static_cast<uint32_t>(d);
    }
    out.push_back(static_cast<uint8_t>(v >> 16));
    if (digits >= 3) out.push_back(static_cast<uint8_t>(v >> 8));
    if (digits == 4) out.push_back(static_cast<uint8_t>(v));
    // The bits below the last whole byte must be zero: one encoding per byte string.
    if (digits == 3 && (v & 0xff) != 0) return std::nullopt;
    if (digits == 2 && (v & 0xffff) != 0) return std::nullopt;
  }
  return out;
}

}  // namespace silt::security
