// Base64url (RFC 4648 section 5) as JOSE writes it (RFC 7515 section 2): the URL-safe alphabet,
// no padding, no line breaks. Decoding is strict: any other character, a length of 4k+1, or
// bits left set in the last character (a second spelling of the same bytes) refuse the text.
// Pure functions, any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace silt::security {

// The bytes `text` spells; nullopt when it is not strict unpadded base64url.
[[nodiscard]] std::optional<std::string> base64url_decode(std::string_view text);

// `bytes` in unpadded base64url.
[[nodiscard]] std::string base64url_encode(std::string_view bytes);

}  // namespace silt::security
