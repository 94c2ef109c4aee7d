#include "storage/object/local_store.h"

#include <atomic>
#include <fstream>
#include <random>
#include <thread>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "storage/object/tests/scratch_dir.h"

namespace silt::storage {
namespace {

std::vector<uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

class LocalStore : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = local_store::open(dir_.path() / "objects");
    ASSERT_TRUE(opened) << opened.error();
    store_ = std::move(*opened);
  }
  testing::scratch_dir dir_;
  std::unique_ptr<local_store> store_;
};

TEST_F(LocalStore, PutThenGetReturnsTheBytes) {
  ASSERT_TRUE(store_->put("a", bytes("hello world")));
  EXPECT_EQ(store_->get("a", 0, to_end).value(), bytes("hello world"));
  EXPECT_EQ(store_->head("a").value(), 11u);
}

TEST_F(LocalStore, GetReadsTheRangeAskedFor) {
  ASSERT_TRUE(store_->put("a", bytes("0123456789")));
  EXPECT_EQ(store_->get("a", 2, 3).value(), bytes("234"));
  EXPECT_EQ(store_->get("a", 7, 100).value(), bytes("789")) << "short when the object ends first";
  EXPECT_EQ(store_->get("a", 0, 0).value(), bytes(""));
  EXPECT_EQ(store_->get("a", 10, 5).value(), bytes("")) << "at the end: empty";
  EXPECT_EQ(store_->get("a", 4, to_end).value(), bytes("456789"));
}

TEST_F(LocalStore, RangePastTheEndIsInvalidRange) {
  ASSERT_TRUE(store_->put("a", bytes("0123")));
  EXPECT_EQ(store_->get("a", 5, 1).error(), store_error::invalid_range);
  EXPECT_EQ(store_->get("a", 5, 0).error(), store_error::invalid_range);
}

TEST_F(LocalStore, EmptyObjectsCanBeWrittenAndRead) {
  ASSERT_TRUE(store_->put("empty", {}));
  EXPECT_EQ(store_->head("empty").value(), 0u);
  EXPECT_TRUE(store_->get("empty", 0, 10).value().empty());
  EXPECT_EQ(store_->get("empty", 1, 10).error(), store_error::invalid_range);
}

TEST_F(LocalStore, MissingObjectsAreNotFound) {
  EXPECT_EQ(store_->get("nope", 0, 1).error(), store_error::not_found);
  EXPECT_EQ(store_->head("nope").error(), store_error::not_found);
  EXPECT_EQ(store_->get("no/such/dir", 0, 1).error(), store_error::not_found);
  ASSERT_TRUE(store_->put("file", bytes("x")));
  EXPECT_EQ(store_->get("file/below", 0, 1).error(), store_error::not_found);
  EXPECT_EQ(store_->head("file/below").error(), store_error::not_found);
}

TEST_F(LocalStore, KeysWithSlashesLiveInSubdirectories) {
  ASSERT_TRUE(store_->put("streams/7/00000001.obj", bytes("x")));
  EXPECT_TRUE(std::filesystem::is_regular_file(dir_.path() / "objects/streams/7/00000001.obj"));
  EXPECT_EQ(store_->get("streams/7/00000001.obj", 0, to_end).value(), bytes("x"));
}

TEST_F(LocalStore, PutReplacesAtomically) {
  ASSERT_TRUE(store_->put("k", bytes("old contents")));
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  // Readers see exactly the old or the new object while the writer replaces it.
  std::thread reader([&] {
    while (!stop) {
      auto r = store_->get("k", 0, to_end);
      if (!r || (*r != bytes("old contents") && *r != bytes("new"))) ++torn;
    }
  });
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(store_->put("k", i % 2 == 0 ? bytes("new") : bytes("old contents")));
  }
  stop = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(store_->get("k", 0, to_end).value(), bytes("old contents"));
}

TEST_F(LocalStore, PutLeavesNoTemporaryFilesBehind) {
  ASSERT_TRUE(store_->put("a/b", bytes("x")));
  ASSERT_TRUE(store_->put("a/b", bytes("y")));
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path() / "objects/.silt-tmp"));
}

TEST_F(LocalStore, BadKeysAreInvalidArguments) {
  const std::vector<std::string_view> bad = {
      "",   "/etc/passwd", "../outside", "a/../../b",   "a/./b", "a//b",
      "a/", ".",           "..",         ".silt-tmp/x", "a/..",  std::string_view("a\0b", 3)};
  for (const auto key : bad) {
    EXPECT_EQ(store_->put(key, bytes("x")).error(), store_error::invalid_argument) << key;
    EXPECT_EQ(store_->get(key, 0, 1).error(), store_error::invalid_argument) << key;
    EXPECT_EQ(store_->head(key).error(), store_error::invalid_argument) << key;
    EXPECT_EQ(store_->remove(key).error(), store_error::invalid_argument) << key;
  }
  EXPECT_EQ(store_->put(std::string(1025, 'k'), bytes("x")).error(), store_error::invalid_argument);
  EXPECT_EQ(store_->list("../").error(), store_error::invalid_argument);
  EXPECT_EQ(store_->list("/abs").error(), store_error::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "outside"));
  EXPECT_TRUE(local_store::valid_key("a..b/.c/d.."));
}

TEST_F(LocalStore, AKeyCannotBeBothAnObjectAndADirectory) {
  ASSERT_TRUE(store_->put("a/b", bytes("x")));
  EXPECT_EQ(store_->put("a", bytes("y")).error(), store_error::invalid_argument);
  ASSERT_TRUE(store_->put("c", bytes("x")));
  EXPECT_EQ(store_->put("c/d", bytes("y")).error(), store_error::invalid_argument);
}

TEST_F(LocalStore, RemoveDeletesAndPrunesEmptyDirectories) {
  ASSERT_TRUE(store_->put("a/b/c", bytes("x")));
  ASSERT_TRUE(store_->put("a/d", bytes("x")));
  ASSERT_TRUE(store_->remove("a/b/c"));
  EXPECT_EQ(store_->head("a/b/c").error(), store_error::not_found);
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "objects/a/b"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "objects/a/d"));
  ASSERT_TRUE(store_->remove("a/d"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "objects/a"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "objects"));
  ASSERT_TRUE(store_->put("a", bytes("now a file"))) << "the pruned directory's name is free";
}

TEST_F(LocalStore, RemoveOfAMissingObjectSucceeds) {
  EXPECT_TRUE(store_->remove("never/written"));
  ASSERT_TRUE(store_->put("dir/x", bytes("x")));
  EXPECT_TRUE(store_->remove("dir")) << "a directory is not an object";
  EXPECT_TRUE(store_->head("dir/x"));
}

TEST_F(LocalStore, ListReturnsKeysWithThePrefixInKeyOrder) {
  // '/' sorts after '-' and '.': key order is not directory-walk order.
  for (const auto* key : {"a/b", "a-b", "a.b", "a/a/z", "b", "ab", "a/c"}) {
    ASSERT_TRUE(store_->put(key, bytes(key)));
  }
  auto all = store_->list("");
  ASSERT_TRUE(all);
  std::vector<object_info> want = {{"a-b", 3}, {"a.b", 3}, {"a/a/z", 5}, {"a/b", 3},
                                   {"a/c", 3}, {"ab", 2},  {"b", 1}};
  EXPECT_EQ(*all, want);
  EXPECT_EQ(store_->list("a/").value(),
            (std::vector<object_info>{{"a/a/z", 5}, {"a/b", 3}, {"a/c", 3}}));
  EXPECT_EQ(store_->list("a/a").value(), (std::vector<object_info>{{"a/a/z", 5}}));
  EXPECT_EQ(store_->list("a").value().size(), 6u);
  EXPECT_TRUE(store_->list("zzz").value().empty());
  EXPECT_TRUE(store_->list("q/r/").value().empty());
}

TEST_F(LocalStore, ListSkipsTemporaryFiles) {
  std::ofstream(dir_.path() / "objects/.silt-tmp/123.0.tmp") << "partial";
  ASSERT_TRUE(store_->put("x", bytes("1")));
  EXPECT_EQ(store_->list("").value(), (std::vector<object_info>{{"x", 1}}));
}

TEST_F(LocalStore, OpenDeletesStaleTemporaryFilesOnly) {
  const auto tmp = dir_.path() / "objects/.silt-tmp";
  std::ofstream(tmp / "old.tmp") << "left by a crash";
  std::ofstream(tmp / "new.tmp") << "another process is writing it";
  std::filesystem::last_write_time(
      tmp / "old.tmp", std::filesystem::file_time_type::clock::now() - std::chrono::hours(2));
  auto reopened = local_store::open(dir_.path() / "objects");
  ASSERT_TRUE(reopened);
  EXPECT_FALSE(std::filesystem::exists(tmp / "old.tmp"));
  EXPECT_TRUE(std::filesystem::exists(tmp / "new.tmp"));
}

TEST_F(LocalStore, ObjectsSurviveReopening) {
  ASSERT_TRUE(store_->put("p/q", bytes("kept")));
  auto reopened = local_store::open(dir_.path() / "objects/");
  ASSERT_TRUE(reopened);
  EXPECT_EQ((*reopened)->get("p/q", 0, to_end).value(), bytes("kept"));
  EXPECT_EQ((*reopened)->describe(), "file://" + (dir_.path() / "objects").string());
}

TEST_F(LocalStore, ConcurrentPutsAndRemovesInOneDirectoryDoNotFail) {
  // Removes prune directories that concurrent puts are about to fill.
  std::vector<std::thread> threads;
  threads.reserve(8);
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string key = "d/e/" + std::to_string(t) + "-" + std::to_string(i);
        if (!store_->put(key, bytes("v"))) ++failures;
        if (!store_->remove(key)) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(store_->list("").value().empty());
}

// Gather puts: the same object as a contiguous put, whatever the parts, with O_DIRECT (in
// chunks, the tail padded then cut) and buffered.

// `data` cut at random places into parts, with empty parts here and there.
std::vector<std::span<const uint8_t>> random_parts(std::mt19937_64& rng,
                                                   std::span<const uint8_t> data) {
  std::vector<std::span<const uint8_t>> parts;
  while (!data.empty()) {
    if (rng() % 4 == 0) parts.emplace_back();
    const size_t n =
        std::min<size_t>(data.size(), 1 + rng() % (data.size() < 9000 ? 3000 : 1500000));
    parts.push_back(data.first(n));
    data = data.subspan(n);
  }
  if (rng() % 2 == 0) parts.emplace_back();
  return parts;
}

class LocalStoreParts : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    auto opened = local_store::open(dir_.path() / "objects", GetParam());
    ASSERT_TRUE(opened) << opened.error();
    store_ = std::move(*opened);
  }
  [[nodiscard]] bool no_temporary_files() const {
    return std::filesystem::is_empty(dir_.path() / "objects/.silt-tmp");
  }
  testing::scratch_dir dir_;
  std::unique_ptr<local_store> store_;
};

TEST_P(LocalStoreParts, GatherPutEqualsContiguousPut) {
  constexpr size_t chunk = local_store::write_chunk_size;
  constexpr size_t align = local_store::direct_alignment;
  std::mt19937_64 rng(42);
  for (const size_t size :
       {size_t{0}, size_t{1}, align - 1, align, align + 1, 2 * align - 1, 2 * align, 3 * align + 1,
        chunk - align, chunk - 1, chunk, chunk + 1, chunk + align, 2 * chunk + align + 7}) {
    std::vector<uint8_t> data(size);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    const auto parts = random_parts(rng, data);
    const std::string n = std::to_string(size);
    ASSERT_TRUE(store_->put_parts("g/" + n, parts)) << size;
    ASSERT_TRUE(store_->put("c/" + n, data)) << size;
    EXPECT_EQ(store_->head("g/" + n).value(), size);
    EXPECT_EQ(store_->get("g/" + n, 0, to_end).value(), data) << size;
    EXPECT_EQ(store_->get("c/" + n, 0, to_end).value(), data) << size;
    if (size > 10) {
      EXPECT_EQ(store_->get("g/" + n, size - 10, 10).value(),
                std::vector<uint8_t>(data.end() - 10, data.end()));
    }
  }
  EXPECT_TRUE(no_temporary_files());
  if (!GetParam()) {
    EXPECT_FALSE(store_->direct_io()) << "a buffered store stays buffered";
  }
}

TEST_P(LocalStoreParts, GatherPutOfNoPartsOrEmptyPartsIsAnEmptyObject) {
  ASSERT_TRUE(store_->put_parts("none", {}));
  EXPECT_EQ(store_->head("none").value(), 0u);
  const std::vector<std::span<const uint8_t>> empties(3);
  ASSERT_TRUE(store_->put_parts("empties", empties));
  EXPECT_EQ(store_->head("empties").value(), 0u);
  EXPECT_TRUE(store_->get("empties", 0, to_end).value().empty());
}

TEST_P(LocalStoreParts, GatherPutReplacesALargerObject) {
  const std::vector<uint8_t> big(3 * local_store::direct_alignment + 5, 7);
  ASSERT_TRUE(store_->put("k", big));
  const auto small = bytes("small");
  const std::span<const uint8_t> parts[] = {std::span(small).first(2), std::span(small).subspan(2)};
  ASSERT_TRUE(store_->put_parts("k", parts));
  EXPECT_EQ(store_->get("k", 0, to_end).value(), small);
}

TEST_P(LocalStoreParts, GatherPutChecksTheKey) {
  const auto v = bytes("v");
  const std::span<const uint8_t> parts[] = {v};
  EXPECT_EQ(store_->put_parts("../k", parts).error(), store_error::invalid_argument);
  EXPECT_EQ(store_->put_parts(".silt-tmp/k", parts).error(), store_error::invalid_argument);
  ASSERT_TRUE(store_->put_parts("a", parts));
  EXPECT_EQ(store_->put_parts("a/b", parts).error(), store_error::invalid_argument);
  EXPECT_TRUE(no_temporary_files());
}

TEST_P(LocalStoreParts, ConcurrentGatherPutsKeepTheirBytesApart) {
  std::vector<std::thread> threads;
  threads.reserve(4);
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 6; ++i) {
        std::vector<uint8_t> data(rng() % (local_store::write_chunk_size + 10000));
        for (auto& b : data) b = static_cast<uint8_t>(rng());
        const auto parts = random_parts(rng, data);
        const std::string key = std::to_string(t) + "/" + std::to_string(i);
        if (!store_->put_parts(key, parts)) ++failures;
        if (store_->get(key, 0, to_end).value_or(std::vector<uint8_t>{}) != data) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(LocalStoreParts, SharedGetsOfEveryRangeAroundTheAlignmentReadWhatGetsRead) {
  constexpr uint64_t align = local_store::direct_alignment;
  std::mt19937_64 rng(7);
  for (const uint64_t size : {uint64_t{1}, align - 1, align, align + 1, 3 * align + 17}) {
    std::vector<uint8_t> data(size);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    const std::string key = "s/" + std::to_string(size);
    ASSERT_TRUE(store_->put(key, data));
    std::vector<uint64_t> points = {0, 1, size - 1, size};
    for (uint64_t k = align; k <= size + align; k += align) {
      for (const uint64_t p : {k - 1, k, k + 1}) {
        if (p <= size) points.push_back(p);
      }
    }
    for (const uint64_t offset : points) {
      for (const uint64_t end : points) {
        if (end < offset) continue;
        for (const uint64_t length : {end - offset, end - offset + 5, to_end}) {
          auto r = store_->get_shared(key, offset, length);
          ASSERT_TRUE(r) << size << " " << offset << " " << length;
          const uint64_t want = std::min(length, size - offset);
          ASSERT_EQ(r->bytes.size(), want) << size << " " << offset << " " << length;
          EXPECT_TRUE(std::equal(r->bytes.begin(), r->bytes.end(),
                                 data.begin() + static_cast<ptrdiff_t>(offset)))
              << size << " " << offset << " " << length;
        }
      }
    }
    EXPECT_EQ(store_->get_shared(key, size + 1, 1).error(), store_error::invalid_range);
  }
  // A range of a large object, kept alive by its owner after the store is gone.
  std::vector<uint8_t> big(2 * local_store::write_chunk_size + 3);
  for (auto& b : big) b = static_cast<uint8_t>(rng());
  ASSERT_TRUE(store_->put("big", big));
  auto r = store_->get_shared("big", 4097, big.size() - 5000);
  ASSERT_TRUE(r);
  store_.reset();
  ASSERT_EQ(r->bytes.size(), big.size() - 5000);
  EXPECT_TRUE(std::equal(r->bytes.begin(), r->bytes.end(), big.begin() + 4097));
}

INSTANTIATE_TEST_SUITE_P(DirectAndBuffered, LocalStoreParts, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Direct" : "Buffered"; });

TEST(LocalStoreOpen, FailsOnAFile) {
  testing::scratch_dir dir;
  std::ofstream(dir.path() / "file") << "x";
  auto opened = local_store::open(dir.path() / "file");
  ASSERT_FALSE(opened);
  EXPECT_NE(opened.error().find("file"), std::string::npos) << opened.error();
}

TEST(LocalStoreOpen, CreatesMissingParents) {
  testing::scratch_dir dir;
  auto opened = local_store::open(dir.path() / "x/y/z");
  ASSERT_TRUE(opened) << opened.error();
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() / "x/y/z"));
}

}  // namespace
}  // namespace silt::storage
