#include "storage/object/metered_store.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "storage/object/faulty_store.h"
#include "storage/object/local_store.h"
#include "storage/object/tests/scratch_dir.h"

namespace silt::storage {
namespace {

std::vector<uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

TEST(MeteredStore, CountsCallsErrorsBytesAndLatencyPerOperation) {
  testing::scratch_dir dir;
  auto inner = local_store::open(dir.path());
  ASSERT_TRUE(inner) << inner.error();
  metered_store s(std::move(*inner));
  ASSERT_TRUE(s.put("a/b", bytes("hello")));
  const std::vector<uint8_t> p1 = bytes("ab"), p2 = bytes("cde");
  const std::span<const uint8_t> parts[] = {p1, p2};
  ASSERT_TRUE(s.put_parts("a/c", parts));
  EXPECT_EQ(s.get("a/b", 1, 3).value(), bytes("ell"));
  EXPECT_EQ(s.get("a/missing", 0, 1).error(), store_error::not_found);
  EXPECT_EQ(s.head("a/c").value(), 5u);
  EXPECT_EQ(s.list("a/").value().size(), 2u);
  ASSERT_TRUE(s.remove("a/b"));

  const auto put = s.stats(store_operation::put);
  EXPECT_EQ(put.calls, 2u);
  EXPECT_EQ(put.bytes, 10u);
  EXPECT_EQ(put.latency_us.count(), 2u);
  const auto get = s.stats(store_operation::get);
  EXPECT_EQ(get.calls, 2u);
  EXPECT_EQ(get.bytes, 3u);
  EXPECT_EQ(get.errors[static_cast<size_t>(store_error::not_found)], 1u);
  EXPECT_EQ(s.stats(store_operation::head).calls, 1u);
  EXPECT_EQ(s.stats(store_operation::list).calls, 1u);
  EXPECT_EQ(s.stats(store_operation::remove).calls, 1u);
  EXPECT_EQ(s.describe(), "file://" + dir.path().string());
  EXPECT_EQ(store_operation_name(store_operation::remove), "delete");
}

TEST(MeteredStore, LogsFailuresButNotOrdinaryAnswersAndLimitsRepeats) {
  testing::scratch_dir dir;
  auto local = local_store::open(dir.path());
  ASSERT_TRUE(local) << local.error();
  auto faulty = std::make_unique<faulty_store>(**local, faulty_store_options{});
  faulty_store* faults = faulty.get();
  metered_store s(std::move(faulty));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(s.get("missing", 0, 1).error(), store_error::not_found);
  faults->script(store_operation::put, {fault::io, fault::throttled});
  EXPECT_EQ(s.put("k1", bytes("v")).error(), store_error::io);
  EXPECT_EQ(s.put("k2", bytes("v")).error(), store_error::throttled);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(log.find("missing"), std::string::npos) << "not found is an answer:\n" << log;
  EXPECT_NE(log.find("WARN silt: object store: put k1 in faulty(file://"), std::string::npos)
      << log;
  EXPECT_NE(log.find("failed: io\n"), std::string::npos) << log;
  EXPECT_EQ(log.find("k2"), std::string::npos) << "the second failure within 10 s is counted:\n"
                                               << log;
}

}  // namespace
}  // namespace silt::storage
