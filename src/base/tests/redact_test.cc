#include "base/redact.h"

#include <chrono>
#include <string>

#include <gtest/gtest.h>

namespace silt::base {
namespace {

TEST(RedactUri, MasksThePasswordOfUserInformation) {
  EXPECT_EQ(redact_uri("postgresql://user:secret@host/db"), "postgresql://user:***@host/db");
  EXPECT_EQ(redact_uri("postgres://silt:pw@127.0.0.1:5432/silt?sslmode=disable"),
            "postgres://silt:***@127.0.0.1:5432/silt?sslmode=disable");
  EXPECT_EQ(redact_uri("http://u:p@h:1"), "http://u:***@h:1");
  // An empty password still says there is one.
  EXPECT_EQ(redact_uri("postgresql://user:@host/db"), "postgresql://user:***@host/db");
}

TEST(RedactUri, KeepsAUserWithoutPasswordAndEverythingElse) {
  for (const char* kept : {"postgresql://silt@127.0.0.1:5432/postgres",
                           "postgresql://host:5432/db?sslmode=require&application_name=x",
                           "sqlite:///var/lib/silt/metadata.db", "file:///srv/a@b/objects",
                           "file:///data/objects?direct=false",
                           "s3://bucket?endpoint=http://127.0.0.1:7480&access_key=AKIAEXAMPLE",
                           "azblob://c?account=devstoreaccount1&endpoint=http://h:10000/a", "",
                           "no uri at all", "://", "x://@", "?", "?&&=&"}) {
    EXPECT_EQ(redact_uri(kept), kept);
  }
}

TEST(RedactUri, MasksAPasswordHoldingUnescapedDelimiters) {
  EXPECT_EQ(redact_uri("postgresql://u:pa/ss@h/db"), "postgresql://u:***@h/db");
  EXPECT_EQ(redact_uri("postgresql://u:pa?ss@h/db"), "postgresql://u:***@h/db");
  EXPECT_EQ(redact_uri("postgresql://u:p@ss@h/db"), "postgresql://u:***@h/db");
  EXPECT_EQ(redact_uri("postgresql://u:p%40ss@h/db"), "postgresql://u:***@h/db");
  EXPECT_EQ(redact_uri("postgresql://u:pa?x@h/db?sas=S"), "postgresql://u:***@h/db?sas=***");
}

// "h:5432?password=p@ss" reads as a password "5432?password=p" before host "ss", or as a
// parameter password=p@ss: both are masked.
TEST(RedactUri, MasksBothReadingsOfAnAmbiguousAt) {
  EXPECT_EQ(redact_uri("postgresql://h:5432?password=p@ss"), "postgresql://h:***");
  EXPECT_EQ(redact_uri("s3://b?region=r:1&secret_key=x@y"), "s3://b?region=r:***");
  EXPECT_EQ(redact_secrets("token \"p@ss\"", "postgresql://h:5432?password=p@ss"), "token \"***\"");
}

TEST(RedactUri, MasksSecretQueryParameters) {
  EXPECT_EQ(redact_uri("postgresql://h/db?user=silt&password=secret&sslmode=require"),
            "postgresql://h/db?user=silt&password=***&sslmode=require");
  EXPECT_EQ(redact_uri("postgresql://h/db?sslpassword=x"), "postgresql://h/db?sslpassword=***");
  EXPECT_EQ(redact_uri("s3://b?endpoint=http://h:1&access_key=AK&secret_key=SK%2Bx&region=r"),
            "s3://b?endpoint=http://h:1&access_key=AK&secret_key=***&region=r");
  EXPECT_EQ(redact_uri("s3://b?access_key=AK&secret_key=SK&session_token=TOKEN"),
            "s3://b?access_key=AK&secret_key=***&session_token=***");
  EXPECT_EQ(redact_uri("azblob://c?account=a&key=bXlrZXk="), "azblob://c?account=a&key=***");
  EXPECT_EQ(redact_uri("azblob://c?account=a&sas=sv%3D2022-11-02%26sig%3DabC%2B"),
            "azblob://c?account=a&sas=***");
  // Names in any case, escaped or with '-' for '_'.
  EXPECT_EQ(redact_uri("x://h?Password=1&SECRET-KEY=2&secret%5Fkey=3"),
            "x://h?Password=***&SECRET-KEY=***&secret%5Fkey=***");
}

TEST(RedactUri, MasksTheSignatureOfAnAzureSasInARequestUrl) {
  EXPECT_EQ(redact_uri("http://127.0.0.1:10000/acct/c/objects/1?comp=list&sv=2022-11-02&ss=b"
                       "&srt=co&sp=rwdlac&se=2030-01-01T00:00:00Z&sig=AbC%2Fd%3D"),
            "http://127.0.0.1:10000/acct/c/objects/1?comp=list&sv=2022-11-02&ss=b"
            "&srt=co&sp=rwdlac&se=2030-01-01T00:00:00Z&sig=***");
  // An unescaped SAS given as sas=: its parameters split, the signature masked all the same.
  EXPECT_EQ(redact_uri("azblob://c?account=a&sas=sv=2022-11-02&ss=b&sig=XYZ"),
            "azblob://c?account=a&sas=***&ss=b&sig=***");
}

TEST(RedactUri, MasksASecretHoldingAnUnescapedAmpersand) {
  EXPECT_EQ(redact_uri("s3://b?secret_key=ab&cd&region=r"), "s3://b?secret_key=***&region=r");
}

TEST(RedactUri, MasksThePasswordOfAUriGivenAsAParameter) {
  EXPECT_EQ(redact_uri("s3://b?endpoint=http://user:pw@h:1&region=r"),
            "s3://b?endpoint=http://user:***@h:1&region=r");
  EXPECT_EQ(redact_uri("http://user:pw@h:1"), "http://user:***@h:1");
}

TEST(RedactUri, TakesLinearTime) {
  // Inputs that would make a backtracking matcher quadratic: many '@', ':', '?', '&', "://".
  const std::string parts[] = {std::string(200000, '@'),
                               std::string(200000, ':'),
                               "x://" + std::string(200000, '?'),
                               "x://h?" + std::string(200000, '&'),
                               "x://h?" + std::string(100000, '=') + std::string(100000, '&'),
                               [] {
                                 std::string s = "x://h?";
                                 for (int i = 0; i < 20000; ++i) s += "e=a://b:c@d&";
                                 return s;
                               }()};
  for (const auto& s : parts) {
    const auto start = std::chrono::steady_clock::now();
    (void)redact_uri(s);
    // Generous for a sanitized build; a quadratic pass over 200,000 bytes takes minutes.
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)) << s.substr(0, 20);
  }
}

TEST(IsSecretName, NamesOfCredentials) {
  for (const char* name : {"password",
                           "sslpassword",
                           "secret_key",
                           "session_token",
                           "key",
                           "sas",
                           "sig",
                           "pwd",
                           "ssl.key.password",
                           "ssl.keystore.password",
                           "ssl.truststore.password",
                           "ssl.keystore.key",
                           "sasl.jaas.config",
                           "listener.name.sasl_ssl.plain.sasl.jaas.config",
                           "AccountKey",
                           "SharedAccessSignature",
                           "X-Amz-Signature",
                           "x-amz-security-token",
                           "client_secret",
                           "account_key",
                           "api_key"}) {
    EXPECT_TRUE(is_secret_name(name)) << name;
  }
  for (const char* name : {"access_key", "account", "endpoint", "region", "user", "host", "sslmode",
                           "object.store.uri", "log.retention.ms", "keystore", "ssl.keystore.type",
                           "key_id", "public_key", "sv", "se", "sp", ""}) {
    EXPECT_FALSE(is_secret_name(name)) << name;
  }
}

TEST(RedactSecrets, MasksTheUriAndItsSecretsWhereverAMessageQuotesThem) {
  const std::string uri = "postgresql://silt:hunter2@db.example.com:5432/silt";
  EXPECT_EQ(redact_secrets("cannot connect to " + uri + ": refused", uri),
            "cannot connect to postgresql://silt:***@db.example.com:5432/silt: refused");
  // libpq quotes a token of the URI, with its escapes.
  const std::string escaped = "postgresql://silt:p%ZZw%40rd@h/db";
  EXPECT_EQ(redact_secrets("invalid percent-encoded token: \"p%ZZw%40rd\"", escaped),
            "invalid percent-encoded token: \"***\"");
  // ... or decoded.
  EXPECT_EQ(redact_secrets("password \"pw@rd\" refused", "postgresql://silt:pw%40rd@h/db"),
            "password \"***\" refused");
  EXPECT_EQ(redact_secrets("no secret here", uri), "no secret here");
  // A short secret only where it stands alone, not inside other words.
  EXPECT_EQ(redact_secrets("'b/x' is not a bucket: b", "s3://b/x?secret_key=b"),
            "'***/x' is not a bucket: ***");
  EXPECT_EQ(redact_secrets("LONGSECRETx", "s3://b?secret_key=LONGSECRET"), "***x");
  // A parser that took the piece after an unescaped '&' for a parameter of its own.
  EXPECT_EQ(redact_secrets("unknown parameter 'cdef'", "s3://b?secret_key=ab&cdef&region=r"),
            "unknown parameter '***'");
  EXPECT_EQ(redact_secrets("nothing to hide", "sqlite:///x.db"), "nothing to hide");
}

}  // namespace
}  // namespace silt::base
