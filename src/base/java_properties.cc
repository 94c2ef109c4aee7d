#include "base/java_properties.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace silt::base {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\f';
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The text of a key or value with the escapes resolved.
std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 't':
        out += '\t';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 'f':
        out += '\f';
        break;
      case 'u': {
        uint32_t cp = 0;
        const auto res =
            std::from_chars(s.data() + i + 1, s.data() + std::min(s.size(), i + 5), cp, 16);
        if (res.ptr == s.data() + i + 5) {
          append_utf8(out, cp);
          i += 4;
        } else {
          out += 'u';
        }
        break;
      }
      default:
        out += c;
        break;
    }
  }
  return out;
}

}  // namespace

std::vector<java_property> parse_java_properties(std::string_view text) {
  std::vector<java_property> out;
  size_t pos = 0;
  size_t line_no = 0;
  // The next natural line, without its leading blanks.
  auto next_line = [&text, &pos, &line_no] {
    const size_t end = text.find_first_of("\r\n", pos);
    std::string_view line = text.substr(pos, end == std::string_view::npos ? end : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;
    if (end != std::string_view::npos && text[end] == '\r' && pos < text.size() &&
        text[pos] == '\n') {
      ++pos;
    }
    ++line_no;
    while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
    return line;
  };
  while (pos < text.size()) {
    std::string_view natural = next_line();
    const size_t first_line = line_no;
    if (natural.empty() || natural.front() == '#' || natural.front() == '!') continue;
    // A line ending in an odd number of backslashes continues on the next one.
    std::string logical;
    for (;;) {
      size_t backslashes = 0;
      while (backslashes < natural.size() && natural[natural.size() - 1 - backslashes] == '\\') {
        ++backslashes;
      }
      if (backslashes % 2 == 0) {
        logical.append(natural);
        break;
      }
      logical.append(natural.substr(0, natural.size() - 1));
      if (pos >= text.size()) break;
      natural = next_line();
    }
    // The key ends at the first unescaped '=', ':' or blank.
    size_t k = 0;
    while (k < logical.size() && logical[k] != '=' && logical[k] != ':' && !is_space(logical[k])) {
      k += logical[k] == '\\' ? 2 : 1;
    }
    k = std::min(k, logical.size());
    size_t v = k;
    while (v < logical.size() && is_space(logical[v])) ++v;
    if (v < logical.size() && (logical[v] == '=' || logical[v] == ':')) ++v;
    while (v < logical.size() && is_space(logical[v])) ++v;
    out.push_back({unescape(std::string_view(logical).substr(0, k)),
                   unescape(std::string_view(logical).substr(v)), first_line});
  }
  return out;
}

}  // namespace silt::base
