// SSL listeners over real sockets: requests answered over TLS, the client's principal from its
// certificate, a handshake that never comes closed after the timeout, a plaintext client on the
// TLS port refused while others are served; and subjects printed as Java prints them.
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include "base/endian.h"
#include "net/server.h"
#include "net/tests/connect.h"
#include "net/tls_context.h"
#include "net/x509_subject.h"

namespace silt::net {
namespace {

namespace asio = boost::asio;

// A key and a certificate for `subject` ("/C=US/O=Silt/CN=x"), signed by `issuer` (null:
// self-signed), as PEM.
struct cert {
  EVP_PKEY* key = nullptr;
  X509* x509 = nullptr;
  ~cert() {
    EVP_PKEY_free(key);
    X509_free(x509);
  }
  [[nodiscard]] std::string key_pem() const {
    BIO* b = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
    return drain(b);
  }
  [[nodiscard]] std::string cert_pem() const {
    BIO* b = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(b, x509);
    return drain(b);
  }
  static std::string drain(BIO* b) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(b, &data);
    std::string s(data, static_cast<size_t>(n));
    BIO_free(b);
    return s;
  }
};

std::unique_ptr<cert> make_cert(const std::vector<std::pair<std::string, std::string>>& subject,
                                const cert* issuer) {
  auto c = std::make_unique<cert>();
  c->key = EVP_EC_gen("P-256");
  c->x509 = X509_new();
  X509_set_version(c->x509, 2);
  static long serial = 1;  // distinct per certificate: the tests run on one thread
  ASN1_INTEGER_set(X509_get_serialNumber(c->x509), serial++);
  X509_gmtime_adj(X509_getm_notBefore(c->x509), -60);
  X509_gmtime_adj(X509_getm_notAfter(c->x509), 3600);
  X509_set_pubkey(c->x509, c->key);
  X509_NAME* name = X509_get_subject_name(c->x509);
  for (const auto& [field, value] : subject) {
    X509_NAME_add_entry_by_txt(name, field.c_str(), MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1, 0);
  }
  X509_set_issuer_name(c->x509, issuer ? X509_get_subject_name(issuer->x509) : name);
  if (issuer == nullptr) {  // a certificate authority
    X509_EXTENSION* ext =
        X509V3_EXT_conf_nid(nullptr, nullptr, NID_basic_constraints, "critical,CA:TRUE");
    X509_add_ext(c->x509, ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_sign(c->x509, issuer ? issuer->key : c->key, EVP_sha256());
  return c;
}

constexpr int32_t big_answer = 1 << 20;

// Records who sent each request, and answers it with its correlation id.
class identity_handler : public request_handler {
 public:
  asio::awaitable<response> handle(request req) override {
    {
      std::lock_guard lock(mu);
      last = req.identity ? req.identity->who.to_string() + " " + req.identity->listener + " " +
                                to_string(req.identity->protocol)
                          : "none";
    }
    // A correlation id from big_answer on is answered with that many bytes after it, each
    // its offset's low byte: a response of many TLS records.
    const int32_t id = req.header.header.correlation_id;
    const size_t body = id >= big_answer ? static_cast<size_t>(id) : 0;
    response r;
    r.bytes.resize(8 + body);
    base::store_be<int32_t>(r.bytes.data(), static_cast<int32_t>(4 + body));
    base::store_be<int32_t>(r.bytes.data() + 4, id);
    for (size_t i = 0; i < body; ++i) r.bytes[8 + i] = static_cast<uint8_t>(i);
    co_return r;
  }
  std::string seen() {
    std::lock_guard lock(mu);
    return last;
  }
  std::mutex mu;
  std::string last;
};

std::vector<uint8_t> frame(int32_t correlation_id) {
  return testing::api_versions_frame(correlation_id);
}

class TlsServerTest : public ::testing::Test {
 protected:
  TlsServerTest() {
    ca_ = make_cert({{"CN", "Silt Test CA"}}, nullptr);
    server_cert_ = make_cert({{"CN", "localhost"}}, ca_.get());
    client_cert_ =
        make_cert({{"C", "US"}, {"O", "Silt"}, {"OU", "eng"}, {"CN", "client"}}, ca_.get());
  }
  void start(const std::string& client_auth, const std::string& rules = "DEFAULT",
             const server_options& o = {}) {
    tls_options t;
    t.keystore_type = "PEM";
    t.keystore_certificate_chain = server_cert_->cert_pem();
    t.keystore_key = server_cert_->key_pem();
    t.truststore_type = "PEM";
    t.truststore_certificates = ca_->cert_pem();
    t.client_auth = client_auth;
    t.cipher_suites = cipher_suites_;
    auto ctx = make_tls_context(t);
    ASSERT_TRUE(ctx) << ctx.error();
    listener_options l;
    l.name = "SECURE";
    l.protocol = security_protocol::ssl;
    l.tls = std::make_shared<tls_context_source>(*ctx);
    auto m = principal_mapper::parse(rules);
    ASSERT_TRUE(m) << m.error();
    l.principal_rules = std::make_shared<const principal_mapper>(std::move(*m));
    server_ = std::make_unique<server>(io_, o, handler_);
    auto p = server_->listen("127.0.0.1", 0, l);
    ASSERT_TRUE(p) << p.error();
    port_ = *p;
    server_->start();
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    if (thread_.joinable()) {
      server_->stop([this] { io_.stop(); });
      thread_.join();
    }
  }

  // A TLS client on a new connection; null when the handshake fails.
  struct client {
    int fd = -1;
    SSL_CTX* ctx = nullptr;
    SSL* ssl = nullptr;
    ~client() {
      if (ssl) SSL_free(ssl);
      if (ctx) SSL_CTX_free(ctx);
      if (fd >= 0) ::close(fd);
    }
  };
  std::unique_ptr<client> connect_tls(bool with_cert, const char* tls13_suites = nullptr) {
    auto c = std::make_unique<client>();
    c->fd = testing::connect_to(port_);
    c->ctx = SSL_CTX_new(TLS_client_method());
    if (tls13_suites != nullptr) SSL_CTX_set_ciphersuites(c->ctx, tls13_suites);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(c->ctx), ca_->x509);
    SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, nullptr);
    if (with_cert) {
      SSL_CTX_use_certificate(c->ctx, client_cert_->x509);
      SSL_CTX_use_PrivateKey(c->ctx, client_cert_->key);
    }
    c->ssl = SSL_new(c->ctx);
    SSL_set_fd(c->ssl, c->fd);
    if (SSL_connect(c->ssl) != 1) {
      ERR_clear_error();
      return nullptr;
    }
    return c;
  }
  // Sends a request and returns the correlation id answered, -1 on a closed connection.
  static int32_t round_trip(client& c, int32_t id) {
    const auto f = frame(id);
    if (SSL_write(c.ssl, f.data(), static_cast<int>(f.size())) <= 0) return -1;
    uint8_t buf[8];
    int got = 0;
    while (got < 8) {
      const int n = SSL_read(c.ssl, buf + got, 8 - got);
      if (n <= 0) return -1;
      got += n;
    }
    return base::load_be<int32_t>(buf + 4);
  }

  std::unique_ptr<cert> ca_, server_cert_, client_cert_;
  std::vector<std::string> cipher_suites_;
  asio::io_context io_;
  identity_handler handler_;
  std::unique_ptr<server> server_;
  uint16_t port_ = 0;
  std::thread thread_;
};

TEST_F(TlsServerTest, AnswersOverTlsAsAnonymousWithoutClientCertificate) {
  start("none");
  auto c = connect_tls(false);
  ASSERT_TRUE(c);
  EXPECT_EQ(round_trip(*c, 7), 7);
  EXPECT_EQ(handler_.seen(), "User:ANONYMOUS SECURE SSL");
  EXPECT_EQ(server_->stats().tls_handshakes, 1u);
}

// Without ssl.cipher.suites the broker's order decides (AES-128-GCM first), but a client
// listing ChaCha20-Poly1305 first gets it; with ssl.cipher.suites the client's order does.
TEST_F(TlsServerTest, CipherSuiteOrder) {
  start("none");
  const auto suite = [this](const char* client_suites) {
    auto c = connect_tls(false, client_suites);
    return c ? std::string(SSL_CIPHER_get_name(SSL_get_current_cipher(c->ssl))) : "failed";
  };
  EXPECT_EQ(suite("TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256"), "TLS_AES_128_GCM_SHA256");
  EXPECT_EQ(suite("TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"),
            "TLS_CHACHA20_POLY1305_SHA256");
  EXPECT_EQ(suite("TLS_AES_256_GCM_SHA384"), "TLS_AES_256_GCM_SHA384");
  TearDown();
  cipher_suites_ = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384"};
  io_.restart();
  start("none");
  EXPECT_EQ(suite("TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256"), "TLS_AES_256_GCM_SHA384");
  EXPECT_EQ(suite("TLS_CHACHA20_POLY1305_SHA256"), "failed");
}

// Requests sent together arrive in records that end mid-frame; every one is answered, in
// order, and a response of megabytes arrives whole.
TEST_F(TlsServerTest, PipelinedRequestsAndALargeResponseCrossRecords) {
  start("none");
  auto c = connect_tls(false);
  ASSERT_TRUE(c);
  constexpr int32_t count = 3000;
  std::vector<uint8_t> all;
  for (int32_t id = 0; id < count; ++id) {
    const auto f = frame(id);
    all.insert(all.end(), f.begin(), f.end());
  }
  const auto big = frame(3 * big_answer);
  all.insert(all.end(), big.begin(), big.end());
  ASSERT_GT(SSL_write(c->ssl, all.data(), static_cast<int>(all.size())), 0);
  auto read_exactly = [&c](uint8_t* out, size_t n) {
    for (size_t got = 0; got < n;) {
      const int r = SSL_read(c->ssl, out + got, static_cast<int>(n - got));
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  };
  uint8_t head[8];
  for (int32_t id = 0; id < count; ++id) {
    ASSERT_TRUE(read_exactly(head, 8)) << id;
    ASSERT_EQ(base::load_be<int32_t>(head), 4);
    ASSERT_EQ(base::load_be<int32_t>(head + 4), id);
  }
  ASSERT_TRUE(read_exactly(head, 8));
  ASSERT_EQ(base::load_be<int32_t>(head), 4 + 3 * big_answer);
  ASSERT_EQ(base::load_be<int32_t>(head + 4), 3 * big_answer);
  std::vector<uint8_t> body(3 * static_cast<size_t>(big_answer));
  ASSERT_TRUE(read_exactly(body.data(), body.size()));
  for (size_t i = 0; i < body.size(); ++i) {
    ASSERT_EQ(body[i], static_cast<uint8_t>(i)) << i;
  }
  EXPECT_EQ(round_trip(*c, 7), 7);
}

TEST_F(TlsServerTest, ClientCertificateSubjectIsThePrincipal) {
  start("required");
  auto c = connect_tls(true);
  ASSERT_TRUE(c);
  EXPECT_EQ(round_trip(*c, 1), 1);
  EXPECT_EQ(handler_.seen(), "User:CN=client,OU=eng,O=Silt,C=US SECURE SSL");
}

TEST_F(TlsServerTest, PrincipalMappingRulesApply) {
  start("requested", "RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/U,DEFAULT");
  auto c = connect_tls(true);
  ASSERT_TRUE(c);
  EXPECT_EQ(round_trip(*c, 1), 1);
  EXPECT_EQ(handler_.seen(), "User:CLIENT@ENG SECURE SSL");
}

TEST_F(TlsServerTest, RequiredClientCertificateIsRequired) {
  start("required");
  auto c = connect_tls(false);
  // TLS 1.3: the client learns of the refusal on its first read.
  if (c) {
    EXPECT_EQ(round_trip(*c, 1), -1);
  }
  auto ok = connect_tls(true);
  ASSERT_TRUE(ok);
  EXPECT_EQ(round_trip(*ok, 2), 2);
}

TEST_F(TlsServerTest, HandshakeNeverStartedIsClosedAfterTheTimeout) {
  server_options o;
  o.handshake_timeout = std::chrono::milliseconds(200);
  start("none", "DEFAULT", o);
  const int fd = testing::connect_to(port_);
  const auto t0 = std::chrono::steady_clock::now();
  char b;
  EXPECT_EQ(::recv(fd, &b, 1, 0), 0);  // closed, well before the 5 s receive timeout
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  ::close(fd);
  // Counted once the aborted handshake returns, just after the close.
  for (int i = 0; i < 100 && server_->stats().tls_handshake_timeouts == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->stats().tls_handshake_timeouts, 1u);
  // Others are still served.
  auto c = connect_tls(false);
  ASSERT_TRUE(c);
  EXPECT_EQ(round_trip(*c, 3), 3);
}

TEST_F(TlsServerTest, PlaintextClientOnTheTlsPortIsClosed) {
  start("none");
  const int fd = testing::connect_to(port_);
  const auto f = frame(1);
  ASSERT_EQ(::send(fd, f.data(), f.size(), MSG_NOSIGNAL), static_cast<ssize_t>(f.size()));
  char buf[64];
  ssize_t n = 0;
  // The server may answer with a TLS alert before closing; never with a Kafka response.
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  EXPECT_EQ(n, 0);
  ::close(fd);
  for (int i = 0; i < 100 && server_->stats().tls_handshake_failures == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->stats().tls_handshake_failures, 1u);
  auto c = connect_tls(false);
  ASSERT_TRUE(c);
  EXPECT_EQ(round_trip(*c, 4), 4);
}

TEST(TlsContext, ErrorsNameTheSettingAndHideThePassword) {
  tls_options o;
  o.keystore_location = "/nonexistent/broker.p12";
  o.keystore_password = "HUNTER2";
  auto e = make_tls_context(o);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().rfind("cannot read ssl.keystore.location '/nonexistent/broker.p12'", 0), 0u)
      << e.error();
  // A key that is not the certificate's.
  auto a = make_cert({{"CN", "a"}}, nullptr);
  auto b = make_cert({{"CN", "b"}}, nullptr);
  o = {};
  o.keystore_type = "PEM";
  o.keystore_certificate_chain = a->cert_pem();
  o.keystore_key = b->key_pem();
  o.key = [](std::string_view s) { return "listener.name.x." + std::string(s); };
  e = make_tls_context(o);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error(),
            "the private key of listener.name.x.ssl.keystore.key and "
            "listener.name.x.ssl.keystore.certificate.chain does not match its certificate");
  EXPECT_EQ(e.error().find("HUNTER2"), std::string::npos);
}

TEST(X509Subject, PrintedAsJavaPrintsRfc2253) {
  auto c = make_cert({{"C", "US"},
                      {"ST", "CA"},
                      {"O", "Silt, Inc."},
                      {"OU", "eng"},
                      {"CN", "client"},
                      {"emailAddress", "a@b"}},
                     nullptr);
  EXPECT_EQ(rfc2253_subject(X509_get_subject_name(c->x509)),
            "1.2.840.113549.1.9.1=#1603614062,CN=client,OU=eng,O=Silt\\, Inc.,ST=CA,C=US");
}

}  // namespace
}  // namespace silt::net
