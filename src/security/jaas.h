// Kafka's sasl.jaas.config value, as its JaasConfig reads it: one login module entry,
//   <class name> <required|requisite|sufficient|optional> [key=value ...];
// a value quoted with double quotes (a backslash escapes the next character) or a bare word.
// Kafka refuses several entries in one value, and so does this.
//
// The value may hold passwords (PlainLoginModule's user_<name>="..."): an error names the
// position and what was expected, never quotes the text.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace silt::security {

struct jaas_entry {
  std::string login_module;  // e.g. org.apache.kafka.common.security.plain.PlainLoginModule
  std::string flag;          // required, requisite, sufficient or optional
  std::map<std::string, std::string> options;
};

[[nodiscard]] tl::expected<jaas_entry, std::string> parse_jaas(std::string_view text);

}  // namespace silt::security
