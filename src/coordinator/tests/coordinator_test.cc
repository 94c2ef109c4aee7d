// The coordinator over a real group store (SQLite in a temp dir), with its writes run on an
// io_context the test drives: answers that show durable group state wait for their write.
#include "coordinator/coordinator.h"

#include <chrono>
#include <filesystem>
#include <future>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include "metadata/sql.h"

namespace silt::coordinator {
namespace {

namespace fs = std::filesystem;

// One topic, "t", as a consumer group sees the broker's topics.
class one_topic final : public topic_lookup {
 public:
  [[nodiscard]] std::optional<topic_meta> by_name(std::string_view name) const override {
    if (name == t_.name) return t_;
    return std::nullopt;
  }
  [[nodiscard]] std::optional<topic_meta> by_id(const topic_uuid& id) const override {
    if (id == t_.id) return t_;
    return std::nullopt;
  }
  [[nodiscard]] std::vector<topic_meta> all() const override { return {t_}; }
  [[nodiscard]] uint64_t version() const override { return 1; }

 private:
  topic_meta t_{topic_uuid{1}, "t", 1};
};

// Topic "t" at a version the test sets, and every look at all of them (what matching patterns
// does) checks from another thread that the coordinator answers meanwhile: it would not while
// its lock is held.
class probing_topics final : public topic_lookup {
 public:
  explicit probing_topics(group_coordinator& c) : c_(c) {}
  [[nodiscard]] std::optional<topic_meta> by_name(std::string_view name) const override {
    if (name == t_.name) return t_;
    return std::nullopt;
  }
  [[nodiscard]] std::optional<topic_meta> by_id(const topic_uuid& id) const override {
    if (id == t_.id) return t_;
    return std::nullopt;
  }
  [[nodiscard]] std::vector<topic_meta> all() const override {
    ++listed;
    // (Kept, not waited for on destruction: were the lock held, that would never end.)
    probes_.push_back(std::async(std::launch::async, [this] { (void)c_.describe("other"); }));
    if (probes_.back().wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      answered = false;
    }
    return {t_};
  }
  [[nodiscard]] uint64_t version() const override { return version_; }

  uint64_t version_ = 1;
  mutable int listed = 0;
  mutable bool answered = true;

 private:
  group_coordinator& c_;
  topic_meta t_{topic_uuid{1}, "t", 1};
  mutable std::vector<std::future<void>> probes_;
};

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

// A group id the store cannot key (too long for PostgreSQL's index entries, or not text) is
// refused with INVALID_GROUP_ID before it reaches a transaction other groups share.
TEST_F(Coordinator, GroupIdsThatCannotBeStoredAreInvalid) {
  open();
  auto commit = [&](const std::string& group) {
    std::optional<error_code> result;
    coordinator_->commit(group, "", std::nullopt, -1, {{"t", 0, 7, -1, "", -1}},
                         [&](error_code e) { result = e; });
    io_.run();
    io_.restart();
    return result.value_or(error_code::unknown_server_error);
  };
  EXPECT_EQ(commit(std::string(max_group_id_bytes, 'g')), error_code::none);
  EXPECT_EQ(commit(std::string(max_group_id_bytes + 1, 'g')), error_code::invalid_group_id);
  EXPECT_EQ(commit(std::string("g\0id", 4)), error_code::invalid_group_id);
  EXPECT_EQ(join_alone(std::string(5000, 'j'), std::nullopt).error, error_code::invalid_group_id);
  EXPECT_TRUE(storable_group_id("orders-service"));
  EXPECT_FALSE(storable_group_id("\xff"));
}

// The requests that would create the group refuse such an id (INVALID_GROUP_ID); the others
// never create a group and find none by it: whichever request names it, it reaches no write.
TEST_F(Coordinator, NoRequestStoresAGroupIdThatCannotBeStored) {
  open();
  const std::string id(max_group_id_bytes + 1, 'g');
  const one_topic topics;
  auto run = [&] {
    io_.run();
    io_.restart();
  };
  EXPECT_EQ(join_alone(id, std::nullopt).error, error_code::invalid_group_id);
  EXPECT_EQ(join_alone(id, "instance").error, error_code::invalid_group_id);
  consumer_heartbeat hb;
  hb.member_epoch = 0;
  hb.rebalance_timeout_ms = 30000;
  hb.subscribed_topic_names = std::vector<std::string>{"t"};
  hb.owned = member_assignment{};
  EXPECT_EQ(coordinator_->consumer_heartbeat(id, hb, topics).error, error_code::invalid_group_id);
  std::optional<error_code> committed;
  coordinator_->commit(id, "", std::nullopt, -1, {{"t", 0, 7, -1, "", -1}},
                       [&](error_code e) { committed = e; });
  run();
  EXPECT_EQ(committed, error_code::invalid_group_id);
  std::optional<sync_result> synced;
  coordinator_->sync(id, "m", std::nullopt, 1, "consumer", "range", {},
                     [&](sync_result r) { synced = std::move(r); });
  run();
  ASSERT_TRUE(synced);
  EXPECT_EQ(synced->error, error_code::unknown_member_id);
  EXPECT_EQ(coordinator_->heartbeat(id, "m", std::nullopt, 1), error_code::unknown_member_id);
  EXPECT_EQ(coordinator_->leave(id, "m", std::nullopt), error_code::unknown_member_id);
  EXPECT_TRUE(coordinator_->fetch(id, nullptr).empty());
  EXPECT_FALSE(coordinator_->describe(id));
  EXPECT_EQ(coordinator_->describe_consumer(id).error(), error_code::group_id_not_found);
  std::optional<error_code> deleted;
  coordinator_->delete_group(id, [&](error_code e) { deleted = e; });
  std::optional<error_code> offsets_deleted;
  coordinator_->delete_offsets(
      id, {{"t", {0}}}, topics,
      [&](error_code e, const std::set<std::string>&) { offsets_deleted = e; });
  run();
  EXPECT_EQ(deleted, error_code::group_id_not_found);
  EXPECT_EQ(offsets_deleted, error_code::group_id_not_found);
  EXPECT_TRUE(coordinator_->list().empty());
  std::vector<int32_t> shards(static_cast<size_t>(options_.shards));
  for (size_t i = 0; i < shards.size(); ++i) shards[i] = static_cast<int32_t>(i);
  const auto stored = store_->load(shards);
  ASSERT_TRUE(stored);
  EXPECT_TRUE(stored->groups.empty());
  EXPECT_TRUE(stored->offsets.empty());
}

// A heartbeat's pattern, and the group's patterns once the topics change, are matched before
// the heartbeat takes the coordinator's lock (as the handler does, on the matching strand):
// the coordinator serves other requests meanwhile and matches nothing under its lock.
TEST_F(Coordinator, TopicPatternsAreMatchedWithoutTheCoordinatorsLock) {
  open();
  probing_topics topics(*coordinator_);
  consumer_heartbeat a;
  a.member_id = "a";
  a.member_epoch = 0;
  a.rebalance_timeout_ms = 30000;
  a.subscribed_topic_regex = "t.*";
  a.owned = member_assignment{};
  const auto patterns = coordinator_->regexes_to_match("g", a.subscribed_topic_regex, 1);
  EXPECT_EQ(patterns, std::vector<std::string>{"t.*"});
  auto matched = match_topic_regexes(patterns, topics);
  EXPECT_EQ(topics.listed, 1);
  EXPECT_TRUE(topics.answered);
  const auto joined = coordinator_->consumer_heartbeat("g", a, topics, std::move(matched));
  ASSERT_EQ(joined.error, error_code::none) << joined.message;
  ASSERT_TRUE(joined.assignment);
  EXPECT_EQ(joined.assignment->size(), 1u);
  EXPECT_EQ(topics.listed, 1) << "matched under the lock";
  // The topics change: the next heartbeat names a's pattern; one sent without matching it
  // uses what it matched before.
  topics.version_ = 2;
  EXPECT_EQ(coordinator_->regexes_to_match("g", std::nullopt, 2), std::vector<std::string>{"t.*"});
  consumer_heartbeat b = a;
  b.member_id = "b";
  b.subscribed_topic_regex.reset();
  b.subscribed_topic_names = std::vector<std::string>{"t"};
  EXPECT_EQ(coordinator_->consumer_heartbeat("g", b, topics).error, error_code::none);
  EXPECT_EQ(topics.listed, 1) << "matched under the lock";
  // Nothing to match for a group this broker does not serve or cannot store.
  EXPECT_TRUE(
      coordinator_->regexes_to_match(std::string(max_group_id_bytes + 1, 'g'), "t.*", 2).empty());
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
