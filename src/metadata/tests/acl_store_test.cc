// The ACL store on SQLite and on PostgreSQL: ACLs survive reopening, one row per distinct ACL
// whatever the length of its names, and reach another broker's store through refresh().
#include "metadata/acl_store.h"

#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "metadata/testing/test_database.h"

namespace silt::metadata {
namespace {

namespace fs = std::filesystem;
using security::acl_binding;

acl_binding acl(std::string name, std::string principal = "User:alice") {
  return {.resource_type = security::acl_resource_type::topic,
          .resource_name = std::move(name),
          .pattern_type = security::acl_pattern_type::literal,
          .principal = std::move(principal),
          .host = "*",
          .operation = security::acl_operation::read,
          .permission_type = security::acl_permission_type::allow};
}

std::vector<acl_binding> sorted(std::vector<acl_binding> v) {
  std::sort(v.begin(), v.end());
  return v;
}

class AclStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  AclStoreTest()
      : path_(fs::temp_directory_path() /
              ("acl-store-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
    uri_ = testing::fresh_uri(GetParam(), path_);
  }
  ~AclStoreTest() override { fs::remove_all(path_); }
  std::unique_ptr<acl_store> open() {
    auto db = sql::open_database(uri_);
    EXPECT_TRUE(db) << db.error();
    if (!db) return nullptr;
    auto s = acl_store::open(*db);
    EXPECT_TRUE(s) << s.error();
    return s ? std::move(*s) : nullptr;
  }
  static inline int counter_ = 0;
  fs::path path_;
  std::string uri_;
};

TEST_P(AclStoreTest, AclsSurviveReopeningOncePerDistinctAcl) {
  const std::string long_name(5000, 't');  // beyond what an index row of the name would take
  {
    auto s = open();
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->alter(std::vector{acl("a"), acl(long_name), acl("a")}, {}));
    ASSERT_TRUE(s->alter(std::vector{acl("a")}, {}));  // exists: nothing changes
  }
  auto s = open();
  ASSERT_TRUE(s);
  auto all = s->load();
  ASSERT_TRUE(all) << all.error();
  EXPECT_EQ(sorted(*all), sorted({acl("a"), acl(long_name)}));
  ASSERT_TRUE(s->alter({}, std::vector{acl(long_name), acl("never-stored")}));
  all = s->load();
  ASSERT_TRUE(all);
  EXPECT_EQ(*all, std::vector{acl("a")});
}

TEST_P(AclStoreTest, AnotherBrokersChangesArriveWithRefresh) {
  auto mine = open();
  auto theirs = open();
  ASSERT_TRUE(mine && theirs);
  ASSERT_TRUE(mine->load());
  ASSERT_TRUE(theirs->load());
  auto nothing = mine->refresh();
  ASSERT_TRUE(nothing);
  EXPECT_FALSE(*nothing);
  ASSERT_TRUE(theirs->alter(std::vector{acl("x", "User:bob")}, {}));
  auto changed = mine->refresh();
  ASSERT_TRUE(changed);
  ASSERT_TRUE(*changed);
  EXPECT_EQ(**changed, std::vector{acl("x", "User:bob")});
  // Its own change is no news to the store that made it.
  auto own = theirs->refresh();
  ASSERT_TRUE(own);
  EXPECT_FALSE(*own);
  nothing = mine->refresh();
  ASSERT_TRUE(nothing);
  EXPECT_FALSE(*nothing);
}

INSTANTIATE_TEST_SUITE_P(Backends, AclStoreTest, ::testing::ValuesIn(testing::backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace silt::metadata
