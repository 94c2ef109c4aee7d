// libFuzzer target: any bytes as the body of an S3 or Azure Blob response: list results,
// InitiateMultipartUpload results and error documents go through every parser of
// storage/object/s3_xml.h and azure_xml.h, which must never crash or read out of bounds. A
// listing that parses is written back as a document of the same kind and must parse to the same
// page (when its strings are plain printable ASCII, which XML carries unchanged); the request
// bodies Silt writes (CompleteMultipartUpload, Put Block List) are built from strings cut from
// the input and must read back to those strings.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <pugixml.hpp>

#include "storage/object/azure_xml.h"
#include "storage/object/s3_xml.h"
#include "storage/object/xml_util.h"

namespace {

using namespace silt::storage;

// Whether XML carries `s` as element text unchanged: printable ASCII without spaces (pugixml
// drops whitespace-only text and normalizes line ends).
bool plain(std::string_view s) {
  for (const char c : s) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

std::string serialize(const pugi::xml_document& doc) {
  return xml::to_string(doc, /*declaration=*/true);
}

void check_s3_list(const s3_xml::list_page& page) {
  if (page.truncated && page.next_token.empty()) std::abort();
  if (!plain(page.next_token)) return;
  for (const auto& o : page.objects) {
    if (!plain(o.key)) return;
  }
  pugi::xml_document doc;
  auto root = doc.append_child("ListBucketResult");
  root.append_attribute("xmlns") = "http://s3.amazonaws.com/doc/2006-03-01/";
  root.append_child("IsTruncated").text().set(page.truncated ? "true" : "false");
  if (!page.next_token.empty()) {
    root.append_child("NextContinuationToken").text().set(page.next_token.c_str());
  }
  for (const auto& o : page.objects) {
    auto c = root.append_child("Contents");
    c.append_child("Key").text().set(o.key.c_str());
    c.append_child("Size").text().set(static_cast<unsigned long long>(o.size));
  }
  auto again = s3_xml::parse_list(serialize(doc));
  if (!again || again->objects != page.objects || again->truncated != page.truncated ||
      again->next_token != page.next_token) {
    std::abort();
  }
}

void check_azure_list(const azure_xml::list_page& page) {
  if (!plain(page.next_marker)) return;
  for (const auto& o : page.objects) {
    if (!plain(o.key)) return;
  }
  pugi::xml_document doc;
  auto root = doc.append_child("EnumerationResults");
  auto blobs = root.append_child("Blobs");
  for (const auto& o : page.objects) {
    auto b = blobs.append_child("Blob");
    b.append_child("Name").text().set(o.key.c_str());
    b.append_child("Properties")
        .append_child("Content-Length")
        .text()
        .set(static_cast<unsigned long long>(o.size));
  }
  root.append_child("NextMarker").text().set(page.next_marker.c_str());
  auto again = azure_xml::parse_list(serialize(doc));
  if (!again || again->objects != page.objects || again->next_marker != page.next_marker) {
    std::abort();
  }
}

// The input cut at newlines into at most 64 strings, each mapped onto printable ASCII.
std::vector<std::string> strings_of(std::string_view in) {
  std::vector<std::string> out;
  while (!in.empty() && out.size() < 64) {
    const size_t nl = in.find('\n');
    std::string s(in.substr(0, nl));
    for (char& c : s) c = static_cast<char>(0x21 + static_cast<unsigned char>(c) % 94);
    out.push_back(std::move(s));
    if (nl == std::string_view::npos) break;
    in.remove_prefix(nl + 1);
  }
  return out;
}

void check_bodies(std::string_view in) {
  const auto strings = strings_of(in.substr(0, 4096));
  {
    const std::string body = s3_xml::complete_multipart_body(strings);
    pugi::xml_document doc;
    if (!xml::parse(doc, body)) std::abort();
    const auto root = doc.document_element();
    if (xml::local_name(root) != "CompleteMultipartUpload") std::abort();
    size_t i = 0;
    for (const auto& part : root.children()) {
      if (i >= strings.size()) std::abort();
      if (xml::text(xml::child(part, "PartNumber")) != std::to_string(i + 1)) std::abort();
      if (xml::text(xml::child(part, "ETag")) != strings[i]) std::abort();
      ++i;
    }
    if (i != strings.size()) std::abort();
    if (s3_xml::parse_error_code(body)) std::abort();
  }
  {
    const std::string body = azure_xml::block_list_body(strings);
    pugi::xml_document doc;
    if (!xml::parse(doc, body)) std::abort();
    const auto root = doc.document_element();
    if (xml::local_name(root) != "BlockList") std::abort();
    size_t i = 0;
    for (const auto& latest : root.children()) {
      if (i >= strings.size() || xml::local_name(latest) != "Latest") std::abort();
      if (xml::text(latest) != strings[i]) std::abort();
      ++i;
    }
    if (i != strings.size()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto page = s3_xml::parse_list(in)) check_s3_list(*page);
  if (auto page = azure_xml::parse_list(in)) check_azure_list(*page);
  (void)s3_xml::parse_upload_id(in);
  (void)s3_xml::parse_error_code(in);
  check_bodies(in);
  return 0;
}
