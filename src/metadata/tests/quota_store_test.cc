// The client quota store on SQLite and on PostgreSQL: quotas survive reopening with their exact
// values, defaults and names stay apart, removals apply, and another broker's changes arrive
// through refresh().
#include "metadata/quota_store.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "metadata/testing/test_database.h"

namespace silt::metadata {
namespace {

namespace fs = std::filesystem;
using part = quota_entity_part;

quota_entity user(std::string name) {
  return {.user = part::named(std::move(name)), .client_id = {}};
}
quota_entity client(std::string name) {
  return {.user = {}, .client_id = part::named(std::move(name))};
}

class QuotaStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  QuotaStoreTest()
      : path_(fs::temp_directory_path() /
              ("quota-store-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
    uri_ = testing::fresh_uri(GetParam(), path_);
  }
  ~QuotaStoreTest() override { fs::remove_all(path_); }
  std::unique_ptr<quota_store> open() {
    auto db = sql::open_database(uri_);
    EXPECT_TRUE(db) << db.error();
    if (!db) return nullptr;
    auto s = quota_store::open(*db);
    EXPECT_TRUE(s) << s.error();
    return s ? std::move(*s) : nullptr;
  }
  static inline int counter_ = 0;
  fs::path path_;
  std::string uri_;
};

TEST_P(QuotaStoreTest, QuotasSurviveReopeningWithExactValues) {
  const std::string long_name(5000, 'u');  // beyond what an index row of the name would take
  const quota_entity both{.user = part::named("alice"), .client_id = part::default_name()};
  const quota_entity default_user{.user = part::default_name(), .client_id = {}};
  {
    auto s = open();
    ASSERT_TRUE(s);
    const std::vector<quota_change> changes{
        {user("alice"), "producer_byte_rate", 1024},
        {user(long_name), "consumer_byte_rate", 2048},
        {both, "request_percentage", 0.1 + 0.2},  // not a short decimal
        {default_user, "producer_byte_rate", 5e6},
        {client("alice"), "producer_byte_rate", 7},   // a client id named like a user
        {user("alice"), "producer_byte_rate", 4096},  // replaces
    };
    ASSERT_TRUE(s->alter(changes));
  }
  auto s = open();
  ASSERT_TRUE(s);
  auto all = s->load();
  ASSERT_TRUE(all) << all.error();
  const quota_map want{
      {user("alice"), {{"producer_byte_rate", 4096}}},
      {user(long_name), {{"consumer_byte_rate", 2048}}},
      {both, {{"request_percentage", 0.1 + 0.2}}},
      {default_user, {{"producer_byte_rate", 5e6}}},
      {client("alice"), {{"producer_byte_rate", 7}}},
  };
  EXPECT_EQ(*all, want);
  const std::vector<quota_change> removals{{user("alice"), "producer_byte_rate", std::nullopt},
                                           {both, "consumer_byte_rate", std::nullopt}};
  ASSERT_TRUE(s->alter(removals));
  all = s->load();
  ASSERT_TRUE(all);
  EXPECT_FALSE(all->contains(user("alice")));
  EXPECT_EQ(all->size(), 4U);
}

TEST_P(QuotaStoreTest, AnotherBrokersChangesArriveWithRefresh) {
  auto mine = open();
  auto theirs = open();
  ASSERT_TRUE(mine && theirs);
  ASSERT_TRUE(mine->load());
  ASSERT_TRUE(theirs->load());
  auto nothing = mine->refresh();
  ASSERT_TRUE(nothing);
  EXPECT_FALSE(*nothing);
  const std::vector<quota_change> c{{client("c1"), "producer_byte_rate", 100}};
  ASSERT_TRUE(theirs->alter(c));
  auto changed = mine->refresh();
  ASSERT_TRUE(changed);
  ASSERT_TRUE(*changed);
  EXPECT_EQ(**changed, (quota_map{{client("c1"), {{"producer_byte_rate", 100}}}}));
  // Its own change is no news to the store that made it.
  auto own = theirs->refresh();
  ASSERT_TRUE(own);
  EXPECT_FALSE(*own);
}

INSTANTIATE_TEST_SUITE_P(Backends, QuotaStoreTest, ::testing::ValuesIn(testing::backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace silt::metadata
