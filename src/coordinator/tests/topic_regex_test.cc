// Matching consumer-protocol topic patterns: whole names, compile errors named, and a CPU budget
// that stops a hostile pattern over many long names.
#include "coordinator/topic_regex.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <time.h>

#include "coordinator/consumer_group.h"

namespace silt::coordinator {
namespace {

class listed_topics final : public topic_lookup {
 public:
  explicit listed_topics(std::vector<topic_meta> topics) : topics_(std::move(topics)) {}
  [[nodiscard]] std::optional<topic_meta> by_name(std::string_view name) const override {
    for (const auto& t : topics_) {
      if (t.name == name) return t;
    }
    return std::nullopt;
  }
  [[nodiscard]] std::optional<topic_meta> by_id(const topic_uuid& id) const override {
    for (const auto& t : topics_) {
      if (t.id == id) return t;
    }
    return std::nullopt;
  }
  [[nodiscard]] std::vector<topic_meta> all() const override { return topics_; }
  [[nodiscard]] uint64_t version() const override { return 7; }

 private:
  std::vector<topic_meta> topics_;
};

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

TEST(TopicRegex, PatternsMatchWholeNamesAndThoseThatDoNotCompileSayWhy) {
  const listed_topics topics({{topic_uuid{1}, "orders", 1}, {topic_uuid{2}, "orders-eu", 1}});
  const auto m = match_topic_regexes({"orders", "orders.*", "orders("}, topics);
  EXPECT_EQ(m.at("orders").ids, (std::set<topic_uuid>{topic_uuid{1}}));
  EXPECT_EQ(m.at("orders.*").ids, (std::set<topic_uuid>{topic_uuid{1}, topic_uuid{2}}));
  EXPECT_EQ(m.at("orders.*").version, 7u);
  EXPECT_FALSE(m.at("orders(").ids);
  EXPECT_NE(m.at("orders(").error, "");
  EXPECT_FALSE(matchable_topic_regex(std::nullopt));
  EXPECT_FALSE(matchable_topic_regex(""));
  EXPECT_FALSE(matchable_topic_regex(std::string(max_topic_regex_bytes + 1, 'a')));
  EXPECT_TRUE(matchable_topic_regex(std::string(max_topic_regex_bytes, 'a')));
}

// A pattern RE2 can only match slowly (its DFA thrashes, then a program of thousands of
// instructions runs per byte), over 2,000 names of 240 bytes: minutes of CPU in full.
TEST(TopicRegex, MatchingStopsOnceItsCpuBudgetIsSpent) {
  std::mt19937 rng(1);
  std::vector<topic_meta> all;
  while (all.size() < 2000) {
    std::string name;
    for (int k = 0; k < 240; ++k) name += "ab"[rng() % 2];
    topic_uuid id{};
    id[0] = static_cast<uint8_t>(all.size() >> 8);
    id[1] = static_cast<uint8_t>(all.size());
    all.push_back({id, name, 1});
  }
  const listed_topics topics(all);
  const double before = thread_cpu_seconds();
  const auto m =
      match_topic_regexes({"(a*b*){500}c", "a.*"}, topics, std::chrono::milliseconds(100));
  const double spent = thread_cpu_seconds() - before;
  EXPECT_LT(spent, 2.0);
  EXPECT_FALSE(m.at("(a*b*){500}c").ids);
  EXPECT_EQ(m.at("(a*b*){500}c").error, "");
  EXPECT_FALSE(m.at("a.*").ids) << "the budget is for the matching as a whole";
  EXPECT_EQ(m.at("a.*").version, 7u);
}

}  // namespace
}  // namespace silt::coordinator
