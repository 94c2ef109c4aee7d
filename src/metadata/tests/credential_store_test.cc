// The credential store on SQLite and on PostgreSQL: SCRAM credentials survive reopening, are
// replaced and deleted in one transaction per change, and reach the other brokers' stores with
// refresh(); lookups keep working while changes are written.
#include "metadata/credential_store.h"

#include <atomic>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "metadata/testing/test_database.h"

namespace silt::metadata {
namespace {

namespace fs = std::filesystem;
using security::scram_algorithm;
using security::scram_credential;

scram_credential credential(std::string_view password, int32_t iterations = 4096) {
  const std::string salt = "salt-of-" + std::string(password);
  return security::make_scram_credential(
      scram_algorithm::sha256, password,
      {reinterpret_cast<const uint8_t*>(salt.data()), salt.size()}, iterations);
}

credential_change set(std::string user, scram_algorithm a, scram_credential c) {
  return {std::move(user), a, std::move(c)};
}

credential_change remove(std::string user, scram_algorithm a) {
  return {std::move(user), a, std::nullopt};
}

class CredentialStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  CredentialStoreTest()
      : path_(fs::temp_directory_path() / ("credential-store-" + std::to_string(::getpid()) + "-" +
                                           std::to_string(counter_++))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
    uri_ = testing::fresh_uri(GetParam(), path_);
  }
  ~CredentialStoreTest() override { fs::remove_all(path_); }
  std::unique_ptr<credential_store> open() {
    auto s = credential_store::open(uri_);
    EXPECT_TRUE(s) << s.error();
    return s ? std::move(*s) : nullptr;
  }
  static inline int counter_ = 0;
  fs::path path_;
  std::string uri_;
};

TEST_P(CredentialStoreTest, CredentialsSurviveReopening) {
  const auto alice256 = credential("a", 8192);
  const auto alice512 = credential("b");
  {
    auto s = open();
    ASSERT_TRUE(s);
    EXPECT_TRUE(s->users().empty());
    auto r = s->alter({set("alice", scram_algorithm::sha512, alice512),
                       set("alice", scram_algorithm::sha256, alice256),
                       set("bob", scram_algorithm::sha256, credential("c"))});
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, (std::vector<bool>{true, true, true}));
    EXPECT_EQ(s->find("alice", scram_algorithm::sha256), alice256);
  }
  auto s = open();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->find("alice", scram_algorithm::sha256), alice256);
  EXPECT_EQ(s->find("alice", scram_algorithm::sha512), alice512);
  EXPECT_FALSE(s->find("bob", scram_algorithm::sha512));
  EXPECT_FALSE(s->find("carol", scram_algorithm::sha256));
  EXPECT_FALSE(s->find("alic", scram_algorithm::sha256));
  EXPECT_TRUE(s->has("alice", scram_algorithm::sha512));
  EXPECT_FALSE(s->has("bob", scram_algorithm::sha512));
  EXPECT_FALSE(s->has("carol", scram_algorithm::sha256));
  EXPECT_EQ(s->describe("alice"), (std::vector<credential_info>{{scram_algorithm::sha256, 8192},
                                                                {scram_algorithm::sha512, 4096}}));
  EXPECT_TRUE(s->describe("carol").empty());
  EXPECT_EQ(s->users(), (std::vector<std::string>{"alice", "bob"}));
}

TEST_P(CredentialStoreTest, ChangesReplaceAndDelete) {
  auto s = open();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->alter({set("alice", scram_algorithm::sha256, credential("old"))}));
  const auto fresh = credential("new", 10000);
  ASSERT_TRUE(s->alter({set("alice", scram_algorithm::sha256, fresh)}));
  EXPECT_EQ(s->find("alice", scram_algorithm::sha256), fresh);
  // A deletion of what is not there changes nothing and says so; the others apply.
  auto r =
      s->alter({remove("alice", scram_algorithm::sha512), remove("nobody", scram_algorithm::sha256),
                set("bob", scram_algorithm::sha512, credential("b"))});
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<bool>{false, false, true}));
  EXPECT_TRUE(s->find("bob", scram_algorithm::sha512));
  r = s->alter({remove("alice", scram_algorithm::sha256)});
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<bool>{true}));
  EXPECT_FALSE(s->find("alice", scram_algorithm::sha256));
  EXPECT_TRUE(s->describe("alice").empty());
  EXPECT_EQ(s->users(), (std::vector<std::string>{"bob"}));
  // And so it is stored.
  auto again = open();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->users(), (std::vector<std::string>{"bob"}));
}

// Two stores on one database (two brokers): each takes in the other's changes with refresh(),
// and its own changes are not read again.
TEST_P(CredentialStoreTest, RefreshTakesInAnotherStoresChanges) {
  auto a = open();
  auto b = open();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->refresh(), false);
  EXPECT_EQ(a->last_change(), 0);
  ASSERT_TRUE(a->alter({set("alice", scram_algorithm::sha256, credential("pw"))}));
  EXPECT_GT(a->last_change(), 0);
  EXPECT_EQ(a->refresh(), false);  // its own change is in already
  EXPECT_FALSE(b->find("alice", scram_algorithm::sha256));
  EXPECT_EQ(b->refresh(), true);
  EXPECT_EQ(b->find("alice", scram_algorithm::sha256), credential("pw"));
  EXPECT_EQ(b->refresh(), false);
  ASSERT_TRUE(b->alter({remove("alice", scram_algorithm::sha256),
                        set("carol", scram_algorithm::sha512, credential("c"))}));
  EXPECT_EQ(a->refresh(), true);
  EXPECT_FALSE(a->find("alice", scram_algorithm::sha256));
  EXPECT_TRUE(a->find("carol", scram_algorithm::sha512));
  EXPECT_EQ(b->last_change(), a->last_change() + 1);
}

// A deletion checks the database, not the snapshot: a credential another broker deleted
// meanwhile is reported missing, not deleted twice.
TEST_P(CredentialStoreTest, DeletionsSeeOtherStoresChanges) {
  auto a = open();
  auto b = open();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->alter({set("alice", scram_algorithm::sha256, credential("pw"))}));
  ASSERT_EQ(b->refresh(), true);
  ASSERT_TRUE(a->alter({remove("alice", scram_algorithm::sha256)}));
  auto r = b->alter({remove("alice", scram_algorithm::sha256)});
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<bool>{false}));
  EXPECT_FALSE(b->find("alice", scram_algorithm::sha256));
  // b's own change followed a's, which it had not seen: refresh reads everything again.
  ASSERT_TRUE(a->alter({set("dave", scram_algorithm::sha256, credential("d"))}));
  EXPECT_EQ(b->refresh(), true);
  EXPECT_TRUE(b->find("dave", scram_algorithm::sha256));
}

TEST_P(CredentialStoreTest, LookupsRunWhileChangesAreWritten) {
  auto s = open();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->alter({set("alice", scram_algorithm::sha256, credential("pw"))}));
  std::atomic<bool> done{false};
  std::atomic<int> missing{0};
  std::thread reader([&] {
    while (!done) {
      if (!s->find("alice", scram_algorithm::sha256)) ++missing;
      (void)s->describe("bob");
    }
  });
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(s->alter({set("bob", scram_algorithm::sha256, credential("b", 4096 + i))}));
    ASSERT_TRUE(s->refresh());
  }
  done = true;
  reader.join();
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(s->describe("bob").front().iterations, 4096 + 19);
}

INSTANTIATE_TEST_SUITE_P(Backends, CredentialStoreTest, ::testing::ValuesIn(testing::backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace silt::metadata
