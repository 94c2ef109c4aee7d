#include "storage/object/local_store.h"

#include <fstream>
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
