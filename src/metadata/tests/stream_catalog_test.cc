#include "metadata/stream_catalog.h"

#include <filesystem>

#include <gtest/gtest.h>

namespace silt::metadata {
namespace {

std::unique_ptr<stream_catalog> memory_catalog() {
  auto c = stream_catalog::open(":memory:");
  EXPECT_TRUE(c.has_value());
  return std::move(*c);
}

object_record object(stream_catalog& c, object_kind kind = object_kind::stream_set) {
  object_record o;
  o.object_id = *c.next_object_id();
  o.key = "objects/" + std::to_string(o.object_id);
  o.size = 100;
  o.kind = kind;
  return o;
}

TEST(StreamCatalog, CommitsRangesThatContinueTheirStreams) {
  auto c = memory_catalog();
  auto o1 = object(*c);
  ASSERT_TRUE(c->commit_object(o1, {{1, 0, 10, 5, 50}, {2, 0, 3, 5, 20}}));
  auto o2 = object(*c);
  ASSERT_TRUE(c->commit_object(o2, {{1, 10, 25, 7, 60}}));
  EXPECT_EQ(c->stream(1)->value().end_offset, 25);
  EXPECT_EQ(c->stream(2)->value().end_offset, 3);
  auto found = c->find(1, 12);
  ASSERT_TRUE(found);
  ASSERT_EQ(found->size(), 1u);
  EXPECT_EQ((*found)[0].key, o2.key);
  EXPECT_EQ((*found)[0].range.start_offset, 10);
  EXPECT_EQ(c->find(1, 0)->size(), 2u);
  EXPECT_TRUE(c->find(1, 25)->empty());
}

TEST(StreamCatalog, RangeNotStartingAtTheStreamEndIsRejectedWhole) {
  auto c = memory_catalog();
  ASSERT_TRUE(c->commit_object(object(*c), {{1, 0, 10, 0, 1}}));
  auto bad = object(*c);
  // Stream 2 is fine but stream 1 leaves a gap: nothing of the object may be committed.
  auto r = c->commit_object(bad, {{2, 0, 5, 0, 1}, {1, 11, 20, 0, 1}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), catalog_error::discontinuous);
  EXPECT_FALSE(c->stream(2)->has_value());
  EXPECT_EQ(c->stream(1)->value().end_offset, 10);
  // An overlap is refused too, and so is a first range above 0.
  EXPECT_FALSE(c->commit_object(object(*c), {{1, 5, 15, 0, 1}}));
  EXPECT_FALSE(c->commit_object(object(*c), {{3, 7, 9, 0, 1}}));
}

TEST(StreamCatalog, CompactionReplacesExactlyTheRangesItCovers) {
  auto c = memory_catalog();
  auto a = object(*c);
  auto b = object(*c);
  ASSERT_TRUE(c->commit_object(a, {{1, 0, 10, 0, 10}, {2, 0, 4, 0, 4}}));
  ASSERT_TRUE(c->commit_object(b, {{1, 10, 20, 0, 10}, {2, 4, 8, 0, 4}}));
  auto merged = object(*c, object_kind::stream);
  // Covering only part of what the replaced objects hold for stream 1 is refused.
  EXPECT_FALSE(c->replace(merged, {{1, 0, 15, 0, 15}}, {a.object_id, b.object_id}));
  ASSERT_TRUE(c->replace(merged, {{1, 0, 20, 0, 20}}, {a.object_id, b.object_id}));
  auto r1 = c->ranges(1);
  ASSERT_EQ(r1->size(), 1u);
  EXPECT_EQ((*r1)[0].key, merged.key);
  // Stream 2 still reads from the old objects, which therefore are not deletable.
  EXPECT_EQ(c->ranges(2)->size(), 2u);
  EXPECT_TRUE(c->deletable(INT64_MAX)->empty());
  auto merged2 = object(*c, object_kind::stream);
  ASSERT_TRUE(c->replace(merged2, {{2, 0, 8, 0, 8}}, {a.object_id, b.object_id}));
  auto gone = c->deletable(INT64_MAX);
  ASSERT_EQ(gone->size(), 2u);
  ASSERT_TRUE(c->forget(a.object_id));
  ASSERT_TRUE(c->forget(b.object_id));
  EXPECT_EQ(c->forget(a.object_id).error(), catalog_error::unknown_object);
  EXPECT_EQ(c->objects(object_kind::stream)->size(), 2u);
}

TEST(StreamCatalog, TrimDropsWholeRangesAndFreesEmptyObjects) {
  auto c = memory_catalog();
  auto a = object(*c);
  auto b = object(*c);
  ASSERT_TRUE(c->commit_object(a, {{1, 0, 10, 0, 10}}));
  ASSERT_TRUE(c->commit_object(b, {{1, 10, 20, 0, 10}}));
  ASSERT_TRUE(c->trim(1, 15));  // inside b: b stays, a goes
  EXPECT_EQ(c->stream(1)->value().start_offset, 15);
  EXPECT_EQ(c->ranges(1)->size(), 1u);
  auto gone = c->deletable(INT64_MAX);
  ASSERT_EQ(gone->size(), 1u);
  EXPECT_EQ((*gone)[0].object_id, a.object_id);
  ASSERT_TRUE(c->trim(1, 5));  // never backwards
  EXPECT_EQ(c->stream(1)->value().start_offset, 15);
}

TEST(StreamCatalog, KnowsTheKeysOfItsObjectsUntilTheyAreForgotten) {
  auto c = memory_catalog();
  EXPECT_EQ(*c->last_object_id(), 0u);
  auto o1 = object(*c);
  auto o2 = object(*c);
  auto uncommitted = object(*c);
  EXPECT_EQ(*c->last_object_id(), uncommitted.object_id);
  ASSERT_TRUE(c->commit_object(o1, {{1, 0, 10, 5, 50}}));
  ASSERT_TRUE(c->commit_object(o2, {{1, 10, 20, 5, 50}}));
  EXPECT_EQ(*c->object_keys(), (std::vector<std::string>{o1.key, o2.key}));
  // Marked for deletion: still known until forgotten.
  ASSERT_TRUE(c->trim(1, 10));
  EXPECT_EQ(*c->object_keys(), (std::vector<std::string>{o1.key, o2.key}));
  ASSERT_TRUE(c->forget(o1.object_id));
  EXPECT_EQ(*c->object_keys(), std::vector<std::string>{o2.key});
  EXPECT_EQ(*c->last_object_id(), uncommitted.object_id);
}

TEST(StreamCatalog, SurvivesReopening) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("silt-catalog-" + std::to_string(::getpid()) + ".db");
  std::filesystem::remove(path);
  {
    auto c = stream_catalog::open(path.string());
    ASSERT_TRUE(c);
    object_record o{*(*c)->next_object_id(), "k", 1, object_kind::stream_set, 0};
    ASSERT_TRUE((*c)->commit_object(o, {{9, 0, 42, 0, 1}}));
  }
  auto c = stream_catalog::open(path.string());
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)->stream(9)->value().end_offset, 42);
  EXPECT_EQ(*(*c)->next_object_id(), 2u);
  c->reset();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
}

}  // namespace
}  // namespace silt::metadata
