// Kafka's SASL authentication of one connection, as its SaslServerAuthenticator runs it, on the
// frames the connection reads before it is authenticated (and again when it re-authenticates,
// KIP-368):
//
//   ApiVersions (any number, before the handshake)  -> answered by the request handler
//   SaslHandshake v1 (the mechanism)                -> the enabled mechanisms, or
//                                                      UNSUPPORTED_SASL_MECHANISM and close
//   SaslAuthenticate v0-2 (a client message) ...    -> the server's message; at the end the
//                                                      session's lifetime (v1+), or
//                                                      SASL_AUTHENTICATION_FAILED and close
//
// After SaslHandshake v0 the client sends its SASL messages as bare size-prefixed tokens
// instead of SaslAuthenticate requests (Kafka before 1.0, kafka-python), and gets bare tokens
// back; a failure closes the connection without an answer. Any other request before the end
// closes the connection, as Kafka does.
//
// The session is a state machine over whole frames: it neither reads nor writes (the
// connection does, net/server.cc), so that it can be tested without sockets. Not thread-safe:
// its connection's strand owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "security/sasl.h"

namespace silt::net {

// What a SASL listener offers (Kafka's sasl.* settings of the listener).
struct sasl_options {
  std::vector<std::shared_ptr<const security::sasl_mechanism>> mechanisms;  // enabled, in order
  // connections.max.reauth.ms, by mechanism name (absent or 0: sessions do not expire unless
  // their credential does).
  std::map<std::string, std::chrono::milliseconds, std::less<>> max_reauth;
  int32_t max_receive_size = 524288;            // sasl.server.max.receive.size
  std::chrono::milliseconds failed_delay{100};  // connection.failed.authentication.delay.ms
};

class sasl_session {
 public:
  enum class action : uint8_t {
    reply,          // send `frame`; read the next frame
    api_versions,   // hand this frame to the request handler and send its response
    authenticated,  // send `frame`: the client is principal() from now on
    failed,         // send `frame` (if any), wait failed_delay, close: authentication failed
    refuse,         // close at once: a frame out of place
  };
  struct step {
    action what = action::refuse;
    std::vector<uint8_t> frame;  // with its size prefix; empty: nothing to send
    std::string detail;          // failed, refuse: for the debug log
  };

  explicit sasl_session(std::shared_ptr<const sasl_options> options);

  [[nodiscard]] step on_frame(std::span<const uint8_t> frame,
                              std::chrono::system_clock::time_point now);

  // Starts a re-authentication of an authenticated session (its client sent SaslHandshake):
  // the mechanism and the principal must stay the same. False, as in Kafka, when the client
  // cannot re-authenticate (it authenticated with SaslAuthenticate v0 or bare tokens), when its
  // session does not expire, or when it started one less than a second ago: its SaslHandshake
  // is then a request like any other (ILLEGAL_SASL_STATE).
  [[nodiscard]] bool begin_reauthentication(std::chrono::steady_clock::time_point now);

  [[nodiscard]] bool authenticated() const { return state_ == state::done; }
  [[nodiscard]] const std::string& principal() const { return principal_; }
  [[nodiscard]] const std::string& mechanism() const { return mechanism_; }
  // When the session ends (the client must have re-authenticated by then); none: never.
  [[nodiscard]] std::optional<std::chrono::steady_clock::time_point> expiry() const {
    return expiry_;
  }
  [[nodiscard]] bool reauthenticating() const { return reauthenticating_; }
  [[nodiscard]] const sasl_options& options() const { return *options_; }

 private:
  enum class state : uint8_t { handshake, authenticate, tokens, done, over };
  step handshake(std::span<const uint8_t> frame, int32_t correlation_id, int16_t version,
                 size_t header_size);
  step authenticate(std::span<const uint8_t> frame, int32_t correlation_id, int16_t version,
                    size_t header_size, std::chrono::system_clock::time_point now);
  step token(std::span<const uint8_t> frame, std::chrono::system_clock::time_point now);
  // The session's lifetime from `now`, as Kafka computes it (0: none), and its expiry.
  int64_t start_session(const security::sasl_result& r, std::chrono::system_clock::time_point now);
  // Refuses a principal other than the one being re-authenticated.
  [[nodiscard]] bool same_principal(const security::sasl_result& r) const;

  std::shared_ptr<const sasl_options> options_;
  state state_ = state::handshake;
  std::unique_ptr<security::sasl_exchange> exchange_;
  std::string mechanism_;
  std::string principal_;
  std::optional<std::chrono::steady_clock::time_point> expiry_;
  bool reauthenticating_ = false;
  bool can_reauthenticate_ = false;
  std::optional<std::chrono::steady_clock::time_point> last_reauthentication_;
};

}  // namespace silt::net
