// The XML documents of the S3 API that the S3 store reads and writes (pugixml). Pure
// functions, no I/O; element names are matched without their namespace.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "storage/object/object_store.h"

namespace silt::storage::s3_xml {

// One page of a ListObjectsV2 response (ListBucketResult).
struct list_page {
  std::vector<object_info> objects;
  bool truncated = false;
  std::string next_token;  // NextContinuationToken when truncated
};

// Parses a ListBucketResult; keys are decoded when the response says EncodingType url.
// The error says what is wrong with the document.
[[nodiscard]] tl::expected<list_page, std::string> parse_list(std::string_view xml);

// The UploadId of an InitiateMultipartUploadResult.
[[nodiscard]] std::optional<std::string> parse_upload_id(std::string_view xml);

// The Code of an <Error> document ("NoSuchKey", "SlowDown", ...); nullopt when the document is
// not an error (CompleteMultipartUpload may answer 200 with an error document).
[[nodiscard]] std::optional<std::string> parse_error_code(std::string_view xml);

// The CompleteMultipartUpload request body for parts 1..n with these ETags (quoted, as the
// server returned them).
[[nodiscard]] std::string complete_multipart_body(const std::vector<std::string>& etags);

}  // namespace silt::storage::s3_xml
