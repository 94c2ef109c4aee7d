#include "storage/object/s3_xml.h"

#include <gtest/gtest.h>

namespace silt::storage {
namespace {

// As radosgw 16.2 answers ListObjectsV2 with encoding-type=url.
constexpr std::string_view radosgw_listing =
    R"(<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><EncodingType>url</EncodingType><Name>bkt1</Name><Prefix></Prefix><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated><Contents><Key>a%20b%2Bc~d%3D%C3%A9%2Fx</Key><LastModified>2026-11-30T03:42:15.330Z</LastModified><ETag>&quot;b1946ac92492d2347c6235b4d2611184&quot;</ETag><Size>6</Size><StorageClass>STANDARD</StorageClass><Type>Normal</Type></Contents><Contents><Key>empty</Key><LastModified>2026-11-30T03:42:17.349Z</LastModified><ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag><Size>0</Size><StorageClass>STANDARD</StorageClass><Type>Normal</Type></Contents><KeyCount>2</KeyCount></ListBucketResult>)";

TEST(S3Xml, ParsesAUrlEncodedListing) {
  auto page = s3_xml::parse_list(radosgw_listing);
  ASSERT_TRUE(page) << page.error();
  EXPECT_FALSE(page->truncated);
  EXPECT_EQ(page->objects, (std::vector<object_info>{{"a b+c~d=\xc3\xa9/x", 6}, {"empty", 0}}));
}

TEST(S3Xml, AwsPlusMeansSpaceInUrlEncodedKeys) {
  auto page = s3_xml::parse_list(
      "<ListBucketResult><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>"
      "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</"
      "NextContinuationToken><Contents><Key>a+b%2Bc</Key><Size>1</Size></Contents>"
      "</ListBucketResult>");
  ASSERT_TRUE(page) << page.error();
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
  EXPECT_EQ(page->objects, (std::vector<object_info>{{"a b+c", 1}}));
}

TEST(S3Xml, PlainKeysAreTakenAsTheyAre) {
  auto page = s3_xml::parse_list(
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "<Contents><Key>a+b%20</Key><Size>18446744073709551615</Size></Contents>"
      "</ListBucketResult>");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->objects, (std::vector<object_info>{{"a+b%20", UINT64_MAX}}));
}

TEST(S3Xml, MalformedListingsAreRejectedWithAReason) {
  EXPECT_FALSE(s3_xml::parse_list("not xml <"));
  EXPECT_NE(s3_xml::parse_list("<Error><Code>x</Code></Error>").error().find("<Error>"),
            std::string::npos);
  EXPECT_FALSE(
      s3_xml::parse_list("<ListBucketResult><Contents><Key>k</Key></Contents>"
                         "</ListBucketResult>"));
  EXPECT_FALSE(
      s3_xml::parse_list("<ListBucketResult><Contents><Key>k</Key><Size>-1</Size>"
                         "</Contents></ListBucketResult>"));
  EXPECT_FALSE(
      s3_xml::parse_list("<ListBucketResult><EncodingType>url</EncodingType>"
                         "<Contents><Key>%zz</Key><Size>1</Size></Contents>"
                         "</ListBucketResult>"));
}

TEST(S3Xml, ReadsUploadIdsAndErrorCodes) {
  EXPECT_EQ(
      s3_xml::parse_upload_id(
          R"(<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>bkt1</Bucket><Key>mp</Key><UploadId>2~EKYWg_k5n6rU8LcBHMEZcFibj3oe5Ak</UploadId></InitiateMultipartUploadResult>)"),
      "2~EKYWg_k5n6rU8LcBHMEZcFibj3oe5Ak");
  EXPECT_FALSE(s3_xml::parse_upload_id("<InitiateMultipartUploadResult/>"));
  EXPECT_EQ(
      s3_xml::parse_error_code(
          R"(<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message></Message></Error>)"),
      "NoSuchKey");
  EXPECT_FALSE(s3_xml::parse_error_code("<CompleteMultipartUploadResult/>"));
  EXPECT_FALSE(s3_xml::parse_error_code(""));
}

TEST(S3Xml, CompletionBodyListsPartsInOrder) {
  EXPECT_EQ(s3_xml::complete_multipart_body({"\"a\"", "\"b&c\""}),
            "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
            "<Part><PartNumber>1</PartNumber><ETag>\"a\"</ETag></Part>"
            "<Part><PartNumber>2</PartNumber><ETag>\"b&amp;c\"</ETag></Part>"
            "</CompleteMultipartUpload>");
}

}  // namespace
}  // namespace silt::storage
