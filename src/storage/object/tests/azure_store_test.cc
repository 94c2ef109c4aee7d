// What is particular to the Azure Blob store: Shared Key signing, its URI, error mapping and
// retries against a scripted HTTP server, and credentials and containers against Azurite
// (when SILT_AZURE_ENDPOINT, SILT_AZURE_ACCOUNT and SILT_AZURE_KEY are set, as
// scripts/azurite-test-server.sh prints them). store_contract_test.cc checks the object store
// contract on it.
#include "storage/object/azure_store.h"

#include <cstdlib>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "storage/object/tests/fake_http_server.h"
#include "storage/object/uri.h"

namespace silt::storage {
namespace {

using testing::fake_http_server;

// Azurite's published development key.
constexpr std::string_view dev_key =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

std::vector<uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

std::string env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read before threads
  return v == nullptr ? std::string() : std::string(v);
}

std::string error_xml(std::string_view code) {
  return "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>" + std::string(code) +
         "</Code><Message>m</Message></Error>";
}

TEST(AzureSigning, StringToSignFollowsTheDocumentedLayout) {
  const std::vector<std::string> headers = {"x-ms-version: 2021-12-02", "If-None-Match: *",
                                            "x-ms-blob-type: BlockBlob",
                                            "X-MS-Date: Thu, 01 Jan 1970 00:00:00 GMT"};
  const auto s = azure::string_to_sign(
      "PUT", headers, 5, "devstoreaccount1",
      "http://127.0.0.1:10000/devstoreaccount1/c1/k%20x?comp=block&blockid=abc%3D");
  EXPECT_EQ(s,
            "PUT\n\n\n5\n\n\n\n\n\n*\n\n\n"
            "x-ms-blob-type:BlockBlob\nx-ms-date:Thu, 01 Jan 1970 00:00:00 GMT\n"
            "x-ms-version:2021-12-02\n"
            "/devstoreaccount1/devstoreaccount1/c1/k%20x\nblockid:abc=\ncomp:block");
  // HMAC-SHA256 under the key, base64: the value Python's hmac module gives for this string.
  EXPECT_EQ(azure::authorization("devstoreaccount1", dev_key, s),
            "SharedKey devstoreaccount1:8M1V2/hrHhTfldHi2ZsylbCrz31G5sKbWb266TdycaY=");
  EXPECT_EQ(azure::authorization("a", "not base64!", s), "");
}

TEST(AzureSigning, ZeroLengthIsSignedEmptyAndTheRootPathIsSlash) {
  const auto s = azure::string_to_sign("GET", {"x-ms-range: bytes=0-9"}, 0, "acct",
                                       "https://acct.blob.core.windows.net");
  EXPECT_EQ(s, "GET\n\n\n\n\n\n\n\n\n\n\n\nx-ms-range:bytes=0-9\n/acct/");
}

TEST(AzureSigning, HttpDate) {
  EXPECT_EQ(azure::http_date(std::chrono::system_clock::time_point{}),
            "Thu, 01 Jan 1970 00:00:00 GMT");
  EXPECT_EQ(azure::http_date(
                std::chrono::system_clock::time_point{std::chrono::seconds(1796342400 + 3723)}),
            "Fri, 04 Dec 2026 01:02:03 GMT");
}

TEST(ParseAzureUri, ReadsEveryParameter) {
  auto o = parse_azure_uri(
      "azblob://my-container?endpoint=http://127.0.0.1:10000/devstoreaccount1"
      "&account=devstoreaccount1&key=a2V5&block_threshold=100&block_size=50"
      "&upload_concurrency=2&max_attempts=3&connect_timeout_ms=7&request_timeout_ms=9"
      "&create_container=true",
      [](const char*) { return std::nullopt; });
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->container, "my-container");
  EXPECT_EQ(o->endpoint, "http://127.0.0.1:10000/devstoreaccount1");
  EXPECT_EQ(o->account, "devstoreaccount1");
  EXPECT_EQ(o->key, "a2V5");
  EXPECT_EQ(o->block_threshold, 100u);
  EXPECT_EQ(o->block_size, 50u);
  EXPECT_EQ(o->upload_concurrency, 2u);
  EXPECT_EQ(o->retry.max_attempts, 3u);
  EXPECT_EQ(o->connect_timeout.count(), 7);
  EXPECT_EQ(o->request_timeout.count(), 9);
  EXPECT_TRUE(o->create_container);
}

TEST(ParseAzureUri, TakesAccountAndCredentialsFromTheEnvironment) {
  std::map<std::string, std::string> vars = {{"AZURE_STORAGE_ACCOUNT", "acct"},
                                             {"AZURE_STORAGE_KEY", "a2V5"}};
  const auto lookup = [&](const char* n) -> std::optional<std::string> {
    auto it = vars.find(n);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  auto o = parse_azure_uri("azblob://c-1", lookup);
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->account, "acct");
  EXPECT_EQ(o->key, "a2V5");
  vars.erase("AZURE_STORAGE_KEY");
  vars["AZURE_STORAGE_SAS_TOKEN"] = "sv=2021&sig=x";
  o = parse_azure_uri("azblob://c-1", lookup);
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->sas, "sv=2021&sig=x");
  EXPECT_TRUE(o->key.empty());
}

TEST(ParseAzureUri, ErrorsNameTheBadPart) {
  const auto none = [](const char*) { return std::optional<std::string>(); };
  const std::map<std::string, std::string> cases = {
      {"azblob://Bad_Name?account=a&key=a2V5", "container name 'Bad_Name'"},
      {"azblob://a--b?account=a&key=a2V5", "container name 'a--b'"},
      {"azblob://cont?key=a2V5", "no account"},
      {"azblob://cont?account=a", "no credentials"},
      {"azblob://cont?account=a&key=a2V5&sas=x", "key or sas, not both"},
      {"azblob://cont?account=a&key=a2V5&block_size=big", "block_size='big'"},
      {"azblob://cont?account=a&key=a2V5&colour=red", "unknown parameter 'colour'"},
  };
  for (const auto& [uri, want] : cases) {
    auto o = parse_azure_uri(uri, none);
    ASSERT_FALSE(o) << uri;
    EXPECT_NE(o.error().find(want), std::string::npos) << uri << ": " << o.error();
  }
  azure_options o;
  o.container = "cont";
  o.account = "acct";
  o.key = "not base64!";
  EXPECT_EQ(azure_store::open(o).error(), "the account key is not base64");
}

TEST(AzureStoreUrl, DefaultEndpointAndSasToken) {
  azure_options o;
  o.container = "cont";
  o.account = "acct";
  o.sas = "?sv=2021-12-02&sig=abc%2B";
  auto s = azure_store::open(o);
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ((*s)->url("a b/c"),
            "https://acct.blob.core.windows.net/cont/a%20b/c?sv=2021-12-02&sig=abc%2B");
  EXPECT_EQ((*s)->url("", "restype=container"),
            "https://acct.blob.core.windows.net/cont?restype=container&sv=2021-12-02&sig=abc%2B");
}

class AzureRetry : public ::testing::Test {
 protected:
  std::unique_ptr<azure_store> open() {
    azure_options o;
    o.container = "cont";
    o.account = "devstoreaccount1";
    o.key = std::string(dev_key);
    o.endpoint = server_.endpoint() + "/devstoreaccount1";
    o.retry = {.max_attempts = 3,
               .base_delay = std::chrono::milliseconds(10),
               .max_delay = std::chrono::milliseconds(100)};
    o.jitter_seed = 7;
    o.sleep = [this](std::chrono::milliseconds d) { sleeps_.push_back(d); };
    o.on_failure = [this](std::string_view line) { log_.emplace_back(line); };
    auto s = azure_store::open(o);
    EXPECT_TRUE(s) << s.error();
    return s ? std::move(*s) : nullptr;
  }
  fake_http_server server_;
  std::vector<std::chrono::milliseconds> sleeps_;
  std::vector<std::string> log_;
};

TEST_F(AzureRetry, ServerBusyAndInternalErrorsAreRetried) {
  server_.script({{.status = 503, .body = error_xml("ServerBusy")},
                  {.status = 500, .body = error_xml("InternalError")},
                  {.status = 201}});
  auto store = open();
  ASSERT_TRUE(store->put("k", bytes("hello")));
  ASSERT_EQ(server_.requests().size(), 3u);
  EXPECT_EQ(sleeps_.size(), 2u);
  ASSERT_EQ(log_.size(), 2u);
  EXPECT_NE(log_[0].find("azblob PUT "), std::string::npos) << log_[0];
  EXPECT_NE(log_[0].find("HTTP 503 ServerBusy; attempt 1 of 3, retrying in"), std::string::npos)
      << log_[0];
  const auto requests = server_.requests();
  const auto& req = requests[2];
  EXPECT_EQ(req.method, "PUT");
  EXPECT_EQ(req.target, "/devstoreaccount1/cont/k");
  EXPECT_EQ(req.header("x-ms-blob-type"), "BlockBlob");
  EXPECT_TRUE(req.header("authorization").starts_with("SharedKey devstoreaccount1:"));
  EXPECT_EQ(req.body, "hello");
}

TEST_F(AzureRetry, ThrottlingThatLastsEndsThrottled) {
  server_.script(std::vector<testing::fake_reply>(3, {.status = 429}));
  auto store = open();
  EXPECT_EQ(store->head("k").error(), store_error::throttled);
  EXPECT_EQ(server_.requests().size(), 3u);
}

TEST_F(AzureRetry, ErrorsMapToStoreErrors) {
  server_.script({{.status = 403,
                   .headers = {{"x-ms-error-code", "AuthenticationFailed"}},
                   .body = error_xml("AuthenticationFailed")},
                  {.status = 404, .headers = {{"x-ms-error-code", "ContainerNotFound"}}},
                  {.status = 404, .headers = {{"x-ms-error-code", "BlobNotFound"}}},
                  {.status = 400, .body = error_xml("InvalidResourceName")}});
  auto store = open();
  EXPECT_EQ(store->put("k", bytes("v")).error(), store_error::access_denied);
  EXPECT_NE(log_.back().find("HTTP 403 AuthenticationFailed; attempt 1 of 3, giving up"),
            std::string::npos)
      << log_.back();
  EXPECT_EQ(store->remove("k").error(), store_error::not_found) << "no container";
  EXPECT_TRUE(store->remove("k")) << "no blob: removed already";
  EXPECT_EQ(store->list("").error(), store_error::invalid_argument);
  EXPECT_EQ(server_.requests().size(), 4u) << "none of these is retried";
}

TEST_F(AzureRetry, ConditionalCreateSettlesAConflictByComparing) {
  // The first attempt wrote and its reply was lost (a 500); the retry finds the blob (409),
  // whose bytes are this put's: success. Another writer's bytes: already_exists.
  server_.script({{.status = 500},
                  {.status = 409, .headers = {{"x-ms-error-code", "BlobAlreadyExists"}}},
                  {.status = 200, .body = "mine"},
                  {.status = 409, .headers = {{"x-ms-error-code", "BlobAlreadyExists"}}},
                  {.status = 200, .body = "theirs"}});
  auto store = open();
  EXPECT_TRUE(store->put_if_absent("w", bytes("mine")));
  EXPECT_EQ(server_.requests()[0].header("if-none-match"), "*");
  EXPECT_EQ(store->put_if_absent("w", bytes("mine")).error(), store_error::already_exists);
}

// A SAS token travels in every request's URL: the lines of failed attempts show its
// parameters but not its signature.
TEST_F(AzureRetry, FailedAttemptLinesHideTheSasSignature) {
  server_.script({{.status = 503, .body = error_xml("ServerBusy")}, {.status = 201}});
  azure_options o;
  o.container = "cont";
  o.account = "devstoreaccount1";
  o.sas = "sv=2022-11-02&ss=b&srt=co&sp=rwdlac&se=2030-01-01T00%3A00%3A00Z&sig=SASSIG%2Bx%3D";
  o.endpoint = server_.endpoint() + "/devstoreaccount1";
  o.retry = {.max_attempts = 3,
             .base_delay = std::chrono::milliseconds(1),
             .max_delay = std::chrono::milliseconds(1)};
  o.sleep = [](std::chrono::milliseconds) {};
  o.on_failure = [this](std::string_view line) { log_.emplace_back(line); };
  auto store = azure_store::open(o);
  ASSERT_TRUE(store) << store.error();
  ASSERT_TRUE((*store)->put("k", bytes("v")));
  EXPECT_NE(server_.requests()[0].target.find("sig=SASSIG"), std::string::npos)
      << "the SAS reaches the server";
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_EQ(log_[0].find("SASSIG"), std::string::npos) << log_[0];
  EXPECT_NE(log_[0].find("/devstoreaccount1/cont/k?sv=2022-11-02&ss=b&srt=co&sp=rwdlac"),
            std::string::npos)
      << log_[0];
  EXPECT_NE(log_[0].find("&sig=***: HTTP 503 ServerBusy"), std::string::npos) << log_[0];
}

class AzureLive : public ::testing::Test {
 protected:
  void SetUp() override {
    if (env("SILT_AZURE_ENDPOINT").empty()) {
      GTEST_SKIP() << "no Azure server (eval \"$(scripts/azurite-test-server.sh start DIR)\")";
    }
    std::random_device rd;
    container_ = "silt-az-" + std::to_string(rd());
  }
  azure_options options() const {
    azure_options o;
    o.container = container_;
    o.endpoint = env("SILT_AZURE_ENDPOINT");
    o.account = env("SILT_AZURE_ACCOUNT");
    o.key = env("SILT_AZURE_KEY");
    o.retry.max_attempts = 2;
    return o;
  }
  std::string container_;
};

TEST_F(AzureLive, WrongKeyIsAccessDenied) {
  auto right = azure_store::open(options()).value();
  ASSERT_TRUE(right->create_container());
  ASSERT_TRUE(right->put("k", bytes("v")));
  auto o = options();
  o.key = "d3Jvbmcga2V5";  // "wrong key"
  std::vector<std::string> log;
  o.on_failure = [&](std::string_view line) { log.emplace_back(line); };
  auto wrong = azure_store::open(o).value();
  EXPECT_EQ(wrong->put("k2", bytes("v")).error(), store_error::access_denied);
  EXPECT_EQ(wrong->get("k", 0, to_end).error(), store_error::access_denied);
  EXPECT_EQ(wrong->head("k").error(), store_error::access_denied);
  EXPECT_EQ(wrong->list("").error(), store_error::access_denied);
  EXPECT_EQ(wrong->remove("k").error(), store_error::access_denied);
  EXPECT_TRUE(right->head("k")) << "the refused remove removed nothing";
  ASSERT_FALSE(log.empty());
  // Azure says AuthenticationFailed, Azurite AuthorizationFailure.
  EXPECT_NE(log.front().find("HTTP 403 Auth"), std::string::npos) << log.front();
  ASSERT_TRUE(right->remove("k"));
  EXPECT_TRUE(right->delete_container());
}

// An account SAS as Azure documents it (version 2020-12-06 and later): the HMAC-SHA256 of
// the account, permissions, services, resource types, start, expiry, IP, protocols, version
// and encryption scope, each on a line.
std::string account_sas(const std::string& account, const std::string& key,
                        const std::string& permissions) {
  const std::string version = "2021-12-02";
  const std::string expiry = "2099-01-01T00:00:00Z";
  const std::string to_sign = account + "\n" + permissions + "\nb\nsco\n\n" + expiry +
                              "\n\nhttps,http\n" + version + "\n\n";
  const std::string auth = azure::authorization(account, key, to_sign);
  const std::string sig = auth.substr(auth.find(':') + 1);
  return "sv=" + version + "&ss=b&srt=sco&sp=" + permissions + "&se=" + uri::encode(expiry) +
         "&spr=https,http&sig=" + uri::encode(sig);
}

TEST_F(AzureLive, SasTokenAuthorisesInsteadOfTheKey) {
  auto o = options();
  o.sas = account_sas(o.account, o.key, "rwdlac");
  o.key.clear();
  auto sas = azure_store::open(o).value();
  ASSERT_TRUE(sas->create_container());
  ASSERT_TRUE(sas->put("s/k", bytes("by sas")));
  EXPECT_EQ(sas->get("s/k", 3, 3).value(), bytes("sas"));
  EXPECT_EQ(sas->list("s/").value(), (std::vector<object_info>{{"s/k", 6}}));
  EXPECT_TRUE(sas->put_if_absent("s/k2", bytes("x")));
  EXPECT_EQ(sas->put_if_absent("s/k2", bytes("y")).error(), store_error::already_exists);

  // A read-only token reads but cannot write; a forged one is refused outright.
  auto read_only = options();
  read_only.sas = account_sas(read_only.account, read_only.key, "rl");
  read_only.key.clear();
  auto reader = azure_store::open(read_only).value();
  EXPECT_EQ(reader->get("s/k", 0, to_end).value(), bytes("by sas"));
  EXPECT_EQ(reader->put("s/k3", bytes("x")).error(), store_error::access_denied);
  auto forged = options();
  forged.sas = account_sas(forged.account, "d3Jvbmcga2V5", "rwdlac");
  forged.key.clear();
  EXPECT_EQ(azure_store::open(forged).value()->get("s/k", 0, to_end).error(),
            store_error::access_denied);

  ASSERT_TRUE(sas->remove("s/k"));
  ASSERT_TRUE(sas->remove("s/k2"));
  EXPECT_TRUE(sas->delete_container());
}

TEST_F(AzureLive, MissingContainerIsNotFound) {
  auto s = azure_store::open(options()).value();
  EXPECT_EQ(s->get("k", 0, 1).error(), store_error::not_found);
  EXPECT_EQ(s->head("k").error(), store_error::not_found);
  EXPECT_EQ(s->list("").error(), store_error::not_found);
  EXPECT_EQ(s->put("k", bytes("v")).error(), store_error::not_found);
  EXPECT_EQ(s->remove("k").error(), store_error::not_found);
  EXPECT_TRUE(s->delete_container()) << "deleting a missing container succeeds";
}

TEST_F(AzureLive, OpensFromAUriAndCreatesTheContainer) {
  auto s = open_object_store("azblob://" + container_ + "?endpoint=" + env("SILT_AZURE_ENDPOINT") +
                             "&account=" + env("SILT_AZURE_ACCOUNT") + "&key=" +
                             uri::encode(env("SILT_AZURE_KEY")) + "&create_container=true");
  ASSERT_TRUE(s) << s.error();
  ASSERT_TRUE((*s)->put("uri", bytes("x")));
  auto direct = azure_store::open(options()).value();
  EXPECT_EQ(direct->get("uri", 0, to_end).value(), bytes("x"));
  EXPECT_TRUE(direct->create_container()) << "creating it again succeeds";
  ASSERT_TRUE(direct->remove("uri"));
  EXPECT_TRUE(direct->delete_container());
}

}  // namespace
}  // namespace silt::storage
