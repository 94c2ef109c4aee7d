#include "security/scram.h"

#include <climits>
#include <stdexcept>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <tl/expected.hpp>

#include "base/utf8.h"
#include "security/base64.h"

namespace silt::security {

namespace {

const EVP_MD* digest_of(scram_algorithm a) {
  return a == scram_algorithm::sha256 ? EVP_sha256() : EVP_sha512();
}

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// OpenSSL takes a null pointer with a zero length for "no key" or "keep the previous one" in
// places: empty inputs point here instead.
const uint8_t* nonnull(std::span<const uint8_t> s) {
  static constexpr uint8_t none = 0;
  return s.empty() ? &none : s.data();
}

// The key made-up credentials are derived with: random, drawn once per process.
const std::vector<uint8_t>& made_up_key() {
  static const std::vector<uint8_t> key = [] {
    std::vector<uint8_t> k(32);
    if (RAND_bytes(k.data(), static_cast<int>(k.size())) != 1) {
      throw std::runtime_error("SCRAM: the random number generator failed");
    }
    return k;
  }();
  return key;
}

std::vector<uint8_t> concat(std::string_view label, scram_algorithm a, std::string_view user) {
  std::vector<uint8_t> out(label.begin(), label.end());
  out.push_back(0);
  const auto mech = scram_mechanism_name(a);
  out.insert(out.end(), mech.begin(), mech.end());
  out.push_back(0);
  out.insert(out.end(), user.begin(), user.end());
  return out;
}

// ---------------------------------------------------------------- parsing the client's messages
//
// Hand-written, one pass each, no regular expressions: every loop advances over the message,
// so the work is linear in its size, which scram_max_message_bytes bounds.

bool printable_nonce(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (c < 0x21 || c > 0x7e || c == ',') return false;
  }
  return true;
}

bool alpha(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return false;
  }
  return true;
}

// An extension's value: Kafka's VALUE, ASCII 0x01-0x7F without ','.
bool extension_value(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u == 0 || u > 0x7f || c == ',') return false;
  }
  return true;
}

// A saslname (RFC 5802): UTF-8 without NUL, ',' and '=', except "=2C" for ',' and "=3D" for
// '='. The decoded name, or none.
std::optional<std::string> decode_saslname(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == ',') return std::nullopt;
    if (c != '=') {
      out += c;
      continue;
    }
    const std::string_view code = s.substr(i + 1, 2);
    if (code == "2C") {
      out += ',';
    } else if (code == "3D") {
      out += '=';
    } else {
      return std::nullopt;
    }
    i += 2;
  }
  if (!base::is_storable_text(out)) return std::nullopt;
  return out;
}

// Takes the next attribute of a message: "<name>=<value>" up to the next ',' (which is
// consumed) or the end. None when the attribute is not `name`.
std::optional<std::string_view> take_attribute(std::string_view& rest, char name) {
  if (rest.size() < 2 || rest[0] != name || rest[1] != '=') return std::nullopt;
  const size_t comma = rest.find(',');
  const std::string_view value =
      rest.substr(2, comma == std::string_view::npos ? rest.npos : comma - 2);
  rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  return value;
}

struct client_first {
  std::string gs2_header;  // "n,," and the like, its last ',' included
  std::string bare;        // client-first-message-bare: the rest, as sent
  std::string user;        // decoded
  std::string nonce;
};

// Why a message is refused (for the broker's log: it quotes nothing the client sent).
struct refusal {
  std::string detail;
  bool authzid_mismatch = false;  // answered with Kafka's own message for it
};

// Extensions (",name=value" after the nonce): Kafka's ALPHA+ names and VALUE values. The
// delegation token extension is refused (Silt has no delegation tokens); others are ignored.
std::optional<refusal> check_extensions(std::string_view rest) {
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view ext = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t eq = ext.find('=');
    if (eq == std::string_view::npos || !alpha(ext.substr(0, eq)) ||
        !extension_value(ext.substr(eq + 1))) {
      return refusal{"malformed extension"};
    }
    // The letters of RFC 5802's attributes name no extension (a second proof, say).
    if (eq == 1 && std::string_view("aceimnprsv").find(ext[0]) != std::string_view::npos) {
      return refusal{"an attribute repeated or out of place"};
    }
    if (ext.substr(0, eq) == "tokenauth") {
      return refusal{"delegation token authentication (tokenauth) is not supported"};
    }
    if (comma == std::string_view::npos) break;
    if (rest.empty()) return refusal{"malformed extension"};  // a trailing ','
  }
  return std::nullopt;
}

tl::expected<client_first, refusal> parse_client_first(std::string_view m) {
  using bad = tl::unexpected<refusal>;
  if (m.size() < 3) return bad(refusal{"client-first message too short"});
  if (m[0] == 'p') return bad(refusal{"the client asked for channel binding (not supported)"});
  if ((m[0] != 'n' && m[0] != 'y') || m[1] != ',') {
    return bad(refusal{"malformed gs2 header in the client-first message"});
  }
  std::string_view rest = m.substr(2);
  std::optional<std::string> authzid;
  if (rest.starts_with("a=")) {
    const size_t comma = rest.find(',');
    if (comma == std::string_view::npos) return bad(refusal{"malformed authorization id"});
    authzid = decode_saslname(rest.substr(2, comma - 2));
    if (!authzid) return bad(refusal{"malformed authorization id"});
    rest = rest.substr(comma + 1);
  } else if (rest.starts_with(",")) {
    rest = rest.substr(1);
  } else {
    return bad(refusal{"malformed gs2 header in the client-first message"});
  }
  client_first out;
  out.gs2_header = std::string(m.substr(0, m.size() - rest.size()));
  out.bare = std::string(rest);
  if (rest.starts_with("m=")) return bad(refusal{"mandatory extension (m=) not supported"});
  const auto name = take_attribute(rest, 'n');
  if (!name) return bad(refusal{"no user name in the client-first message"});
  auto user = decode_saslname(*name);
  if (!user) return bad(refusal{"malformed user name in the client-first message"});
  const auto nonce = take_attribute(rest, 'r');
  if (!nonce || !printable_nonce(*nonce)) {
    return bad(refusal{"malformed nonce in the client-first message"});
  }
  // A ',' right after the nonce with nothing behind it.
  if (rest.empty() && out.bare.back() == ',') return bad(refusal{"malformed extension"});
  if (auto r = check_extensions(rest)) return bad(std::move(*r));
  if (authzid && *authzid != *user) {
    return bad(refusal{"the authorization id differs from the user name", true});
  }
  out.user = std::move(*user);
  out.nonce = std::string(*nonce);
  return out;
}

struct client_final {
  std::vector<uint8_t> channel_binding;
  std::string nonce;
  std::vector<uint8_t> proof;
  std::string without_proof;  // client-final-message-without-proof, as sent
};

tl::expected<client_final, refusal> parse_client_final(std::string_view m) {
  using bad = tl::unexpected<refusal>;
  // The proof comes last: everything before its ',' is the message without it.
  const size_t last = m.rfind(",p=");
  if (last == std::string_view::npos) return bad(refusal{"no proof in the client-final message"});
  client_final out;
  out.without_proof = std::string(m.substr(0, last));
  auto proof = base64_decode(m.substr(last + 3));
  if (!proof) return bad(refusal{"malformed proof in the client-final message"});
  out.proof = std::move(*proof);
  std::string_view rest = m.substr(0, last);
  const auto cb = take_attribute(rest, 'c');
  auto binding = cb ? base64_decode(*cb) : std::nullopt;
  if (!binding) return bad(refusal{"malformed channel binding in the client-final message"});
  out.channel_binding = std::move(*binding);
  const auto nonce = take_attribute(rest, 'r');
  if (!nonce || !printable_nonce(*nonce)) {
    return bad(refusal{"malformed nonce in the client-final message"});
  }
  if (rest.empty() && out.without_proof.back() == ',') return bad(refusal{"malformed extension"});
  out.nonce = std::string(*nonce);
  // Extensions between the nonce and the proof are checked and ignored.
  if (auto r = check_extensions(rest)) return bad(std::move(*r));
  return out;
}

std::string random_server_nonce() {
  std::vector<uint8_t> bytes(24);
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) return {};
  return base64_encode(bytes);  // 32 characters of the base64 alphabet: printable, no ','
}

}  // namespace

// ---------------------------------------------------------------- names and formulas

std::string_view scram_mechanism_name(scram_algorithm a) {
  return a == scram_algorithm::sha256 ? "SCRAM-SHA-256" : "SCRAM-SHA-512";
}

std::optional<scram_algorithm> scram_algorithm_of(std::string_view mechanism) {
  if (mechanism == "SCRAM-SHA-256") return scram_algorithm::sha256;
  if (mechanism == "SCRAM-SHA-512") return scram_algorithm::sha512;
  return std::nullopt;
}

int8_t scram_mechanism_type(scram_algorithm a) {
  return a == scram_algorithm::sha256 ? 1 : 2;
}

std::optional<scram_algorithm> scram_algorithm_of_type(int8_t type) {
  if (type == 1) return scram_algorithm::sha256;
  if (type == 2) return scram_algorithm::sha512;
  return std::nullopt;
}

size_t scram_hash_size(scram_algorithm a) {
  return a == scram_algorithm::sha256 ? 32 : 64;
}

std::vector<uint8_t> scram_hash(scram_algorithm a, std::span<const uint8_t> data) {
  std::vector<uint8_t> out(EVP_MAX_MD_SIZE);
  unsigned int n = 0;
  if (EVP_Digest(nonnull(data), data.size(), out.data(), &n, digest_of(a), nullptr) != 1) return {};
  out.resize(n);
  return out;
}

std::vector<uint8_t> scram_hmac(scram_algorithm a, std::span<const uint8_t> key,
                                std::span<const uint8_t> data) {
  if (key.size() > INT_MAX) return {};
  std::vector<uint8_t> out(EVP_MAX_MD_SIZE);
  unsigned int n = 0;
  if (HMAC(digest_of(a), nonnull(key), static_cast<int>(key.size()), nonnull(data), data.size(),
           out.data(), &n) == nullptr) {
    return {};
  }
  out.resize(n);
  return out;
}

std::vector<uint8_t> scram_salted_password(scram_algorithm a, std::string_view password,
                                           std::span<const uint8_t> salt, int32_t iterations) {
  if (iterations <= 0 || password.size() > INT_MAX || salt.size() > INT_MAX) return {};
  std::vector<uint8_t> out(scram_hash_size(a));
  const auto pass = bytes_of(password);
  if (PKCS5_PBKDF2_HMAC(reinterpret_cast<const char*>(nonnull(pass)),
                        static_cast<int>(password.size()), nonnull(salt),
                        static_cast<int>(salt.size()), iterations, digest_of(a),
                        static_cast<int>(out.size()), out.data()) != 1) {
    return {};
  }
  return out;
}

scram_credential scram_credential_from_salted(scram_algorithm a, std::span<const uint8_t> salt,
                                              std::span<const uint8_t> salted_password,
                                              int32_t iterations) {
  scram_credential c;
  c.salt.assign(salt.begin(), salt.end());
  c.iterations = iterations;
  c.stored_key = scram_hash(a, scram_hmac(a, salted_password, bytes_of("Client Key")));
  c.server_key = scram_hmac(a, salted_password, bytes_of("Server Key"));
  return c;
}

scram_credential make_scram_credential(scram_algorithm a, std::string_view password,
                                       std::span<const uint8_t> salt, int32_t iterations) {
  auto salted = scram_salted_password(a, password, salt, iterations);
  auto c = scram_credential_from_salted(a, salt, salted, iterations);
  OPENSSL_cleanse(salted.data(), salted.size());
  return c;
}

// ---------------------------------------------------------------- the exchange

class scram_mechanism::exchange final : public sasl_exchange {
 public:
  explicit exchange(const scram_mechanism& m) : m_(m) {}
  ~exchange() override { forget(); }
  exchange(const exchange&) = delete;
  exchange& operator=(const exchange&) = delete;

  sasl_result step(std::span<const uint8_t> message) override {
    const std::string_view text(reinterpret_cast<const char*>(message.data()), message.size());
    if (state_ != state::over && text.size() > scram_max_message_bytes) {
      return fail("message of " + std::to_string(text.size()) + " bytes, above the bound");
    }
    switch (state_) {
      case state::expect_first:
        return first_step(text);
      case state::expect_final:
        return final_step(text);
      case state::over:
        break;
    }
    return sasl_result::fail(invalid_credentials_message(m_.name()),
                             "a message after the exchange ended");
  }

 private:
  enum class state : uint8_t { expect_first, expect_final, over };

  sasl_result fail(std::string detail) {
    forget();
    state_ = state::over;
    return sasl_result::fail(invalid_credentials_message(m_.name()), std::move(detail));
  }

  // Nothing of the credential outlives the exchange.
  void forget() {
    OPENSSL_cleanse(credential_.stored_key.data(), credential_.stored_key.size());
    OPENSSL_cleanse(credential_.server_key.data(), credential_.server_key.size());
    credential_ = {};
  }

  sasl_result first_step(std::string_view text) {
    auto parsed = parse_client_first(text);
    if (!parsed) {
      if (parsed.error().authzid_mismatch) {
        // Kafka's SaslAuthenticationException for it, sent to the client as is.
        forget();
        state_ = state::over;
        return sasl_result::fail(
            "Authentication failed: Client requested an authorization id that is different from "
            "username",
            parsed.error().detail);
      }
      return fail(parsed.error().detail);
    }
    client_first_ = std::move(*parsed);
    if (auto found = m_.source_.find(client_first_.user, m_.algorithm_)) {
      credential_ = std::move(*found);
      known_ = true;
      if (credential_.iterations < scram_min_iterations) {
        return fail("the credential of user " + client_first_.user + " has " +
                    std::to_string(credential_.iterations) + " iterations, fewer than " +
                    std::to_string(scram_min_iterations));
      }
    } else {
      credential_ = m_.made_up_credential(client_first_.user);
    }
    const std::string server_nonce =
        m_.options_.server_nonce ? m_.options_.server_nonce() : random_server_nonce();
    if (server_nonce.empty()) return fail("no random bytes for the server nonce");
    nonce_ = client_first_.nonce + server_nonce;
    server_first_ = "r=" + nonce_ + ",s=" + base64_encode(credential_.salt) +
                    ",i=" + std::to_string(credential_.iterations);
    state_ = state::expect_final;
    return sasl_result::challenge({server_first_.begin(), server_first_.end()});
  }

  sasl_result final_step(std::string_view text) {
    auto parsed = parse_client_final(text);
    if (!parsed) return fail(parsed.error().detail);
    const auto& header = client_first_.gs2_header;
    if (parsed->channel_binding != std::vector<uint8_t>(header.begin(), header.end())) {
      return fail("the channel binding differs from the client-first message's gs2 header");
    }
    // The whole nonce, as RFC 5802 and Kafka 4 compare it (Kafka 3.8.1 to 3.9 took any nonce
    // that ends with it, for librdkafka before 2.6.1, which repeats its own in front).
    if (parsed->nonce != nonce_) return fail("the nonce differs from the server-first message's");
    const auto a = m_.algorithm_;
    const size_t size = scram_hash_size(a);
    if (parsed->proof.size() != size) return fail("a proof of the wrong size");
    if (credential_.stored_key.size() != size || credential_.server_key.size() != size) {
      return fail("the stored credential of user " + client_first_.user + " is malformed");
    }
    const std::string auth_message =
        client_first_.bare + "," + server_first_ + "," + parsed->without_proof;
    // ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage); it must hash to StoredKey.
    auto client_key = scram_hmac(a, credential_.stored_key, bytes_of(auth_message));
    if (client_key.size() != size) return fail("HMAC failed");
    for (size_t i = 0; i < size; ++i) client_key[i] ^= parsed->proof[i];
    const auto stored = scram_hash(a, client_key);
    OPENSSL_cleanse(client_key.data(), client_key.size());
    if (stored.size() != size ||
        CRYPTO_memcmp(stored.data(), credential_.stored_key.data(), size) != 0) {
      return fail(known_ ? "wrong password of user " + client_first_.user
                         : "unknown user " + client_first_.user);
    }
    const auto signature = scram_hmac(a, credential_.server_key, bytes_of(auth_message));
    const std::string reply = "v=" + base64_encode(signature);
    forget();
    state_ = state::over;
    sasl_result done;
    done.status = sasl_result::state::done;
    done.reply.assign(reply.begin(), reply.end());
    done.principal = client_first_.user;
    return done;
  }

  const scram_mechanism& m_;
  state state_ = state::expect_first;
  client_first client_first_;
  scram_credential credential_;
  bool known_ = false;  // credential_ is the user's, not made up (for the log only)
  std::string nonce_;   // the client's and the server's
  std::string server_first_;
};

// ---------------------------------------------------------------- the mechanism

scram_mechanism::scram_mechanism(scram_algorithm a, const scram_credential_source& source,
                                 scram_options options)
    : algorithm_(a), source_(source), options_(std::move(options)) {
  (void)made_up_key();  // drawn now, at start-up, rather than on a network thread
}

scram_mechanism::~scram_mechanism() = default;

std::unique_ptr<sasl_exchange> scram_mechanism::start() const {
  return std::make_unique<exchange>(*this);
}

scram_credential scram_mechanism::made_up_credential(std::string_view user) const {
  const auto& key = made_up_key();
  const auto a = algorithm_;
  scram_credential c;
  // 26 characters of base 36, as the salts Kafka's tools make (a random 130-bit number).
  const auto salt_bytes = scram_hmac(scram_algorithm::sha256, key, concat("salt", a, user));
  static constexpr std::string_view digits = "0123456789abcdefghijklmnopqrstuvwxyz";
  for (size_t i = 0; i < 26 && i < salt_bytes.size(); ++i) {
    c.salt.push_back(static_cast<uint8_t>(digits[salt_bytes[i] % digits.size()]));
  }
  c.iterations = scram_default_iterations;
  c.stored_key = scram_hmac(a, key, concat("stored key", a, user));
  c.server_key = scram_hmac(a, key, concat("server key", a, user));
  return c;
}

}  // namespace silt::security
