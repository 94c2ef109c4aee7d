// The TLS context of an SSL listener, built from Kafka's ssl.* settings with OpenSSL: the
// broker's key and certificate chain (PKCS12, a PEM file, or PEM inline as in KIP-651), the
// trust store that client certificates are checked against, ssl.client.auth, the TLS versions
// and cipher suites. Each listener has its own; tls_context_source holds the current one, which
// tls_reloader (tls_reloader.h) replaces when the files change.
//
// Errors name the setting at fault (as tls_options::key gives its name) and never quote a
// password or a key.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ssl/context.hpp>
#include <tl/expected.hpp>

namespace silt::net {

struct tls_options {
  std::string keystore_type = "PKCS12";  // PEM | PKCS12
  std::string keystore_location;
  std::string keystore_password;
  std::string key_password;
  std::string keystore_certificate_chain;  // PEM inline (with keystore_key)
  std::string keystore_key;
  std::string truststore_type = "PKCS12";  // PEM | PKCS12
  std::string truststore_location;
  std::string truststore_password;
  std::string truststore_certificates;  // PEM inline
  std::string client_auth = "none";     // none | requested | required
  std::vector<std::string> enabled_protocols = {"TLSv1.2", "TLSv1.3"};
  std::vector<std::string> cipher_suites;  // empty: OpenSSL's defaults
  // A setting's name as messages give it: "ssl.keystore.location", or the listener's
  // "listener.name.ssl.ssl.keystore.location" when it overrides it. Null: the name as it is.
  std::function<std::string(std::string_view)> key;
};

using tls_context_ptr = std::shared_ptr<boost::asio::ssl::context>;

// A server context for `o`, or what is wrong with it (a missing or unreadable file, a wrong
// password, a key that does not match its certificate, an unknown cipher suite).
[[nodiscard]] tl::expected<tls_context_ptr, std::string> make_tls_context(const tls_options& o);

// The files a context of `o` is read from (key store, trust store), to watch for changes.
[[nodiscard]] std::vector<std::string> tls_files(const tls_options& o);

// The current context of one listener: read by the accepting strand for each new connection,
// replaced by the reloader. A connection keeps the context it started with.
class tls_context_source {
 public:
  explicit tls_context_source(tls_context_ptr ctx) : ctx_(std::move(ctx)) {}
  [[nodiscard]] tls_context_ptr get() const {
    std::lock_guard lock(mu_);
    return ctx_;
  }
  void set(tls_context_ptr ctx) {
    std::lock_guard lock(mu_);
    ctx_ = std::move(ctx);
  }

 private:
  mutable std::mutex mu_;
  tls_context_ptr ctx_;  // guarded by mu_
};

}  // namespace silt::net
