// Pieces shared by config.cc and topic_config.cc; not part of the component's interface.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace silt::config::detail {

// Without leading and trailing spaces, tabs, form feeds, carriage returns and newlines.
[[nodiscard]] std::string_view trim(std::string_view s);

// A decimal integer with an optional sign and nothing else; nullopt on any other text or on
// overflow.
[[nodiscard]] std::optional<int64_t> parse_int(std::string_view s);

// "true" or "false" in any case (as Kafka's ConfigDef reads booleans).
[[nodiscard]] std::optional<bool> parse_bool(std::string_view s);

// A finite decimal floating-point number.
[[nodiscard]] std::optional<double> parse_double(std::string_view s);

// The items of a comma-separated list, each trimmed; empty items are dropped.
[[nodiscard]] std::vector<std::string> split_list(std::string_view s);

// The Markdown table of topic configs for docs/configuration.md (topic_config.cc).
[[nodiscard]] std::string topic_docs_table();

// A Kafka broker setting that Silt accepts but that has no effect in Silt (ignored_settings.cc).
struct ignored_setting {
  std::string name;
  std::string reason;  // why it has no effect: "Silt has no KRaft controller"
  std::string valid;   // what `check` accepts, for the error: "a 32-bit integer"
  std::function<bool(std::string_view)> check;
};

// Every ignored Kafka setting, grouped by reason.
[[nodiscard]] const std::vector<ignored_setting>& ignored_settings();

// nullptr when `name` is not an ignored Kafka setting.
[[nodiscard]] const ignored_setting* find_ignored(std::string_view name);

// The Markdown table of ignored Kafka settings for docs/configuration.md, a row per reason.
[[nodiscard]] std::string ignored_docs_table();

// The default value of a broker setting as text, nullopt for an unknown name or a setting
// without default (config.cc). Derived defaults (wal.path, ...) are given as documented.
[[nodiscard]] std::optional<std::string> broker_default(std::string_view name);

}  // namespace silt::config::detail
