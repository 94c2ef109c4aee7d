#include "app/listener_setup.h"

#include <memory>

#include "security/jaas.h"
#include "security/oauthbearer.h"
#include "security/plain.h"
#include "security/scram.h"

namespace silt::app {

net::tls_options tls_options_of(const config::ssl_config& c) {
  net::tls_options o;
  o.keystore_type = c.keystore_type;
  o.keystore_location = c.keystore_location;
  o.keystore_password = c.keystore_password;
  o.key_password = c.key_password;
  o.keystore_certificate_chain = c.keystore_certificate_chain;
  o.keystore_key = c.keystore_key;
  o.truststore_type = c.truststore_type;
  o.truststore_location = c.truststore_location;
  o.truststore_password = c.truststore_password;
  o.truststore_certificates = c.truststore_certificates;
  o.client_auth = c.client_auth;
  o.enabled_protocols = c.enabled_protocols;
  o.cipher_suites = c.cipher_suites;
  o.key = [c](std::string_view setting) { return c.key(setting); };
  return o;
}

namespace {

// "listener.name.<listener>.<mechanism>.sasl.jaas.config", or "sasl.jaas.config" when the
// listener has none of its own.
std::string jaas_key(const config::sasl_config& c, const std::string& mechanism) {
  if (!c.mechanism_jaas_config.contains(mechanism)) return "sasl.jaas.config";
  std::string key = "listener.name." + c.listener_name + "." + mechanism + ".sasl.jaas.config";
  for (auto& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return key;
}

tl::expected<std::shared_ptr<const security::sasl_mechanism>, std::string> plain_of(
    const config::sasl_config& c) {
  const std::string key = jaas_key(c, "PLAIN");
  const auto& text = c.jaas_for("PLAIN");
  if (text.empty()) {
    return tl::unexpected("PLAIN needs its users: set " + key +
                          " (org.apache.kafka.common.security.plain.PlainLoginModule required "
                          "user_<name>=\"<password>\" ...;)");
  }
  auto entry = security::parse_jaas(text);
  if (!entry) return tl::unexpected(key + ": " + entry.error());
  if (!entry->login_module.ends_with("PlainLoginModule")) {
    return tl::unexpected(key + ": PLAIN reads its users from Kafka's PlainLoginModule, not " +
                          entry->login_module);
  }
  auto users = security::plain_mechanism::users_of(entry->options);
  if (users.empty()) {
    return tl::unexpected(key + ": the PlainLoginModule entry names no user (user_<name>=...)");
  }
  return std::make_shared<const security::plain_mechanism>(std::move(users));
}

tl::expected<std::shared_ptr<const security::sasl_mechanism>, std::string> oauthbearer_of(
    const config::oauthbearer_config& c, sasl_sources& sources) {
  auto& keys_of_url = sources.jwks[c.jwks_endpoint_url];
  if (!keys_of_url) {
    security::jwks_options o;
    o.url = c.jwks_endpoint_url;
    o.refresh_interval = std::chrono::milliseconds(c.jwks_endpoint_refresh_ms);
    o.retry_backoff = std::chrono::milliseconds(c.jwks_endpoint_retry_backoff_ms);
    o.retry_backoff_max = std::chrono::milliseconds(c.jwks_endpoint_retry_backoff_max_ms);
    auto keys = security::jwks_source::open(std::move(o));
    if (!keys) return tl::unexpected("sasl.oauthbearer.jwks.endpoint.url: " + keys.error());
    keys_of_url = std::move(*keys);
  }
  security::jwt_options t;
  t.expected_audience = c.expected_audience;
  if (!c.expected_issuer.empty()) t.expected_issuer = c.expected_issuer;
  t.sub_claim_name = c.sub_claim_name;
  t.scope_claim_name = c.scope_claim_name;
  t.clock_skew = std::chrono::seconds(c.clock_skew_seconds);
  return std::make_shared<const security::oauthbearer_mechanism>(keys_of_url, std::move(t));
}

}  // namespace

tl::expected<std::shared_ptr<const net::sasl_options>, std::string> sasl_options_of(
    const config::broker_config& cfg, const config::sasl_config& c, sasl_sources& sources) {
  auto o = std::make_shared<net::sasl_options>();
  o->max_receive_size = cfg.sasl_server_max_receive_size;
  o->failed_delay = std::chrono::milliseconds(cfg.connection_failed_authentication_delay_ms);
  for (const auto& m : c.enabled_mechanisms) {
    o->max_reauth.emplace(m, std::chrono::milliseconds(c.reauth_ms_for(m)));
    if (m == "PLAIN") {
      auto plain = plain_of(c);
      if (!plain) return tl::unexpected(plain.error());
      o->mechanisms.push_back(std::move(*plain));
      continue;
    }
    if (m == "SCRAM-SHA-256" || m == "SCRAM-SHA-512") {
      // The mechanism refers to the source, which outlives the listeners (main holds both).
      o->mechanisms.push_back(std::make_shared<const security::scram_mechanism>(
          m == "SCRAM-SHA-256" ? security::scram_algorithm::sha256
                               : security::scram_algorithm::sha512,
          *sources.scram));
      continue;
    }
    if (m == "OAUTHBEARER") {
      auto oauth = oauthbearer_of(c.oauthbearer, sources);
      if (!oauth) return tl::unexpected(oauth.error());
      o->mechanisms.push_back(std::move(*oauth));
      continue;
    }
    return tl::unexpected("SASL mechanism " + m + " is not available in this build");
  }
  return o;
}

tl::expected<std::map<std::string, net::listener_options>, std::string> listener_options_of(
    const config::broker_config& cfg, net::tls_reloader& reloader, sasl_sources& sources) {
  std::map<std::string, net::listener_options> out;
  for (const auto& l : cfg.listeners) {
    net::listener_options lo;
    lo.name = l.listener_name;
    const std::string where = "listener " + config::to_string(l) + ": ";
    const auto sasl = cfg.listener_sasl.find(l.listener_name);
    if (sasl != cfg.listener_sasl.end()) {
      auto so = sasl_options_of(cfg, sasl->second, sources);
      if (!so) return tl::unexpected(where + so.error());
      lo.sasl = std::move(*so);
      lo.protocol = net::security_protocol::sasl_plaintext;
    }
    const auto ssl = cfg.listener_ssl.find(l.listener_name);
    if (ssl == cfg.listener_ssl.end()) {
      out.emplace(l.listener_name, std::move(lo));
      continue;
    }
    lo.protocol = lo.sasl ? net::security_protocol::sasl_ssl : net::security_protocol::ssl;
    auto options = tls_options_of(ssl->second);
    auto ctx = net::make_tls_context(options);
    if (!ctx) return tl::unexpected(where + ctx.error());
    auto rules = net::principal_mapper::parse(ssl->second.principal_mapping_rules);
    if (!rules) {
      return tl::unexpected(where + ssl->second.key("ssl.principal.mapping.rules") + ": " +
                            rules.error());
    }
    lo.principal_rules = std::make_shared<const net::principal_mapper>(std::move(*rules));
    lo.tls = std::make_shared<net::tls_context_source>(std::move(*ctx));
    reloader.watch(l.listener_name, std::move(options), lo.tls);
    out.emplace(l.listener_name, std::move(lo));
  }
  return out;
}

}  // namespace silt::app
