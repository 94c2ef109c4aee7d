// The XML documents of the Azure Blob API that the Azure store reads and writes (pugixml).
// Pure functions, no I/O.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "storage/object/object_store.h"

namespace silt::storage::azure_xml {

// One page of a List Blobs response (EnumerationResults).
struct list_page {
  std::vector<object_info> objects;
  std::string next_marker;  // empty on the last page
};

// Parses an EnumerationResults; names marked Encoded="true" are percent-decoded. The error
// says what is wrong with the document.
[[nodiscard]] tl::expected<list_page, std::string> parse_list(std::string_view xml);

// The Put Block List body committing these block ids (base64), in order.
[[nodiscard]] std::string block_list_body(const std::vector<std::string>& ids);

}  // namespace silt::storage::azure_xml
