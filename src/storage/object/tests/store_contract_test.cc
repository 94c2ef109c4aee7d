// The object store contract (object_store.h), checked on every store: the local directory,
// S3 (Ceph radosgw) and Azure Blob (Azurite). The S3 and Azure cases run when their servers'
// variables are set, as run-ctest.sh does with scripts/s3-test-server.sh and
// scripts/azurite-test-server.sh, and are skipped otherwise. Each test works in a directory,
// bucket or container of its own, emptied and deleted after.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "storage/object/azure_store.h"
#include "storage/object/local_store.h"
#include "storage/object/s3_store.h"
#include "storage/object/tests/scratch_dir.h"

namespace silt::storage {
namespace {

std::vector<uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read before threads
  return v == nullptr ? std::string() : std::string(v);
}

std::string fresh_name() {
  std::random_device rd;
  return "silt-test-" + std::to_string(rd()) + std::to_string(rd() % 1000);
}

// One store under test and how to clean it away.
struct backend {
  std::unique_ptr<object_store> store;
  std::function<void()> drop;
};

class StoreContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& kind = GetParam();
    if (kind == "local") {
      auto s = local_store::open(dir_.path() / "objects");
      ASSERT_TRUE(s) << s.error();
      store_ = std::move(*s);
    } else if (kind == "s3") {
      if (env("SILT_S3_ENDPOINT").empty()) {
        GTEST_SKIP() << "no S3 server (eval \"$(scripts/s3-test-server.sh start DIR)\")";
      }
      s3_options o;
      o.bucket = fresh_name();
      o.endpoint = env("SILT_S3_ENDPOINT");
      o.region = env("SILT_S3_REGION").empty() ? "us-east-1" : env("SILT_S3_REGION");
      o.path_style = true;
      o.access_key = env("SILT_S3_ACCESS_KEY");
      o.secret_key = env("SILT_S3_SECRET_KEY");
      o.retry.max_attempts = 3;
      o.multipart_threshold = 6ull << 20;
      o.part_size = 5ull << 20;
      auto s = s3_store::open(o);
      ASSERT_TRUE(s) << s.error();
      ASSERT_TRUE((*s)->create_bucket());
      auto* raw = s->get();
      drop_ = [raw] { EXPECT_TRUE(raw->delete_bucket()); };
      store_ = std::move(*s);
    } else if (kind == "azblob") {
      if (env("SILT_AZURE_ENDPOINT").empty()) {
        GTEST_SKIP() << "no Azure server (eval \"$(scripts/azurite-test-server.sh start DIR)\")";
      }
      azure_options o;
      o.container = fresh_name();
      o.endpoint = env("SILT_AZURE_ENDPOINT");
      o.account = env("SILT_AZURE_ACCOUNT");
      o.key = env("SILT_AZURE_KEY");
      o.retry.max_attempts = 3;
      o.block_threshold = 6ull << 20;
      o.block_size = 5ull << 20;
      o.list_page_size = 100;
      auto s = azure_store::open(o);
      ASSERT_TRUE(s) << s.error();
      ASSERT_TRUE((*s)->create_container());
      auto* raw = s->get();
      drop_ = [raw] { EXPECT_TRUE(raw->delete_container()); };
      store_ = std::move(*s);
    }
  }
  void TearDown() override {
    if (!store_) return;
    if (auto all = store_->list(""); all) {
      for (const auto& o : *all) (void)store_->remove(o.key);
    }
    if (drop_) drop_();
  }

  testing::scratch_dir dir_;
  std::unique_ptr<object_store> store_;
  std::function<void()> drop_;
};

TEST_P(StoreContract, PutGetHeadRemove) {
  ASSERT_TRUE(store_->put("a/b", bytes("hello world")));
  EXPECT_EQ(store_->get("a/b", 0, to_end).value(), bytes("hello world"));
  EXPECT_EQ(store_->head("a/b").value(), 11u);
  ASSERT_TRUE(store_->remove("a/b"));
  EXPECT_EQ(store_->head("a/b").error(), store_error::not_found);
  EXPECT_EQ(store_->get("a/b", 0, 1).error(), store_error::not_found);
  EXPECT_TRUE(store_->remove("a/b")) << "removing a missing key succeeds";
}

TEST_P(StoreContract, PutReplacesTheObject) {
  ASSERT_TRUE(store_->put("k", bytes("first version")));
  ASSERT_TRUE(store_->put("k", bytes("second")));
  EXPECT_EQ(store_->get("k", 0, to_end).value(), bytes("second"));
}

TEST_P(StoreContract, GatherPut) {
  const auto a = bytes("hello ");
  const auto b = bytes("world");
  const std::span<const uint8_t> parts[] = {a, {}, b};
  ASSERT_TRUE(store_->put_parts("g", parts));
  EXPECT_EQ(store_->get("g", 0, to_end).value(), bytes("hello world"));
}

TEST_P(StoreContract, RangedGets) {
  ASSERT_TRUE(store_->put("r", bytes("0123456789")));
  EXPECT_EQ(store_->get("r", 2, 3).value(), bytes("234"));
  EXPECT_EQ(store_->get("r", 7, 100).value(), bytes("789"));
  EXPECT_EQ(store_->get("r", 4, to_end).value(), bytes("456789"));
  EXPECT_TRUE(store_->get("r", 10, 5).value().empty()) << "at the end: empty";
  EXPECT_TRUE(store_->get("r", 3, 0).value().empty());
  EXPECT_EQ(store_->get("r", 11, 5).error(), store_error::invalid_range);
  EXPECT_EQ(store_->get("r", 11, 0).error(), store_error::invalid_range);
}

TEST_P(StoreContract, SharedGetsReadWhatGetsRead) {
  ASSERT_TRUE(store_->put("r", bytes("0123456789")));
  auto shared = [&](uint64_t offset, uint64_t length) {
    auto r = store_->get_shared("r", offset, length);
    if (!r) return std::vector<uint8_t>{0xff};
    EXPECT_TRUE(r->owner);
    return std::vector<uint8_t>(r->bytes.begin(), r->bytes.end());
  };
  EXPECT_EQ(shared(2, 3), bytes("234"));
  EXPECT_EQ(shared(7, 100), bytes("789"));
  EXPECT_EQ(shared(0, to_end), bytes("0123456789"));
  EXPECT_TRUE(shared(10, 5).empty()) << "at the end: empty";
  EXPECT_TRUE(shared(3, 0).empty());
  EXPECT_EQ(store_->get_shared("r", 11, 5).error(), store_error::invalid_range);
  EXPECT_EQ(store_->get_shared("nope", 0, 1).error(), store_error::not_found);
}

TEST_P(StoreContract, EmptyObjects) {
  ASSERT_TRUE(store_->put("empty", {}));
  EXPECT_EQ(store_->head("empty").value(), 0u);
  EXPECT_TRUE(store_->get("empty", 0, to_end).value().empty());
  EXPECT_TRUE(store_->get("empty", 0, 10).value().empty());
  EXPECT_EQ(store_->get("empty", 1, 10).error(), store_error::invalid_range);
}

TEST_P(StoreContract, KeysWithSpecialCharactersRoundTrip) {
  std::vector<std::string> keys = {"a b",         "plus+sign",  "eq=amp&q?",       "tilde~star*",
                                   "caf\xc3\xa9", "percent%41", "semi;colon,comma"};
  if (GetParam() == "s3") {
    // Keys the local store refuses as paths (empty or dot segments); Azure folds them too.
    keys.insert(keys.end(), {"x//y", "./dot/../dots"});
  }
  for (const auto& k : keys) ASSERT_TRUE(store_->put(k, bytes(k))) << k;
  for (const auto& k : keys) EXPECT_EQ(store_->get(k, 0, to_end).value(), bytes(k)) << k;
  auto listed = store_->list("");
  ASSERT_TRUE(listed);
  std::vector<std::string> names;
  for (const auto& o : *listed) names.push_back(o.key);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(names, keys);
}

TEST_P(StoreContract, ListPaginatesInKeyOrder) {
  // More keys than one page holds (1000 on S3, 100 as the Azure store is set up here).
  constexpr int count = 1050;
  std::vector<std::thread> threads;
  threads.reserve(8);
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < count; i += 8) {
        char key[32];
        std::snprintf(key, sizeof key, "many/%05d", i);
        if (!store_->put(key, bytes(std::to_string(i)))) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_TRUE(store_->put("other", bytes("x")));
  auto listed = store_->list("many/");
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    char key[32];
    std::snprintf(key, sizeof key, "many/%05d", i);
    EXPECT_EQ((*listed)[i].key, key);
    EXPECT_EQ((*listed)[i].size, std::to_string(i).size());
  }
  EXPECT_EQ(store_->list("").value().size(), static_cast<size_t>(count) + 1);
  EXPECT_EQ(store_->list("many/0104").value().size(), 10u);
  EXPECT_TRUE(store_->list("none/").value().empty());
}

TEST_P(StoreContract, LargeObjectsGoUpInParts) {
  // Over the 6 MiB threshold the HTTP stores are set up with: multipart or blocks.
  const auto data = random_bytes((13ull << 20) + 5, 3);
  ASSERT_TRUE(store_->put("big", data));
  EXPECT_EQ(store_->head("big").value(), data.size());
  auto back = store_->get("big", 0, to_end);
  ASSERT_TRUE(back);
  EXPECT_TRUE(*back == data);
  // A range across the boundary of parts 1 and 2.
  const uint64_t at = (5ull << 20) - 100;
  auto across = store_->get("big", at, 200);
  ASSERT_TRUE(across);
  EXPECT_TRUE(
      std::equal(across->begin(), across->end(), data.begin() + static_cast<ptrdiff_t>(at)));
  EXPECT_EQ(store_->list("").value(), (std::vector<object_info>{{"big", data.size()}}));
}

TEST_P(StoreContract, PutIfAbsentCreatesOnce) {
  ASSERT_TRUE(store_->put_if_absent("w/1", bytes("first")));
  EXPECT_EQ(store_->put_if_absent("w/1", bytes("second")).error(), store_error::already_exists);
  EXPECT_EQ(store_->get("w/1", 0, to_end).value(), bytes("first")) << "not replaced";
  EXPECT_TRUE(store_->put_if_absent("w/1", bytes("first")))
      << "the same bytes again: an earlier attempt of this write";
  ASSERT_TRUE(store_->remove("w/1"));
  EXPECT_TRUE(store_->put_if_absent("w/1", bytes("third"))) << "free again once removed";
  EXPECT_EQ(store_->get("w/1", 0, to_end).value(), bytes("third"));
}

TEST_P(StoreContract, PutIfAbsentOfALargeObject) {
  const auto data = random_bytes((7ull << 20) + 1, 8);
  ASSERT_TRUE(store_->put_if_absent("w/big", data));
  EXPECT_EQ(store_->put_if_absent("w/big", random_bytes(data.size(), 9)).error(),
            store_error::already_exists);
  EXPECT_TRUE(store_->get("w/big", 0, to_end).value() == data);
}

TEST_P(StoreContract, OneOfManyRacingCreatorsWins) {
  constexpr int writers = 8;
  for (int round = 0; round < 5; ++round) {
    const std::string key = "race/" + std::to_string(round);
    std::atomic<int> won{0};
    std::atomic<int> refused{0};
    std::atomic<int> other{0};
    std::vector<std::thread> threads;
    threads.reserve(writers);
    for (int w = 0; w < writers; ++w) {
      threads.emplace_back([&, w] {
        auto r = store_->put_if_absent(key, bytes("writer " + std::to_string(w)));
        if (r) {
          ++won;
        } else if (r.error() == store_error::already_exists) {
          ++refused;
        } else {
          ++other;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(won.load(), 1) << key;
    EXPECT_EQ(refused.load(), writers - 1) << key;
    EXPECT_EQ(other.load(), 0) << key;
    const auto there = store_->get(key, 0, to_end).value();
    EXPECT_TRUE(std::string(there.begin(), there.end()).starts_with("writer ")) << key;
  }
}

TEST_P(StoreContract, ConcurrentCallsFromManyThreads) {
  std::vector<std::thread> threads;
  threads.reserve(6);
  std::atomic<int> failures{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const std::string key = "c/" + std::to_string(t) + "/" + std::to_string(i);
        const auto data = random_bytes(1000 + i, t * 100 + i);
        if (!store_->put(key, data)) ++failures;
        auto back = store_->get(key, 0, to_end);
        if (!back || *back != data) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store_->list("c/").value().size(), 120u);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreContract, ::testing::Values("local", "s3", "azblob"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace silt::storage
