// SASL on the broker's side (RFC 4422): a mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512,
// OAUTHBEARER) starts one exchange per authentication of a connection; each message the client
// sends (a SaslAuthenticate request's auth_bytes, or a raw token after SaslHandshake v0) is one
// step of it, answered with the bytes to send back.
//
// An exchange runs on its connection's strand, one step at a time, and must stay cheap: no
// disk, database or network wait (credentials come from memory, see scram.h), bounded work per
// byte of the message. A failed step says why twice: `error` goes to the client and never says
// which part was wrong (an unknown user and a wrong password look the same), `detail` goes to
// the broker's debug log and never quotes a secret.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace silt::security {

struct sasl_result {
  enum class state : uint8_t {
    more,    // `reply` is a challenge: the client sends another message
    done,    // authenticated as `principal`; `reply` is the server's last message (may be empty)
    failed,  // refused: answer `error`, then close the connection
  };
  state status = state::more;
  std::vector<uint8_t> reply;
  std::string principal;  // done: the name of the User principal
  // done: when the credential stops being valid (a token's exp); none: it does not expire.
  std::optional<std::chrono::system_clock::time_point> expires;
  std::string error;   // failed: for the client
  std::string detail;  // failed: for the broker's log

  static sasl_result challenge(std::vector<uint8_t> bytes) {
    return {.status = state::more, .reply = std::move(bytes)};
  }
  static sasl_result fail(std::string error, std::string detail) {
    return {.status = state::failed, .error = std::move(error), .detail = std::move(detail)};
  }
};

// One authentication: the steps of one client's exchange, in order. Not thread-safe (its
// connection's strand owns it).
class sasl_exchange {
 public:
  virtual ~sasl_exchange() = default;
  sasl_exchange() = default;
  sasl_exchange(const sasl_exchange&) = delete;
  sasl_exchange& operator=(const sasl_exchange&) = delete;
  // The client's next message. After `done` or `failed` the exchange is over: a further step
  // fails.
  [[nodiscard]] virtual sasl_result step(std::span<const uint8_t> message) = 0;
};

// A mechanism as a listener enables it; shared by every connection of the listener, so
// thread-safe.
class sasl_mechanism {
 public:
  virtual ~sasl_mechanism() = default;
  sasl_mechanism() = default;
  sasl_mechanism(const sasl_mechanism&) = delete;
  sasl_mechanism& operator=(const sasl_mechanism&) = delete;
  // The name clients ask for in SaslHandshake ("PLAIN", "SCRAM-SHA-256", ...).
  [[nodiscard]] virtual std::string_view name() const = 0;
  [[nodiscard]] virtual std::unique_ptr<sasl_exchange> start() const = 0;
};

// The message a client gets for refused credentials, as Kafka words it (it names the
// mechanism, nothing else).
[[nodiscard]] std::string invalid_credentials_message(std::string_view mechanism);

}  // namespace silt::security
