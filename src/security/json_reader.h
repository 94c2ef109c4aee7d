// JSON from outside the broker (a token's header and claims, a JWKS document) read into
// nlohmann::json with bounds: the text's size is the caller's to cap; here objects and arrays
// nest at most `max_depth` deep, and an object naming a member twice is refused (RFC 7515
// section 5.2 lets a JWS reader refuse it, and jose4j, which Kafka validates tokens with, does).
//
// nlohmann's parser is iterative (no recursion however deep the text nests) and reports errors
// to the reader below instead of throwing; the depth bound keeps what the rest of the code does
// with the document (copies, comparisons, dumps: recursive) shallow. Never throws. Any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

namespace silt::security {

// The document `text` holds; the error says why it does not parse (position and reason, never
// the text itself).
[[nodiscard]] tl::expected<nlohmann::json, std::string> read_json(std::string_view text,
                                                                  size_t max_depth);

}  // namespace silt::security
