// Kafka's ssl.principal.mapping.rules: how a client certificate's subject becomes the name of
// its principal. Comma-separated rules, tried in order: `RULE:pattern/replacement/` with an
// optional `L` or `U` (lower or upper case the result), or `DEFAULT` (the subject as it is).
// A rule applies when its pattern matches the whole subject; the replacement then stands for it,
// `$1`... naming the pattern's groups (a group number beyond the pattern's is literal text, and
// `\x` is a literal x, as in Java). Patterns are RE2 regular expressions: linear time, whatever
// the pattern, where Kafka uses java.util.regex.
//
// Immutable once parsed; any thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

namespace re2 {
class RE2;
}

namespace silt::net {

class principal_mapper {
 public:
  // The rules of `text`; the error names the rule that does not parse or compile.
  [[nodiscard]] static tl::expected<principal_mapper, std::string> parse(std::string_view text);

  // The principal's name for a subject in RFC 2253 form; nullopt when no rule applies (Kafka
  // then refuses the connection).
  [[nodiscard]] std::optional<std::string> map(const std::string& subject) const;

 private:
  struct rule {
    std::shared_ptr<const re2::RE2> pattern;  // null: DEFAULT
    std::string rewrite;                      // RE2's form of the replacement (\1, \\)
    char case_change = 0;                     // 0, 'L' or 'U'
  };
  std::vector<rule> rules_;
};

}  // namespace silt::net
