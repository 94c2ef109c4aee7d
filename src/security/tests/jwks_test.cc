// The JWKS source: a file or an HTTP URL loaded at open, refreshed on its schedule and early
// for unknown key ids (rate-limited), failures keeping the keys in memory.
#include "security/jwks.h"

#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "security/tests/test_keys.h"
#include "storage/object/tests/fake_http_server.h"

namespace silt::security {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using storage::testing::fake_http_server;
using testing::jwks_document;
using testing::signing_key;

const signing_key& key_a() {
  static const signing_key k = signing_key::ec("P-256");
  return k;
}
const signing_key& key_b() {
  static const signing_key k = signing_key::ec("P-256");
  return k;
}

// A temporary directory, removed at the end of the test.
class temp_dir {
 public:
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "silt-jwks-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~temp_dir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  // Writes `text` to `name` (through a rename, as a deployment replaces a file).
  [[nodiscard]] std::string write(const std::string& name, const std::string& text) const {
    const fs::path tmp = path_ / (name + ".tmp");
    std::ofstream(tmp, std::ios::binary) << text;
    fs::rename(tmp, path_ / name);
    return (path_ / name).string();
  }

 private:
  fs::path path_;
};

template <typename Pred>
bool eventually(Pred done, std::chrono::milliseconds limit = 5s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

jwks_options quick(const std::string& url) {
  jwks_options o;
  o.url = url;
  o.retry_backoff = 10ms;
  o.retry_backoff_max = 100ms;
  return o;
}

TEST(JwksSource, LoadsAFileByPathOrFileUrl) {
  temp_dir dir;
  const std::string doc = jwks_document({key_a().jwk("a")});
  const std::string path = dir.write("jwks.json", doc);
  const std::string spaced = dir.write("my jwks.json", doc);
  for (const std::string& url :
       {path, "file://" + path, "file:" + path, "file://localhost" + path,
        "file://" + spaced.substr(0, spaced.find("my ")) + "my%20jwks.json"}) {
    auto s = jwks_source::open(quick(url));
    ASSERT_TRUE(s) << url << ": " << s.error();
    EXPECT_EQ((*s)->loads(), 1u);
    EXPECT_TRUE((*s)->keys()->contains("a")) << url;
  }
}

TEST(JwksSource, OpenFailsWithoutAKeySet) {
  temp_dir dir;
  const std::string garbage = dir.write("garbage.json", "<html>not found</html>");
  for (const std::string& url :
       {std::string(), dir.write("x", "") + ".missing", garbage, std::string("ftp://idp/jwks"),
        std::string("file://idp/etc/jwks.json"), std::string("file:relative"),
        std::string("file:///bad%2")}) {
    auto s = jwks_source::open(quick(url));
    EXPECT_FALSE(s) << url;
  }
  jwks_options o = quick(dir.write("ok.json", jwks_document({})));
  o.refresh_interval = 0ms;
  EXPECT_FALSE(jwks_source::open(o));
}

TEST(JwksSource, ErrorsMaskTheUrlsCredentials) {
  // Nothing listens on port 1: the fetch fails, and the error quotes the URL masked.
  auto s = jwks_source::open(quick("http://user:hunter2@127.0.0.1:1/jwks?token=t0ps3cret"));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().find("hunter2"), std::string::npos) << s.error();
  EXPECT_EQ(s.error().find("t0ps3cret"), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("127.0.0.1"), std::string::npos) << s.error();
}

TEST(JwksSource, RefreshesOnItsSchedule) {
  temp_dir dir;
  jwks_options o = quick(dir.write("jwks.json", jwks_document({key_a().jwk("a")})));
  o.refresh_interval = 50ms;
  auto s = jwks_source::open(o);
  ASSERT_TRUE(s) << s.error();
  (void)dir.write("jwks.json", jwks_document({key_a().jwk("a"), key_b().jwk("b")}));
  EXPECT_TRUE(eventually([&] { return (*s)->keys()->contains("b"); }));
}

TEST(JwksSource, AFailedRefreshKeepsTheKeys) {
  temp_dir dir;
  jwks_options o = quick(dir.write("jwks.json", jwks_document({key_a().jwk("a")})));
  o.refresh_interval = 20ms;
  auto s = jwks_source::open(o);
  ASSERT_TRUE(s) << s.error();
  (void)dir.write("jwks.json", "{\"keys\": [");
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ((*s)->loads(), 1u);
  EXPECT_TRUE((*s)->keys()->contains("a"));
  (void)dir.write("jwks.json", jwks_document({key_b().jwk("b")}));
  EXPECT_TRUE(eventually([&] { return (*s)->keys()->contains("b"); }));
  EXPECT_FALSE((*s)->keys()->contains("a"));
}

TEST(JwksSource, AnUnknownKidRefreshesEarlyOncePerMinute) {
  temp_dir dir;
  const std::string path = dir.write("jwks.json", jwks_document({key_a().jwk("a")}));
  auto s = jwks_source::open(quick(path));  // the scheduled refresh is an hour away
  ASSERT_TRUE(s) << s.error();
  (void)dir.write("jwks.json", jwks_document({key_a().jwk("a"), key_b().jwk("b")}));
  (*s)->key_missing("b");
  ASSERT_TRUE(eventually([&] { return (*s)->loads() == 2; }));
  EXPECT_TRUE((*s)->keys()->contains("b"));

  // A kid the identity provider does not know either: one early refresh, then it waits.
  (*s)->key_missing("made-up");
  ASSERT_TRUE(eventually([&] { return (*s)->loads() == 3; }));
  for (int i = 0; i < 50; ++i) (*s)->key_missing("made-up");
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ((*s)->loads(), 3u);
  // Absurdly long ones never ask.
  (*s)->key_missing(std::string(5000, 'k'));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ((*s)->loads(), 3u);
}

TEST(JwksSource, EarlyRefreshesAreSpacedOut) {
  temp_dir dir;
  jwks_options o = quick(dir.write("jwks.json", jwks_document({key_a().jwk("a")})));
  o.retry_backoff = 200ms;
  auto s = jwks_source::open(o);
  ASSERT_TRUE(s) << s.error();
  // Many made-up kids at once: their refreshes merge, at most one per 200 ms.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 40; ++i) {
    (*s)->key_missing("kid-" + std::to_string(i));
    std::this_thread::sleep_for(10ms);
  }
  std::this_thread::sleep_for(100ms);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  const auto most = 1 + 1 + elapsed / 200ms;  // the first load, then one per gap
  EXPECT_LE((*s)->loads(), static_cast<uint64_t>(most));
  EXPECT_GE((*s)->loads(), 2u);
}

TEST(JwksSource, FixedSetNeverRefreshes) {
  auto s = jwks_source::fixed(jwks_document({key_a().jwk("a")}));
  ASSERT_TRUE(s) << s.error();
  (*s)->key_missing("b");
  EXPECT_EQ((*s)->loads(), 1u);
  EXPECT_FALSE(jwks_source::fixed("{}"));
}

TEST(JwksSource, FetchesAnHttpUrl) {
  fake_http_server server;
  server.script({{.body = jwks_document({key_a().jwk("a")})},
                 {.body = jwks_document({key_a().jwk("a"), key_b().jwk("b")})}});
  auto s = jwks_source::open(quick(server.endpoint() + "/realms/kafka/certs"));
  ASSERT_TRUE(s) << s.error();
  EXPECT_TRUE((*s)->keys()->contains("a"));
  (*s)->key_missing("b");
  ASSERT_TRUE(eventually([&] { return (*s)->keys()->contains("b"); }));
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].method, "GET");
  EXPECT_EQ(requests[0].target, "/realms/kafka/certs");
  EXPECT_EQ(requests[0].header("accept"), "application/json");
}

TEST(JwksSource, HttpFailuresAreRetriedThenRefused) {
  fake_http_server server;
  server.script({{.status = 503}, {.body = jwks_document({key_a().jwk("a")})}});
  auto s = jwks_source::open(quick(server.endpoint() + "/jwks"));
  ASSERT_TRUE(s) << s.error();  // the second attempt succeeded
  EXPECT_EQ(server.requests().size(), 2u);

  fake_http_server missing;
  missing.script({{.status = 404},
                  {.status = 404},
                  {.status = 404},
                  {.status = 404},
                  {.status = 404},
                  {.status = 404},
                  {.status = 404},
                  {.status = 404}});
  auto m = jwks_source::open(quick(missing.endpoint() + "/jwks"));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().find("404"), std::string::npos) << m.error();
}

TEST(JwksSource, HttpDocumentsAreBoundedInSizeAndTime) {
  fake_http_server big;
  big.script({{.body = std::string(5000, ' ') + jwks_document({})}});
  jwks_options o = quick(big.endpoint() + "/jwks");
  o.retry_backoff_max = 0ms;
  o.max_document_bytes = 4096;
  auto s = jwks_source::open(o);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("larger"), std::string::npos) << s.error();

  fake_http_server slow;
  slow.script({{.hang = true}});
  o = quick(slow.endpoint() + "/jwks");
  o.retry_backoff_max = 0ms;
  o.fetch_timeout = 200ms;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(jwks_source::open(o));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(JwksSource, DestructionAbortsAFetchInProgress) {
  fake_http_server server;
  server.script({{.body = jwks_document({key_a().jwk("a")})}, {.hang = true}});
  jwks_options o = quick(server.endpoint() + "/jwks");
  o.refresh_interval = 10ms;
  o.fetch_timeout = 60s;
  auto s = jwks_source::open(o);
  ASSERT_TRUE(s) << s.error();
  ASSERT_TRUE(eventually([&] { return server.requests().size() == 2; }));
  const auto start = std::chrono::steady_clock::now();
  s->reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

}  // namespace
}  // namespace silt::security
