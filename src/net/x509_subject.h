// A certificate's subject as Java's X500Principal.getName() prints it (RFC 2253): what Kafka's
// DefaultKafkaPrincipalBuilder takes for an SSL client's principal, and so what
// ssl.principal.mapping.rules and ACLs are written against ("CN=client,OU=eng,O=Silt,C=US").
#pragma once

#include <string>

#include <openssl/x509.h>

namespace silt::net {

// The last RDN first; attributes Java has a keyword for (CN, C, L, ST, O, OU, STREET, DC, UID)
// by keyword, others as a dotted OID with the value's DER encoding in hex (`1.2.840.113549.1.9.1=
// #16...` for an e-mail address, as Java prints it); RFC 2253's escapes.
[[nodiscard]] std::string rfc2253_subject(const X509_NAME* name);

}  // namespace silt::net
