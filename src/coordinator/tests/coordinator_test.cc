// The coordinator over a real group store (SQLite in a temp dir), with its writes run on an
// io_context the test drives: answers that show durable group state wait for their write.
#include "coordinator/coordinator.h"

#include <filesystem>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include "metadata/sql.h"

namespace silt::coordinator {
namespace {

namespace fs = std::filesystem;

class Coordinator : public ::testing::Test {
 protected:
  Coordinator()
      : dir_(fs::temp_directory_path() / ("coordinator-test-" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto db = metadata::sql::open_database("sqlite://" + (dir_ / "metadata.db").string());
    EXPECT_TRUE(db) << db.error();
    auto s = metadata::group_store::open(std::move(*db), base::node_id(1));
    EXPECT_TRUE(s) << s.error();
    store_ = std::move(*s);
    options_.limits.initial_rebalance_delay_ms = 0;
  }
  void TearDown() override {
    if (coordinator_) coordinator_->close();
    io_.run();
    coordinator_.reset();
  }
  ~Coordinator() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  void open() {
    if (coordinator_) {
      coordinator_->close();
      io_.run();
      io_.restart();
    }
    auto c = group_coordinator::open(options_, *store_, io_.get_executor());
    ASSERT_TRUE(c) << c.error();
    coordinator_ = std::move(*c);
  }

  join_request join_of(const std::string& member_id,
                       std::optional<std::string> instance_id = std::nullopt) {
    join_request r;
    r.member_id = member_id;
    r.group_instance_id = std::move(instance_id);
    r.client_id = "client";
    r.client_host = "/127.0.0.1";
    r.session_timeout_ms = 10000;
    r.rebalance_timeout_ms = 10000;
    r.protocol_type = "consumer";
    r.protocols = {{"range", {1, 2, 3}}};
    return r;
  }

  // Joins `g` as its only member (static when `instance` is set) and returns the join's answer.
  join_result join_alone(const std::string& g, std::optional<std::string> instance) {
    std::optional<join_result> joined;
    coordinator_->join(g, join_of("", std::move(instance)),
                       [&](join_result r) { joined = std::move(r); });
    io_.run();
    io_.restart();
    EXPECT_TRUE(joined);
    return joined ? *joined : join_result{};
  }

  fs::path dir_;
  boost::asio::io_context io_;
  std::unique_ptr<metadata::group_store> store_;
  coordinator_options options_;
  std::unique_ptr<group_coordinator> coordinator_;
};

// A shard moves from one node's coordinator to another's: the new holder sees what the old one
// committed, the old one's writes after the move are refused (NOT_COORDINATOR), and once it
// dropped the shard it answers NOT_COORDINATOR at once and names the route it was given. Its
// other shards stay served.
TEST_F(Coordinator, AShardTakenByAnotherNodeIsServedThereOnly) {
  open();
  auto db = metadata::sql::open_database("sqlite://" + (dir_ / "metadata.db").string());
  ASSERT_TRUE(db) << db.error();
  auto other_store = metadata::group_store::open(std::move(*db), base::node_id(2));
  ASSERT_TRUE(other_store) << other_store.error();
  auto other = group_coordinator::open(options_, **other_store, io_.get_executor(), false);
  ASSERT_TRUE(other) << other.error();
  auto& b = **other;
  auto& a = *coordinator_;
  const std::string g = "moving-group";
  std::string stays = "staying-group";
  while (a.shard(stays) == a.shard(g)) stays += "x";
  EXPECT_TRUE(a.serves(g));
  EXPECT_FALSE(b.serves(g));
  EXPECT_EQ(b.coordinator_of(g, 2), -1);

  auto commit = [&](group_coordinator& c, const std::string& group, int64_t offset) {
    std::optional<error_code> result;
    c.commit(group, "", std::nullopt, -1, {{"t", 0, offset, -1, "", -1}},
             [&](error_code e) { result = e; });
    io_.run();
    io_.restart();
    EXPECT_TRUE(result);
    return result.value_or(error_code::unknown_server_error);
  };
  ASSERT_EQ(commit(a, g, 10), error_code::none);

  ASSERT_TRUE(b.take_shards({b.shard(g)}));
  EXPECT_TRUE(b.serves(g));
  ASSERT_EQ(b.fetch(g, nullptr).size(), 1u);
  EXPECT_EQ(b.fetch(g, nullptr).front().offset, 10);
  EXPECT_EQ(
      b.held(),
      (std::vector<std::pair<int32_t, base::leader_epoch>>{{b.shard(g), base::leader_epoch(1)}}));
  // The old holder has not noticed yet: its write is fenced by the shard's epoch.
  EXPECT_EQ(commit(a, g, 11), error_code::not_coordinator);
  EXPECT_EQ(b.fetch(g, nullptr).front().offset, 10);

  std::vector<int32_t> routes(static_cast<size_t>(options_.shards), 1);
  routes[static_cast<size_t>(a.shard(g))] = 2;
  a.set_routes(routes);
  a.drop_shards({a.shard(g)});
  EXPECT_FALSE(a.serves(g));
  EXPECT_EQ(a.coordinator_of(g, 1), 2);
  EXPECT_EQ(a.shard_node(a.shard(g), 1), 2);
  EXPECT_EQ(b.shard_node(b.shard(g), 2), 2);
  EXPECT_EQ(a.shard_node(options_.shards, 1), -1);
  EXPECT_EQ(commit(a, g, 12), error_code::not_coordinator);
  EXPECT_TRUE(a.fetch(g, nullptr).empty());
  EXPECT_EQ(commit(b, g, 13), error_code::none);
  EXPECT_EQ(b.fetch(g, nullptr).front().offset, 13);

  EXPECT_TRUE(a.serves(stays));
  EXPECT_EQ(a.coordinator_of(stays, 1), 1);
  EXPECT_EQ(commit(a, stays, 5), error_code::none);
  b.close();
  io_.run();
  io_.restart();
}

TEST_F(Coordinator, ASyncAnswerWaitsUntilTheAssignmentIsDurable) {
  open();
  const join_result joined = join_alone("g", std::nullopt);
  ASSERT_EQ(joined.error, error_code::none);
  ASSERT_EQ(joined.leader, joined.member_id);

  std::optional<sync_result> synced;
  coordinator_->sync("g", joined.member_id, std::nullopt, joined.generation_id, "consumer", "range",
                     {{joined.member_id, {7, 7}}}, [&](sync_result r) { synced = std::move(r); });
  EXPECT_FALSE(synced) << "answered before the group's record was written";
  io_.run();  // the offset writer's transaction
  ASSERT_TRUE(synced);
  EXPECT_EQ(synced->error, error_code::none);
  EXPECT_EQ(synced->assignment, (std::vector<uint8_t>{7, 7}));
}

TEST_F(Coordinator, AStaticMemberBackUnderANewIdIsAnsweredOnceThatIdIsDurable) {
  open();
  const join_result first = join_alone("g", "instance-1");
  ASSERT_EQ(first.error, error_code::none);
  std::optional<sync_result> synced;
  coordinator_->sync("g", first.member_id, "instance-1", first.generation_id, "consumer", "range",
                     {{first.member_id, {1}}}, [&](sync_result r) { synced = std::move(r); });
  io_.run();
  io_.restart();
  ASSERT_TRUE(synced);

  // The same instance comes back with no member id: it gets a new id, without a rebalance,
  // only once the record naming the new id is written.
  std::optional<join_result> again;
  coordinator_->join("g", join_of("", "instance-1"), [&](join_result r) { again = std::move(r); });
  EXPECT_FALSE(again) << "answered before the new member id was written";
  io_.run();
  io_.restart();
  ASSERT_TRUE(again);
  ASSERT_EQ(again->error, error_code::none);
  EXPECT_NE(again->member_id, first.member_id);
  EXPECT_EQ(again->generation_id, first.generation_id);

  // A coordinator opened on the same store knows the new id, not the old one.
  open();
  EXPECT_EQ(coordinator_->heartbeat("g", again->member_id, "instance-1", first.generation_id),
            error_code::none);
  EXPECT_NE(coordinator_->heartbeat("g", first.member_id, "instance-1", first.generation_id),
            error_code::none);
}

}  // namespace
}  // namespace silt::coordinator
