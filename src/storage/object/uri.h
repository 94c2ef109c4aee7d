// Percent-encoding and query strings, as object store URIs and S3 requests need them.
// Pure functions, no I/O.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace silt::storage::uri {

// RFC 3986 percent-encoding as AWS Signature V4 canonicalises it: A-Z a-z 0-9 - . _ ~ stay,
// every other byte becomes %XX (upper-case hex); '/' stays when `keep_slash` (object keys in
// a path), so that the encoded string is already the canonical form libcurl signs.
[[nodiscard]] std::string encode(std::string_view s, bool keep_slash = false);

// Decodes %XX escapes; `plus_is_space` also turns '+' into ' ' (form encoding, which S3 uses
// in listings with encoding-type=url). Nullopt on a malformed escape.
[[nodiscard]] std::optional<std::string> decode(std::string_view s, bool plus_is_space = false);

// The parameters of a query string ("a=1&b&c=x%20y"), decoded, in order; a parameter without
// '=' has an empty value. '+' is kept (secret keys contain it). Nullopt on a malformed escape.
[[nodiscard]] std::optional<std::vector<std::pair<std::string, std::string>>> parse_query(
    std::string_view query);

// A canonical query string: parameters sorted by name, names and values encoded, every one
// with '=' ("uploads="). AWS Signature V4 signs this form and libcurl 7.88 signs the query
// as given, so requests must be sent in it.
[[nodiscard]] std::string canonical_query(std::vector<std::pair<std::string, std::string>> params);

}  // namespace silt::storage::uri
