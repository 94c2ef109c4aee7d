#include "security/jaas.h"

#include <cctype>

namespace silt::security {

namespace {

class jaas_reader {
 public:
  explicit jaas_reader(std::string_view t) : t_(t) {}

  void skip_space() {
    while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_])) != 0) ++pos_;
  }
  [[nodiscard]] bool at_end() {
    skip_space();
    return pos_ >= t_.size();
  }
  [[nodiscard]] bool take(char c) {
    skip_space();
    if (pos_ < t_.size() && t_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  // A bare word: anything up to a space, '=', ';' or '"'.
  [[nodiscard]] std::string word() {
    skip_space();
    const size_t start = pos_;
    while (pos_ < t_.size()) {
      const char c = t_[pos_];
      if (std::isspace(static_cast<unsigned char>(c)) != 0 || c == '=' || c == ';' || c == '"') {
        break;
      }
      ++pos_;
    }
    return std::string(t_.substr(start, pos_ - start));
  }
  // A quoted value or a bare word; nullopt for an unterminated quote or nothing.
  [[nodiscard]] tl::expected<std::string, std::string> value() {
    skip_space();
    if (pos_ < t_.size() && t_[pos_] == '"') {
      ++pos_;
      std::string out;
      while (pos_ < t_.size() && t_[pos_] != '"') {
        if (t_[pos_] == '\\' && pos_ + 1 < t_.size()) ++pos_;
        out.push_back(t_[pos_++]);
      }
      if (pos_ >= t_.size()) return tl::unexpected(where("an unterminated quoted value"));
      ++pos_;
      return out;
    }
    auto w = word();
    if (w.empty()) return tl::unexpected(where("a value"));
    return w;
  }
  [[nodiscard]] std::string where(std::string_view what) const {
    return "sasl.jaas.config: expected " + std::string(what) + " at character " +
           std::to_string(pos_ + 1);
  }

 private:
  std::string_view t_;
  size_t pos_ = 0;
};

}  // namespace

tl::expected<jaas_entry, std::string> parse_jaas(std::string_view text) {
  jaas_reader r(text);
  jaas_entry e;
  e.login_module = r.word();
  if (e.login_module.empty()) return tl::unexpected(r.where("a login module class name"));
  e.flag = r.word();
  if (e.flag != "required" && e.flag != "requisite" && e.flag != "sufficient" &&
      e.flag != "optional") {
    return tl::unexpected(
        r.where("a control flag after the login module (required, requisite, sufficient or "
                "optional)"));
  }
  while (!r.take(';')) {
    if (r.at_end()) return tl::unexpected(r.where("';' at the end of the login module entry"));
    auto key = r.word();
    if (key.empty()) return tl::unexpected(r.where("an option name"));
    if (!r.take('=')) return tl::unexpected(r.where("'=' after an option name"));
    auto v = r.value();
    if (!v) return tl::unexpected(v.error());
    e.options[std::move(key)] = std::move(*v);
  }
  if (!r.at_end()) {
    return tl::unexpected(
        r.where("the end: sasl.jaas.config holds one login module entry (Kafka refuses more)"));
  }
  return e;
}

}  // namespace silt::security
