#include "net/tls_context.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace silt::net {
namespace {

namespace ssl = boost::asio::ssl;

struct bio_deleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct x509_deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct pkey_deleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct p12_deleter {
  void operator()(PKCS12* p) const { PKCS12_free(p); }
};
struct stack_deleter {
  void operator()(STACK_OF(X509) * s) const { sk_X509_pop_free(s, X509_free); }
};
using bio_ptr = std::unique_ptr<BIO, bio_deleter>;
using x509_ptr = std::unique_ptr<X509, x509_deleter>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_deleter>;

std::string name_of(const tls_options& o, std::string_view setting) {
  return o.key ? o.key(setting) : std::string(setting);
}

// The last OpenSSL error as text, and the queue cleared.
std::string openssl_error() {
  const unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

tl::expected<std::string, std::string> read_file(const tls_options& o, std::string_view setting,
                                                 const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return tl::unexpected("cannot read " + name_of(o, setting) + " '" + path +
                          "': " + std::error_code(errno, std::generic_category()).message());
  }
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Hands OpenSSL the password of an encrypted PEM key; none: the key cannot be read (instead of
// OpenSSL's default of asking on the terminal).
int password_callback(char* buf, int size, int /*rwflag*/, void* u) {
  const auto* password = static_cast<const std::string*>(u);
  if (password == nullptr || password->empty()) return 0;
  const int n = std::min(size, static_cast<int>(password->size()));
  std::memcpy(buf, password->data(), static_cast<size_t>(n));
  return n;
}

// Every certificate of PEM text, in order.
std::vector<x509_ptr> pem_certificates(const std::string& pem) {
  std::vector<x509_ptr> out;
  bio_ptr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) out.emplace_back(x);
  ERR_clear_error();  // the end of the text reads as an error
  return out;
}

struct key_and_chain {
  pkey_ptr key;
  std::vector<x509_ptr> chain;  // the broker's certificate first
};

tl::expected<key_and_chain, std::string> pem_keystore(const tls_options& o,
                                                      const std::string& key_pem,
                                                      const std::string& chain_pem,
                                                      const std::string& key_setting,
                                                      const std::string& chain_setting) {
  key_and_chain out;
  out.chain = pem_certificates(chain_pem);
  if (out.chain.empty()) {
    return tl::unexpected(name_of(o, chain_setting) + ": no PEM certificate found");
  }
  const std::string& password = o.key_password.empty() ? o.keystore_password : o.key_password;
  bio_ptr bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  out.key.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, password_callback,
                                        const_cast<std::string*>(&password)));
  if (!out.key) {
    ERR_clear_error();
    if (key_pem.find("ENCRYPTED") != std::string::npos) {
      return tl::unexpected("cannot decrypt the private key of " + name_of(o, key_setting) + ": " +
                            name_of(o, "ssl.key.password") + " is wrong or missing");
    }
    return tl::unexpected(name_of(o, key_setting) + ": no PEM private key found");
  }
  return out;
}

// A PKCS12 store's key, certificate and other certificates; `need_key`: a key store.
struct pkcs12_content {
  pkey_ptr key;
  x509_ptr cert;
  std::vector<x509_ptr> others;
};

tl::expected<pkcs12_content, std::string> read_pkcs12(const tls_options& o,
                                                      std::string_view location_setting,
                                                      std::string_view password_setting,
                                                      const std::string& path,
                                                      const std::string& password) {
  const auto bytes = read_file(o, location_setting, path);
  if (!bytes) return tl::unexpected(bytes.error());
  const std::string& der = *bytes;
  bio_ptr bio(BIO_new_mem_buf(der.data(), static_cast<int>(der.size())));
  std::unique_ptr<PKCS12, p12_deleter> p12(d2i_PKCS12_bio(bio.get(), nullptr));
  if (!p12) {
    ERR_clear_error();
    return tl::unexpected(name_of(o, location_setting) + " '" + path + "' is not a PKCS12 store");
  }
  const char* pass = password.c_str();
  if (PKCS12_mac_present(p12.get()) == 1 &&
      PKCS12_verify_mac(p12.get(), pass, static_cast<int>(password.size())) != 1 &&
      !(password.empty() && PKCS12_verify_mac(p12.get(), nullptr, 0) == 1)) {
    ERR_clear_error();
    return tl::unexpected(name_of(o, password_setting) + " is wrong for " +
                          name_of(o, location_setting) + " '" + path + "'");
  }
  EVP_PKEY* key = nullptr;
  X509* cert = nullptr;
  STACK_OF(X509)* ca = nullptr;
  if (PKCS12_parse(p12.get(), pass, &key, &cert, &ca) != 1) {
    return tl::unexpected("cannot read " + name_of(o, location_setting) + " '" + path +
                          "': " + openssl_error());
  }
  pkcs12_content out;
  out.key.reset(key);
  out.cert.reset(cert);
  std::unique_ptr<STACK_OF(X509), stack_deleter> others(ca);
  if (others) {
    while (sk_X509_num(others.get()) > 0) out.others.emplace_back(sk_X509_shift(others.get()));
  }
  return out;
}

tl::expected<void, std::string> use_keystore(const tls_options& o, SSL_CTX* ctx) {
  key_and_chain kc;
  std::string where;  // the setting the key came from, for the mismatch error
  if (o.keystore_type == "PEM") {
    if (!o.keystore_location.empty()) {
      auto pem = read_file(o, "ssl.keystore.location", o.keystore_location);
      if (!pem) return tl::unexpected(pem.error());
      auto r = pem_keystore(o, *pem, *pem, "ssl.keystore.location", "ssl.keystore.location");
      if (!r) return tl::unexpected(r.error());
      kc = std::move(*r);
      where = name_of(o, "ssl.keystore.location") + " '" + o.keystore_location + "'";
    } else {
      auto r = pem_keystore(o, o.keystore_key, o.keystore_certificate_chain, "ssl.keystore.key",
                            "ssl.keystore.certificate.chain");
      if (!r) return tl::unexpected(r.error());
      kc = std::move(*r);
      where =
          name_of(o, "ssl.keystore.key") + " and " + name_of(o, "ssl.keystore.certificate.chain");
    }
  } else {
    auto r = read_pkcs12(o, "ssl.keystore.location", "ssl.keystore.password", o.keystore_location,
                         o.keystore_password);
    if (!r) return tl::unexpected(r.error());
    if (!r->key || !r->cert) {
      return tl::unexpected(name_of(o, "ssl.keystore.location") + " '" + o.keystore_location +
                            "' holds no private key with its certificate");
    }
    kc.key = std::move(r->key);
    kc.chain.push_back(std::move(r->cert));
    for (auto& c : r->others) kc.chain.push_back(std::move(c));
    where = name_of(o, "ssl.keystore.location") + " '" + o.keystore_location + "'";
  }
  if (SSL_CTX_use_certificate(ctx, kc.chain.front().get()) != 1) {
    return tl::unexpected("cannot use the certificate of " + where + ": " + openssl_error());
  }
  for (size_t i = 1; i < kc.chain.size(); ++i) {
    if (SSL_CTX_add1_chain_cert(ctx, kc.chain[i].get()) != 1) {
      return tl::unexpected("cannot use the certificate chain of " + where + ": " +
                            openssl_error());
    }
  }
  if (SSL_CTX_use_PrivateKey(ctx, kc.key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return tl::unexpected("the private key of " + where + " does not match its certificate");
  }
  return {};
}

tl::expected<void, std::string> use_truststore(const tls_options& o, SSL_CTX* ctx) {
  std::vector<x509_ptr> certs;
  std::string where;
  if (!o.truststore_certificates.empty()) {
    certs = pem_certificates(o.truststore_certificates);
    where = name_of(o, "ssl.truststore.certificates");
  } else if (o.truststore_type == "PEM") {
    auto pem = read_file(o, "ssl.truststore.location", o.truststore_location);
    if (!pem) return tl::unexpected(pem.error());
    certs = pem_certificates(*pem);
    where = name_of(o, "ssl.truststore.location") + " '" + o.truststore_location + "'";
  } else {
    auto r = read_pkcs12(o, "ssl.truststore.location", "ssl.truststore.password",
                         o.truststore_location, o.truststore_password);
    if (!r) return tl::unexpected(r.error());
    if (r->cert) certs.push_back(std::move(r->cert));
    for (auto& c : r->others) certs.push_back(std::move(c));
    where = name_of(o, "ssl.truststore.location") + " '" + o.truststore_location + "'";
  }
  if (certs.empty()) return tl::unexpected(where + ": no certificate found");
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
  for (const auto& c : certs) {
    X509_STORE_add_cert(store, c.get());
    sk_X509_NAME_push(names, X509_NAME_dup(X509_get_subject_name(c.get())));
  }
  ERR_clear_error();                       // a certificate given twice
  SSL_CTX_set_client_CA_list(ctx, names);  // takes `names`
  return {};
}

bool is_tls13_suite(std::string_view s) {
  return s == "TLS_AES_128_GCM_SHA256" || s == "TLS_AES_256_GCM_SHA384" ||
         s == "TLS_CHACHA20_POLY1305_SHA256" || s == "TLS_AES_128_CCM_SHA256" ||
         s == "TLS_AES_128_CCM_8_SHA256";
}

// The TLSv1.3 suites when ssl.cipher.suites is empty: OpenSSL's, AES-128-GCM first (a quarter
// less CPU per byte than AES-256-GCM with AES-NI, on both ends of the connection).
constexpr const char* kDefaultTls13Suites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

tl::expected<void, std::string> use_ciphers(const tls_options& o, SSL_CTX* ctx) {
  if (o.cipher_suites.empty()) {
    // The server's order decides, except that a client listing ChaCha20-Poly1305 first (one
    // without AES instructions) gets it.
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA);
    if (SSL_CTX_set_ciphersuites(ctx, kDefaultTls13Suites) != 1) {
      return tl::unexpected("TLSv1.3 cipher suites: " + openssl_error());
    }
    return {};
  }
  std::string tls12;
  std::string tls13;
  for (const auto& s : o.cipher_suites) {
    if (is_tls13_suite(s)) {
      tls13 += (tls13.empty() ? "" : ":") + s;
      continue;
    }
    std::string name = s;
    if (s.starts_with("TLS_") || s.starts_with("SSL_")) {  // an IANA (Java) name
      const char* openssl_name = OPENSSL_cipher_name(s.c_str());
      if (openssl_name == nullptr || std::string_view(openssl_name) == "(NONE)") {
        return tl::unexpected(name_of(o, "ssl.cipher.suites") + ": unknown cipher suite '" + s +
                              "'");
      }
      name = openssl_name;
    }
    tls12 += (tls12.empty() ? "" : ":") + name;
  }
  // Given suites of one version only, the other version keeps none (as in Kafka, only the
  // given suites are enabled).
  if (SSL_CTX_set_ciphersuites(ctx, tls13.c_str()) != 1) {
    return tl::unexpected(name_of(o, "ssl.cipher.suites") +
                          ": no usable TLSv1.3 cipher suite: " + openssl_error());
  }
  if (!tls12.empty() && SSL_CTX_set_cipher_list(ctx, tls12.c_str()) != 1) {
    return tl::unexpected(name_of(o, "ssl.cipher.suites") + ": no usable cipher suite in '" +
                          tls12 + "': " + openssl_error());
  }
  return {};
}

}  // namespace

tl::expected<tls_context_ptr, std::string> make_tls_context(const tls_options& o) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::single_dh_use);
  bool v12 = false;
  bool v13 = false;
  for (const auto& p : o.enabled_protocols) {
    v12 = v12 || p == "TLSv1.2";
    v13 = v13 || p == "TLSv1.3";
  }
  if (!v12 && !v13) {
    return tl::unexpected(name_of(o, "ssl.enabled.protocols") +
                          ": enable TLSv1.2, TLSv1.3 or both");
  }
  SSL_CTX_set_min_proto_version(native, v12 ? TLS1_2_VERSION : TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(native, v13 ? TLS1_3_VERSION : TLS1_2_VERSION);
  // Resumed sessions must find their context (needed once client certificates are checked).
  static constexpr unsigned char kSessionContext[] = "silt";
  SSL_CTX_set_session_id_context(native, kSessionContext, sizeof kSessionContext - 1);
  if (auto ok = use_keystore(o, native); !ok) return tl::unexpected(ok.error());
  const bool has_truststore = !o.truststore_location.empty() || !o.truststore_certificates.empty();
  if (has_truststore) {
    if (auto ok = use_truststore(o, native); !ok) return tl::unexpected(ok.error());
  }
  if (auto ok = use_ciphers(o, native); !ok) return tl::unexpected(ok.error());
  if (o.client_auth == "required") {
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  } else if (o.client_auth == "requested") {
    ctx->set_verify_mode(ssl::verify_peer);
  } else {
    ctx->set_verify_mode(ssl::verify_none);
  }
  return ctx;
}

std::vector<std::string> tls_files(const tls_options& o) {
  std::vector<std::string> out;
  if (!o.keystore_location.empty()) out.push_back(o.keystore_location);
  if (!o.truststore_location.empty() && o.truststore_certificates.empty()) {
    out.push_back(o.truststore_location);
  }
  return out;
}

}  // namespace silt::net
