// The S3 store against a scripted local HTTP server: retries and backoff, error mapping,
// truncated and range-ignoring responses, multipart abort, request signing headers.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include "storage/object/s3_store.h"
#include "storage/object/tests/fake_http_server.h"

namespace silt::storage {
namespace {

using testing::fake_http_server;
using testing::fake_reply;

constexpr uint64_t seed = 42;

std::vector<uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

std::string error_xml(std::string_view code) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>" + std::string(code) +
         "</Code><Message></Message></Error>";
}

class S3Retry : public ::testing::Test {
 protected:
  s3_options options() {
    s3_options o;
    o.bucket = "test-bucket";
    o.endpoint = server_.endpoint();
    o.path_style = true;
    o.access_key = "AKIDEXAMPLE";
    o.secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    o.retry = {.max_attempts = 4,
               .base_delay = std::chrono::milliseconds(100),
               .max_delay = std::chrono::milliseconds(1000)};
    o.jitter_seed = seed;
    // Record the waits instead of sleeping: the test is fast and sees the exact delays.
    o.sleep = [this](std::chrono::milliseconds d) { sleeps_.push_back(d); };
    o.on_failure = [this](std::string_view line) { log_.emplace_back(line); };
    return o;
  }
  std::unique_ptr<s3_store> open(const s3_options& o) {
    auto s = s3_store::open(o);
    EXPECT_TRUE(s) << s.error();
    return s ? std::move(*s) : nullptr;
  }

  fake_http_server server_;
  std::vector<std::chrono::milliseconds> sleeps_;
  std::vector<std::string> log_;
};

TEST_F(S3Retry, ServiceUnavailableTwiceThenSuccessRetriesWithJitteredBackoff) {
  server_.script({{.status = 503, .body = error_xml("ServiceUnavailable")},
                  {.status = 503, .body = error_xml("SlowDown")},
                  {.status = 200, .body = "payload"}});
  auto store = open(options());
  EXPECT_EQ(store->get("k", 0, to_end).value(), bytes("payload"));
  EXPECT_EQ(server_.requests().size(), 3u);
  // Full jitter: the delay before retry n is the seeded draw below base * 2^n.
  backoff expected(options().retry, seed);
  ASSERT_EQ(sleeps_.size(), 2u);
  EXPECT_EQ(sleeps_[0], expected.delay(0));
  EXPECT_EQ(sleeps_[1], expected.delay(1));
  EXPECT_LE(sleeps_[0], std::chrono::milliseconds(100));
  EXPECT_LE(sleeps_[1], std::chrono::milliseconds(200));
  ASSERT_EQ(log_.size(), 2u);
  EXPECT_NE(log_[0].find("HTTP 503 ServiceUnavailable; attempt 1 of 4, retrying in"),
            std::string::npos)
      << log_[0];
  EXPECT_NE(log_[1].find("SlowDown; attempt 2 of 4"), std::string::npos) << log_[1];
}

TEST_F(S3Retry, PersistentSlowDownEndsThrottledAfterMaxAttempts) {
  server_.script(std::vector<fake_reply>(4, {.status = 503, .body = error_xml("SlowDown")}));
  auto store = open(options());
  EXPECT_EQ(store->put("k", bytes("v")).error(), store_error::throttled);
  EXPECT_EQ(server_.requests().size(), 4u);
  EXPECT_EQ(sleeps_.size(), 3u);
  EXPECT_NE(log_.back().find("giving up"), std::string::npos);
}

TEST_F(S3Retry, TooManyRequestsIsThrottling) {
  server_.script({{.status = 429}, {.status = 200}});
  auto store = open(options());
  EXPECT_TRUE(store->put("k", bytes("v")));
  EXPECT_EQ(server_.requests().size(), 2u);
}

TEST_F(S3Retry, PersistentInternalErrorEndsAsIo) {
  server_.script(std::vector<fake_reply>(4, {.status = 500, .body = error_xml("InternalError")}));
  auto store = open(options());
  EXPECT_EQ(store->head("k").error(), store_error::io);
  EXPECT_EQ(server_.requests().size(), 4u);
}

TEST_F(S3Retry, BackoffDelaysStayUnderTheCap) {
  auto o = options();
  o.retry.max_attempts = 8;
  server_.script(std::vector<fake_reply>(8, {.status = 502}));
  auto store = open(o);
  EXPECT_EQ(store->remove("k").error(), store_error::io);
  ASSERT_EQ(sleeps_.size(), 7u);
  backoff bounds(o.retry, 0);
  for (uint32_t i = 0; i < sleeps_.size(); ++i) EXPECT_LE(sleeps_[i], bounds.cap(i)) << i;
  EXPECT_EQ(bounds.cap(6), std::chrono::milliseconds(1000)) << "capped at max_delay";
}

TEST_F(S3Retry, ClientErrorsAreNotRetried) {
  server_.script({{.status = 404, .body = error_xml("NoSuchKey")},
                  {.status = 403, .body = error_xml("SignatureDoesNotMatch")},
                  {.status = 400, .body = error_xml("InvalidArgument")},
                  {.status = 501, .body = error_xml("NotImplemented")}});
  auto store = open(options());
  EXPECT_EQ(store->get("k", 0, 10).error(), store_error::not_found);
  EXPECT_EQ(store->get("k", 0, 10).error(), store_error::access_denied);
  EXPECT_EQ(store->get("k", 0, 10).error(), store_error::invalid_argument);
  EXPECT_EQ(store->get("k", 0, 10).error(), store_error::io);
  EXPECT_EQ(server_.requests().size(), 4u);
  EXPECT_TRUE(sleeps_.empty());
}

TEST_F(S3Retry, RetriableClientErrorCodesAreRetried) {
  server_.script({{.status = 400, .body = error_xml("RequestTimeout")},
                  {.status = 400, .body = error_xml("XAmzContentSHA256Mismatch")},
                  {.status = 200}});
  auto store = open(options());
  EXPECT_TRUE(store->put("k", bytes("v")));
  EXPECT_EQ(server_.requests().size(), 3u);
}

TEST_F(S3Retry, AHungServerTimesOutAndIsRetried) {
  auto o = options();
  o.request_timeout = std::chrono::milliseconds(200);
  o.retry.max_attempts = 2;
  server_.script({{.hang = true}, {.hang = true}});
  auto store = open(o);
  const auto began = std::chrono::steady_clock::now();
  EXPECT_EQ(store->get("k", 0, 1).error(), store_error::timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(5));
  EXPECT_EQ(server_.requests().size(), 2u);
}

TEST_F(S3Retry, TimeoutThenSuccessSucceeds) {
  auto o = options();
  o.request_timeout = std::chrono::milliseconds(200);
  server_.script({{.hang = true}, {.status = 200, .body = "ok"}});
  auto store = open(o);
  EXPECT_EQ(store->get("k", 0, to_end).value(), bytes("ok"));
}

TEST_F(S3Retry, ConnectionRefusedIsRetriedThenIo) {
  auto o = options();
  o.endpoint = "http://127.0.0.1:1";  // nothing listens on port 1
  o.retry.max_attempts = 3;
  auto store = open(o);
  EXPECT_EQ(store->head("k").error(), store_error::io);
  EXPECT_EQ(sleeps_.size(), 2u);
}

TEST_F(S3Retry, TruncatedBodyIsRetried) {
  server_.script({{.status = 200, .body = "0123456789", .cut_body_at = 4},
                  {.status = 200, .body = "0123456789"}});
  auto store = open(options());
  EXPECT_EQ(store->get("k", 0, to_end).value(), bytes("0123456789"));
  EXPECT_EQ(server_.requests().size(), 2u);
}

TEST_F(S3Retry, RangedGetSendsRangeAndChecksContentRange) {
  server_.script({{.status = 206, .headers = {{"Content-Range", "bytes 3-5/10"}}, .body = "345"},
                  // A reply for another range than asked is not accepted.
                  {.status = 206, .headers = {{"Content-Range", "bytes 0-2/10"}}, .body = "012"},
                  {.status = 206, .headers = {{"Content-Range", "bytes 3-5/10"}}, .body = "345"}});
  auto store = open(options());
  EXPECT_EQ(store->get("k", 3, 3).value(), bytes("345"));
  EXPECT_EQ(store->get("k", 3, 3).value(), bytes("345"));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].header("range"), "bytes=3-5");
  EXPECT_EQ(reqs[0].target, "/test-bucket/k");
}

TEST_F(S3Retry, OpenEndedRangeHasNoLastByte) {
  server_.script({{.status = 206, .headers = {{"Content-Range", "bytes 7-9/10"}}, .body = "789"}});
  auto store = open(options());
  EXPECT_EQ(store->get("k", 7, to_end).value(), bytes("789"));
  EXPECT_EQ(server_.requests()[0].header("range"), "bytes=7-");
}

TEST_F(S3Retry, AServerIgnoringRangeStillYieldsTheRange) {
  server_.script({{.status = 200, .body = "0123456789"}, {.status = 200, .body = "0123456789"}});
  auto store = open(options());
  EXPECT_EQ(store->get("k", 2, 5).value(), bytes("23456"));
  EXPECT_EQ(store->get("k", 11, 5).error(), store_error::invalid_range);
}

TEST_F(S3Retry, UnsatisfiableRangeIsResolvedWithTheSize) {
  const auto range_error = fake_reply{.status = 416, .body = error_xml("InvalidRange")};
  const auto head_of_10 = fake_reply{.status = 200, .body = "0123456789"};
  server_.script({range_error, head_of_10, range_error, head_of_10, range_error});
  auto store = open(options());
  EXPECT_EQ(store->get("k", 11, 5).error(), store_error::invalid_range);
  EXPECT_TRUE(store->get("k", 10, 5).value().empty()) << "at the end: empty";
  EXPECT_TRUE(store->get("k", 0, 5).value().empty()) << "no byte 0: an empty object";
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 5u);
  EXPECT_EQ(reqs[1].method, "HEAD");
}

TEST_F(S3Retry, RequestsCarrySignatureAndPayloadHash) {
  auto store = open(options());
  ASSERT_TRUE(store->put("dir/a b+c", bytes("hello")));
  ASSERT_TRUE(store->head("x"));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].method, "PUT");
  EXPECT_EQ(reqs[0].target, "/test-bucket/dir/a%20b%2Bc");
  EXPECT_EQ(reqs[0].body, "hello");
  EXPECT_EQ(reqs[0].header("x-amz-content-sha256"),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
  const auto auth = reqs[0].header("authorization");
  EXPECT_TRUE(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")) << auth;
  EXPECT_NE(auth.find("/us-east-1/s3/aws4_request"), std::string::npos) << auth;
  EXPECT_NE(auth.find("x-amz-content-sha256"), std::string::npos) << "the hash is signed";
  EXPECT_FALSE(reqs[0].header("x-amz-date").empty());
  EXPECT_EQ(reqs[1].header("x-amz-content-sha256"),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_F(S3Retry, UnsignedPayloadSkipsHashing) {
  auto o = options();
  o.sign_payload = false;
  auto store = open(o);
  ASSERT_TRUE(store->put("k", bytes("hello")));
  EXPECT_EQ(server_.requests()[0].header("x-amz-content-sha256"), "UNSIGNED-PAYLOAD");
}

TEST_F(S3Retry, SessionTokenIsSent) {
  auto o = options();
  o.session_token = "token/with+chars";
  auto store = open(o);
  ASSERT_TRUE(store->head("k"));
  EXPECT_EQ(server_.requests()[0].header("x-amz-security-token"), "token/with+chars");
}

constexpr std::string_view initiated =
    "<InitiateMultipartUploadResult><Bucket>test-bucket</Bucket><Key>big</Key>"
    "<UploadId>up/1+x</UploadId></InitiateMultipartUploadResult>";

TEST_F(S3Retry, MultipartUploadSendsPartsAndCompletes) {
  auto o = options();
  o.multipart_threshold = 10;
  o.part_size = 8;
  o.upload_concurrency = 1;
  server_.script({{.status = 200, .body = std::string(initiated)},
                  {.status = 200, .headers = {{"ETag", "\"e1\""}}},
                  {.status = 503},  // part 2 once refused: retried alone
                  {.status = 200, .headers = {{"ETag", "\"e2\""}}},
                  {.status = 200, .headers = {{"ETag", "\"e3\""}}},
                  // An error inside a 200 answer to the completion is retried too.
                  {.status = 200, .body = error_xml("InternalError")},
                  {.status = 200, .body = "<CompleteMultipartUploadResult/>"}});
  auto store = open(o);
  ASSERT_TRUE(store->put("big", bytes("0123456789abcdefXYZ")));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 7u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].target, "/test-bucket/big?uploads=");
  EXPECT_EQ(reqs[1].target, "/test-bucket/big?partNumber=1&uploadId=up%2F1%2Bx");
  EXPECT_EQ(reqs[1].body, "01234567");
  EXPECT_EQ(reqs[3].body, "89abcdef");
  EXPECT_EQ(reqs[4].body, "XYZ");
  EXPECT_EQ(reqs[6].method, "POST");
  EXPECT_EQ(reqs[6].target, "/test-bucket/big?uploadId=up%2F1%2Bx");
  EXPECT_EQ(reqs[6].body,
            "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
            "<Part><PartNumber>1</PartNumber><ETag>\"e1\"</ETag></Part>"
            "<Part><PartNumber>2</PartNumber><ETag>\"e2\"</ETag></Part>"
            "<Part><PartNumber>3</PartNumber><ETag>\"e3\"</ETag></Part>"
            "</CompleteMultipartUpload>");
}

TEST_F(S3Retry, MultipartUploadIsAbortedWhenAPartFails) {
  auto o = options();
  o.multipart_threshold = 10;
  o.part_size = 8;
  o.upload_concurrency = 1;
  server_.script({{.status = 200, .body = std::string(initiated)},
                  {.status = 200, .headers = {{"ETag", "\"e1\""}}},
                  {.status = 403, .body = error_xml("AccessDenied")},
                  {.status = 204}});
  auto store = open(o);
  EXPECT_EQ(store->put("big", bytes("0123456789abcdefXYZ")).error(), store_error::access_denied);
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[3].method, "DELETE");
  EXPECT_EQ(reqs[3].target, "/test-bucket/big?uploadId=up%2F1%2Bx");
}

TEST_F(S3Retry, ACompletionWhoseReplyWasLostIsRecognised) {
  auto o = options();
  o.multipart_threshold = 10;
  o.part_size = 8;
  o.upload_concurrency = 1;
  server_.script({{.status = 200, .body = std::string(initiated)},
                  {.status = 200, .headers = {{"ETag", "\"e1\""}}},
                  {.status = 200, .headers = {{"ETag", "\"e2\""}}},
                  {.status = 500},  // the completion happened, but its answer was a 500
                  {.status = 404, .body = error_xml("NoSuchUpload")},
                  {.status = 200, .body = "0123456789abcdef"}});  // HEAD: the size written
  auto store = open(o);
  EXPECT_TRUE(store->put("big", bytes("0123456789abcdef")));
  EXPECT_EQ(server_.requests().back().method, "HEAD");
}

TEST_F(S3Retry, ListFollowsContinuationTokens) {
  const std::string page1 =
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>"
      "<NextContinuationToken>tok/1=</NextContinuationToken>"
      "<Contents><Key>p/a%20b</Key><Size>3</Size></Contents></ListBucketResult>";
  const std::string page2 =
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
      "<Contents><Key>p/c</Key><Size>5</Size></Contents></ListBucketResult>";
  server_.script({{.status = 200, .body = page1}, {.status = 200, .body = page2}});
  auto store = open(options());
  EXPECT_EQ(store->list("p/").value(), (std::vector<object_info>{{"p/a b", 3}, {"p/c", 5}}));
  const auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].target, "/test-bucket?encoding-type=url&list-type=2&max-keys=1000&prefix=p%2F");
  EXPECT_EQ(reqs[1].target,
            "/test-bucket?continuation-token=tok%2F1%3D&encoding-type=url&list-type=2&"
            "max-keys=1000&prefix=p%2F");
}

TEST_F(S3Retry, MalformedListingIsIo) {
  server_.script({{.status = 200,
                   .body = "<ListBucketResult><IsTruncated>true</IsTruncated>"
                           "</ListBucketResult>"}});
  auto store = open(options());
  EXPECT_EQ(store->list("").error(), store_error::io);
  ASSERT_FALSE(log_.empty());
  EXPECT_NE(log_.back().find("NextContinuationToken"), std::string::npos) << log_.back();
}

TEST_F(S3Retry, RemoveTreatsMissingKeysAsDoneButNotMissingBuckets) {
  server_.script({{.status = 404, .body = error_xml("NoSuchKey")},
                  {.status = 404, .body = error_xml("NoSuchBucket")}});
  auto store = open(options());
  EXPECT_TRUE(store->remove("k"));
  EXPECT_EQ(store->remove("k").error(), store_error::not_found);
}

TEST_F(S3Retry, ConcurrentCallsShareTheStore) {
  auto store = open(options());
  std::vector<std::thread> threads;
  threads.reserve(8);
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        if (!store->put("k", bytes("v"))) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(server_.requests().size(), 100u);
}

}  // namespace
}  // namespace silt::storage
