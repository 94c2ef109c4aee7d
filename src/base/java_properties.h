// A .properties file's text as java.util.Properties.load reads it, for the broker's
// server.properties and the client properties files of silt-perf: '#' and '!' comments,
// "k=v", "k: v" and "k v", backslash escapes (\t \n \r \f, \uXXXX as UTF-8, any other
// character as itself), continuation lines (a line ending in an odd number of backslashes),
// and \n, \r or \r\n line ends. A malformed \u is kept as text (Java throws).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace silt::base {

struct java_property {
  std::string key;
  std::string value;
  size_t line = 0;  // where the entry starts, from 1
  bool operator==(const java_property&) const = default;
};

// The entries in file order (a key may come more than once: the last one wins in Java).
[[nodiscard]] std::vector<java_property> parse_java_properties(std::string_view text);

}  // namespace silt::base
