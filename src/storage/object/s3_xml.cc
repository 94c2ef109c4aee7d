#include "storage/object/s3_xml.h"

#include <charconv>

#include <pugixml.hpp>

#include "storage/object/uri.h"
#include "storage/object/xml_util.h"

namespace silt::storage::s3_xml {
namespace {

using xml::child;
using xml::local_name;
using xml::parse;
using xml::text;

pugi::xml_node root_element(const pugi::xml_document& doc) {
  return doc.document_element();
}

}  // namespace

tl::expected<list_page, std::string> parse_list(std::string_view xml) {
  pugi::xml_document doc;
  if (!parse(doc, xml)) return tl::make_unexpected(std::string("listing is not XML"));
  const auto root = root_element(doc);
  if (local_name(root) != "ListBucketResult") {
    return tl::make_unexpected("listing has root element <" + std::string(root.name()) + ">");
  }
  const bool url_encoded = text(child(root, "EncodingType")) == "url";
  list_page page;
  page.truncated = text(child(root, "IsTruncated")) == "true";
  page.next_token = text(child(root, "NextContinuationToken"));
  if (page.truncated && page.next_token.empty()) {
    return tl::make_unexpected(std::string("truncated listing without NextContinuationToken"));
  }
  for (const auto& c : root.children()) {
    if (c.type() != pugi::node_element || local_name(c) != "Contents") continue;
    const auto key_node = child(c, "Key");
    const auto size_node = child(c, "Size");
    if (!key_node || !size_node) {
      return tl::make_unexpected(std::string("listing entry without Key or Size"));
    }
    std::string key(text(key_node));
    if (url_encoded) {
      auto decoded = uri::decode(key, /*plus_is_space=*/true);
      if (!decoded) return tl::make_unexpected("listing key is badly encoded: " + key);
      key = std::move(*decoded);
    }
    const auto size_text = text(size_node);
    uint64_t size = 0;
    const auto [end, ec] =
        std::from_chars(size_text.data(), size_text.data() + size_text.size(), size);
    if (ec != std::errc() || end != size_text.data() + size_text.size()) {
      return tl::make_unexpected("listing entry has a bad Size: " + std::string(size_text));
    }
    page.objects.push_back({std::move(key), size});
  }
  return page;
}

std::optional<std::string> parse_upload_id(std::string_view xml) {
  pugi::xml_document doc;
  if (!parse(doc, xml)) return std::nullopt;
  const auto id = text(child(root_element(doc), "UploadId"));
  if (id.empty()) return std::nullopt;
  return std::string(id);
}

std::optional<std::string> parse_error_code(std::string_view xml) {
  return xml::error_code(xml);
}

std::string complete_multipart_body(const std::vector<std::string>& etags) {
  pugi::xml_document doc;
  auto root = doc.append_child("CompleteMultipartUpload");
  root.append_attribute("xmlns") = "http://s3.amazonaws.com/doc/2006-03-01/";
  for (size_t i = 0; i < etags.size(); ++i) {
    auto part = root.append_child("Part");
    part.append_child("PartNumber").text().set(static_cast<unsigned long long>(i) + 1);
    part.append_child("ETag").text().set(etags[i].c_str());
  }
  return xml::to_string(doc);
}

}  // namespace silt::storage::s3_xml
