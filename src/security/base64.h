// Base64 (RFC 4648 section 4: the standard alphabet, padded) for SASL messages, which carry
// binary values (SCRAM's salts, proofs and signatures, its channel binding) as text.
//
// Decoding is strict, as the messages come from unauthenticated clients: the length is a
// multiple of 4, only the alphabet and at most two trailing '=' appear, and the bits the
// padding leaves over are zero (every byte string has one encoding). Linear time, no
// allocation beyond the result.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace silt::security {

[[nodiscard]] std::string base64_encode(std::span<const uint8_t> bytes);

// The bytes `text` encodes, or none when it is not canonical padded base64.
[[nodiscard]] std::optional<std::vector<uint8_t>> base64_decode(std::string_view text);

}  // namespace silt::security
