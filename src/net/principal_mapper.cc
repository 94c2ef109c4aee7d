#include "net/principal_mapper.h"

#include <cctype>

#include <re2/re2.h>

#include "net/principal.h"

namespace silt::net {

const char* to_string(security_protocol p) {
  switch (p) {
    case security_protocol::plaintext:
      return "PLAINTEXT";
    case security_protocol::ssl:
      return "SSL";
    case security_protocol::sasl_plaintext:
      return "SASL_PLAINTEXT";
    case security_protocol::sasl_ssl:
      return "SASL_SSL";
  }
  return "PLAINTEXT";
}

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

// Up to the next '/' not escaped by a backslash (the escapes kept, as Kafka keeps them);
// nullopt when there is none.
std::optional<std::string> until_slash(std::string_view text, size_t& pos) {
  std::string out;
  while (pos < text.size()) {
    const char c = text[pos];
    if (c == '/') {
      ++pos;
      return out;
    }
    if (c == '\\' && pos + 1 < text.size()) {
      out += c;
      out += text[pos + 1];
      pos += 2;
      continue;
    }
    out += c;
    ++pos;
  }
  return std::nullopt;
}

// Java's replacement string (`$n` a group, `\x` a literal x) in RE2's rewrite form (`\n` a
// group, `\\` a backslash). Like Kafka, a group number beyond the pattern's loses its last
// digits down to one the pattern has, or is literal text when even one digit is too many.
std::string to_rewrite(std::string_view replacement, int groups) {
  std::string out;
  for (size_t i = 0; i < replacement.size(); ++i) {
    const char c = replacement[i];
    if (c == '\\' && i + 1 < replacement.size()) {
      const char lit = replacement[++i];
      if (lit == '\\') {
        out += "\\\\";
      } else {
        out += lit;
      }
      continue;
    }
    if (c == '$' && i + 1 < replacement.size() &&
        std::isdigit(static_cast<unsigned char>(replacement[i + 1])) != 0) {
      size_t end = i + 1;
      while (end < replacement.size() &&
             std::isdigit(static_cast<unsigned char>(replacement[end])) != 0) {
        ++end;
      }
      std::string digits(replacement.substr(i + 1, end - i - 1));
      // Java reads as many digits as still name a group.
      while (digits.size() > 1 && std::stol(digits) > groups) digits.pop_back();
      const long n = std::stol(digits);
      if (n > groups || n > 9) {
        out += '$';  // literal, as Kafka escapes it
        continue;
      }
      out += '\\';
      out += digits;
      i += digits.size();
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

tl::expected<principal_mapper, std::string> principal_mapper::parse(std::string_view text) {
  principal_mapper m;
  size_t pos = 0;
  auto skip_spaces = [&] {
    while (pos < text.size() && is_space(text[pos])) ++pos;
  };
  skip_spaces();
  while (pos < text.size()) {
    const size_t start = pos;
    rule r;
    if (text.substr(pos).starts_with("DEFAULT")) {
      pos += 7;
    } else if (text.substr(pos).starts_with("RULE:")) {
      pos += 5;
      auto pattern = until_slash(text, pos);
      auto replacement = pattern ? until_slash(text, pos) : std::nullopt;
      if (!replacement) {
        return tl::unexpected("invalid rule '" + std::string(text.substr(start)) +
                              "': expected RULE:pattern/replacement/[LU]");
      }
      if (pos < text.size() && (text[pos] == 'L' || text[pos] == 'U')) r.case_change = text[pos++];
      RE2::Options o;
      o.set_log_errors(false);
      auto re = std::make_shared<const RE2>(*pattern, o);
      if (!re->ok()) {
        return tl::unexpected("invalid rule pattern '" + *pattern + "': " + re->error());
      }
      r.rewrite = to_rewrite(*replacement, re->NumberOfCapturingGroups());
      r.pattern = std::move(re);
    } else {
      const size_t comma = text.find(',', pos);
      return tl::unexpected("invalid rule '" + std::string(text.substr(start, comma - start)) +
                            "': expected RULE:pattern/replacement/[LU] or DEFAULT");
    }
    skip_spaces();
    if (pos < text.size()) {
      if (text[pos] != ',') {
        return tl::unexpected("invalid rule '" + std::string(text.substr(start)) +
                              "': unexpected text after it (rules are separated by commas)");
      }
      ++pos;
      skip_spaces();
    }
    m.rules_.push_back(std::move(r));
  }
  if (m.rules_.empty()) return tl::unexpected(std::string("no rule (DEFAULT keeps the subject)"));
  return m;
}

std::optional<std::string> principal_mapper::map(const std::string& subject) const {
  for (const auto& r : rules_) {
    if (!r.pattern) return subject;
    if (!RE2::FullMatch(subject, *r.pattern)) continue;
    std::string out = subject;
    RE2::GlobalReplace(&out, *r.pattern, r.rewrite);
    for (auto& c : out) {
      if (r.case_change == 'L') c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (r.case_change == 'U') c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace silt::net
