// What each configured listener speaks, ready for net::server::listen: its security protocol;
// for SSL and SASL_SSL, its TLS context (built and checked here, at start: a missing key store, a
// wrong password or a key that does not match its certificate stops the broker with an error
// naming the setting; the reloader is told which files to watch); for SSL, its principal mapping
// rules; for SASL_PLAINTEXT and SASL_SSL, its mechanisms (PLAIN's users read from the JAAS
// config here, at start: a JAAS value that does not parse or names no user stops the broker).
#pragma once

#include <atomic>
#include <map>
#include <optional>
#include <string>

#include <tl/expected.hpp>

#include "config/config.h"
#include "net/server.h"
#include "net/tls_context.h"
#include "net/tls_reloader.h"
#include "security/jwks.h"
#include "security/scram.h"

namespace silt::app {

// net's form of a listener's ssl.* settings.
[[nodiscard]] net::tls_options tls_options_of(const config::ssl_config& c);

// Where SCRAM mechanisms look users up: the broker's credential store, which opens after the
// listeners are set up (and before any connection is accepted): set() once it is open; until
// then no user is known.
class scram_credentials_ref final : public security::scram_credential_source {
 public:
  void set(const security::scram_credential_source* target) {
    target_.store(target, std::memory_order_release);
  }
  [[nodiscard]] std::optional<security::scram_credential> find(
      std::string_view user, security::scram_algorithm a) const override {
    const auto* t = target_.load(std::memory_order_acquire);
    return t != nullptr ? t->find(user, a) : std::nullopt;
  }

 private:
  std::atomic<const security::scram_credential_source*> target_{nullptr};
};

// What the SASL mechanisms of several listeners share: the JWKS sources of OAUTHBEARER, by URL
// (each opened by the first listener that names it: its first load happens then), and the
// SCRAM credentials.
struct sasl_sources {
  std::map<std::string, std::shared_ptr<security::jwks_source>> jwks;
  std::shared_ptr<scram_credentials_ref> scram = std::make_shared<scram_credentials_ref>();
};

// The SASL mechanisms of one listener, from its effective settings.
[[nodiscard]] tl::expected<std::shared_ptr<const net::sasl_options>, std::string> sasl_options_of(
    const config::broker_config& cfg, const config::sasl_config& c, sasl_sources& sources);

// The options of every listener of `cfg`, by listener name.
[[nodiscard]] tl::expected<std::map<std::string, net::listener_options>, std::string>
listener_options_of(const config::broker_config& cfg, net::tls_reloader& reloader,
                    sasl_sources& sources);

}  // namespace silt::app
