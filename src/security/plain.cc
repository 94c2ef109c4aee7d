#include "security/plain.h"

#include <array>

#include <openssl/crypto.h>
#include <openssl/sha.h>

namespace silt::security {

namespace {

// Kafka's PlainSaslServer answers every refusal with this.
constexpr const char* kRefused = "Authentication failed: Invalid username or password";

std::array<uint8_t, SHA256_DIGEST_LENGTH> digest(std::string_view s) {
  std::array<uint8_t, SHA256_DIGEST_LENGTH> d{};
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d.data());
  return d;
}

class plain_exchange final : public sasl_exchange {
 public:
  explicit plain_exchange(const plain_mechanism& m) : m_(m) {}

  sasl_result step(std::span<const uint8_t> message) override {
    if (over_) return sasl_result::fail(kRefused, "a message after the exchange ended");
    over_ = true;
    const std::string_view text(reinterpret_cast<const char*>(message.data()), message.size());
    const size_t a = text.find('\0');
    const size_t b = a == std::string_view::npos ? a : text.find('\0', a + 1);
    if (b == std::string_view::npos || text.find('\0', b + 1) != std::string_view::npos) {
      return sasl_result::fail(kRefused,
                               "a PLAIN message not of the form authzid NUL user NUL "
                               "password");
    }
    const auto authzid = text.substr(0, a);
    const auto user = text.substr(a + 1, b - a - 1);
    const auto password = text.substr(b + 1);
    if (user.empty() || password.empty()) {
      return sasl_result::fail(kRefused, "an empty PLAIN user name or password");
    }
    if (!authzid.empty() && authzid != user) {
      return sasl_result::fail(kRefused, "a PLAIN authorization id that is not the user name");
    }
    if (!m_.check(user, password)) {
      return sasl_result::fail(
          kRefused, "unknown PLAIN user or wrong password for '" + std::string(user) + "'");
    }
    sasl_result r;
    r.status = sasl_result::state::done;
    r.principal = std::string(user);
    return r;
  }

 private:
  const plain_mechanism& m_;
  bool over_ = false;
};

}  // namespace

plain_mechanism::plain_mechanism(std::map<std::string, std::string> users)
    : users_(users.begin(), users.end()) {}

std::map<std::string, std::string> plain_mechanism::users_of(
    const std::map<std::string, std::string>& jaas_options) {
  std::map<std::string, std::string> users;
  for (const auto& [k, v] : jaas_options) {
    if (k.size() > 5 && k.starts_with("user_")) users.emplace(k.substr(5), v);
  }
  return users;
}

std::unique_ptr<sasl_exchange> plain_mechanism::start() const {
  return std::make_unique<plain_exchange>(*this);
}

bool plain_mechanism::check(std::string_view user, std::string_view password) const {
  // Digests of equal length, compared in constant time: the time says nothing of the password,
  // nor (beyond the map lookup) whether the user exists.
  const auto it = users_.find(user);
  const auto given = digest(password);
  const auto known = digest(it == users_.end() ? std::string_view("\x01unknown") : it->second);
  const bool same = CRYPTO_memcmp(given.data(), known.data(), given.size()) == 0;
  return it != users_.end() && same;
}

}  // namespace silt::security
