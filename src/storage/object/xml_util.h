// pugixml helpers shared by the XML documents of the S3 and Azure Blob APIs (s3_xml.cc,
// azure_xml.cc): element names are matched without their namespace prefix.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <pugixml.hpp>

namespace silt::storage::xml {

// The element's name without a namespace prefix ("s3:Key" -> "Key").
inline std::string_view local_name(const pugi::xml_node& node) {
  std::string_view name = node.name();
  const size_t colon = name.find(':');
  return colon == std::string_view::npos ? name : name.substr(colon + 1);
}

// The first child element named `name`; an empty node when there is none.
inline pugi::xml_node child(const pugi::xml_node& node, std::string_view name) {
  for (const auto& c : node.children()) {
    if (c.type() == pugi::node_element && local_name(c) == name) return c;
  }
  return {};
}

inline std::string_view text(const pugi::xml_node& node) {
  return node.text().get();
}

// Parses `xml` (UTF-8) into `doc`; false when it is not well-formed.
inline bool parse(pugi::xml_document& doc, std::string_view xml) {
  return static_cast<bool>(
      doc.load_buffer(xml.data(), xml.size(), pugi::parse_default, pugi::encoding_utf8));
}

// The Code of an <Error> document, as S3 and Azure send them ("NoSuchKey", "BlobNotFound");
// nullopt when the document is not an error.
inline std::optional<std::string> error_code(std::string_view xml) {
  pugi::xml_document doc;
  if (!parse(doc, xml)) return std::nullopt;
  const auto root = doc.document_element();
  if (local_name(root) != "Error") return std::nullopt;
  return std::string(text(child(root, "Code")));
}

// The document without its declaration, on one line.
inline std::string to_string(const pugi::xml_document& doc, bool declaration = false) {
  struct string_writer final : pugi::xml_writer {
    std::string out;
    void write(const void* data, size_t size) override {
      out.append(static_cast<const char*>(data), size);
    }
  } writer;
  doc.save(
      writer, "",
      pugi::format_raw | (declaration ? 0u : static_cast<unsigned>(pugi::format_no_declaration)));
  return std::move(writer.out);
}

}  // namespace silt::storage::xml
