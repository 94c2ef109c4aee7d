// Every generated message at every valid version survives encode -> decode -> encode with
// identical bytes, for many random values per field type.
#include <gtest/gtest.h>

#include "protocol/generated/api_table.h"
#include "protocol/tests/random_messages.h"

namespace silt::protocol::testing {
namespace {

TEST(RoundTrip, EveryMessageAtEveryVersionReencodesToIdenticalBytes) {
  const auto cases = all_message_cases();
  ASSERT_GT(cases.size(), 500u);
  random_source rnd(20261130);
  size_t runs = 0;
  for (const auto& c : cases) {
    for (int i = 0; i < 20; ++i) {
      const auto result = c.run(rnd, c.version);
      ++runs;
      ASSERT_TRUE(result.ok) << c.name << " v" << c.version << " iteration " << i << ": "
                             << result.detail;
    }
  }
  EXPECT_EQ(runs, cases.size() * 20);
}

TEST(RoundTrip, EveryApiInTheTableHasCasesForAllItsVersions) {
  const auto cases = all_message_cases();
  for (const auto& api : api_table) {
    for (int16_t v = api.min_version; v <= api.max_version; ++v) {
      const std::string req = std::string(api.name) + "Request";
      const auto found = std::count_if(cases.begin(), cases.end(), [&](const message_case& c) {
        return c.name == req && c.version == v && c.is_request;
      });
      EXPECT_EQ(found, 1) << req << " v" << v;
    }
  }
}

}  // namespace
}  // namespace silt::protocol::testing
