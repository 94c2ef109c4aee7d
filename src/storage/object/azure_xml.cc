#include "storage/object/azure_xml.h"

#include <pugixml.hpp>

#include "storage/object/http_retry.h"
#include "storage/object/uri.h"
#include "storage/object/xml_util.h"

namespace silt::storage::azure_xml {

tl::expected<list_page, std::string> parse_list(std::string_view text) {
  pugi::xml_document doc;
  if (!xml::parse(doc, text)) return tl::make_unexpected(std::string("listing is not XML"));
  const auto root = doc.document_element();
  if (xml::local_name(root) != "EnumerationResults") {
    return tl::make_unexpected("listing has root element <" + std::string(root.name()) + ">");
  }
  list_page page;
  page.next_marker = xml::text(xml::child(root, "NextMarker"));
  for (const auto& blob : xml::child(root, "Blobs").children()) {
    if (blob.type() != pugi::node_element || xml::local_name(blob) != "Blob") continue;
    const auto name_node = xml::child(blob, "Name");
    const auto size_node = xml::child(xml::child(blob, "Properties"), "Content-Length");
    if (!name_node || !size_node) {
      return tl::make_unexpected(std::string("listing entry without Name or Content-Length"));
    }
    std::string name(xml::text(name_node));
    if (std::string_view(name_node.attribute("Encoded").value()) == "true") {
      auto decoded = uri::decode(name);
      if (!decoded) return tl::make_unexpected("listing name is badly encoded: " + name);
      name = std::move(*decoded);
    }
    const auto size = http::parse_u64(xml::text(size_node));
    if (!size) {
      return tl::make_unexpected("listing entry has a bad Content-Length: " +
                                 std::string(xml::text(size_node)));
    }
    page.objects.push_back({std::move(name), *size});
  }
  return page;
}

std::string block_list_body(const std::vector<std::string>& ids) {
  pugi::xml_document doc;
  auto decl = doc.append_child(pugi::node_declaration);
  decl.append_attribute("version") = "1.0";
  decl.append_attribute("encoding") = "utf-8";
  auto root = doc.append_child("BlockList");
  for (const auto& id : ids) root.append_child("Latest").text().set(id.c_str());
  return xml::to_string(doc, /*declaration=*/true);
}

}  // namespace silt::storage::azure_xml
