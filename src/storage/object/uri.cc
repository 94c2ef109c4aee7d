#include "storage/object/uri.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "base/redact.h"

namespace silt::storage::uri {
namespace {

bool unreserved(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string encode(std::string_view s, bool keep_slash) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    if (unreserved(c) || (keep_slash && c == '/')) {
      out += c;
    } else {
      const auto b = static_cast<unsigned char>(c);
      out += '%';
      out += hex[b >> 4];
      out += hex[b & 0xf];
    }
  }
  return out;
}

std::optional<std::string> decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      const int hi = hex_value(s[i + 1]);
      const int lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (plus_is_space && s[i] == '+') {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<std::vector<std::pair<std::string, std::string>>> parse_query(
    std::string_view query) {
  std::vector<std::pair<std::string, std::string>> params;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const auto part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    auto name = decode(part.substr(0, eq));
    auto value = decode(eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1));
    if (!name || !value) return std::nullopt;
    params.emplace_back(std::move(*name), std::move(*value));
  }
  return params;
}

std::string canonical_query(std::vector<std::pair<std::string, std::string>> params) {
  for (auto& [name, value] : params) {
    name = encode(name);
    value = encode(value);
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += '&';
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

std::optional<uint64_t> parse_number(std::string_view s) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<bool> parse_flag(std::string_view v) {
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  return std::nullopt;
}

bool parse_millis_into(std::string_view value, std::chrono::milliseconds& field) {
  uint32_t ms = 0;
  if (!parse_number_into(value, ms)) return false;
  field = std::chrono::milliseconds(ms);
  return true;
}

std::string bad_parameter(std::string_view scheme, std::string_view name, std::string_view value,
                          std::string_view want) {
  std::string out(scheme);
  out += " URI: parameter ";
  out += name;
  out += "='";
  // Credentials are taken as they come; should one of them ever be checked, its value stays
  // out of the message.
  out += base::is_secret_name(name) ? base::redacted : value;
  out += "' is not ";
  out += want;
  return out;
}

std::optional<std::string> system_env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): see the declaration
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace silt::storage::uri
