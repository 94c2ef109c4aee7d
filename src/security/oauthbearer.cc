#include "security/oauthbearer.h"

#include <algorithm>
#include <chrono>
#include <optional>

namespace silt::security {
namespace {

constexpr std::string_view mechanism_name = "OAUTHBEARER";
constexpr uint8_t control_a = 0x01;

bool is_alpha(uint8_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_digit(uint8_t c) {
  return c >= '0' && c <= '9';
}
bool is_value_char(uint8_t c) {
  return (c >= 0x21 && c <= 0x7e) || c == ' ' || c == '\t' || c == '\r' || c == '\n';
}
bool is_token_char(char c) {
  const auto u = static_cast<uint8_t>(c);
  return is_alpha(u) || is_digit(u) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' ||
         c == '/';
}

// The token of an auth value `scheme 1*SP token`; nullopt when it is not one, or the scheme is
// not Bearer.
std::optional<std::string_view> bearer_token(std::string_view auth) {
  size_t i = 0;
  while (i < auth.size() && (is_alpha(static_cast<uint8_t>(auth[i])) ||
                             is_digit(static_cast<uint8_t>(auth[i])) || auth[i] == '_')) {
    ++i;
  }
  const std::string_view scheme = auth.substr(0, i);
  const size_t spaces = i;
  while (i < auth.size() && auth[i] == ' ') ++i;
  if (scheme.empty() || i == spaces) return std::nullopt;
  const std::string_view token = auth.substr(i);
  size_t j = 0;
  while (j < token.size() && is_token_char(token[j])) ++j;
  if (j == 0) return std::nullopt;
  while (j < token.size() && token[j] == '=') ++j;
  if (j != token.size()) return std::nullopt;
  const bool bearer = std::equal(scheme.begin(), scheme.end(), std::string_view("bearer").begin(),
                                 std::string_view("bearer").end(), [](char a, char b) {
                                   return (a >= 'A' && a <= 'Z' ? a - 'A' + 'a' : a) == b;
                                 });
  if (!bearer) return std::nullopt;
  return token;
}

// One client's authentication, owned by its connection's strand (see the header for the steps).
class oauthbearer_exchange final : public sasl_exchange {
 public:
  explicit oauthbearer_exchange(std::shared_ptr<const oauthbearer_mechanism::state> state)
      : state_(std::move(state)) {}

  sasl_result step(std::span<const uint8_t> message) override {
    if (over_) {
      return sasl_result::fail(invalid_credentials_message(mechanism_name),
                               "a step after the OAUTHBEARER exchange ended");
    }
    if (error_sent_ && message.size() == 1 && message[0] == control_a) {
      over_ = true;
      return sasl_result::fail(std::string(oauthbearer_invalid_token), std::move(why_));
    }
    error_sent_ = false;

    // A message longer than any token allowed is not read at all.
    if (message.size() > state_->options.max_token_bytes + 4096) {
      over_ = true;
      return sasl_result::fail(invalid_credentials_message(mechanism_name),
                               "OAUTHBEARER client message too long");
    }
    auto parsed = parse_oauthbearer_message(message);
    if (!parsed) {
      over_ = true;
      return sasl_result::fail(invalid_credentials_message(mechanism_name),
                               "invalid OAUTHBEARER client message: " + parsed.error());
    }

    const std::shared_ptr<const jwk_set> keys = state_->keys->keys();
    auto token =
        validate_jwt(parsed->token, *keys, state_->options, std::chrono::system_clock::now());
    if (!token) {
      if (token.error().kind == jwt_error_kind::no_key) {
        state_->keys->key_missing(token.error().kid);
      }
      error_sent_ = true;
      why_ = "invalid OAUTHBEARER token: " + token.error().detail;
      const auto json = oauthbearer_invalid_token;
      return sasl_result::challenge(std::vector<uint8_t>(json.begin(), json.end()));
    }

    over_ = true;
    if (!parsed->authzid.empty() && parsed->authzid != token->principal) {
      return sasl_result::fail(
          "Authentication failed: Client requested an authorization id (" + parsed->authzid +
              ") that is different from the token's principal name (" + token->principal + ")",
          "OAUTHBEARER authorization id is not the token's principal");
    }
    sasl_result done;
    done.status = sasl_result::state::done;
    done.principal = std::move(token->principal);
    // A time beyond what system_clock holds (about the year 2262) is cut to its end.
    const auto latest =
        std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::time_point::max());
    done.expires = std::chrono::system_clock::time_point(std::min(token->expires, latest));
    return done;
  }

 private:
  const std::shared_ptr<const oauthbearer_mechanism::state> state_;
  bool error_sent_ = false;  // the last step answered with the invalid_token challenge
  bool over_ = false;
  std::string why_;  // why the token was refused, for the log line of the failure
};

}  // namespace

tl::expected<oauthbearer_message, std::string> parse_oauthbearer_message(
    std::span<const uint8_t> m) {
  size_t i = 0;
  auto at = [&](uint8_t c) { return i < m.size() && m[i] == c; };
  auto expect = [&](uint8_t c) {
    if (!at(c)) return false;
    ++i;
    return true;
  };

  oauthbearer_message out;
  if (!expect('n') || !expect(',')) return tl::unexpected(std::string("no \"n,\" GS2 header"));
  if (at('a')) {
    ++i;
    if (!expect('=')) return tl::unexpected(std::string("a bad authorization id"));
    const size_t start = i;
    while (i < m.size() && m[i] != ',') {
      if (m[i] == '=') {
        const bool comma = i + 2 < m.size() && m[i + 1] == '2' && m[i + 2] == 'C';
        const bool equals = i + 2 < m.size() && m[i + 1] == '3' && m[i + 2] == 'D';
        if (!comma && !equals) {
          return tl::unexpected(std::string("a bad escape in the authorization id"));
        }
        i += 3;
      } else if (m[i] >= 0x01 && m[i] <= 0x7f) {
        ++i;
      } else {
        return tl::unexpected(std::string("a bad character in the authorization id"));
      }
    }
    if (i == start) return tl::unexpected(std::string("an empty authorization id"));
    out.authzid.assign(m.begin() + static_cast<ptrdiff_t>(start),
                       m.begin() + static_cast<ptrdiff_t>(i));
  }
  if (!expect(',')) return tl::unexpected(std::string("no \",\" after the GS2 header"));
  if (!expect(control_a)) return tl::unexpected(std::string("no separator after the GS2 header"));

  std::optional<std::string> auth;
  while (!at(control_a)) {
    const size_t key_start = i;
    while (i < m.size() && is_alpha(m[i])) ++i;
    if (i == key_start || !at('=')) return tl::unexpected(std::string("a bad key"));
    std::string key(m.begin() + static_cast<ptrdiff_t>(key_start),
                    m.begin() + static_cast<ptrdiff_t>(i));
    ++i;
    const size_t value_start = i;
    while (i < m.size() && is_value_char(m[i])) ++i;
    if (i == value_start || !at(control_a)) return tl::unexpected(std::string("a bad value"));
    std::string value(m.begin() + static_cast<ptrdiff_t>(value_start),
                      m.begin() + static_cast<ptrdiff_t>(i));
    ++i;
    if (key == "auth") {
      auth = std::move(value);
      continue;
    }
    auto same = std::find_if(out.extensions.begin(), out.extensions.end(),
                             [&](const auto& e) { return e.first == key; });
    if (same != out.extensions.end()) {
      same->second = std::move(value);
    } else {
      out.extensions.emplace_back(std::move(key), std::move(value));
    }
  }
  ++i;  // the final separator
  if (i != m.size()) return tl::unexpected(std::string("bytes after the final separator"));
  if (!auth) return tl::unexpected(std::string("no auth key"));
  const auto token = bearer_token(*auth);
  if (!token) return tl::unexpected(std::string("an auth value that is not a bearer token"));
  out.token = std::string(*token);
  return out;
}

tl::expected<std::unique_ptr<oauthbearer_mechanism>, std::string> oauthbearer_mechanism::open(
    oauthbearer_options options) {
  auto keys = jwks_source::open(std::move(options.jwks));
  if (!keys) return tl::unexpected(keys.error());
  return std::make_unique<oauthbearer_mechanism>(std::move(*keys), std::move(options.token));
}

oauthbearer_mechanism::oauthbearer_mechanism(std::shared_ptr<jwks_source> keys, jwt_options options)
    : state_(std::make_shared<const state>(state{std::move(keys), std::move(options)})) {}

std::unique_ptr<sasl_exchange> oauthbearer_mechanism::start() const {
  return std::make_unique<oauthbearer_exchange>(state_);
}

const std::shared_ptr<jwks_source>& oauthbearer_mechanism::keys() const {
  return state_->keys;
}

}  // namespace silt::security
