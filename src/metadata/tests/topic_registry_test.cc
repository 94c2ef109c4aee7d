// The topic registry on SQLite and on PostgreSQL: topics, partitions, configs and counters
// survive reopening; names follow Kafka's rules.
#include "metadata/topic_registry.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "metadata/testing/test_database.h"

namespace silt::metadata {
namespace {

namespace fs = std::filesystem;

class TopicRegistryTest : public ::testing::TestWithParam<std::string> {
 protected:
  TopicRegistryTest()
      : path_(fs::temp_directory_path() /
              ("topic-registry-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
    uri_ = testing::fresh_uri(GetParam(), path_);
  }
  ~TopicRegistryTest() override { fs::remove_all(path_); }
  std::unique_ptr<topic_registry> open() {
    auto r = topic_registry::open(uri_);
    EXPECT_TRUE(r) << r.error();
    return std::move(*r);
  }
  static inline int counter_ = 0;
  fs::path path_;
  std::string uri_;
};

TEST_P(TopicRegistryTest, TopicsSurviveReopening) {
  topic_id id{};
  {
    auto r = open();
    auto t = r->create("orders", 3, {{"retention.ms", "1000"}});
    ASSERT_TRUE(t);
    EXPECT_EQ((*t)->partitions(), 3);
    id = (*t)->id;
    ASSERT_TRUE(r->add_partitions("orders", 5));
    ASSERT_TRUE(r->set_configs("orders", {{"retention.bytes", "10"}}));
  }
  auto r = open();
  auto t = r->find("orders");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->partitions(), 5);
  EXPECT_EQ(t->id, id);
  EXPECT_EQ(r->find(id), t);
  EXPECT_EQ(t->configs, (std::map<std::string, std::string>{{"retention.bytes", "10"}}));
}

TEST_P(TopicRegistryTest, StreamsAreDistinctAndNeverReused) {
  auto r = open();
  auto a = r->create("a", 2, {});
  ASSERT_TRUE(a);
  // A partition's stream; none for an index the topic does not have (requests carry any int32).
  EXPECT_EQ((*a)->stream_of(base::partition_id(1)), (*a)->streams[1]);
  EXPECT_FALSE((*a)->stream_of(base::partition_id(2)));
  EXPECT_FALSE((*a)->stream_of(base::partition_id(-1)));
  ASSERT_TRUE(r->remove("a"));
  auto b = r->create("a", 2, {});
  ASSERT_TRUE(b);
  for (base::stream_id s : (*b)->streams) {
    EXPECT_EQ(std::count((*a)->streams.begin(), (*a)->streams.end(), s), 0);
  }
  auto grown = r->add_partitions("a", 3);
  ASSERT_TRUE(grown);
  EXPECT_EQ((*grown)->streams[0], (*b)->streams[0]);
  EXPECT_GT((*grown)->streams[2], (*b)->streams[1]);
}

TEST_P(TopicRegistryTest, ErrorsForExistingMissingAndShrinking) {
  auto r = open();
  ASSERT_TRUE(r->create("t", 2, {}));
  EXPECT_EQ(r->create("t", 1, {}).error(), registry_error::exists);
  EXPECT_EQ(r->remove("missing").error(), registry_error::not_found);
  EXPECT_EQ(r->add_partitions("t", 2).error(), registry_error::invalid);
  EXPECT_EQ(r->create("z", 0, {}).error(), registry_error::invalid);
}

// Two registries on one database (two brokers): each takes in the other's creations, growths,
// config changes and deletions with refresh(), and its own changes are not reported back.
TEST_P(TopicRegistryTest, RefreshTakesInAnotherRegistrysChanges) {
  auto a = open();
  auto b = open();
  auto names = [](const std::vector<topic_ptr>& v) {
    std::vector<std::string> out;
    out.reserve(v.size());
    for (const auto& t : v) out.push_back(t->name);
    return out;
  };
  auto none = b->refresh();
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->changed.empty() && none->removed.empty());

  ASSERT_TRUE(a->create("orders", 2, {{"retention.ms", "5"}}));
  ASSERT_TRUE(a->create("users", 1, {}));
  EXPECT_TRUE(a->refresh()->changed.empty());
  EXPECT_EQ(b->find("orders"), nullptr);
  auto got = b->refresh();
  ASSERT_TRUE(got);
  EXPECT_EQ(names(got->changed), (std::vector<std::string>{"orders", "users"}));
  EXPECT_TRUE(got->removed.empty());
  ASSERT_NE(b->find("orders"), nullptr);
  EXPECT_EQ(b->find("orders")->streams, a->find("orders")->streams);
  EXPECT_EQ(b->find(a->find("orders")->id), b->find("orders"));
  // A name created elsewhere and not yet refreshed here is refused, not duplicated.
  ASSERT_TRUE(b->refresh()->changed.empty());
  ASSERT_TRUE(a->create("late", 1, {}));
  auto twice = b->create("late", 3, {});
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error(), registry_error::exists);
  EXPECT_EQ(names(b->refresh()->changed), (std::vector<std::string>{"late"}));

  ASSERT_TRUE(a->add_partitions("orders", 4));
  ASSERT_TRUE(a->set_configs("users", {{"retention.bytes", "7"}}));
  ASSERT_TRUE(a->remove("late"));
  got = b->refresh();
  ASSERT_TRUE(got);
  EXPECT_EQ(names(got->changed), (std::vector<std::string>{"orders", "users"}));
  EXPECT_EQ(names(got->removed), (std::vector<std::string>{"late"}));
  EXPECT_EQ(b->find("orders")->partitions(), 4);
  EXPECT_EQ(b->find("users")->configs.at("retention.bytes"), "7");
  EXPECT_EQ(b->find("late"), nullptr);
  // b's own change reaches a.
  ASSERT_TRUE(b->create("from-b", 1, {}));
  EXPECT_EQ(names(a->refresh()->changed), (std::vector<std::string>{"from-b"}));
  EXPECT_TRUE(b->refresh()->changed.empty());
}

// A registry's last change is the counter value another registry reaches once it took that
// change in: what an admin call waits for every broker to report.
TEST_P(TopicRegistryTest, RefreshReachesTheLastChangeOfAnotherRegistry) {
  auto a = open();
  auto b = open();
  EXPECT_EQ(a->last_change(), 0);
  ASSERT_TRUE(a->create("orders", 2, {}));
  const int64_t created = a->last_change();
  EXPECT_GT(created, 0);
  auto got = b->refresh();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->version, created);
  EXPECT_EQ(b->refresh()->version, created);  // nothing changed since
  ASSERT_TRUE(a->set_configs("orders", {{"retention.ms", "5"}}));
  ASSERT_TRUE(a->remove("orders"));
  EXPECT_GT(a->last_change(), created);
  got = b->refresh();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->version, a->last_change());
  EXPECT_EQ(got->removed.size(), 1u);
  EXPECT_EQ(b->last_change(), 0);  // b changed nothing itself
}

TEST_P(TopicRegistryTest, ClusterIdIsStoredOnce) {
  std::string id;
  {
    auto r = open();
    auto a = r->cluster_id("");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->size(), 22u);
    id = *a;
  }
  auto r = open();
  EXPECT_EQ(*r->cluster_id(""), id);
}

TEST_P(TopicRegistryTest, ProducerIdBlocksDoNotOverlap) {
  auto r = open();
  auto a = r->allocate_producer_ids(1000);
  auto b = r->allocate_producer_ids(1000);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*b, *a + 1000);
}

INSTANTIATE_TEST_SUITE_P(Backends, TopicRegistryTest, ::testing::ValuesIn(testing::backends()),
                         [](const auto& info) { return info.param; });

TEST(TopicName, KafkaRules) {
  EXPECT_TRUE(check_topic_name("a.b_c-1").empty());
  EXPECT_FALSE(check_topic_name("").empty());
  EXPECT_FALSE(check_topic_name(".").empty());
  EXPECT_FALSE(check_topic_name("..").empty());
  EXPECT_FALSE(check_topic_name("has space").empty());
  EXPECT_FALSE(check_topic_name(std::string(250, 'a')).empty());
  EXPECT_TRUE(check_topic_name(std::string(249, 'a')).empty());
}

}  // namespace
}  // namespace silt::metadata
