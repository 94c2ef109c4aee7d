#include "storage/object/gated_store.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "storage/object/local_store.h"
#include "storage/object/tests/scratch_dir.h"

namespace silt::storage {
namespace {

std::vector<uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

TEST(GatedStore, ClosedGateFailsEveryCallWithoutTouchingTheStore) {
  testing::scratch_dir dir;
  auto local = local_store::open(dir.path());
  ASSERT_TRUE(local) << local.error();
  local_store* inner = local->get();
  ASSERT_TRUE(inner->put("objects/a", bytes("there")));
  gated_store s(std::move(*local));
  EXPECT_FALSE(s.is_open());
  const std::vector<uint8_t> part = bytes("x");
  const std::span<const uint8_t> parts[] = {part, part};
  EXPECT_EQ(s.put("objects/b", bytes("new")).error(), store_error::io);
  EXPECT_EQ(s.put_parts("objects/c", parts).error(), store_error::io);
  EXPECT_EQ(s.put_if_absent("objects/d", bytes("new")).error(), store_error::io);
  EXPECT_EQ(s.get("objects/a", 0, to_end).error(), store_error::io);
  EXPECT_EQ(s.get_shared("objects/a", 0, to_end).error(), store_error::io);
  EXPECT_EQ(s.head("objects/a").error(), store_error::io);
  EXPECT_EQ(s.remove("objects/a").error(), store_error::io);
  EXPECT_EQ(s.list("").error(), store_error::io);
  EXPECT_EQ(s.describe(), "file://" + dir.path().string());
  const auto all = inner->list("").value();
  ASSERT_EQ(all.size(), 1u) << "nothing written";
  EXPECT_EQ(all[0].key, "objects/a") << "nothing deleted";
}

TEST(GatedStore, OpenGateLetsEveryCallThrough) {
  testing::scratch_dir dir;
  auto local = local_store::open(dir.path());
  ASSERT_TRUE(local) << local.error();
  gated_store s(std::move(*local));
  s.open();
  EXPECT_TRUE(s.is_open());
  ASSERT_TRUE(s.put("k/1", bytes("one")));
  const std::vector<uint8_t> p1 = bytes("t"), p2 = bytes("wo");
  const std::span<const uint8_t> parts[] = {p1, p2};
  ASSERT_TRUE(s.put_parts("k/2", parts));
  ASSERT_TRUE(s.put_if_absent("k/3", bytes("three")));
  EXPECT_EQ(s.put_if_absent("k/3", bytes("other")).error(), store_error::already_exists);
  EXPECT_EQ(s.get("k/2", 0, to_end).value(), bytes("two"));
  const auto shared = s.get_shared("k/1", 1, 2).value();
  EXPECT_EQ(std::vector<uint8_t>(shared.bytes.begin(), shared.bytes.end()), bytes("ne"));
  EXPECT_EQ(s.head("k/3").value(), 5u);
  EXPECT_EQ(s.list("k/").value().size(), 3u);
  ASSERT_TRUE(s.remove("k/1"));
  EXPECT_EQ(s.get("k/1", 0, to_end).error(), store_error::not_found);
}

}  // namespace
}  // namespace silt::storage
