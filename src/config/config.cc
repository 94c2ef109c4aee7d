// Broker settings: one table (name, type, default, validation, documentation) drives parsing,
// validation, DescribeConfigs on the broker and docs/configuration.md. Kafka settings that Silt
// accepts but ignores have their own table (ignored_settings.cc).
#include "config/config.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

#include "base/java_properties.h"
#include "base/log.h"
#include "base/redact.h"
#include "config/internal.h"
#include "config/topic_config.h"

namespace silt::config {
namespace {

using detail::parse_bool;
using detail::parse_int;
using detail::trim;

// Parses and stores one value; the error says what was expected ("expected an integer ...").
using setter = std::function<tl::expected<void, std::string>(broker_config&, std::string_view)>;
// The effective value as text; nullopt when there is none (an alias that was not given).
using getter = std::function<std::optional<std::string>(const broker_config&)>;

// Whether a setting's value may hold a secret, and what of it. Any but `no` makes the setting
// sensitive, as Kafka's PASSWORD settings are: DescribeConfigs answers it with a null value and
// is_sensitive=true (for every client, whatever the value), and no message quotes its value
// whole (docs/security.md, "Secrets"). A setting that can carry a secret declares it here; a
// test checks that every setting named like a secret (base::is_secret_name: *.password,
// *.key, sasl.jaas.config...) does.
enum class sensitive_value : uint8_t {
  no,
  credentials,  // a URI that may carry credentials: messages show it through base::redact_uri
  whole,        // a password, a key, a JAAS configuration: messages show "[hidden]", as Kafka
};

struct setting {
  std::string name;
  config_type type = config_type::string;
  std::string doc_default;  // the default as the docs show it; empty: none
  std::string doc;
  std::string valid;  // the valid values, for the docs ("an integer between 1 and 4096")
  setter set;
  getter get;
  sensitive_value sensitive = sensitive_value::no;
};

// `s` declared sensitive; its type becomes PASSWORD, the type Kafka gives its sensitive settings.
setting sensitive(setting s, sensitive_value what) {
  s.sensitive = what;
  s.type = config_type::password;
  return s;
}

// A value of `s` as a message may quote it.
std::string shown(const setting& s, std::string_view value) {
  switch (s.sensitive) {
    case sensitive_value::no:
      break;
    case sensitive_value::credentials:
      return base::redact_uri(value);
    case sensitive_value::whole:
      return "[hidden]";
  }
  return std::string(value);
}

constexpr int64_t kMiB = 1024 * 1024;

const broker_config& defaults() {
  static const broker_config d;
  return d;
}

std::string quote(std::string_view v) {
  return "'" + std::string(v) + "'";
}

// "an integer between lo and hi", "an integer of at least lo", with ", a multiple of m".
std::string integer_range(int64_t lo, int64_t hi, int64_t type_max, int64_t multiple) {
  std::string s = hi >= type_max
                      ? "an integer of at least " + std::to_string(lo)
                      : "an integer between " + std::to_string(lo) + " and " + std::to_string(hi);
  if (multiple > 1) s += " and a multiple of " + std::to_string(multiple);
  return s;
}

template <typename T>
constexpr config_type integer_type() {
  if constexpr (sizeof(T) <= 2) {
    return config_type::short_;
  } else if constexpr (sizeof(T) <= 4) {
    return config_type::int_;
  } else {
    return config_type::long_;
  }
}

template <typename T>
setting integer(std::string name, T broker_config::*field, int64_t lo, int64_t hi, std::string doc,
                int64_t multiple = 1) {
  constexpr auto kTypeMax = static_cast<int64_t>(
      std::min<uint64_t>(std::numeric_limits<T>::max(), std::numeric_limits<int64_t>::max()));
  if (hi > kTypeMax) hi = kTypeMax;
  std::string valid = integer_range(lo, hi, kTypeMax, multiple);
  setting s;
  s.name = std::move(name);
  s.type = integer_type<T>();
  s.doc_default = std::to_string(defaults().*field);
  s.doc = std::move(doc);
  s.valid = valid;
  s.set = [field, lo, hi, multiple, valid](broker_config& c,
                                           std::string_view v) -> tl::expected<void, std::string> {
    const auto n = parse_int(v);
    if (!n || *n < lo || *n > hi || *n % multiple != 0) {
      return tl::unexpected("expected " + valid);
    }
    c.*field = static_cast<T>(*n);
    return {};
  };
  s.get = [field](const broker_config& c) { return std::to_string(c.*field); };
  return s;
}

// A double as Java's Double.toString writes it for the values settings take: "0.5", "1.0",
// and Double.MAX_VALUE as "1.7976931348623157E308".
std::string java_double(double d) {
  std::array<char, 64> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), d);
  std::string out(buf.data(), ec == std::errc() ? end : buf.data());
  if (const auto e = out.find('e'); e != std::string::npos) {
    std::string mantissa = out.substr(0, e);
    std::string exponent = out.substr(e + 1);
    if (!exponent.empty() && exponent.front() == '+') exponent.erase(0, 1);
    if (mantissa.find('.') == std::string::npos) mantissa += ".0";
    return mantissa + "E" + exponent;
  }
  if (out.find('.') == std::string::npos) out += ".0";
  return out;
}

// A number (Java's double) from lo to hi.
setting real(std::string name, double broker_config::*field, double lo, double hi,
             std::string doc_default, std::string doc, const std::string& valid) {
  setting s;
  s.name = std::move(name);
  s.type = config_type::double_;
  s.doc_default = std::move(doc_default);
  s.doc = std::move(doc);
  s.valid = valid;
  s.set = [field, lo, hi, valid](broker_config& c,
                                 std::string_view v) -> tl::expected<void, std::string> {
    const auto d = detail::parse_double(v);
    if (!d || !(*d >= lo && *d <= hi)) return tl::unexpected("expected " + valid);
    c.*field = *d;
    return {};
  };
  s.get = [field](const broker_config& c) {
    return std::optional<std::string>(java_double(c.*field));
  };
  return s;
}

setting boolean(std::string name, bool broker_config::*field, std::string doc) {
  setting s;
  s.name = std::move(name);
  s.type = config_type::boolean;
  s.doc_default = defaults().*field ? "true" : "false";
  s.doc = std::move(doc);
  s.valid = "true or false";
  s.set = [field](broker_config& c, std::string_view v) -> tl::expected<void, std::string> {
    const auto b = parse_bool(v);
    if (!b) return tl::unexpected(std::string("expected true or false"));
    c.*field = *b;
    return {};
  };
  s.get = [field](const broker_config& c) {
    return std::optional<std::string>(c.*field ? "true" : "false");
  };
  return s;
}

// A string checked by `check` (nullptr: any string, even empty); the error is "expected <valid>".
setting text(std::string name, std::string broker_config::*field, std::string doc_default,
             std::string doc, const std::string& valid,
             const std::function<bool(std::string_view)>& check) {
  setting s;
  s.name = std::move(name);
  s.type = config_type::string;
  s.doc_default = std::move(doc_default);
  s.doc = std::move(doc);
  s.valid = valid;
  s.set = [field, valid, check](broker_config& c,
                                std::string_view v) -> tl::expected<void, std::string> {
    if (check && !check(v)) return tl::unexpected("expected " + valid);
    c.*field = std::string(v);
    return {};
  };
  s.get = [field](const broker_config& c) { return c.*field; };
  return s;
}

bool non_empty(std::string_view v) {
  return !v.empty();
}

std::function<bool(std::string_view)> one_of(std::vector<std::string> choices) {
  return [choices = std::move(choices)](std::string_view v) {
    for (const auto& c : choices) {
      if (v == c) return true;
    }
    return false;
  };
}

// An alias that stands in for another setting: checked here, applied after all values are
// read (see resolve()), present in `values` only when given.
setting alias(std::string name, config_type type, std::string doc, const std::string& valid,
              const std::function<bool(std::string_view)>& check) {
  setting s;
  s.name = std::move(name);
  s.type = type;
  s.doc = std::move(doc);
  s.valid = valid;
  s.set = [valid, check](broker_config&, std::string_view v) -> tl::expected<void, std::string> {
    if (!check(v)) return tl::unexpected("expected " + valid);
    return {};
  };
  s.get = [](const broker_config&) { return std::optional<std::string>(); };
  return s;
}

bool is_wildcard_host(std::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::";
}

// Listener names and security protocols are compared in upper case, as Kafka normalises them.
std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& ch : out) {
    if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
  }
  return out;
}

// Listener names as listener.name.<name>.* settings spell them.
std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& ch : out) {
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  return out;
}

bool is_listener_name(std::string_view name) {
  if (name.empty()) return false;
  for (const char ch : name) {
    const bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    if (!ok) return false;
  }
  return true;
}

// "NAME://host:port[,...]", names in upper case. Which names are usable (their security
// protocol, Kafka's controller listeners) is decided in resolve(), once every setting is read.
// The error says what is wrong with which item.
tl::expected<std::vector<endpoint>, std::string> parse_listeners(std::string_view v) {
  std::vector<endpoint> out;
  for (const auto& item : detail::split_list(v)) {
    const auto sep = item.find("://");
    if (sep == std::string::npos) {
      return tl::unexpected("expected NAME://host:port, got " + quote(item));
    }
    endpoint e;
    e.listener_name = upper(std::string_view(item).substr(0, sep));
    if (!is_listener_name(e.listener_name)) {
      return tl::unexpected("listener " + quote(item) +
                            ": expected a listener name of letters, digits, '_' and '-'");
    }
    std::string_view rest = std::string_view(item).substr(sep + 3);
    std::string_view port_text;
    if (!rest.empty() && rest.front() == '[') {  // [IPv6]:port
      const auto close = rest.find("]:");
      if (close == std::string_view::npos) {
        return tl::unexpected("expected [address]:port, got " + quote(item));
      }
      e.host = std::string(rest.substr(1, close - 1));
      port_text = rest.substr(close + 2);
    } else {
      const auto colon = rest.rfind(':');
      if (colon == std::string_view::npos || rest.substr(0, colon).find(':') != rest.npos) {
        return tl::unexpected("expected NAME://host:port, got " + quote(item));
      }
      e.host = std::string(rest.substr(0, colon));
      port_text = rest.substr(colon + 1);
    }
    const auto port = parse_int(port_text);
    if (!port || port_text.front() == '+' || port_text.front() == '-' || *port > 65535) {
      return tl::unexpected("listener " + quote(item) + ": expected a port between 0 and 65535");
    }
    e.port = static_cast<uint16_t>(*port);
    for (const auto& other : out) {
      if (other.listener_name == e.listener_name) {
        return tl::unexpected("listener name " + e.listener_name + " appears twice");
      }
    }
    out.push_back(std::move(e));
  }
  if (out.empty()) return tl::unexpected(std::string("expected at least one listener"));
  return out;
}

// The items of a list setting as `text` writes each, comma-separated.
template <typename Items, typename Text>
std::string join(const Items& items, Text text) {
  std::string s;
  for (const auto& i : items) {
    if (!s.empty()) s += ',';
    s += text(i);
  }
  return s;
}

std::string join(const std::vector<endpoint>& endpoints) {
  return join(endpoints, [](const endpoint& e) { return to_string(e); });
}

setting listeners_setting(std::string name, std::vector<endpoint> broker_config::*field,
                          std::string doc_default, std::string doc) {
  setting s;
  s.name = std::move(name);
  s.type = config_type::list;
  s.doc_default = std::move(doc_default);
  s.doc = std::move(doc);
  s.valid = "comma-separated NAME://host:port, each name once";
  s.set = [field](broker_config& c, std::string_view v) -> tl::expected<void, std::string> {
    auto parsed = parse_listeners(v);
    if (!parsed) return tl::unexpected(parsed.error());
    c.*field = std::move(*parsed);
    return {};
  };
  s.get = [field](const broker_config& c) { return join(c.*field); };
  return s;
}

constexpr std::string_view kSecurityProtocols[] = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT",
                                                   "SASL_SSL"};

// listener.security.protocol.map: "NAME:PROTOCOL[,...]", each name once.
tl::expected<std::vector<std::pair<std::string, std::string>>, std::string> parse_protocol_map(
    std::string_view v) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& item : detail::split_list(v)) {
    const auto colon = item.find(':');
    if (colon == std::string::npos) {
      return tl::unexpected("expected NAME:PROTOCOL, got " + quote(item));
    }
    auto name = upper(trim(std::string_view(item).substr(0, colon)));
    auto protocol = upper(trim(std::string_view(item).substr(colon + 1)));
    if (!is_listener_name(name)) {
      return tl::unexpected("expected a listener name of letters, digits, '_' and '-', got " +
                            quote(item));
    }
    if (std::find(std::begin(kSecurityProtocols), std::end(kSecurityProtocols), protocol) ==
        std::end(kSecurityProtocols)) {
      return tl::unexpected("unknown security protocol " + quote(protocol) +
                            " (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)");
    }
    for (const auto& [other, p] : out) {
      if (other == name) return tl::unexpected("listener name " + name + " appears twice");
    }
    out.emplace_back(std::move(name), std::move(protocol));
  }
  return out;
}

setting protocol_map_setting() {
  setting s;
  s.name = "listener.security.protocol.map";
  s.type = config_type::string;
  s.doc_default = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT";
  s.doc =
      "The security protocol of each listener name, as in Kafka: a listener's name says which "
      "protocol it speaks (`BROKER:PLAINTEXT` makes `BROKER://host:port` a plaintext listener). "
      "Each of PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL is served (docs/security.md).";
  s.valid = "comma-separated NAME:PROTOCOL, each name once";
  s.set = [](broker_config& c, std::string_view v) -> tl::expected<void, std::string> {
    auto parsed = parse_protocol_map(v);
    if (!parsed) return tl::unexpected(parsed.error());
    c.listener_security_protocol_map = std::move(*parsed);
    return {};
  };
  s.get = [](const broker_config& c) {
    return std::optional<std::string>(join(c.listener_security_protocol_map, [](const auto& entry) {
      return entry.first + ':' + entry.second;
    }));
  };
  return s;
}

setting controller_listener_names_setting() {
  setting s;
  s.name = "controller.listener.names";
  s.type = config_type::list;
  s.doc_default = "CONTROLLER";
  s.doc =
      "The listener names of Kafka's KRaft controller. Silt has no controller: entries of "
      "`listeners` and `advertised.listeners` with these names are dropped, with a notice on "
      "stderr.";
  s.valid = "comma-separated listener names";
  s.set = [](broker_config& c, std::string_view v) -> tl::expected<void, std::string> {
    std::vector<std::string> names;
    for (const auto& item : detail::split_list(v)) {
      names.push_back(upper(item));
      if (!is_listener_name(names.back())) {
        return tl::unexpected("expected listener names of letters, digits, '_' and '-', got " +
                              quote(item));
      }
    }
    c.controller_listener_names = std::move(names);
    return {};
  };
  s.get = [](const broker_config& c) {
    return std::optional<std::string>(
        join(c.controller_listener_names, [](const std::string& n) { return n; }));
  };
  return s;
}

bool is_base64url(std::string_view v) {
  for (const char ch : v) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
    if (!ok) return false;
  }
  return true;
}

bool is_object_store_uri(std::string_view v) {
  return (v.starts_with("file://") && v.size() > 7) || (v.starts_with("s3://") && v.size() > 5) ||
         (v.starts_with("azblob://") && v.size() > 9);
}

bool is_metrics_listener(std::string_view v) {
  return v.empty() || parse_http_endpoint(v).has_value();
}

bool is_metadata_store_uri(std::string_view v) {
  return (v.starts_with("sqlite://") && v.size() > 9) || v.starts_with("postgresql://") ||
         v.starts_with("postgres://");
}

bool is_retention_count(std::string_view v) {
  const auto n = parse_int(v);
  return n && *n >= -1 && *n <= INT32_MAX;
}

// One ssl.* setting, read into an ssl_config: the same table reads the broker-wide settings
// (into broker_config::ssl) and a listener's listener.name.<listener>.ssl.* overrides.
struct ssl_setting {
  std::string name;
  std::string doc_default;
  std::string doc;
  std::string valid;
  config_type type = config_type::string;
  sensitive_value sensitive = sensitive_value::no;
  std::function<tl::expected<void, std::string>(ssl_config&, std::string_view)> set;
  std::function<std::string(const ssl_config&)> get;
};

ssl_setting ssl_text(std::string name, std::string ssl_config::*field, std::string doc,
                     std::string valid,
                     const std::function<tl::expected<std::string, std::string>(std::string_view)>&
                         check = nullptr) {
  ssl_setting s;
  s.name = std::move(name);
  s.doc_default = ssl_config{}.*field;
  s.doc = std::move(doc);
  s.valid = std::move(valid);
  s.set = [field, check](ssl_config& c, std::string_view v) -> tl::expected<void, std::string> {
    if (!check) {
      c.*field = std::string(v);
      return {};
    }
    auto normal = check(v);
    if (!normal) return tl::unexpected(normal.error());
    c.*field = std::move(*normal);
    return {};
  };
  s.get = [field](const ssl_config& c) { return c.*field; };
  return s;
}

ssl_setting ssl_secret(std::string name, std::string ssl_config::*field, std::string doc,
                       std::string valid) {
  auto s = ssl_text(std::move(name), field, std::move(doc), std::move(valid));
  s.sensitive = sensitive_value::whole;
  s.type = config_type::password;
  return s;
}

ssl_setting ssl_list(
    std::string name, std::vector<std::string> ssl_config::*field, std::string doc,
    std::string valid,
    const std::function<tl::expected<void, std::string>(const std::string&)>& check) {
  ssl_setting s;
  s.name = std::move(name);
  s.type = config_type::list;
  s.doc_default = join(ssl_config{}.*field, [](const std::string& i) { return i; });
  s.doc = std::move(doc);
  s.valid = std::move(valid);
  s.set = [field, check](ssl_config& c, std::string_view v) -> tl::expected<void, std::string> {
    auto items = detail::split_list(v);
    for (const auto& i : items) {
      if (auto ok = check(i); !ok) return ok;
    }
    c.*field = std::move(items);
    return {};
  };
  s.get = [field](const ssl_config& c) {
    return join(c.*field, [](const std::string& i) { return i; });
  };
  return s;
}

// A store type: PEM or PKCS12, in any case. Java's own JKS format is not read.
tl::expected<std::string, std::string> store_type(std::string_view v) {
  const std::string t = upper(v);
  if (t == "PEM" || t == "PKCS12") return t;
  if (t == "JKS") {
    return tl::unexpected(std::string(
        "expected PEM or PKCS12: JKS stores are not supported (convert one with `keytool "
        "-importkeystore -srcstoretype JKS -deststoretype PKCS12`)"));
  }
  return tl::unexpected(std::string("expected PEM or PKCS12"));
}

std::vector<ssl_setting> make_ssl_settings() {
  using sc = ssl_config;
  const std::string per_listener =
      " A listener's `listener.name.<listener>.` form (the listener's name in lower case) "
      "overrides it for that listener.";
  std::vector<ssl_setting> t;
  t.push_back(ssl_text(
      "ssl.keystore.type", &sc::keystore_type,
      "The format of the key store of SSL listeners: `PKCS12` (a file, `ssl.keystore.location`, "
      "with `ssl.keystore.password`) or `PEM` (KIP-651: a file holding the private key and the "
      "certificate chain, or both inline in `ssl.keystore.key` and "
      "`ssl.keystore.certificate.chain`). Kafka's default is JKS, which Silt does not read; "
      "Java's keytool converts one to PKCS12." +
          per_listener,
      "PEM or PKCS12", store_type));
  t.push_back(ssl_text("ssl.keystore.location", &sc::keystore_location,
                       "The key store file: the broker's private key and certificate chain, "
                       "which SSL listeners present to clients. Reloaded when it changes (its "
                       "modification time is checked every few seconds): new connections use "
                       "the new certificate, open ones keep theirs." +
                           per_listener,
                       "a path"));
  t.push_back(ssl_secret("ssl.keystore.password", &sc::keystore_password,
                         "The password of the key store (PKCS12; for a PEM file, the password "
                         "of its encrypted private key when `ssl.key.password` is not set)." +
                             per_listener,
                         "any string"));
  t.push_back(ssl_secret("ssl.key.password", &sc::key_password,
                         "The password of the private key: of an encrypted PEM key (a file or "
                         "`ssl.keystore.key`), or of the key in a PKCS12 store when it differs "
                         "from the store's." +
                             per_listener,
                         "any string"));
  t.push_back(ssl_secret("ssl.keystore.certificate.chain", &sc::keystore_certificate_chain,
                         "With `ssl.keystore.type=PEM`: the certificate chain inline, in PEM "
                         "(the broker's certificate first), instead of a key store file." +
                             per_listener,
                         "PEM certificates"));
  t.push_back(ssl_secret("ssl.keystore.key", &sc::keystore_key,
                         "With `ssl.keystore.type=PEM`: the private key inline, in PEM (PKCS#8, "
                         "encrypted with `ssl.key.password` or not), with "
                         "`ssl.keystore.certificate.chain`." +
                             per_listener,
                         "a PEM private key"));
  t.push_back(ssl_text("ssl.truststore.type", &sc::truststore_type,
                       "The format of the trust store, the certificates of the authorities "
                       "whose client certificates SSL listeners accept: `PKCS12` or `PEM`." +
                           per_listener,
                       "PEM or PKCS12", store_type));
  t.push_back(
      ssl_text("ssl.truststore.location", &sc::truststore_location,
               "The trust store file. Reloaded when it changes, as the key store." + per_listener,
               "a path"));
  t.push_back(ssl_secret("ssl.truststore.password", &sc::truststore_password,
                         "The password of a PKCS12 trust store." + per_listener, "any string"));
  t.push_back(ssl_secret("ssl.truststore.certificates", &sc::truststore_certificates,
                         "With `ssl.truststore.type=PEM`: the trusted certificates inline, in "
                         "PEM, instead of a trust store file." +
                             per_listener,
                         "PEM certificates"));
  t.push_back(ssl_text(
      "ssl.client.auth", &sc::client_auth,
      "Whether SSL listeners ask clients for a certificate (mTLS): `none`; `requested` (a "
      "client may present one, which must then be valid); `required` (a client without a valid "
      "certificate is refused in the handshake). A client's principal is `User:` and its "
      "certificate's subject, mapped by `ssl.principal.mapping.rules`; without a certificate "
      "it is `User:ANONYMOUS`. `requested` and `required` need a trust store." +
          per_listener,
      "none, requested or required",
      [](std::string_view v) -> tl::expected<std::string, std::string> {
        std::string l(v);
        for (auto& ch : l) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (l == "none" || l == "requested" || l == "required") return l;
        return tl::unexpected(std::string("expected none, requested or required"));
      }));
  t.push_back(ssl_list("ssl.enabled.protocols", &sc::enabled_protocols,
                       "The TLS versions SSL listeners accept, comma-separated." + per_listener,
                       "a non-empty list of TLSv1.2 and TLSv1.3",
                       [](const std::string& p) -> tl::expected<void, std::string> {
                         if (p == "TLSv1.2" || p == "TLSv1.3") return {};
                         return tl::unexpected("unsupported TLS version " + quote(p) +
                                               " (TLSv1.2 or TLSv1.3)");
                       }));
  t.push_back(ssl_list("ssl.cipher.suites", &sc::cipher_suites,
                       "The cipher suites SSL listeners accept, comma-separated, as OpenSSL or "
                       "IANA (Java) names them (`TLS_AES_128_GCM_SHA256`, "
                       "`ECDHE-RSA-AES128-GCM-SHA256` or `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`)"
                       "; TLSv1.3 suites apply to TLSv1.3, the others to TLSv1.2. Empty: "
                       "OpenSSL's defaults, in the broker's order (TLSv1.3: "
                       "`TLS_AES_128_GCM_SHA256` first, as it costs both ends the least CPU; "
                       "ChaCha20-Poly1305 for a client that lists it first)." +
                           per_listener,
                       "comma-separated cipher suite names",
                       [](const std::string&) -> tl::expected<void, std::string> { return {}; }));
  t.push_back(ssl_text(
      "ssl.principal.mapping.rules", &sc::principal_mapping_rules,
      "How the subject of a client certificate becomes the principal's name, as in Kafka: "
      "comma-separated rules `RULE:pattern/replacement/` (optionally ending `L` or `U` for "
      "lower or upper case), tried in order on the subject in RFC 2253 form "
      "(`CN=client,OU=eng,O=Silt,C=US`), the first whose pattern matches the whole subject "
      "giving the name; `DEFAULT` keeps the subject as it is. Patterns are RE2 regular "
      "expressions (linear time); `$1`... in a replacement stand for the pattern's groups. "
      "With no rule matching, the connection is refused." +
          per_listener,
      "Kafka's rules: RULE:pattern/replacement/[LU] or DEFAULT, comma-separated"));
  return t;
}

const std::vector<ssl_setting>& ssl_settings() {
  static const std::vector<ssl_setting> table = make_ssl_settings();
  return table;
}

const ssl_setting* find_ssl_setting(std::string_view name) {
  for (const auto& s : ssl_settings()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// An ssl.* setting in the broker's table, read into broker_config::ssl.
setting broker_ssl_setting(const ssl_setting& ss) {
  setting s;
  s.name = ss.name;
  s.type = ss.type;
  s.doc_default = ss.doc_default;
  s.doc = ss.doc;
  s.valid = ss.valid;
  s.sensitive = ss.sensitive;
  s.set = [&ss](broker_config& c, std::string_view v) { return ss.set(c.ssl, v); };
  s.get = [&ss](const broker_config& c) { return std::optional<std::string>(ss.get(c.ssl)); };
  return s;
}

// SASL settings a listener may override (listener.name.<listener>.<name>), and those it may
// override per mechanism (listener.name.<listener>.<mechanism>.<name>).
constexpr std::string_view kListenerSaslSettings[] = {
    "sasl.enabled.mechanisms", "connections.max.reauth.ms", "sasl.oauthbearer.jwt.validator.class"};

// sasl.oauthbearer.jwt.validator.class: Kafka 4.1's validators that check tokens against the
// JWKS (what Silt does); Kafka's client-side one checks no signature and is refused.
tl::expected<void, std::string> check_jwt_validator(std::string_view v) {
  if (v == "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator" ||
      v == "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator") {
    return {};
  }
  return tl::unexpected(std::string(
      "expected org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator or "
      "DefaultJwtValidator (Silt checks every token against the JWKS; a validator that checks "
      "no signature is not offered)"));
}
constexpr std::string_view kMechanismSaslSettings[] = {
    "sasl.jaas.config", "connections.max.reauth.ms", "sasl.server.callback.handler.class"};
// Mechanism prefixes Kafka knows, GSSAPI's included (so that its settings are refused by name).
constexpr std::string_view kSaslMechanismPrefixes[] = {"plain", "scram-sha-256", "scram-sha-512",
                                                       "oauthbearer", "gssapi"};

// Stores one SASL setting, broker-wide (`mechanism` empty) or for one mechanism, in `c`.
tl::expected<void, std::string> set_sasl(sasl_config& c, std::string_view name,
                                         const std::string& mechanism, std::string_view v) {
  if (name == "sasl.enabled.mechanisms") {
    auto items = detail::split_list(v);
    for (auto& i : items) i = upper(i);
    c.enabled_mechanisms = std::move(items);
  } else if (name == "sasl.jaas.config") {
    if (mechanism.empty()) {
      c.jaas_config = std::string(v);
    } else {
      c.mechanism_jaas_config[mechanism] = std::string(v);
    }
  } else if (name == "connections.max.reauth.ms") {
    const auto n = parse_int(v);
    if (!n || *n < 0) return tl::unexpected(std::string("expected an integer of at least 0"));
    if (mechanism.empty()) {
      c.connections_max_reauth_ms = *n;
    } else {
      c.mechanism_reauth_ms[mechanism] = *n;
    }
  } else if (name == "sasl.server.callback.handler.class") {
    c.callback_handler_class[mechanism] = std::string(v);
  } else if (name == "sasl.oauthbearer.jwt.validator.class") {
    return check_jwt_validator(v);
  }
  return {};
}

setting broker_sasl_setting(std::string name, config_type type, std::string doc_default,
                            std::string doc, std::string valid,
                            std::function<std::string(const sasl_config&)> get) {
  setting s;
  s.name = std::move(name);
  s.type = type;
  s.doc_default = std::move(doc_default);
  s.doc = std::move(doc);
  s.valid = std::move(valid);
  s.set = [n = s.name](broker_config& c, std::string_view v) { return set_sasl(c.sasl, n, "", v); };
  s.get = [get = std::move(get)](const broker_config& c) {
    return std::optional<std::string>(get(c.sasl));
  };
  return s;
}

void add_sasl_settings(std::vector<setting>& t) {
  using bc = broker_config;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  t.push_back(broker_sasl_setting(
      "sasl.enabled.mechanisms", config_type::list, "GSSAPI",
      "The SASL mechanisms SASL_PLAINTEXT and SASL_SSL listeners offer, as in Kafka (override "
      "for one listener with `listener.name.<listener>.sasl.enabled.mechanisms`): PLAIN, "
      "SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER. Kafka's default, GSSAPI (Kerberos), is not "
      "served: a SASL listener must name others (docs/security.md).",
      "comma-separated mechanism names", [](const sasl_config& c) {
        return join(c.enabled_mechanisms, [](const std::string& i) { return i; });
      }));
  t.push_back(sensitive(
      broker_sasl_setting(
          "sasl.jaas.config", config_type::password, "",
          "A JAAS login module entry, as in Kafka; for brokers it is usually given per "
          "listener and mechanism (`listener.name.<listener>.<mechanism>.sasl.jaas.config`), "
          "which wins over this one. PLAIN's users come from "
          "`org.apache.kafka.common.security.plain.PlainLoginModule required "
          "user_<name>=\"<password>\" ...;`; SCRAM and OAUTHBEARER need none.",
          "a JAAS entry: <class> required [key=\"value\" ...];",
          [](const sasl_config& c) { return c.jaas_config; }),
      sensitive_value::whole));
  t.push_back(broker_sasl_setting(
      "connections.max.reauth.ms", config_type::long_, "0",
      "As in Kafka (KIP-368): a SASL session lasts at most this long (and never past its "
      "token's expiry); the client re-authenticates on the same connection before then, or the "
      "broker closes the connection at its next request. 0: sessions do not expire (except "
      "with an expiring token). Per listener: `listener.name.<listener>.<mechanism>."
      "connections.max.reauth.ms`.",
      "an integer of at least 0",
      [](const sasl_config& c) { return std::to_string(c.connections_max_reauth_ms); }));
  t.push_back(broker_sasl_setting(
      "sasl.server.callback.handler.class", config_type::string, "",
      "As in Kafka, per listener and mechanism "
      "(`listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class`): only "
      "Kafka's JWT validator, `org.apache.kafka.common.security.oauthbearer."
      "OAuthBearerValidatorCallbackHandler`, is understood (Silt validates tokens itself, with "
      "the `sasl.oauthbearer.*` settings); any other class stops the broker with an error.",
      "Kafka's OAuthBearerValidatorCallbackHandler class name", [](const sasl_config& c) {
        const auto it = c.callback_handler_class.find("");
        return it == c.callback_handler_class.end() ? std::string() : it->second;
      }));
  t.push_back(text(
      "authorizer.class.name", &bc::authorizer_class_name, "",
      "As in Kafka: empty, no authorization (every client may do everything); Kafka's "
      "`org.apache.kafka.metadata.authorizer.StandardAuthorizer` turns ACLs on: each request "
      "is checked as Kafka checks it, against the ACLs of `kafka-acls.sh` (kept in the "
      "metadata store, shared by a cluster's brokers), `super.users` and "
      "`allow.everyone.if.no.acl.found` (docs/security.md).",
      "empty or org.apache.kafka.metadata.authorizer.StandardAuthorizer", [](std::string_view v) {
        return v.empty() || v == "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
      }));
  t.push_back(text("super.users", &bc::super_users, "",
                   "As in Kafka: principals allowed everything whatever the ACLs, separated by "
                   "`;` (`User:admin;User:CN=broker,O=Silt`).",
                   "';'-separated Type:name principals", [](std::string_view v) {
                     for (size_t start = 0; start <= v.size();) {
                       const size_t end = std::min(v.find(';', start), v.size());
                       const auto item = detail::trim(v.substr(start, end - start));
                       if (!item.empty() && item.find(':') == std::string_view::npos) {
                         return false;
                       }
                       start = end + 1;
                     }
                     return true;
                   }));
  t.push_back(boolean("allow.everyone.if.no.acl.found", &bc::allow_everyone_if_no_acl_found,
                      "As in Kafka: with an authorizer, whether a resource no ACL applies to "
                      "is open to everyone (true) or to super users only (false)."));
  {
    setting s;
    s.name = "sasl.oauthbearer.jwt.validator.class";
    s.doc_default = "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator";
    s.doc =
        "Kafka 4.1's choice of JWT validator for OAUTHBEARER, also per listener "
        "(`listener.name.<listener>.sasl.oauthbearer.jwt.validator.class`): Silt always checks "
        "tokens against the JWKS, as Kafka's `BrokerJwtValidator` does, and accepts that class "
        "and the default; `ClientJwtValidator`, which checks no signature, is refused.";
    s.valid = "BrokerJwtValidator or DefaultJwtValidator (full class names)";
    s.set = [](broker_config& c, std::string_view v) -> tl::expected<void, std::string> {
      if (auto ok = check_jwt_validator(v); !ok) return ok;
      c.oauthbearer.jwt_validator_class = std::string(v);
      return {};
    };
    s.get = [](const broker_config& c) { return c.oauthbearer.jwt_validator_class; };
    t.push_back(std::move(s));
  }
  t.push_back(integer("quota.window.num", &bc::quota_window_num, 1, INT32_MAX,
                      "As in Kafka: the number of windows a client's rate is measured over for "
                      "its quotas (`kafka-configs.sh --entity-type users/clients`, "
                      "docs/security.md), the current one included."));
  t.push_back(integer("quota.window.size.seconds", &bc::quota_window_size_seconds, 1, INT32_MAX,
                      "As in Kafka: the length of each of those windows, in seconds."));
  t.push_back(integer("sasl.server.max.receive.size", &bc::sasl_server_max_receive_size, 1,
                      INT32_MAX,
                      "As in Kafka: the largest request a SASL connection may send before it "
                      "has authenticated; a larger one closes the connection."));
  t.push_back(integer("connection.failed.authentication.delay.ms",
                      &bc::connection_failed_authentication_delay_ms, 0, kMax,
                      "As in Kafka: how long the broker waits, after answering a failed "
                      "authentication, before it closes the connection (it slows down "
                      "password guessing)."));
  auto oauth_text = [&t](std::string name, std::string oauthbearer_config::*field,
                         std::string doc) {
    setting s;
    s.name = std::move(name);
    s.doc_default = oauthbearer_config{}.*field;
    s.doc = std::move(doc);
    s.valid = "a string";
    s.set = [field](broker_config& c, std::string_view v) -> tl::expected<void, std::string> {
      c.oauthbearer.*field = std::string(v);
      return {};
    };
    s.get = [field](const broker_config& c) { return c.oauthbearer.*field; };
    t.push_back(std::move(s));
  };
  auto oauth_int = [&t](std::string name, auto oauthbearer_config::*field, int64_t lo,
                        std::string doc) {
    setting s;
    s.name = std::move(name);
    s.type = config_type::long_;
    s.doc_default = std::to_string(oauthbearer_config{}.*field);
    s.doc = std::move(doc);
    s.valid = integer_range(lo, kMax, kMax, 1);
    s.set = [field, lo, valid = s.valid](broker_config& c,
                                         std::string_view v) -> tl::expected<void, std::string> {
      const auto n = parse_int(v);
      using field_type = std::remove_reference_t<decltype(c.oauthbearer.*field)>;
      if (!n || *n < lo || *n > std::numeric_limits<field_type>::max()) {
        return tl::unexpected("expected " + valid);
      }
      c.oauthbearer.*field = static_cast<field_type>(*n);
      return {};
    };
    s.get = [field](const broker_config& c) { return std::to_string(c.oauthbearer.*field); };
    t.push_back(std::move(s));
  };
  oauth_text("sasl.oauthbearer.jwks.endpoint.url", &oauthbearer_config::jwks_endpoint_url,
             "As in Kafka: where the keys that sign OAUTHBEARER tokens come from, a JWKS "
             "document at an https:// or http:// URL, or a file (a path or file:// URL). "
             "Required when OAUTHBEARER is enabled.");
  oauth_int("sasl.oauthbearer.jwks.endpoint.refresh.ms",
            &oauthbearer_config::jwks_endpoint_refresh_ms, 1,
            "As in Kafka: how often the JWKS is read again.");
  oauth_int("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
            &oauthbearer_config::jwks_endpoint_retry_backoff_ms, 0,
            "As in Kafka: the first wait before a failed JWKS read is tried again (then "
            "doubled), and the least time between two reads prompted by tokens of unknown "
            "keys.");
  oauth_int("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
            &oauthbearer_config::jwks_endpoint_retry_backoff_max_ms, 0,
            "As in Kafka: the longest wait between tries of a failing JWKS read.");
  {
    setting s;
    s.name = "sasl.oauthbearer.expected.audience";
    s.type = config_type::list;
    s.doc = "As in Kafka: a token's `aud` must name one of these (empty: `aud` is not checked).";
    s.valid = "comma-separated audiences";
    s.set = [](broker_config& c, std::string_view v) -> tl::expected<void, std::string> {
      c.oauthbearer.expected_audience = detail::split_list(v);
      return {};
    };
    s.get = [](const broker_config& c) {
      return std::optional<std::string>(
          join(c.oauthbearer.expected_audience, [](const std::string& i) { return i; }));
    };
    t.push_back(std::move(s));
  }
  oauth_text("sasl.oauthbearer.expected.issuer", &oauthbearer_config::expected_issuer,
             "As in Kafka: a token's `iss` must be this (empty: `iss` is not checked).");
  oauth_text("sasl.oauthbearer.sub.claim.name", &oauthbearer_config::sub_claim_name,
             "As in Kafka: the claim that names the principal.");
  oauth_text("sasl.oauthbearer.scope.claim.name", &oauthbearer_config::scope_claim_name,
             "As in Kafka: the claim that holds the token's scope.");
  oauth_int("sasl.oauthbearer.clock.skew.seconds", &oauthbearer_config::clock_skew_seconds, 0,
            "As in Kafka: how far the token issuer's clock may differ from the broker's when "
            "`exp`, `nbf` and `iat` are checked.");
}

std::vector<setting> make_settings() {
  using bc = broker_config;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<setting> t;
  // Network
  t.push_back(listeners_setting(
      "listeners", &bc::listeners, "PLAINTEXT://localhost:9092",
      "Where the broker accepts connections, as comma-separated `NAME://host:port`. An empty "
      "host means all interfaces; port 0 asks the system for a free port. The name's protocol "
      "(`listener.security.protocol.map`) says what it speaks: PLAINTEXT, SSL (TLS, set up by the "
      "`ssl.*` settings), SASL_PLAINTEXT or SASL_SSL (SASL, set up by the `sasl.*` settings; "
      "docs/security.md). "
      "Listeners named in `controller.listener.names` are dropped with a notice."));
  t.push_back(listeners_setting(
      "advertised.listeners", &bc::advertised_listeners, "`listeners`",
      "What the broker tells clients to connect to (Metadata responses). Defaults to "
      "`listeners`, with an empty, `0.0.0.0` or `::` host replaced by `localhost`; set it when "
      "clients reach the broker under another name. Every name must also be in `listeners`; "
      "controller listeners are dropped here too."));
  t.push_back(controller_listener_names_setting());
  t.push_back(protocol_map_setting());
  for (const auto& ss : ssl_settings()) t.push_back(broker_ssl_setting(ss));
  add_sasl_settings(t);
  t.push_back(integer("node.id", &bc::node_id, 0, INT32_MAX, "The id of this broker."));
  t.push_back(alias("broker.id", config_type::int_,
                    "Kafka's older name for `node.id`: stands in for it when `node.id` is not "
                    "given; given both, they must be equal.",
                    "an integer of at least 0", [](std::string_view v) {
                      const auto n = parse_int(v);
                      return n && *n >= 0 && *n <= INT32_MAX;
                    }));
  t.push_back(text("cluster.id", &bc::cluster_id, "",
                   "The cluster id. Empty: the broker generates one on first start and stores it "
                   "in the metadata store; a given id must match the stored one.",
                   "letters, digits, '-' and '_'", is_base64url));
  t.push_back(text("broker.rack", &bc::broker_rack, "",
                   "The rack (zone) of this broker, registered with it and listed in Metadata "
                   "and DescribeCluster. Empty: none.",
                   "any string", nullptr));
  t.push_back(text("replica.selector.class", &bc::replica_selector_class, "",
                   "Reads near the client (KIP-392): with Kafka's "
                   "org.apache.kafka.common.replica.RackAwareReplicaSelector, a consumer that "
                   "sets client.rack is sent, for data that left the log cache, to a broker of "
                   "its rack, which reads it from the object store; each partition then lists "
                   "as replicas its leader and, in every other rack, the broker serving it "
                   "there. Empty: the leader serves every read.",
                   "empty or org.apache.kafka.common.replica.RackAwareReplicaSelector",
                   [](std::string_view v) { return v.empty() || v == rack_aware_selector; }));
  t.push_back(integer("broker.heartbeat.interval.ms", &bc::broker_heartbeat_interval_ms, 10, kMax,
                      "Every this many milliseconds the broker renews its membership lease in the "
                      "metadata store, and takes in the topics other brokers sharing it created, "
                      "changed or deleted."));
  t.push_back(integer("broker.session.timeout.ms", &bc::broker_session_timeout_ms, 100, kMax,
                      "A broker's membership lease lasts this many milliseconds from its last "
                      "renewal; once it lapsed, the broker acknowledges, commits and trims "
                      "nothing until it registered again. Must be above "
                      "`broker.heartbeat.interval.ms`."));
  t.push_back(integer("num.network.threads", &bc::num_network_threads, 1, 1024,
                      "Threads that read requests from and write responses to the sockets."));
  t.push_back(integer("num.io.threads", &bc::num_io_threads, 1, 1024,
                      "Threads for blocking work such as object store reads of cold data."));
  t.push_back(integer("latency.threads.nice", &bc::latency_threads_nice, -20, 19,
                      "The nice value of the threads that an acknowledgement waits for: the "
                      "network threads and the WAL's threads (uploads, compaction, cold reads "
                      "and metadata work keep the process's). Lower runs sooner when the CPUs "
                      "are busy, for instance beside clients on the same machine. A value below "
                      "the process's needs root, CAP_SYS_NICE or a high enough RLIMIT_NICE; "
                      "without them these threads keep the process's value and the broker logs "
                      "a warning at start. 0: the process's value."));
  t.push_back(integer("socket.request.max.bytes", &bc::socket_request_max_bytes, 1024, INT32_MAX,
                      "The largest request the broker accepts, in bytes; a bigger one closes the "
                      "connection."));
  t.push_back(integer("queued.max.request.bytes", &bc::queued_max_request_bytes, 1024, kMax,
                      "Bytes of requests read but not yet answered, over all connections; above "
                      "it the broker stops reading. At least `socket.request.max.bytes`."));
  t.push_back(integer("queued.max.response.bytes", &bc::queued_max_response_bytes, 1024, kMax,
                      "Bytes of responses handled but not yet written, over all connections. A "
                      "connection with unsent responses reads no further request while its own "
                      "exceed a sixteenth of this, or everyone's exceed all of it: a client that "
                      "does not read its responses stops being read. Silt's own setting."));
  t.push_back(integer("connections.max.inflight.requests", &bc::max_inflight_requests, 1, 65536,
                      "Requests of one connection being handled at once; responses still go out "
                      "in request order."));
  t.push_back(integer("connections.max.idle.ms", &bc::connections_max_idle_ms, -1, kMax,
                      "Idle connections are closed after this many milliseconds; -1: never."));
  t.push_back(integer("max.connections", &bc::max_connections, 1, INT32_MAX,
                      "Open client connections at most; more are refused."));
  t.push_back(integer("max.connections.per.ip", &bc::max_connections_per_ip, 0, INT32_MAX,
                      "Open connections from one IP address at most, as in Kafka: a connection "
                      "beyond it is closed at once (0: none, except from the addresses of "
                      "`max.connections.per.ip.overrides`)."));
  t.push_back(text("max.connections.per.ip.overrides", &bc::max_connections_per_ip_overrides, "",
                   "Other limits for some addresses, as in Kafka: `host:count[,...]`, each host "
                   "an IP address or a name (resolved at start, every address it has).",
                   "host:count[,host:count...]",
                   [](std::string_view v) { return parse_ip_overrides(v).has_value(); }));
  t.push_back(integer("metrics.log.interval.ms", &bc::metrics_log_interval_ms, 0, kMax,
                      "Every this many milliseconds the broker logs, per API, the requests of "
                      "the interval with their latency percentiles (total, handling, response "
                      "queue, send); 0: only at shutdown and on SIGUSR1, for the time since the "
                      "previous report."));
  t.push_back(text("log.level", &bc::log_level, "info",
                   "What the broker logs on stderr: `error`, `warn` (and errors), `info` (and "
                   "warnings: starts, stops, ownership and membership changes) or `debug`.",
                   "error, warn, info or debug", one_of({"error", "warn", "info", "debug"})));
  t.push_back(text("metrics.listener", &bc::metrics_listener, "",
                   "Where the broker serves its metrics in Prometheus text format, as "
                   "`http://host:port/path` (e.g. `http://127.0.0.1:9644/metrics`; an empty "
                   "host means all interfaces, port 0 a free port, no path `/metrics`), or "
                   "`https://...` for HTTPS with the broker-wide `ssl.*` settings (key store, "
                   "versions, cipher suites; `ssl.client.auth` asks scrapers for a "
                   "certificate). Empty: no endpoint. The metrics are listed in "
                   "docs/operations.md.",
                   "empty or http[s]://host:port[/path]", is_metrics_listener));
  // Storage
  t.push_back(text("data.dir", &bc::data_dir, "./data",
                   "The directory of the broker's own files: the WAL, the metadata store and "
                   "(with the default object store) the objects. Created if missing.",
                   "a non-empty path", non_empty));
  t.push_back(alias("log.dirs", config_type::string,
                    "Kafka's data directories: the first one stands in for `data.dir` when that "
                    "is not given (Silt keeps its files in one directory; a notice names the "
                    "others).",
                    "a comma-separated list of directories",
                    [](std::string_view v) { return !detail::split_list(v).empty(); }));
  t.push_back(alias("log.dir", config_type::string,
                    "Kafka's single data directory: stands in for `data.dir` when neither that "
                    "nor `log.dirs` is given.",
                    "a non-empty path", non_empty));
  t.push_back(text("wal.type", &bc::wal_type, "file",
                   "Where the write-ahead log is: `file`, a ring on a local file or block device "
                   "(`wal.path`); `object`, objects in the object store (no local disk at all; "
                   "a produce is acknowledged once its object is stored, tens of milliseconds "
                   "on S3). Format: docs/formats/wal-object.md.",
                   "file or object", one_of({"file", "object"})));
  t.push_back(integer("wal.object.flush.interval.ms", &bc::wal_object_flush_interval_ms, 1, 60000,
                      "With `wal.type=object`: appends wait at most this long to be grouped "
                      "into one WAL object."));
  t.push_back(integer("wal.object.flush.bytes", &bc::wal_object_flush_bytes, 1, 1ull << 30,
                      "With `wal.type=object`: a WAL object is written as soon as this many "
                      "bytes wait, without waiting for `wal.object.flush.interval.ms`."));
  t.push_back(text("wal.path", &bc::wal_path, "`<data.dir>/wal`",
                   "The write-ahead log: a file (created with `wal.capacity.bytes`) or a block "
                   "device.",
                   "a non-empty path", non_empty));
  t.push_back(integer("wal.capacity.bytes", &bc::wal_capacity_bytes, 4 * kMiB, kMax,
                      "The size of the WAL ring when it is created, in bytes. An existing WAL "
                      "keeps its size.",
                      4096));
  t.push_back(integer("wal.iodepth", &bc::wal_iodepth, 1, 4096, "WAL writes in flight at most."));
  t.push_back(integer("wal.iops", &bc::wal_iops, 0, UINT32_MAX,
                      "WAL writes per second at most; 0: no cap."));
  t.push_back(integer("wal.commit.delay.us", &bc::wal_commit_delay_us, 0, 100000,
                      "Group commit across requests: while the WAL's appends are small (under "
                      "24 KiB on average), a write waits up to this many microseconds after its "
                      "first append for more appends to share it (up to 256 KiB); while they "
                      "are bigger, up to 300 microseconds (or this, if less) for the first "
                      "append of the next request. The acknowledgements wait with it; waits "
                      "are kept as long as they gather appends of later requests at least half "
                      "the time; 0: written at once."));
  t.push_back(text("wal.sync", &bc::wal_sync, "dsync",
                   "How WAL writes become durable: `dsync` opens the WAL with O_DSYNC, "
                   "`fdatasync` calls fdatasync after each group of writes.",
                   "dsync or fdatasync", one_of({"dsync", "fdatasync"})));
  t.push_back(text("wal.io.engine", &bc::wal_io_engine, "threads",
                   "Who issues WAL writes: `threads`, writer threads (`wal.iodepth` of them, at "
                   "most 16) that each write with pwrite and wait for the write and its flush "
                   "themselves; `uring`, one thread through io_uring, where the flush of an "
                   "O_DSYNC write runs in a kernel worker that waits behind busy threads.",
                   "threads or uring", one_of({"threads", "uring"})));
  t.push_back(
      sensitive(text("object.store.uri", &bc::object_store_uri, "`file://<data.dir>/objects`",
                     "Where the data lives: `file:///path` (a local directory; "
                     "`?direct=false` writes objects through the page cache, which keeps them "
                     "there for consumers catching up, at some more CPU), "
                     "`s3://bucket?endpoint=http://host:port&region=...&path_style=true` or "
                     "`azblob://container?account=NAME&endpoint=URL` (key from `key=` or "
                     "AZURE_STORAGE_KEY, or a SAS token from `sas=` or AZURE_STORAGE_SAS_TOKEN). "
                     "The default is an absolute path under `data.dir`.",
                     "a file://, s3:// or azblob:// URI", is_object_store_uri),
                sensitive_value::credentials));
  t.push_back(sensitive(
      text("metadata.store.uri", &bc::metadata_store_uri, "`sqlite://<data.dir>/metadata.db`",
           "The metadata store: topics, configs, the stream catalog, stream ownership "
           "and producer state. `sqlite:///path/metadata.db` (embedded, the default) or "
           "`postgresql://user:password@host:port/dbname` (shared by the brokers of a "
           "cluster). The broker creates and migrates the schema.",
           "a sqlite:// or postgresql:// URI", is_metadata_store_uri),
      sensitive_value::credentials));
  t.push_back(text("metadata.path", &bc::metadata_path, "`<data.dir>/metadata.db`",
                   "The SQLite file of the metadata store: the same as "
                   "`metadata.store.uri=sqlite://PATH`.",
                   "a non-empty path", non_empty));
  t.push_back(integer("log.cache.bytes", &bc::log_cache_bytes, kMiB, kMax,
                      "Memory for recent record batches (not yet uploaded, or tailing reads)."));
  t.push_back(integer("block.cache.bytes", &bc::block_cache_bytes, kMiB, kMax,
                      "Memory for blocks read from objects (cold reads)."));
  t.push_back(integer("upload.interval.ms", &bc::upload_interval_ms, 1, kMax,
                      "The WAL's data is uploaded to the object store at least this often."));
  t.push_back(integer("upload.threshold.bytes", &bc::upload_threshold_bytes, 1, kMax,
                      "Upload as soon as this many bytes wait in the WAL. Less than "
                      "`wal.capacity.bytes`; unless set, at most a quarter of it."));
  t.push_back(integer("compaction.interval.ms", &bc::compaction_interval_ms, 1, kMax,
                      "How often small objects are merged into bigger ones."));
  t.push_back(integer("log.retention.check.interval.ms", &bc::retention_check_interval_ms, 1, kMax,
                      "How often data past its retention is deleted."));
  t.push_back(integer("object.sweep.interval.ms", &bc::object_sweep_interval_ms, 1, kMax,
                      "How often objects that were written but never committed to the catalog "
                      "(a lost PUT reply, a failed commit, a crash between the two) are looked "
                      "for under `objects/` in the object store."));
  t.push_back(integer("object.sweep.grace.ms", &bc::object_sweep_grace_ms, 0, kMax,
                      "Such an object is deleted once its upload began at least this long "
                      "ago. Keys outside `objects/` are never touched."));
  // Topics
  t.push_back(integer("num.partitions", &bc::num_partitions, 1, INT32_MAX,
                      "Partitions of a topic created without a partition count (including "
                      "auto-created topics)."));
  t.push_back(integer("default.replication.factor", &bc::default_replication_factor, 1, INT16_MAX,
                      "Replication factor of topics created without one. Accepted for "
                      "compatibility: data is replicated by the object store, not by brokers."));
  t.push_back(boolean("auto.create.topics.enable", &bc::auto_create_topics_enable,
                      "Create a topic when a client asks for metadata of one that does not "
                      "exist (if the request allows it)."));
  t.push_back(boolean("delete.topic.enable", &bc::delete_topic_enable,
                      "Allow DeleteTopics; when false it fails with TOPIC_DELETION_DISABLED."));
  // Log compaction
  t.push_back(boolean("log.cleaner.enable", &bc::log_cleaner_enable,
                      "Run the log cleaner, which compacts topics whose `cleanup.policy` has "
                      "`compact`. When false, such topics keep every record."));
  t.push_back(integer("log.cleaner.threads", &bc::log_cleaner_threads, 1, 64,
                      "Threads of the log cleaner: streams cleaned at once."));
  t.push_back(integer("log.cleaner.dedupe.buffer.size", &bc::log_cleaner_dedupe_buffer_size,
                      1 << 20, kMax,
                      "Memory of the cleaner's key maps, shared by its threads: 24 bytes a key. "
                      "A pass whose keys do not fit cleans what they cover; the next goes on."));
  t.push_back(real("log.cleaner.io.buffer.load.factor", &bc::log_cleaner_io_buffer_load_factor, 0.1,
                   0.95, "0.9", "How full the key map may get.", "a number from 0.1 to 0.95"));
  t.push_back(real("log.cleaner.io.max.bytes.per.second", &bc::log_cleaner_io_max_bytes_per_second,
                   1, 1.7976931348623157e308, "1.7976931348623157E308",
                   "Bytes a second the cleaner reads and writes, all threads together.",
                   "a number of at least 1"));
  t.push_back(integer("log.cleaner.backoff.ms", &bc::log_cleaner_backoff_ms, 0, kMax,
                      "How long the cleaner sleeps when no stream needs cleaning."));
  t.push_back(real("log.cleaner.min.cleanable.ratio", &bc::log_cleaner_min_cleanable_ratio, 0, 1,
                   "0.5", "Default of the topic config `min.cleanable.dirty.ratio`.",
                   "a number from 0 to 1"));
  t.push_back(integer("log.cleaner.min.compaction.lag.ms", &bc::log_cleaner_min_compaction_lag_ms,
                      0, kMax, "Default of the topic config `min.compaction.lag.ms`."));
  t.push_back(integer("log.cleaner.max.compaction.lag.ms", &bc::log_cleaner_max_compaction_lag_ms,
                      1, kMax, "Default of the topic config `max.compaction.lag.ms`."));
  t.push_back(integer("log.cleaner.delete.retention.ms", &bc::log_cleaner_delete_retention_ms, 0,
                      kMax, "Default of the topic config `delete.retention.ms`."));
  t.push_back(integer("log.retention.ms", &bc::log_retention_ms, -1, kMax,
                      "How long data is kept, in milliseconds; -1: forever. Topic config "
                      "`retention.ms` overrides it. Takes precedence over "
                      "`log.retention.minutes` and `log.retention.hours`."));
  t.push_back(alias("log.retention.minutes", config_type::int_,
                    "`log.retention.ms` in minutes, used when `log.retention.ms` is not given; "
                    "-1: forever.",
                    "an integer of at least -1", is_retention_count));
  t.push_back(alias("log.retention.hours", config_type::int_,
                    "`log.retention.ms` in hours, used when neither `log.retention.ms` nor "
                    "`log.retention.minutes` is given; -1: forever.",
                    "an integer of at least -1", is_retention_count));
  t.push_back(integer("log.retention.bytes", &bc::log_retention_bytes, -1, kMax,
                      "Bytes kept per partition at most; -1: no limit. Topic config "
                      "`retention.bytes` overrides it."));
  t.push_back(integer("message.max.bytes", &bc::message_max_bytes, 0, INT32_MAX,
                      "The largest record batch a producer may send, in bytes. Topic config "
                      "`max.message.bytes` overrides it."));
  {
    setting s;
    s.name = "log.message.timestamp.type";
    s.doc_default = "CreateTime";
    s.doc =
        "Which timestamp records keep: the producer's (`CreateTime`) or the broker's at "
        "append (`LogAppendTime`). Topic config `message.timestamp.type` overrides it.";
    s.valid = "CreateTime or LogAppendTime";
    s.set = [](broker_config& c, std::string_view v) -> tl::expected<void, std::string> {
      if (v == "CreateTime") {
        c.log_message_timestamp_type = timestamp_type::create_time;
      } else if (v == "LogAppendTime") {
        c.log_message_timestamp_type = timestamp_type::log_append_time;
      } else {
        return tl::unexpected(std::string("expected CreateTime or LogAppendTime"));
      }
      return {};
    };
    s.get = [](const broker_config& c) {
      return std::optional<std::string>(c.log_message_timestamp_type == timestamp_type::create_time
                                            ? "CreateTime"
                                            : "LogAppendTime");
    };
    t.push_back(std::move(s));
  }
  t.push_back(integer("log.message.timestamp.before.max.ms",
                      &bc::log_message_timestamp_before_max_ms, 0, kMax,
                      "With CreateTime, a batch whose timestamp is more than this many "
                      "milliseconds in the past is refused. Topic config "
                      "`message.timestamp.before.max.ms` overrides it."));
  t.push_back(integer("log.message.timestamp.after.max.ms", &bc::log_message_timestamp_after_max_ms,
                      0, kMax,
                      "With CreateTime, a batch whose timestamp is more than this many "
                      "milliseconds in the future is refused. Topic config "
                      "`message.timestamp.after.max.ms` overrides it."));
  t.push_back(integer("min.insync.replicas", &bc::min_insync_replicas, 1, INT32_MAX,
                      "Replicas that must have a write for acks=all to succeed. Topic config "
                      "`min.insync.replicas` overrides it."));
  // Producers and fetch sessions
  t.push_back(integer("producer.id.expiration.ms", &bc::producer_id_expiration_ms, 1, kMax,
                      "Idempotent producer state is forgotten after this many milliseconds "
                      "without a write from that producer."));
  t.push_back(integer("max.incremental.fetch.session.cache.slots",
                      &bc::max_incremental_fetch_session_cache_slots, 0, INT32_MAX,
                      "Incremental fetch sessions kept at most; 0 disables them."));
  // Groups
  t.push_back(integer("group.initial.rebalance.delay.ms", &bc::group_initial_rebalance_delay_ms, 0,
                      INT32_MAX,
                      "How long the group coordinator waits for more members to join a new "
                      "(empty) classic consumer group before its first rebalance."));
  t.push_back(integer("group.min.session.timeout.ms", &bc::group_min_session_timeout_ms, 0,
                      INT32_MAX, "The shortest session timeout a group member may ask for."));
  t.push_back(integer("group.max.session.timeout.ms", &bc::group_max_session_timeout_ms, 0,
                      INT32_MAX, "The longest session timeout a group member may ask for."));
  t.push_back(integer("group.max.size", &bc::group_max_size, 1, INT32_MAX,
                      "Members a classic group may have at most."));
  t.push_back(integer("offsets.topic.num.partitions", &bc::offsets_topic_num_partitions, 1,
                      INT32_MAX,
                      "Coordinator shards: a group belongs to the shard of its id's hash (the "
                      "partition of `__consumer_offsets` Kafka would give it). Shards are the "
                      "unit a cluster spreads coordinators by; keep it fixed once groups exist."));
  t.push_back(integer("offsets.retention.minutes", &bc::offsets_retention_minutes, 1, kMax / 60000,
                      "The committed offsets of a group that has had no members for this long "
                      "are deleted."));
  t.push_back(integer("offsets.retention.check.interval.ms",
                      &bc::offsets_retention_check_interval_ms, 1, kMax,
                      "How often expired committed offsets are looked for."));
  t.push_back(integer("offset.metadata.max.bytes", &bc::offset_metadata_max_bytes, 0, INT32_MAX,
                      "The longest metadata string a committed offset may carry."));
  t.push_back(integer("offsets.commit.timeout.ms", &bc::offsets_commit_timeout_ms, 1, INT32_MAX,
                      "An offset commit (or group deletion) not durable in the metadata store "
                      "within this many milliseconds is answered REQUEST_TIMED_OUT."));
  return t;
}

const std::vector<setting>& settings() {
  static const std::vector<setting> table = make_settings();
  return table;
}

const setting* find_setting(std::string_view name) {
  for (const auto& s : settings()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// The defaults of a start without a properties file (`silt`, `make run`, `--override` only),
// which differ from Kafka's: a first try on one machine, where Kafka's own default would only
// make the developer wait. A properties file keeps Kafka's defaults (the table's), as a
// production configuration expects them.
struct zero_config_default {
  const char* name;
  const char* value;
  const char* why;
};
constexpr zero_config_default kZeroConfigDefaults[] = {
    {"group.initial.rebalance.delay.ms", "0",
     "A new classic consumer group gets its first assignment at once instead of 3 s later: "
     "Kafka's ConsumerPerformance, `kafka-console-consumer --group` or `kcat -G` show their "
     "first record without that wait. Kafka's `config/server.properties` set it to 0 for the "
     "same reason up to Kafka 3.9 (\"a better out-of-the-box experience for development and "
     "testing\"), as do Kafka's Docker examples; Kafka 4's file, written for KRaft, no longer "
     "sets it. In production the 3 s let the members of a starting application join before the "
     "first assignment, saving a rebalance for each member that joins later."},
};

const zero_config_default* find_zero_config_default(std::string_view name) {
  for (const auto& d : kZeroConfigDefaults) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

// One key=value with where it came from ("server.properties:12", "--override"; empty: none).
struct property {
  std::string key;
  std::string value;
  std::string origin;
};

std::string at(const std::string& origin, const std::string& message) {
  return origin.empty() ? message : origin + ": " + message;
}

// Drops the listeners of Kafka's controller from `key`'s list (with a notice) and checks that
// the others have a security protocol.
tl::expected<void, std::string> keep_broker_listeners(broker_config& c,
                                                      const std::map<std::string, property>& given,
                                                      const std::string& key,
                                                      std::vector<endpoint>& list) {
  auto error = [&](const endpoint& e, const std::string& why) {
    std::string message = "listener " + quote(to_string(e)) + " " + why;
    const auto it = given.find(key);
    if (it == given.end()) return tl::unexpected(key + ": " + message);
    const auto& p = it->second;
    return tl::unexpected(
        at(p.origin, "invalid value " + quote(p.value) + " for " + key + ": " + message));
  };
  std::vector<endpoint> kept;
  for (auto& e : list) {
    const auto& controllers = c.controller_listener_names;
    if (std::find(controllers.begin(), controllers.end(), e.listener_name) != controllers.end()) {
      c.notices.push_back("ignoring Kafka listener " + quote(to_string(e)) + " in " + key +
                          " (Silt has no KRaft controller)");
      continue;
    }
    const auto& map = c.listener_security_protocol_map;
    const auto p = std::find_if(map.begin(), map.end(),
                                [&e](const auto& entry) { return entry.first == e.listener_name; });
    if (p == map.end()) {
      return error(e, "has no security protocol: " + e.listener_name +
                          " is not in listener.security.protocol.map");
    }
    kept.push_back(std::move(e));
  }
  if (kept.empty()) {
    const auto it = given.find(key);
    return tl::unexpected(at(it == given.end() ? "" : it->second.origin,
                             key + " has no broker listener (only Kafka controller listeners)"));
  }
  list = std::move(kept);
  return {};
}

constexpr std::string_view kListenerPrefix = "listener.name.";

// "listener.name.<listener>.<setting>" split into the listener (upper case) and an ssl.*
// setting; nullopt for any other key.
std::optional<std::pair<std::string, const ssl_setting*>> listener_setting(std::string_view key) {
  if (!key.starts_with(kListenerPrefix)) return std::nullopt;
  key.remove_prefix(kListenerPrefix.size());
  const size_t dot = key.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  const auto* s = find_ssl_setting(key.substr(dot + 1));
  if (s == nullptr || !is_listener_name(upper(key.substr(0, dot)))) return std::nullopt;
  return std::pair{upper(key.substr(0, dot)), s};
}

// "listener.name.<listener>.[<mechanism>.]<setting>" of a SASL setting: the listener (upper
// case), the mechanism (upper case; empty: the listener's own setting) and the setting.
struct listener_sasl_key {
  std::string listener;
  std::string mechanism;
  std::string setting;
};
std::optional<listener_sasl_key> listener_sasl_setting(std::string_view key) {
  if (!key.starts_with(kListenerPrefix)) return std::nullopt;
  key.remove_prefix(kListenerPrefix.size());
  const size_t dot = key.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  auto listener = upper(key.substr(0, dot));
  if (!is_listener_name(listener)) return std::nullopt;
  const auto rest = key.substr(dot + 1);
  for (const auto name : kListenerSaslSettings) {
    if (rest == name) return listener_sasl_key{std::move(listener), "", std::string(name)};
  }
  for (const auto mechanism : kSaslMechanismPrefixes) {
    if (!rest.starts_with(mechanism) || rest.size() <= mechanism.size() ||
        rest[mechanism.size()] != '.') {
      continue;
    }
    const auto name = rest.substr(mechanism.size() + 1);
    for (const auto known : kMechanismSaslSettings) {
      if (name == known) {
        return listener_sasl_key{std::move(listener), upper(mechanism), std::string(name)};
      }
    }
    // OAUTHBEARER's token checks, per listener as Kafka 4.1 reads them.
    if (mechanism == "oauthbearer" && name.starts_with("sasl.oauthbearer.") &&
        find_setting(name) != nullptr) {
      return listener_sasl_key{std::move(listener), "OAUTHBEARER", std::string(name)};
    }
  }
  return std::nullopt;
}

// The effective SASL settings of each SASL listener: the broker-wide ones with the listener's
// overrides; each enabled mechanism must be one Silt serves.
tl::expected<void, std::string> resolve_listener_sasl(
    broker_config& c, const std::map<std::string, property>& given) {
  for (const auto& [key, p] : given) {
    const auto ls = listener_sasl_setting(key);
    if (!ls) continue;
    bool known = false;
    for (const auto& l : c.listeners) known = known || l.listener_name == ls->listener;
    const auto& controllers = c.controller_listener_names;
    if (!known &&
        std::find(controllers.begin(), controllers.end(), ls->listener) != controllers.end()) {
      c.notices.push_back("ignoring Kafka setting " + quote(key) +
                          " (Silt has no KRaft controller)");
      continue;
    }
    if (!known)
      return tl::unexpected(
          at(p.origin, key + ": " + ls->listener + " is not a listener in listeners"));
    if (!protocol_uses_sasl(security_protocol(c, ls->listener))) {
      c.notices.push_back("ignoring " + quote(key) + " (listener " + ls->listener +
                          " does not use SASL)");
    }
  }
  auto check_handler = [](const std::string& mechanism, const std::string& cls,
                          const std::string& key) -> tl::expected<void, std::string> {
    if (cls.empty() || (mechanism == "OAUTHBEARER" && is_oauthbearer_validator_class(cls))) {
      return {};
    }
    return tl::unexpected(key + ": " + quote(cls) +
                          " is not supported (Silt runs no Java callback handler; only Kafka's "
                          "OAuthBearerValidatorCallbackHandler for OAUTHBEARER is understood)");
  };
  c.listener_sasl.clear();
  for (const auto& l : c.listeners) {
    if (!protocol_uses_sasl(security_protocol(c, l.listener_name))) continue;
    sasl_config sc = c.sasl;
    sc.listener_name = l.listener_name;
    sc.oauthbearer = c.oauthbearer;
    for (const auto& [key, p] : given) {
      const auto ls = listener_sasl_setting(key);
      if (!ls || ls->listener != l.listener_name) continue;
      if (ls->setting.starts_with("sasl.oauthbearer.")) {
        // The broker-wide setting's own parser, on a copy of this listener's values.
        broker_config scratch;
        scratch.oauthbearer = sc.oauthbearer;
        if (auto ok = find_setting(ls->setting)->set(scratch, p.value); !ok) {
          return tl::unexpected(
              at(p.origin, "invalid value " + quote(p.value) + " for " + key + ": " + ok.error()));
        }
        sc.oauthbearer = std::move(scratch.oauthbearer);
        continue;
      }
      if (auto ok = set_sasl(sc, ls->setting, ls->mechanism, p.value); !ok) {
        const std::string v = ls->setting == "sasl.jaas.config" ? "[hidden]" : p.value;
        return tl::unexpected(
            at(p.origin, "invalid value " + quote(v) + " for " + key + ": " + ok.error()));
      }
    }
    const std::string where = "listener " + quote(to_string(l)) + ": ";
    const std::string mechanisms_key =
        given.contains("listener.name." + lower(l.listener_name) + ".sasl.enabled.mechanisms")
            ? "listener.name." + lower(l.listener_name) + ".sasl.enabled.mechanisms"
            : "sasl.enabled.mechanisms";
    if (sc.enabled_mechanisms.empty()) {
      return tl::unexpected(where + mechanisms_key +
                            " is empty: enable PLAIN, SCRAM-SHA-256, "
                            "SCRAM-SHA-512 or OAUTHBEARER");
    }
    for (const auto& m : sc.enabled_mechanisms) {
      if (std::find(std::begin(kSaslMechanisms), std::end(kSaslMechanisms), m) !=
          std::end(kSaslMechanisms)) {
        continue;
      }
      if (m == "GSSAPI") {
        std::string msg = where + mechanisms_key;
        msg += " enables GSSAPI (Kerberos, Kafka's default), which Silt does not serve: set ";
        msg += mechanisms_key;
        msg += " to PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER";
        return tl::unexpected(std::move(msg));
      }
      return tl::unexpected(where + mechanisms_key + " names " + quote(m) +
                            ", an unknown SASL mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
                            "or OAUTHBEARER)");
    }
    for (const auto& [mechanism, cls] : sc.callback_handler_class) {
      const std::string key = mechanism.empty()
                                  ? "sasl.server.callback.handler.class"
                                  : "listener.name." + lower(l.listener_name) + "." +
                                        lower(mechanism) + ".sasl.server.callback.handler.class";
      if (mechanism.empty()) {
        // The broker-wide class applies to every enabled mechanism.
        for (const auto& m : sc.enabled_mechanisms) {
          if (auto ok = check_handler(m, cls, key); !ok) return tl::unexpected(where + ok.error());
        }
      } else if (auto ok = check_handler(mechanism, cls, key); !ok) {
        return tl::unexpected(where + ok.error());
      }
    }
    const bool oauth = std::find(sc.enabled_mechanisms.begin(), sc.enabled_mechanisms.end(),
                                 "OAUTHBEARER") != sc.enabled_mechanisms.end();
    if (oauth && sc.oauthbearer.jwks_endpoint_url.empty()) {
      return tl::unexpected(where +
                            "OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (the keys that "
                            "sign tokens; Silt has no unsecured token validation)");
    }
    c.listener_sasl.emplace(l.listener_name, std::move(sc));
  }
  return {};
}

// The effective TLS settings of each SSL listener: the broker-wide ones with the listener's
// overrides, each checked; every SSL listener must have a key store.
tl::expected<void, std::string> resolve_listener_ssl(broker_config& c,
                                                     const std::map<std::string, property>& given) {
  for (const auto& [key, p] : given) {
    const auto ls = listener_setting(key);
    if (!ls) continue;
    const auto& [name, s] = *ls;
    bool known = false;
    for (const auto& l : c.listeners) known = known || l.listener_name == name;
    const auto& controllers = c.controller_listener_names;
    if (!known && std::find(controllers.begin(), controllers.end(), name) != controllers.end()) {
      c.notices.push_back("ignoring Kafka setting " + quote(key) +
                          " (Silt has no KRaft controller)");
      continue;
    }
    if (!known) {
      std::string message = key;
      message += ": " + name + " is not a listener in listeners";
      return tl::unexpected(at(p.origin, message));
    }
    if (!protocol_uses_tls(security_protocol(c, name))) {
      c.notices.push_back("ignoring " + quote(key) + " (listener " + name + " does not use SSL)");
    }
  }
  c.listener_ssl.clear();
  for (const auto& l : c.listeners) {
    if (!protocol_uses_tls(security_protocol(c, l.listener_name))) continue;
    ssl_config sc = c.ssl;
    sc.listener_name = l.listener_name;
    std::string lower = l.listener_name;
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (const auto& [key, p] : given) {
      const auto ls = listener_setting(key);
      if (!ls || ls->first != l.listener_name) continue;
      const auto* s = ls->second;
      if (auto ok = s->set(sc, p.value); !ok) {
        const std::string v = s->sensitive == sensitive_value::no ? p.value : "[hidden]";
        return tl::unexpected(
            at(p.origin, "invalid value " + quote(v) + " for " + key + ": " + ok.error()));
      }
      sc.overridden.insert(s->name);
    }
    const std::string where = "listener " + quote(to_string(l)) + ": ";
    const bool inline_pem = !sc.keystore_certificate_chain.empty() || !sc.keystore_key.empty();
    if (inline_pem) {
      if (sc.keystore_type != "PEM") {
        return tl::unexpected(where + sc.key("ssl.keystore.certificate.chain") + " and " +
                              sc.key("ssl.keystore.key") + " need " + sc.key("ssl.keystore.type") +
                              "=PEM");
      }
      if (sc.keystore_certificate_chain.empty() || sc.keystore_key.empty()) {
        return tl::unexpected(where + sc.key("ssl.keystore.certificate.chain") + " and " +
                              sc.key("ssl.keystore.key") + " go together: set both");
      }
      if (!sc.keystore_location.empty()) {
        return tl::unexpected(where + "set either " + sc.key("ssl.keystore.location") + " or " +
                              sc.key("ssl.keystore.certificate.chain") + " and " +
                              sc.key("ssl.keystore.key") + ", not both");
      }
    } else if (sc.keystore_location.empty()) {
      return tl::unexpected(
          where + "an SSL listener needs a key store: set " + sc.key("ssl.keystore.location") +
          " (or, with " + sc.key("ssl.keystore.type") + "=PEM, " +
          sc.key("ssl.keystore.certificate.chain") + " and " + sc.key("ssl.keystore.key") + ")");
    }
    if (!sc.truststore_certificates.empty()) {
      if (sc.truststore_type != "PEM") {
        return tl::unexpected(where + sc.key("ssl.truststore.certificates") + " needs " +
                              sc.key("ssl.truststore.type") + "=PEM");
      }
      if (!sc.truststore_location.empty()) {
        return tl::unexpected(where + "set either " + sc.key("ssl.truststore.location") + " or " +
                              sc.key("ssl.truststore.certificates") + ", not both");
      }
    }
    if (sc.client_auth != "none" && sc.truststore_location.empty() &&
        sc.truststore_certificates.empty()) {
      return tl::unexpected(where + sc.key("ssl.client.auth") + "=" + sc.client_auth +
                            " needs a trust store: set " + sc.key("ssl.truststore.location") +
                            " or " + sc.key("ssl.truststore.certificates"));
    }
    if (sc.enabled_protocols.empty()) {
      return tl::unexpected(where + sc.key("ssl.enabled.protocols") +
                            " is empty: enable TLSv1.2, TLSv1.3 or both");
    }
    c.listener_ssl.emplace(l.listener_name, std::move(sc));
  }
  return {};
}

// Derived defaults, aliases and checks across settings, once every given value is stored.
tl::expected<void, std::string> resolve(broker_config& c,
                                        const std::map<std::string, property>& given) {
  auto given_value = [&given](const char* key) -> std::optional<int64_t> {
    const auto it = given.find(key);
    if (it == given.end()) return std::nullopt;
    return parse_int(it->second.value);
  };
  // broker.id is Kafka's synonym of node.id.
  if (const auto broker_id = given_value("broker.id")) {
    if (!given.contains("node.id")) {
      c.node_id = static_cast<int32_t>(*broker_id);
    } else if (*broker_id != c.node_id) {
      return tl::unexpected(
          at(given.at("broker.id").origin, "broker.id (" + std::to_string(*broker_id) +
                                               ") and node.id (" + std::to_string(c.node_id) +
                                               ") differ; they name the same thing"));
    }
  }
  // log.dirs, else log.dir (Kafka's precedence), stands in for data.dir.
  for (const char* key : {"log.dirs", "log.dir"}) {
    const auto it = given.find(key);
    if (it == given.end()) continue;
    if (given.contains("data.dir")) {
      c.notices.push_back(std::string("ignoring ") + key + " (data.dir is given)");
      break;
    }
    const auto dirs = detail::split_list(it->second.value);
    c.data_dir = dirs.front();
    if (dirs.size() > 1) {
      c.notices.push_back(std::string("using only the first directory of ") + key + ", " +
                          quote(dirs.front()) + " (Silt keeps its files in one directory)");
    }
    break;
  }
  // Kafka's precedence: log.retention.ms, then minutes, then hours; negative means forever.
  if (!given.contains("log.retention.ms")) {
    if (const auto minutes = given_value("log.retention.minutes")) {
      c.log_retention_ms = *minutes < 0 ? -1 : *minutes * 60 * 1000;
    } else if (const auto hours = given_value("log.retention.hours")) {
      c.log_retention_ms = *hours < 0 ? -1 : *hours * 60 * 60 * 1000;
    }
  }
  const std::filesystem::path data_dir(c.data_dir);
  if (!given.contains("wal.path")) c.wal_path = (data_dir / "wal").string();
  // metadata.path names an SQLite file: metadata.store.uri=sqlite://PATH, unless that is given.
  if (given.contains("metadata.path")) {
    if (!given.contains("metadata.store.uri")) {
      c.metadata_store_uri = "sqlite://" + c.metadata_path;
    } else if (c.metadata_store_uri != "sqlite://" + c.metadata_path) {
      return tl::unexpected(
          at(given.at("metadata.path").origin,
             "metadata.path (" + quote(c.metadata_path) + ") and metadata.store.uri (" +
                 quote(base::redact_uri(c.metadata_store_uri)) + ") differ; give one of them"));
    }
  } else if (!given.contains("metadata.store.uri")) {
    std::error_code ec;
    auto absolute = std::filesystem::absolute(data_dir, ec);
    if (ec) return tl::unexpected("cannot make data.dir " + quote(c.data_dir) + " absolute");
    c.metadata_path = (absolute.lexically_normal() / "metadata.db").string();
    c.metadata_store_uri = "sqlite://" + c.metadata_path;
  }
  if (c.broker_heartbeat_interval_ms >= c.broker_session_timeout_ms) {
    return tl::unexpected("broker.heartbeat.interval.ms (" +
                          std::to_string(c.broker_heartbeat_interval_ms) +
                          ") must be below broker.session.timeout.ms (" +
                          std::to_string(c.broker_session_timeout_ms) + ")");
  }
  // A small WAL uploads sooner by default: at a quarter of its capacity at most.
  if (!given.contains("upload.threshold.bytes")) {
    c.upload_threshold_bytes =
        std::min(c.upload_threshold_bytes, std::max<uint64_t>(c.wal_capacity_bytes / 4, 1));
  }
  if (!given.contains("object.store.uri")) {
    std::error_code ec;
    auto absolute = std::filesystem::absolute(data_dir, ec);
    if (ec) return tl::unexpected("cannot make data.dir " + quote(c.data_dir) + " absolute");
    c.object_store_uri = "file://" + (absolute.lexically_normal() / "objects").string();
  }
  if (auto ok = keep_broker_listeners(c, given, "listeners", c.listeners); !ok) return ok;
  if (!given.contains("advertised.listeners")) {
    c.advertised_listeners = c.listeners;
    for (auto& e : c.advertised_listeners) {
      if (is_wildcard_host(e.host)) e.host = "localhost";
    }
  } else {
    auto ok = keep_broker_listeners(c, given, "advertised.listeners", c.advertised_listeners);
    if (!ok) return ok;
    for (auto& e : c.advertised_listeners) {
      if (e.host == "0.0.0.0" || e.host == "::") {
        return tl::unexpected(at(given.at("advertised.listeners").origin,
                                 "advertised.listeners: listener " + quote(to_string(e)) + ": " +
                                     e.host +
                                     " cannot be advertised (clients cannot connect to it)"));
      }
      if (e.host.empty()) e.host = "localhost";
      bool known = false;
      for (const auto& l : c.listeners) known = known || l.listener_name == e.listener_name;
      if (!known) {
        return tl::unexpected(
            at(given.at("advertised.listeners").origin,
               "advertised.listeners names " + e.listener_name + ", which is not in listeners"));
      }
    }
  }
  if (auto ok = resolve_listener_ssl(c, given); !ok) return ok;
  if (auto ok = resolve_listener_sasl(c, given); !ok) return ok;
  if (const auto m = parse_http_endpoint(c.metrics_listener); m && m->tls) {
    const bool inline_pem = !c.ssl.keystore_certificate_chain.empty();
    if (c.ssl.keystore_location.empty() && !inline_pem) {
      return tl::unexpected(
          std::string("metrics.listener is https: set ssl.keystore.location "
                      "(or ssl.keystore.certificate.chain and "
                      "ssl.keystore.key) for its certificate"));
    }
  }
  if (c.queued_max_request_bytes < c.socket_request_max_bytes) {
    return tl::unexpected("queued.max.request.bytes (" +
                          std::to_string(c.queued_max_request_bytes) +
                          ") must be at least socket.request.max.bytes (" +
                          std::to_string(c.socket_request_max_bytes) + ")");
  }
  if (c.upload_threshold_bytes >= c.wal_capacity_bytes) {
    return tl::unexpected("upload.threshold.bytes (" + std::to_string(c.upload_threshold_bytes) +
                          ") must be less than wal.capacity.bytes (" +
                          std::to_string(c.wal_capacity_bytes) + ")");
  }
  return {};
}

// `zero_config`: no properties file was given, so kZeroConfigDefaults apply to what is not given.
tl::expected<broker_config, std::string> build(const std::vector<property>& properties,
                                               bool zero_config) {
  std::map<std::string, property> given;                // later ones win
  std::vector<const detail::ignored_setting*> ignored;  // in order of first appearance
  for (const auto& p : properties) {
    const auto* kafka_only = detail::find_ignored(p.key);
    if (find_setting(p.key) == nullptr && kafka_only == nullptr && !listener_setting(p.key) &&
        !listener_sasl_setting(p.key)) {
      return tl::unexpected(at(p.origin, "unknown setting " + quote(p.key)));
    }
    if (kafka_only != nullptr && !given.contains(p.key)) ignored.push_back(kafka_only);
    given[p.key] = p;
  }
  broker_config c;
  if (zero_config) {
    for (const auto& d : kZeroConfigDefaults) {
      const auto* s = find_setting(d.name);
      if (s == nullptr || !s->set(c, d.value)) {
        return tl::unexpected(std::string("invalid zero-config default for ") + d.name);
      }
    }
  }
  for (const auto* s : ignored) {
    const auto& p = given.at(s->name);
    if (!s->check(p.value)) {
      return tl::unexpected(at(p.origin, "invalid value " + quote(p.value) + " for " + s->name +
                                             ": expected " + s->valid));
    }
    c.notices.push_back("ignoring Kafka setting " + quote(s->name) + " (" + s->reason + ")");
  }
  for (const auto& s : settings()) {
    const auto it = given.find(s.name);
    if (it == given.end()) continue;
    const auto& p = it->second;
    if (auto ok = s.set(c, p.value); !ok) {
      return tl::unexpected(at(p.origin, "invalid value " + quote(shown(s, p.value)) + " for " +
                                             s.name + ": " + ok.error()));
    }
    c.given.insert(s.name);
  }
  if (auto ok = resolve(c, given); !ok) return tl::unexpected(ok.error());
  for (const auto& s : settings()) {
    if (auto v = s.get(c)) {
      c.values[s.name] = std::move(*v);
    } else if (const auto it = given.find(s.name); it != given.end()) {
      c.values[s.name] = it->second.value;
    }
  }
  return c;
}

// As java.util.Properties.load reads them (base/java_properties.h), except that trailing
// whitespace of a value is dropped too.
std::vector<property> parse_properties(std::string_view text, const std::string& file) {
  std::vector<property> out;
  for (auto& e : base::parse_java_properties(text)) {
    property p;
    p.key = std::move(e.key);
    p.value = std::string(trim(e.value));
    p.origin = file + ":" + std::to_string(e.line);
    out.push_back(std::move(p));
  }
  return out;
}

tl::expected<property, std::string> parse_override(const std::string& text) {
  const auto eq = text.find('=');
  property p;
  if (eq != std::string::npos) p.key = std::string(trim(std::string_view(text).substr(0, eq)));
  if (eq == std::string::npos || p.key.empty()) {
    return tl::unexpected("--override expects key=value, got " + quote(base::redact_uri(text)));
  }
  p.value = std::string(trim(std::string_view(text).substr(eq + 1)));
  p.origin = "--override";
  return p;
}

std::string escape_cell(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    if (ch == '|') out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

std::string ssl_config::key(std::string_view setting) const {
  if (listener_name.empty() || !overridden.contains(std::string(setting))) {
    return std::string(setting);
  }
  std::string lower = listener_name;
  for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return std::string(kListenerPrefix) + lower + "." + std::string(setting);
}

bool is_oauthbearer_validator_class(std::string_view name) {
  return name ==
             "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler" ||
         name ==
             "org.apache.kafka.common.security.oauthbearer.secured."
             "OAuthBearerValidatorCallbackHandler";
}

std::string security_protocol(const broker_config& c, std::string_view listener) {
  for (const auto& [name, protocol] : c.listener_security_protocol_map) {
    if (name == listener) return protocol;
  }
  return {};
}

std::string to_string(const endpoint& e) {
  const bool v6 = e.host.find(':') != std::string::npos;
  return e.listener_name + "://" + (v6 ? "[" + e.host + "]" : e.host) + ":" +
         std::to_string(e.port);
}

tl::expected<command_line, std::string> parse_command_line(int argc, const char* const* argv) {
  command_line cmd;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      cmd.help = true;
    } else if (arg == "--print-config-docs") {
      cmd.print_config_docs = true;
    } else if (arg == "--override") {
      if (i + 1 == argc) return tl::unexpected(std::string("--override expects key=value"));
      const std::string value = argv[++i];
      if (auto p = parse_override(value); !p) return tl::unexpected(p.error());
      cmd.overrides.push_back(value);
    } else if (arg.starts_with("--override=")) {
      const std::string value(arg.substr(11));
      if (auto p = parse_override(value); !p) return tl::unexpected(p.error());
      cmd.overrides.push_back(value);
    } else if (arg.starts_with("-") && arg != "-") {
      return tl::unexpected("unknown option " + quote(arg) + " (see --help)");
    } else if (cmd.properties_file) {
      // A setting given without --override lands here: masked as a URI, in case it is one.
      return tl::unexpected(
          "more than one properties file: " + quote(base::redact_uri(*cmd.properties_file)) +
          " and " + quote(base::redact_uri(arg)));
    } else {
      cmd.properties_file = std::string(arg);
    }
  }
  return cmd;
}

tl::expected<broker_config, std::string> load(const command_line& cmd) {
  std::vector<property> properties;
  if (cmd.properties_file) {
    std::ifstream in(*cmd.properties_file, std::ios::binary);
    if (!in) {
      // A setting given without --override lands here: masked as a URI, in case it is one.
      return tl::unexpected("cannot read properties file " +
                            quote(base::redact_uri(*cmd.properties_file)) + ": " +
                            std::error_code(errno, std::generic_category()).message());
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    properties = parse_properties(buffer.str(), *cmd.properties_file);
  }
  for (const auto& o : cmd.overrides) {
    auto p = parse_override(o);
    if (!p) return tl::unexpected(p.error());
    properties.push_back(std::move(*p));
  }
  auto c = build(properties, !cmd.properties_file.has_value());
  if (c) {
    for (const auto& n : c->notices) SILT_LOG(info, "silt: %s", n.c_str());
  }
  return c;
}

tl::expected<broker_config, std::string> from_properties(
    const std::vector<std::pair<std::string, std::string>>& properties) {
  std::vector<property> props;
  props.reserve(properties.size());
  for (const auto& [k, v] : properties) props.push_back({k, v, ""});
  return build(props, /*zero_config=*/false);
}

std::vector<config_entry> describe_broker_configs(const broker_config& broker) {
  std::vector<config_entry> out;
  for (const auto& s : settings()) {
    config_entry e;
    e.name = s.name;
    if (const auto it = broker.values.find(s.name); it != broker.values.end()) {
      e.value = it->second;
    }
    e.read_only = true;
    e.source = broker.given.contains(s.name) ? config_source::static_broker_config
                                             : config_source::default_config;
    e.is_default = e.source == config_source::default_config;
    e.type = s.type;
    e.documentation = s.doc;
    // A sensitive setting's value stays in the broker, as Kafka keeps a PASSWORD setting's.
    e.sensitive = s.sensitive != sensitive_value::no;
    if (e.sensitive) e.value = std::nullopt;
    e.synonyms.push_back({s.name, e.value, e.source});
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(),
            [](const config_entry& a, const config_entry& b) { return a.name < b.name; });
  return out;
}

std::optional<std::vector<std::pair<std::string, int32_t>>> parse_ip_overrides(std::string_view v) {
  std::vector<std::pair<std::string, int32_t>> out;
  while (!v.empty()) {
    const size_t comma = v.find(',');
    std::string_view item = trim(v.substr(0, comma));
    v = comma == std::string_view::npos ? std::string_view() : v.substr(comma + 1);
    if (item.empty()) continue;
    const size_t colon = item.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return std::nullopt;
    std::string_view host = trim(item.substr(0, colon));
    if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
    const auto n = detail::parse_int(trim(item.substr(colon + 1)));
    if (host.empty() || !n || *n < 0 || *n > INT32_MAX) return std::nullopt;
    out.emplace_back(std::string(host), static_cast<int32_t>(*n));
  }
  return out;
}

std::optional<http_endpoint> parse_http_endpoint(std::string_view uri) {
  http_endpoint e;
  if (uri.starts_with("https://")) {
    e.tls = true;
    uri.remove_prefix(8);
  } else if (uri.starts_with("http://")) {
    uri.remove_prefix(7);
  } else {
    return std::nullopt;
  }
  const size_t slash = uri.find('/');
  const std::string_view authority = uri.substr(0, slash);
  e.path = slash == std::string_view::npos ? "/metrics" : std::string(uri.substr(slash));
  // host:port, the host possibly a bracketed IPv6 address.
  const size_t colon = authority.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = authority.substr(0, colon);
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  const auto port = detail::parse_int(authority.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) return std::nullopt;
  for (const char ch : e.path) {
    if (ch <= ' ' || ch == '?' || ch == '#') return std::nullopt;
  }
  e.host = std::string(host);
  e.port = static_cast<uint16_t>(*port);
  return e;
}

endpoint advertised_endpoint(const broker_config& c) {
  endpoint e = c.advertised_listeners.empty() ? endpoint{"PLAINTEXT", "localhost", 9092}
                                              : c.advertised_listeners.front();
  if (e.host.empty()) e.host = "localhost";
  return e;
}

std::string config_docs_markdown() {
  std::string md =
      "# Configuration\n"
      "\n"
      "<!-- Generated from src/config (`silt --print-config-docs`); a test keeps this file and "
      "the code equal. -->\n"
      "\n"
      "Silt runs with no configuration at all: every setting has a default, and the broker "
      "listens on `localhost:9092` and keeps its files under `./data`. To change settings, give "
      "a properties file (Kafka's `server.properties` format: `key=value` or `key: value`, `#` "
      "and `!` comments, a backslash at the end of a line continues it) and/or "
      "`--override key=value`, which may be repeated; overrides win over the file, and a later "
      "value of the same key wins over an earlier one:\n"
      "\n"
      "```\n"
      "silt [server.properties] [--override key=value]... [--help] [--print-config-docs]\n"
      "```\n"
      "\n"
      "An unknown setting or an invalid value stops the broker with an error naming it (and the "
      "file and line). Sizes are plain numbers of bytes, durations plain numbers of "
      "milliseconds.\n"
      "\n"
      "Settings that can carry a secret (the two store URIs, the `ssl.*` passwords and keys, "
      "`sasl.jaas.config`) are sensitive, as Kafka's PASSWORD settings are: "
      "DescribeConfigs answers them with no value and `is_sensitive=true` (`kafka-configs.sh "
      "--describe --all` shows `sensitive=true`), and logs and error messages mask their "
      "credentials. The table below says which; docs/security.md, \"Secrets\", what is "
      "masked and how.\n"
      "\n"
      "Apache Kafka's own `config/server.properties` loads as it is. Kafka's names for Silt's "
      "settings stand in for them (`log.dirs` for `data.dir`, `broker.id` for `node.id`, "
      "`log.retention.hours` for `log.retention.ms`); the Kafka settings that have no effect in "
      "Silt are accepted and named once on stderr (`silt: ignoring Kafka setting 'KEY' "
      "(REASON)`, see the list below), and so are the listeners of Kafka's KRaft controller "
      "(`controller.listener.names`), which are dropped.\n"
      "\n"
      "## Defaults without a properties file\n"
      "\n"
      "A broker started without a properties file (`silt`, `make run`, or `--override` alone) "
      "is taken for a first try on one machine: the settings below then default to what suits "
      "that (an `--override` still wins). Given a properties file, even an empty one, they keep "
      "the default of the table further down, Kafka's, which production configurations expect; "
      "Kafka 4.1's own `config/server.properties`, which does not set them, loads with those "
      "too. The other settings of Kafka's shipped file need no such treatment: they equal "
      "Kafka's defaults (`num.partitions=1`, `log.retention.hours=168`), concern what Silt does "
      "not have (the replication of internal topics, segment files), or are what Silt does with "
      "no configuration anyway (a listener on `localhost:9092`, data in a local directory).\n"
      "\n"
      "| name | without a properties file | with one (Kafka's default) | why |\n"
      "|---|---|---|---|\n";
  for (const auto& d : kZeroConfigDefaults) {
    const auto* s = find_setting(d.name);
    md += "| `" + std::string(d.name) + "` | `" + d.value + "` | `" +
          (s != nullptr ? s->doc_default : std::string()) + "` | " + escape_cell(d.why) + " |\n";
  }
  md +=
      "\n"
      "## Broker settings\n"
      "\n"
      "| name | default | meaning |\n"
      "|---|---|---|\n";
  for (const auto& s : settings()) {
    std::string def = s.doc_default.empty() ? "(none)" : s.doc_default;
    if (!def.starts_with("`") && def != "(none)") def.insert(0, "`").append("`");
    if (const auto* d = find_zero_config_default(s.name)) {
      def += " (`" + std::string(d->value) + "` without a properties file)";
    }
    std::string meaning = s.doc + " Valid: " + s.valid + ".";
    if (s.sensitive != sensitive_value::no) {
      meaning += " Sensitive: DescribeConfigs answers it without its value";
      meaning += s.sensitive == sensitive_value::credentials
                     ? ", and logs and errors show it with its credentials masked."
                     : ", and logs and errors never show it.";
    }
    md += "| `" + s.name + "` | " + escape_cell(def) + " | " + escape_cell(meaning) + " |\n";
  }
  md +=
      "\n"
      "## Kafka settings Silt ignores\n"
      "\n"
      "Kafka broker settings that concern what Silt does differently or not at all. They are "
      "accepted so that a Kafka configuration loads, each named once on stderr with the reason, "
      "and otherwise ignored; they are not listed by DescribeConfigs. A value must still be "
      "valid for the setting's type in Kafka (an integer, true or false...), and "
      "`process.roles` must include `broker`. Any other Kafka setting is unknown to Silt and "
      "stops the broker.\n"
      "\n";
  md += detail::ignored_docs_table();
  md +=
      "\n"
      "## Topic settings\n"
      "\n"
      "Set per topic with CreateTopics, AlterConfigs or IncrementalAlterConfigs (e.g. "
      "`kafka-configs.sh --alter --entity-type topics`), listed by DescribeConfigs. A topic "
      "without an override of a setting takes the broker setting named in the second column. "
      "Every topic config of Kafka 4.1 is accepted and validated as Kafka does; those marked "
      "\"no effect\" are stored and described but do not change how Silt behaves. An unknown "
      "name fails with INVALID_CONFIG (\"Unknown topic config name: ...\").\n"
      "\n";
  md += detail::topic_docs_table();
  return md;
}

namespace detail {

std::optional<std::string> broker_default(std::string_view name) {
  static const std::map<std::string, std::string> values = [] {
    std::map<std::string, std::string> v;
    auto c = from_properties({});
    if (c.has_value()) v = std::move(c->values);
    return v;
  }();
  const auto it = values.find(std::string(name));
  if (it == values.end()) return std::nullopt;
  return it->second;
}

}  // namespace detail
}  // namespace silt::config
