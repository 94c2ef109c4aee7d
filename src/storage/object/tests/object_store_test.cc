#include "storage/object/object_store.h"

#include <map>

#include <gtest/gtest.h>

#include "storage/object/local_store.h"
#include "storage/object/s3_store.h"
#include "storage/object/tests/scratch_dir.h"

namespace silt::storage {
namespace {

TEST(StoreErrorName, NamesEveryError) {
  EXPECT_EQ(store_error_name(store_error::not_found), "not_found");
  EXPECT_EQ(store_error_name(store_error::invalid_range), "invalid_range");
  EXPECT_EQ(store_error_name(store_error::access_denied), "access_denied");
  EXPECT_EQ(store_error_name(store_error::throttled), "throttled");
  EXPECT_EQ(store_error_name(store_error::timeout), "timeout");
  EXPECT_EQ(store_error_name(store_error::io), "io");
  EXPECT_EQ(store_error_name(store_error::invalid_argument), "invalid_argument");
  EXPECT_EQ(store_error_name(store_error::already_exists), "already_exists");
}

// A store that records its puts, for the default gather put.
class recording_store final : public object_store {
 public:
  tl::expected<void, store_error> put(std::string_view key,
                                      std::span<const uint8_t> data) override {
    puts.emplace_back(key, std::vector<uint8_t>(data.begin(), data.end()));
    return {};
  }
  tl::expected<void, store_error> put_if_absent(std::string_view key,
                                                std::span<const uint8_t> data) override {
    return put(key, data);
  }
  tl::expected<std::vector<uint8_t>, store_error> get(std::string_view, uint64_t,
                                                      uint64_t) override {
    return tl::make_unexpected(store_error::io);
  }
  tl::expected<uint64_t, store_error> head(std::string_view) override {
    return tl::make_unexpected(store_error::io);
  }
  tl::expected<void, store_error> remove(std::string_view) override { return {}; }
  tl::expected<std::vector<object_info>, store_error> list(std::string_view) override {
    return std::vector<object_info>{};
  }
  std::string describe() const override { return "recording"; }

  std::vector<std::pair<std::string, std::vector<uint8_t>>> puts;
};

TEST(ObjectStore, DefaultGatherPutConcatenatesTheParts) {
  recording_store s;
  const std::vector<uint8_t> a = {1, 2, 3};
  const std::vector<uint8_t> b = {4};
  const std::span<const uint8_t> parts[] = {a, {}, b, a};
  ASSERT_TRUE(s.put_parts("k", parts));
  ASSERT_TRUE(s.put_parts("none", {}));
  ASSERT_TRUE(s.put_parts("one", std::span(parts).first(1)));
  ASSERT_EQ(s.puts.size(), 3u);
  EXPECT_EQ(s.puts[0].first, "k");
  EXPECT_EQ(s.puts[0].second, (std::vector<uint8_t>{1, 2, 3, 4, 1, 2, 3}));
  EXPECT_TRUE(s.puts[1].second.empty());
  EXPECT_EQ(s.puts[2].second, a);
}

TEST(OpenObjectStore, OpensAbsoluteAndRelativeFileUris) {
  testing::scratch_dir dir;
  auto abs = open_object_store("file://" + (dir.path() / "abs").string());
  ASSERT_TRUE(abs) << abs.error();
  EXPECT_EQ((*abs)->describe(), "file://" + (dir.path() / "abs").string());
  ASSERT_TRUE((*abs)->put("x", std::vector<uint8_t>{1}));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "abs/x"));

  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  auto rel = open_object_store("file://rel/objects");
  std::filesystem::current_path(cwd);
  ASSERT_TRUE(rel) << rel.error();
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() / "rel/objects"));
}

TEST(OpenObjectStore, AFileUriSaysWhetherWritesBypassThePageCache) {
  testing::scratch_dir dir;
  const auto root = (dir.path() / "objects").string();
  for (const auto& [query, direct] : std::vector<std::pair<std::string, bool>>{
           {"", true}, {"?direct=true", true}, {"?direct=false", false}}) {
    std::string uri = "file://" + root;
    uri += query;
    auto s = open_object_store(uri);
    ASSERT_TRUE(s) << query << ": " << s.error();
    auto* local = dynamic_cast<local_store*>(s->get());
    ASSERT_NE(local, nullptr);
    // A file system that refuses O_DIRECT turns it off on the first write.
    ASSERT_TRUE(local->put("k" + std::to_string(query.size()), std::vector<uint8_t>{1, 2, 3}));
    if (!direct) {
      EXPECT_FALSE(local->direct_io()) << query;
    }
    EXPECT_EQ(local->describe(), "file://" + root) << query;
  }
}

TEST(OpenObjectStore, ErrorsNameTheBadPart) {
  const std::map<std::string, std::string> cases = {
      {"/data/objects", "no scheme"},
      {"gs://bucket", "scheme 'gs'"},
      {"file://", "no directory path"},
      {"file:///x%zz", "%-escape"},
      {"file:///x?cache=yes", "unknown parameter 'cache'"},
      {"file:///x?direct=maybe", "direct must be true or false, not 'maybe'"},
      {"file://?direct=true", "no directory path"},
      {"s3://Bad_Bucket?access_key=a&secret_key=b", "bucket name 'Bad_Bucket'"},
      {"s3://bucket/prefix?access_key=a&secret_key=b", "'bucket/prefix' is not a bucket"},
      {"s3://bucket?access_key=a&secret_key=b&colour=red", "unknown parameter 'colour'"},
      {"s3://bucket?access_key=a&secret_key=b&path_style=maybe", "path_style='maybe'"},
      {"s3://bucket?access_key=a&secret_key=b&part_size=8M", "part_size='8M'"},
      {"s3://bucket?access_key=a", "go together"},
      {"s3://bucket?access_key=a&secret_key=b&endpoint=ftp://h", "endpoint 'ftp://h'"},
      {"s3://bucket?access_key=a&secret_key=b&endpoint=http://127.0.0.1:7480",
       "virtual-hosted addressing needs a host name"},
  };
  for (const auto& [uri, want] : cases) {
    auto s = open_object_store(uri);
    ASSERT_FALSE(s) << uri;
    EXPECT_NE(s.error().find(want), std::string::npos) << uri << " -> " << s.error();
  }
}

// Whatever part of the URI an error quotes, no credential of it.
TEST(OpenObjectStore, ErrorsQuoteNoCredential) {
  for (const std::string uri : {
           "s3://bucket?access_key=a&secret_key=S3SECRET&colour=red",
           "s3://bucket?access_key=a&secret_key=S3SECRET&endpoint=ftp://u:EPSECRET@h",
           "s3://bucket?access_key=a&secret_key=S3SECRET&endpoint=http://u:EPSECRET@h:1",
           "s3://u:S3SECRET@bucket?access_key=a&secret_key=S3SECRET",
           "s3://bucket/x?access_key=a&secret_key=S3SECRET&session_token=TOKSECRET",
           "s3://bucket?access_key=a&secret_key=S3SECRET&SECRETTAIL&region=r",
           "azblob://c?account=a&key=QVpTRUNSRVQ=&endpoint=ftp://u:EPSECRET@h",
           "azblob://u:AZSECRET@cont?account=a&sas=sv%3D1%26sig%3DSIGSECRET",
           "azblob://cont?account=a&key=QVpTRUNSRVQ=&sas=sv=1&sig=SIGSECRET",
           "file:///x%zz?direct=true&password=FILESECRET",
           "files://u:FILESECRET@x",
           "/data/objects?secret_key=FILESECRET",
       }) {
    auto s = open_object_store(uri);
    ASSERT_FALSE(s) << uri;
    EXPECT_EQ(s.error().find("SECRET"), std::string::npos) << uri << " -> " << s.error();
    EXPECT_EQ(s.error().find("QVpTRUNSRVQ="), std::string::npos) << uri << " -> " << s.error();
  }
}

TEST(ParseS3Uri, ReadsEveryParameter) {
  auto o = parse_s3_uri(
      "s3://my.bucket-1?endpoint=http://127.0.0.1:7480&region=eu-west-1&path_style=true"
      "&access_key=AK&secret_key=s%2Fk+x&session_token=tok&multipart_threshold=1000"
      "&part_size=500&upload_concurrency=2&max_attempts=9&sign_payload=false"
      "&connect_timeout_ms=1500&request_timeout_ms=60000",
      [](const char*) { return std::nullopt; });
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->bucket, "my.bucket-1");
  EXPECT_EQ(o->endpoint, "http://127.0.0.1:7480");
  EXPECT_EQ(o->region, "eu-west-1");
  EXPECT_TRUE(o->path_style);
  EXPECT_EQ(o->access_key, "AK");
  EXPECT_EQ(o->secret_key, "s/k+x") << "'+' stays: secret keys contain it";
  EXPECT_EQ(o->session_token, "tok");
  EXPECT_EQ(o->multipart_threshold, 1000u);
  EXPECT_EQ(o->part_size, 500u);
  EXPECT_EQ(o->upload_concurrency, 2u);
  EXPECT_EQ(o->retry.max_attempts, 9u);
  EXPECT_FALSE(o->sign_payload);
  EXPECT_EQ(o->connect_timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(o->request_timeout, std::chrono::milliseconds(60000));
}

TEST(ParseS3Uri, TakesCredentialsAndRegionFromTheEnvironment) {
  const std::map<std::string, std::string> env = {{"AWS_ACCESS_KEY_ID", "envkey"},
                                                  {"AWS_SECRET_ACCESS_KEY", "envsecret"},
                                                  {"AWS_SESSION_TOKEN", "envtoken"},
                                                  {"AWS_DEFAULT_REGION", "ap-south-1"}};
  const auto lookup = [&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  auto o = parse_s3_uri("s3://bucket/", lookup);
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->bucket, "bucket");
  EXPECT_EQ(o->access_key, "envkey");
  EXPECT_EQ(o->secret_key, "envsecret");
  EXPECT_EQ(o->session_token, "envtoken");
  EXPECT_EQ(o->region, "ap-south-1");
  EXPECT_FALSE(o->path_style);

  auto with_region = parse_s3_uri("s3://bucket", [&](const char* name) {
    return std::string_view(name) == "AWS_REGION" ? std::optional<std::string>("us-west-2")
                                                  : lookup(name);
  });
  EXPECT_EQ(with_region->region, "us-west-2") << "AWS_REGION before AWS_DEFAULT_REGION";

  auto uri_wins = parse_s3_uri("s3://bucket?access_key=a&secret_key=b&region=r1", lookup);
  EXPECT_EQ(uri_wins->access_key, "a");
  EXPECT_EQ(uri_wins->region, "r1");
  EXPECT_TRUE(uri_wins->session_token.empty()) << "a token belongs to the env's key";
}

TEST(ParseS3Uri, NoCredentialsAnywhereIsAnError) {
  auto o = parse_s3_uri("s3://bucket", [](const char*) { return std::nullopt; });
  ASSERT_FALSE(o);
  EXPECT_NE(o.error().find("AWS_ACCESS_KEY_ID"), std::string::npos) << o.error();
  auto defaults = parse_s3_uri("s3://bucket?access_key=a&secret_key=b",
                               [](const char*) { return std::nullopt; });
  EXPECT_EQ(defaults->region, "us-east-1");
}

s3_options url_options(bool path_style, std::string endpoint) {
  s3_options o;
  o.bucket = "bkt";
  o.endpoint = std::move(endpoint);
  o.path_style = path_style;
  o.access_key = "a";
  o.secret_key = "b";
  return o;
}

TEST(S3StoreUrl, PathStyleNamesTheBucketInThePath) {
  auto s = s3_store::open(url_options(true, "http://127.0.0.1:7480/"));
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ((*s)->url("a b/c+d"), "http://127.0.0.1:7480/bkt/a%20b/c%2Bd");
  EXPECT_EQ((*s)->url("", "list-type=2"), "http://127.0.0.1:7480/bkt?list-type=2");
  EXPECT_EQ((*s)->describe(), "s3://bkt at http://127.0.0.1:7480 (path-style)");
}

TEST(S3StoreUrl, VirtualHostedNamesTheBucketInTheHost) {
  auto s = s3_store::open(url_options(false, "https://s3.example.com"));
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ((*s)->url("x/../y"), "https://bkt.s3.example.com/x/../y");
  EXPECT_EQ((*s)->url("", "uploads="), "https://bkt.s3.example.com/?uploads=");
  EXPECT_EQ((*s)->describe(), "s3://bkt at https://s3.example.com (virtual-hosted)");
}

TEST(S3StoreUrl, NoEndpointMeansAwsInTheRegion) {
  auto o = url_options(false, "");
  o.region = "eu-central-1";
  auto s = s3_store::open(o);
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ((*s)->url("k"), "https://bkt.s3.eu-central-1.amazonaws.com/k");
}

}  // namespace
}  // namespace silt::storage
