// Row keys for names that may be longer than an index row takes (PostgreSQL's index rows hold
// about 2.7 KB): the SHA-256 of a canonical text, in lowercase hex.
#pragma once

#include <string>
#include <string_view>

namespace silt::metadata {

[[nodiscard]] std::string row_key_digest(std::string_view canonical);

}  // namespace silt::metadata
