#include "net/x509_subject.h"

#include <vector>

#include <openssl/asn1.h>
#include <openssl/objects.h>

namespace silt::net {
namespace {

// Java's RFC 2253 keywords; nullptr for an attribute printed as its OID.
const char* keyword(int nid) {
  switch (nid) {
    case NID_commonName:
      return "CN";
    case NID_countryName:
      return "C";
    case NID_localityName:
      return "L";
    case NID_stateOrProvinceName:
      return "ST";
    case NID_organizationName:
      return "O";
    case NID_organizationalUnitName:
      return "OU";
    case NID_streetAddress:
      return "STREET";
    case NID_domainComponent:
      return "DC";
    case NID_userId:
      return "UID";
    default:
      return nullptr;
  }
}

// RFC 2253 section 2.4: `,+"\<>;` escaped, and a leading '#' or space, a trailing space.
std::string escaped(const std::string& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    const bool special = c == ',' || c == '+' || c == '"' || c == '\\' || c == '<' || c == '>' ||
                         c == ';' || (i == 0 && (c == '#' || c == ' ')) ||
                         (i + 1 == v.size() && c == ' ');
    if (special) out += '\\';
    out += c;
  }
  return out;
}

std::string attribute(const X509_NAME_ENTRY* e) {
  const ASN1_OBJECT* obj = X509_NAME_ENTRY_get_object(e);
  const ASN1_STRING* data = X509_NAME_ENTRY_get_data(e);
  if (const char* kw = keyword(OBJ_obj2nid(obj))) {
    unsigned char* utf8 = nullptr;
    const int n = ASN1_STRING_to_UTF8(&utf8, data);
    std::string value;
    if (n > 0) value.assign(reinterpret_cast<const char*>(utf8), static_cast<size_t>(n));
    OPENSSL_free(utf8);
    return std::string(kw) + "=" + escaped(value);
  }
  char oid[128];
  OBJ_obj2txt(oid, sizeof oid, obj, 1);
  // The value's DER encoding (tag, length, content), in lower-case hex.
  ASN1_TYPE* t = ASN1_TYPE_new();
  ASN1_TYPE_set1(t, ASN1_STRING_type(data), data);
  unsigned char* der = nullptr;
  const int n = i2d_ASN1_TYPE(t, &der);
  ASN1_TYPE_free(t);
  std::string out = std::string(oid) + "=#";
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < n; ++i) {
    out += kHex[der[i] >> 4];
    out += kHex[der[i] & 15];
  }
  OPENSSL_free(der);
  return out;
}

}  // namespace

std::string rfc2253_subject(const X509_NAME* name) {
  // Entries grouped into RDNs (multi-valued ones joined by '+'), the RDNs printed last first.
  std::vector<std::vector<std::string>> rdns;
  int set = -1;
  const int count = X509_NAME_entry_count(name);
  for (int i = 0; i < count; ++i) {
    const X509_NAME_ENTRY* e = X509_NAME_get_entry(name, i);
    if (X509_NAME_ENTRY_set(e) != set || rdns.empty()) {
      rdns.emplace_back();
      set = X509_NAME_ENTRY_set(e);
    }
    rdns.back().push_back(attribute(e));
  }
  std::string out;
  for (auto it = rdns.rbegin(); it != rdns.rend(); ++it) {
    if (!out.empty()) out += ',';
    for (size_t i = 0; i < it->size(); ++i) {
      if (i > 0) out += '+';
      out += (*it)[i];
    }
  }
  return out;
}

}  // namespace silt::net
