// Percent-encoding and query strings, as object store URIs and S3 requests need them.
// Pure functions, no I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
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

// For the stores' URI parsers: a parameter's value as a number or a flag (true/1/yes,
// false/0/no); nullopt when it is not one.
[[nodiscard]] std::optional<uint64_t> parse_number(std::string_view value);
[[nodiscard]] std::optional<bool> parse_flag(std::string_view value);
// parse_number into an unsigned `field`; false (the field untouched) when `value` is not a
// number or does not fit.
template <typename T>
[[nodiscard]] bool parse_number_into(std::string_view value, T& field) {
  const auto v = parse_number(value);
  if (!v || *v > std::numeric_limits<T>::max()) return false;
  field = static_cast<T>(*v);
  return true;
}
// A number of milliseconds into a duration `field`, as parse_number_into.
[[nodiscard]] bool parse_millis_into(std::string_view value, std::chrono::milliseconds& field);
// "SCHEME URI: parameter NAME='VALUE' is not WANT"; VALUE is "***" when NAME names a secret
// (base::is_secret_name).
[[nodiscard]] std::string bad_parameter(std::string_view scheme, std::string_view name,
                                        std::string_view value, std::string_view want);

// Looks a variable up in the environment (nullopt when unset or empty); URI parsers take one
// so that tests can substitute theirs.
using env_lookup = std::function<std::optional<std::string>(const char* name)>;
// The process environment, read at the call (nothing in Silt sets variables at run time).
[[nodiscard]] std::optional<std::string> system_env(const char* name);

}  // namespace silt::storage::uri
