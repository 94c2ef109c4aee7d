// Who a client is, as the handlers will ask it (ACLs, quotas): Kafka's KafkaPrincipal, plus the
// listener it came through and that listener's security protocol (what Kafka's authorizer is
// given as well).
//
// A connection fixes its identity (at accept for PLAINTEXT, after the TLS handshake for SSL,
// after SASL authentication for SASL_PLAINTEXT and SASL_SSL: the SASL user, whatever the
// certificate) and owns it; every request of the connection points at it
// (net::request::identity). A re-authentication keeps the principal (it must not change).
#pragma once

#include <string>

namespace silt::net {

enum class security_protocol : uint8_t { plaintext, ssl, sasl_plaintext, sasl_ssl };

[[nodiscard]] inline bool uses_tls(security_protocol p) {
  return p == security_protocol::ssl || p == security_protocol::sasl_ssl;
}
[[nodiscard]] inline bool uses_sasl(security_protocol p) {
  return p == security_protocol::sasl_plaintext || p == security_protocol::sasl_ssl;
}

[[nodiscard]] const char* to_string(security_protocol p);

struct principal {
  std::string type = "User";
  std::string name = "ANONYMOUS";  // Kafka's anonymous principal: no client certificate, no SASL
  // "User:ANONYMOUS", as Kafka prints a principal (and ACLs name it).
  [[nodiscard]] std::string to_string() const { return type + ":" + name; }
  bool operator==(const principal&) const = default;
};

struct client_identity {
  principal who;
  // The client's IP address as Kafka's authorizer compares it with ACL hosts
  // (security::kafka_host_address: "10.0.0.7", "0:0:0:0:0:0:0:1").
  std::string host;
  std::string listener = "PLAINTEXT";  // the listener's name, upper case
  security_protocol protocol = security_protocol::plaintext;
};

}  // namespace silt::net
