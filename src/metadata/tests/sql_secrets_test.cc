// The metadata store's messages quote no credential of its URI: not the password of a
// postgresql:// URI in either form (user:password@, ?password=), not what libpq echoes of a
// malformed URI, not describe().
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "metadata/sql.h"
#include "metadata/testing/test_database.h"

namespace silt::metadata::sql {
namespace {

// The error of opening `uri`, which must fail.
std::string error_of(const std::string& uri) {
  auto db = open_database(uri);
  EXPECT_FALSE(db) << uri;
  return db ? "" : db.error();
}

TEST(MetadataStoreSecrets, AFailedConnectionQuotesTheUriMasked) {
  // Port 1 on loopback: refused at once, no server needed.
  const auto e = error_of("postgresql://silt:PGSECRET@127.0.0.1:1/silt?connect_timeout=2");
  EXPECT_EQ(e.find("PGSECRET"), std::string::npos) << e;
  EXPECT_NE(e.find("postgresql://silt:***@127.0.0.1:1/silt"), std::string::npos) << e;
  const auto q = error_of("postgresql://127.0.0.1:1/silt?user=silt&password=PGSECRET");
  EXPECT_EQ(q.find("PGSECRET"), std::string::npos) << q;
  EXPECT_NE(q.find("password=***"), std::string::npos) << q;
}

TEST(MetadataStoreSecrets, WhatLibpqEchoesOfAMalformedUriIsMasked) {
  // libpq quotes the token it cannot decode, and the whole URI when a bracket is unclosed.
  for (const std::string uri :
       {"postgresql://silt:PG%ZZSECRET@127.0.0.1:1/silt", "postgresql://silt:PGSECRET@[::1:1/silt",
        "postgresql://silt@127.0.0.1:1/silt?password=PG%ZZSECRET",
        "postgres://silt:PGSECRET@127.0.0.1:notaport/silt"}) {
    const auto e = error_of(uri);
    EXPECT_EQ(e.find("SECRET"), std::string::npos) << e;
  }
}

TEST(MetadataStoreSecrets, AnUnsupportedUriIsQuotedMasked) {
  const auto e = error_of("mysql://silt:PGSECRET@127.0.0.1/silt");
  EXPECT_EQ(e,
            "unsupported metadata store URI mysql://silt:***@127.0.0.1/silt "
            "(sqlite:///path or postgresql://user:password@host:port/db)");
}

// On a server (trust authentication takes any password): describe() shows none.
TEST(MetadataStoreSecrets, DescribeShowsNoPassword) {
  const auto dir = std::filesystem::temp_directory_path() / "silt_sql_secrets_test";
  const std::string uri = testing::fresh_uri("postgresql", dir);  // postgresql://silt@host...
  const auto at = uri.find('@');
  ASSERT_NE(at, std::string::npos) << uri;
  const std::string with_password = uri.substr(0, at) + ":PGSECRET" + uri.substr(at);
  auto db = open_database(with_password);
  ASSERT_TRUE(db) << db.error();
  EXPECT_EQ((*db)->describe().find("PGSECRET"), std::string::npos) << (*db)->describe();
  EXPECT_NE((*db)->describe().find(":***@"), std::string::npos) << (*db)->describe();
}

}  // namespace
}  // namespace silt::metadata::sql
