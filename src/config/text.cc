// Text helpers of the config component (internal.h).
#include <charconv>
#include <cmath>

#include "config/internal.h"

namespace silt::config::detail {

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\f\r\n";
  const auto first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(kSpace);
  return s.substr(first, last - first + 1);
}

std::optional<int64_t> parse_int(std::string_view s) {
  // from_chars takes a leading '-' but not '+'; Kafka (Long.parseLong) takes both.
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() == '+') return std::nullopt;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<bool> parse_bool(std::string_view s) {
  auto equals_ignoring_case = [s](std::string_view word) {
    if (s.size() != word.size()) return false;
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = (s[i] >= 'A' && s[i] <= 'Z') ? static_cast<char>(s[i] - 'A' + 'a') : s[i];
      if (c != word[i]) return false;
    }
    return true;
  };
  if (equals_ignoring_case("true")) return true;
  if (equals_ignoring_case("false")) return false;
  return std::nullopt;
}

std::optional<double> parse_double(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() == '+') return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> items;
  while (true) {
    const auto comma = s.find(',');
    const auto item = trim(s.substr(0, comma));
    if (!item.empty()) items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return items;
}

}  // namespace silt::config::detail
