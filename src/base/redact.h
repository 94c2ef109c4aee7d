// Secrets kept out of log lines and error messages: the credentials a URI or a connection
// string may carry (postgresql://user:PASSWORD@host, s3://...?secret_key=..., azblob://...?
// key=...&sas=..., an Azure SAS's sig=) are masked as "***", the rest of the text is kept so
// that the message still says where the broker went. Pure functions, no I/O, no state.
//
// Whatever text reaches a log line or an error message with a URI or a connection string in
// it goes through redact_uri (the text of the URI) or redact_secrets (a message built by a
// library from it, such as libpq's): see docs/security.md, "Secrets".
#pragma once

#include <string>
#include <string_view>

namespace silt::base {

// What masked text is replaced with.
inline constexpr std::string_view redacted = "***";

// Whether a parameter or setting named `name` carries a secret: compared in lower case with
// '.' and '-' read as '_', it is one of key, sas, sig, pass, pwd, auth, authorization, apikey,
// accountkey, sharedaccesssignature (Azure's names) or ends in password, passwd, secret, token,
// signature, jaas_config or _key (access_key and public_key, which name no secret, aside). So
// `password`, `sslpassword`, `secret_key`, `session_token`, `key`, `sas`, `sig`,
// `ssl.key.password`, `ssl.keystore.key` and `sasl.jaas.config` do, `access_key`, `account`,
// `endpoint` and `region` do not. %XX escapes in the name are decoded first.
[[nodiscard]] bool is_secret_name(std::string_view name);

// `uri` with its credentials masked, in at most two passes over it (linear time, no
// backtracking):
// - the password of a user:password@ after "scheme://": everything from the first ':' after
//   "://" to the last '@' before the path or the query, whichever begins later (so that a
//   password with an unescaped '/', '?' or '@' is masked whole):
//   postgresql://silt:pw@db:5432/x -> postgresql://silt:***@db:5432/x;
// - the value of every query parameter (after the first '?' that follows the user
//   information, parameters split at '&') whose name is_secret_name: ?password=pw,
//   &secret_key=..., &key=..., &sas=..., &sig=..., &session_token=...; words without '='
//   right after such a parameter are masked with it (an unescaped '&' inside the secret).
//   Where a '?' comes before the '@' of the user information, the '@' may as well be in a
//   parameter (postgresql://h:5432?password=p@ss): the query is then also read from that
//   '?', and what either reading finds is masked;
// - the password of a URI given as the value of another parameter
//   (s3://b?endpoint=http://user:pw@host).
// Anything else, the user name and the host included, is kept as it is.
[[nodiscard]] std::string redact_uri(std::string_view uri);

// `text` (a message that may quote `uri` or parts of it: libpq echoes a malformed connection
// URI or a percent-escaped token of it) with `uri` replaced by redact_uri(uri) wherever it
// appears whole, and then every secret that redact_uri masks in `uri` replaced by "***"
// wherever it appears, as written and with its %XX escapes decoded (a secret holding an
// unescaped '&' also piece by piece). A secret of fewer than 8 characters is masked only
// where no letter or digit touches it, so that secret_key=b leaves "bucket" alone.
[[nodiscard]] std::string redact_secrets(std::string_view text, std::string_view uri);

}  // namespace silt::base
