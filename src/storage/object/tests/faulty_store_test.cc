#include "storage/object/faulty_store.h"

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "storage/object/local_store.h"
#include "storage/object/tests/scratch_dir.h"

namespace silt::storage {
namespace {

std::vector<uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

class FaultyStore : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = local_store::open(dir_.path());
    ASSERT_TRUE(opened) << opened.error();
    inner_ = std::move(*opened);
  }
  testing::scratch_dir dir_;
  std::unique_ptr<local_store> inner_;
};

TEST_F(FaultyStore, WithoutFaultsItPassesCallsThrough) {
  faulty_store s(*inner_, {});
  ASSERT_TRUE(s.put("a/b", bytes("xyz")));
  EXPECT_EQ(s.get("a/b", 1, 5).value(), bytes("yz"));
  EXPECT_EQ(s.head("a/b").value(), 3u);
  EXPECT_EQ(s.list("a").value(), (std::vector<object_info>{{"a/b", 3}}));
  ASSERT_TRUE(s.remove("a/b"));
  EXPECT_EQ(s.get("a/b", 0, 1).error(), store_error::not_found);
  EXPECT_EQ(s.injected(fault::none), 6u);
  EXPECT_EQ(s.describe(), "faulty(" + inner_->describe() + ")");
}

// With an off period, the faults come in outages: all in the first second, none after it.
TEST_F(FaultyStore, ProbabilitiesApplyOnlyInTheirPeriod) {
  faulty_store_options o;
  o.error_probability = 1;
  o.on_period = std::chrono::milliseconds(1000);
  o.off_period = std::chrono::milliseconds(600000);
  faulty_store s(*inner_, o);
  EXPECT_EQ(s.put("k", bytes("v")).error(), store_error::io);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_TRUE(s.put("k", bytes("v")));
  EXPECT_EQ(s.injected(fault::io), 1u);
}

TEST_F(FaultyStore, HookRunsAfterTheInnerCallBeforeTheReply) {
  std::vector<std::string> seen;
  faulty_store_options o;
  o.after_inner_call = [&](store_operation op, std::string_view key) {
    seen.push_back(std::to_string(static_cast<int>(op)) + ":" + std::string(key));
    // The object is already there when the hook runs, even for a reply about to be lost.
    if (op == store_operation::put) {
      EXPECT_TRUE(inner_->head(key));
    }
  };
  faulty_store s(*inner_, o);
  s.script(store_operation::put, {fault::none, fault::lost_reply, fault::io});
  ASSERT_TRUE(s.put("a", bytes("1")));
  EXPECT_EQ(s.put("b", bytes("2")).error(), store_error::io);
  EXPECT_EQ(s.put("c", bytes("3")).error(), store_error::io);  // the inner store is not called
  ASSERT_TRUE(s.list(""));
  ASSERT_TRUE(s.remove("a"));
  EXPECT_EQ(seen, (std::vector<std::string>{"0:a", "0:b", "4:", "3:a"}));
}

TEST_F(FaultyStore, ScriptedFaultsHitTheNextCallsInOrder) {
  faulty_store s(*inner_, {});
  s.script(store_operation::put, {fault::io, fault::throttled, fault::none, fault::timeout});
  EXPECT_EQ(s.put("k", bytes("1")).error(), store_error::io);
  EXPECT_EQ(s.put("k", bytes("2")).error(), store_error::throttled);
  EXPECT_TRUE(s.put("k", bytes("3")));
  EXPECT_EQ(s.put("k", bytes("4")).error(), store_error::timeout);
  EXPECT_TRUE(s.put("k", bytes("5")));
  EXPECT_EQ(inner_->get("k", 0, to_end).value(), bytes("5"));
  EXPECT_EQ(s.injected(fault::io), 1u);
  EXPECT_EQ(s.injected(fault::timeout), 1u);
}

TEST_F(FaultyStore, FailedPutsWriteNothing) {
  faulty_store s(*inner_, {});
  s.script(store_operation::put, {fault::io, fault::partial, fault::timeout, fault::throttled});
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(s.put("k", bytes("v")));
  EXPECT_EQ(inner_->head("k").error(), store_error::not_found);
}

TEST_F(FaultyStore, GatherPutsTakeThePutFaults) {
  faulty_store s(*inner_, {});
  const auto a = bytes("ab");
  const auto b = bytes("cd");
  const std::span<const uint8_t> parts[] = {a, {}, b};
  s.script(store_operation::put, {fault::io, fault::throttled, fault::timeout, fault::partial,
                                  fault::none, fault::lost_reply});
  EXPECT_EQ(s.put_parts("k", parts).error(), store_error::io);
  EXPECT_EQ(s.put_parts("k", parts).error(), store_error::throttled);
  EXPECT_EQ(s.put_parts("k", parts).error(), store_error::timeout);
  EXPECT_EQ(s.put_parts("k", parts).error(), store_error::io) << "partial";
  EXPECT_EQ(inner_->head("k").error(), store_error::not_found) << "failed puts write nothing";
  ASSERT_TRUE(s.put_parts("k", parts));
  EXPECT_EQ(inner_->get("k", 0, to_end).value(), bytes("abcd"));
  ASSERT_TRUE(inner_->remove("k"));
  EXPECT_EQ(s.put_parts("k", parts).error(), store_error::io) << "lost reply";
  EXPECT_EQ(inner_->get("k", 0, to_end).value(), bytes("abcd")) << "but written";
  EXPECT_EQ(s.injected(fault::none), 1u);
  EXPECT_EQ(s.injected(fault::lost_reply), 1u);

  faulty_store_options o;
  o.error_probability = 1;
  o.operations = 1u << static_cast<unsigned>(store_operation::put);
  s.set_options(o);
  EXPECT_EQ(s.put_parts("k", parts).error(), store_error::io) << "drawn by probability too";
}

TEST_F(FaultyStore, LostReplyWritesButReportsFailure) {
  faulty_store s(*inner_, {});
  s.script(store_operation::put, {fault::lost_reply});
  s.script(store_operation::remove, {fault::lost_reply});
  EXPECT_EQ(s.put("k", bytes("v")).error(), store_error::io);
  EXPECT_EQ(inner_->get("k", 0, to_end).value(), bytes("v"));
  EXPECT_EQ(s.remove("k").error(), store_error::io);
  EXPECT_EQ(inner_->head("k").error(), store_error::not_found);
}

TEST_F(FaultyStore, PartialGetReturnsAStrictPrefix) {
  ASSERT_TRUE(inner_->put("k", bytes("0123456789")));
  faulty_store s(*inner_, {});
  for (int i = 0; i < 20; ++i) s.script(store_operation::get, {fault::partial});
  for (int i = 0; i < 20; ++i) {
    auto r = s.get("k", 2, 6);
    ASSERT_TRUE(r);
    EXPECT_LT(r->size(), 6u) << "the caller must notice the short read";
    const auto want = bytes("234567");
    EXPECT_TRUE(std::equal(r->begin(), r->end(), want.begin()));
  }
}

TEST_F(FaultyStore, PartialSharedGetReturnsAStrictPrefix) {
  ASSERT_TRUE(inner_->put("k", bytes("0123456789")));
  faulty_store s(*inner_, {});
  for (int i = 0; i < 20; ++i) s.script(store_operation::get, {fault::partial});
  for (int i = 0; i < 20; ++i) {
    auto r = s.get_shared("k", 2, 6);
    ASSERT_TRUE(r);
    EXPECT_LT(r->bytes.size(), 6u) << "the caller must notice the short read";
    const auto want = bytes("234567");
    EXPECT_TRUE(std::equal(r->bytes.begin(), r->bytes.end(), want.begin()));
  }
  s.script(store_operation::get, {fault::io});
  EXPECT_EQ(s.get_shared("k", 0, 1).error(), store_error::io);
  EXPECT_EQ(s.get_shared("k", 0, to_end).value().bytes.size(), 10u);
}

TEST_F(FaultyStore, TimeoutsSleepThenFailAndSlowCallsSleepThenSucceed) {
  faulty_store_options o;
  o.timeout_delay = std::chrono::milliseconds(30);
  o.slow_delay = std::chrono::milliseconds(30);
  faulty_store s(*inner_, o);
  s.script(store_operation::head, {fault::timeout, fault::slow});
  ASSERT_TRUE(inner_->put("k", bytes("v")));
  auto began = std::chrono::steady_clock::now();
  EXPECT_EQ(s.head("k").error(), store_error::timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - began, std::chrono::milliseconds(30));
  began = std::chrono::steady_clock::now();
  EXPECT_EQ(s.head("k").value(), 1u);
  EXPECT_GE(std::chrono::steady_clock::now() - began, std::chrono::milliseconds(30));
}

// The outcomes of 200 puts as a string, one letter per call.
std::string run_pattern(object_store& inner, const faulty_store_options& o) {
  faulty_store s(inner, o);
  std::string pattern;
  for (int i = 0; i < 200; ++i) {
    auto r = s.put("k", {});
    pattern += r ? '.' : store_error_name(r.error())[0];
  }
  return pattern;
}

TEST_F(FaultyStore, ProbabilitiesAreDeterministicForASeed) {
  faulty_store_options o;
  o.seed = 11;
  o.error_probability = 0.2;
  o.throttle_probability = 0.1;
  o.timeout_delay = std::chrono::milliseconds(0);
  o.timeout_probability = 0.1;
  const auto a = run_pattern(*inner_, o);
  EXPECT_EQ(a, run_pattern(*inner_, o));
  o.seed = 12;
  EXPECT_NE(a, run_pattern(*inner_, o));
  const auto count = [&](char c) { return std::count(a.begin(), a.end(), c); };
  EXPECT_NEAR(count('i'), 40, 20);
  EXPECT_NEAR(count('t'), 40, 20) << "throttled and timeout both start with t";
  EXPECT_NEAR(count('.'), 120, 25);
}

TEST_F(FaultyStore, ProbabilitiesApplyOnlyToTheChosenOperations) {
  ASSERT_TRUE(inner_->put("k", bytes("v")));
  faulty_store_options o;
  o.error_probability = 1;
  o.operations = 1u << static_cast<unsigned>(store_operation::put);
  faulty_store s(*inner_, o);
  EXPECT_FALSE(s.put("k", bytes("w")));
  EXPECT_TRUE(s.get("k", 0, 1));
  EXPECT_TRUE(s.head("k"));
  EXPECT_TRUE(s.list(""));
}

TEST_F(FaultyStore, SetOptionsStopsInjection) {
  faulty_store_options o;
  o.error_probability = 1;
  faulty_store s(*inner_, o);
  EXPECT_FALSE(s.put("k", bytes("v")));
  o.error_probability = 0;
  s.set_options(o);
  EXPECT_TRUE(s.put("k", bytes("v")));
}

TEST_F(FaultyStore, IsSafeForConcurrentCalls) {
  faulty_store_options o;
  o.error_probability = 0.3;
  o.partial_probability = 0.2;
  faulty_store s(*inner_, o);
  ASSERT_TRUE(inner_->put("k", bytes("0123456789")));
  std::vector<std::thread> threads;
  threads.reserve(8);
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 250; ++i) {
        if (s.get("k", 0, to_end)) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(s.injected(fault::none) + s.injected(fault::io) + s.injected(fault::partial), 1000u);
  EXPECT_EQ(static_cast<uint64_t>(ok.load()), 1000u - s.injected(fault::io));
}

}  // namespace
}  // namespace silt::storage
