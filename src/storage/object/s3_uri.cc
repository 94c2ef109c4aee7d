// parse_s3_uri and the bucket naming rules (declared in s3_store.h).
#include <algorithm>

#include "storage/object/s3_store.h"
#include "storage/object/uri.h"

namespace silt::storage {

bool valid_s3_bucket_name(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(b.front()) || !alnum(b.back())) return false;
  return std::all_of(b.begin(), b.end(), [&](char c) { return alnum(c) || c == '-' || c == '.'; });
}

tl::expected<s3_options, std::string> parse_s3_uri(std::string_view uri, const env_lookup& env) {
  const env_lookup& lookup = env ? env : env_lookup(uri::system_env);
  constexpr std::string_view scheme = "s3://";
  if (!uri.starts_with(scheme)) return tl::make_unexpected(std::string("not an s3:// URI"));
  auto rest = uri.substr(scheme.size());
  const size_t q = rest.find('?');
  auto bucket = rest.substr(0, q);
  if (bucket.ends_with('/')) bucket.remove_suffix(1);
  if (bucket.find('/') != std::string_view::npos) {
    return tl::make_unexpected("s3:// URI: '" + std::string(bucket) +
                               "' is not a bucket name (a key prefix after it is not supported)");
  }
  if (!valid_s3_bucket_name(bucket)) {
    return tl::make_unexpected("s3:// URI: bucket name '" + std::string(bucket) +
                               "' is invalid (3-63 characters: a-z, 0-9, '.', '-')");
  }
  s3_options o;
  o.bucket = std::string(bucket);
  const auto params = uri::parse_query(q == std::string_view::npos ? "" : rest.substr(q + 1));
  if (!params)
    return tl::make_unexpected(std::string("s3:// URI: malformed %-escape in the query"));

  bool region_given = false;
  for (const auto& [name, value] : *params) {
    const auto bad_value = [&, &name = name, &value = value](std::string_view want) {
      return tl::make_unexpected(uri::bad_parameter("s3://", name, value, want));
    };
    const auto number = [&value = value](auto& field) {
      return uri::parse_number_into(value, field);
    };
    if (name == "endpoint") {
      o.endpoint = value;
    } else if (name == "region") {
      o.region = value;
      region_given = true;
    } else if (name == "path_style" || name == "sign_payload") {
      const auto b = uri::parse_flag(value);
      if (!b) return bad_value("true or false");
      (name == "path_style" ? o.path_style : o.sign_payload) = *b;
    } else if (name == "access_key") {
      o.access_key = value;
    } else if (name == "secret_key") {
      o.secret_key = value;
    } else if (name == "session_token") {
      o.session_token = value;
    } else if (name == "multipart_threshold") {
      if (!number(o.multipart_threshold)) return bad_value("a number of bytes");
    } else if (name == "part_size") {
      if (!number(o.part_size)) return bad_value("a number of bytes");
    } else if (name == "upload_concurrency") {
      if (!number(o.upload_concurrency)) return bad_value("a number");
    } else if (name == "max_attempts") {
      if (!number(o.retry.max_attempts)) return bad_value("a number");
    } else if (name == "connect_timeout_ms" || name == "request_timeout_ms") {
      if (!uri::parse_millis_into(
              value, name == "connect_timeout_ms" ? o.connect_timeout : o.request_timeout))
        return bad_value("a number of milliseconds");
    } else {
      return tl::make_unexpected(
          "s3:// URI: unknown parameter '" + name +
          "' (known: endpoint, region, path_style, access_key, secret_key, session_token, "
          "multipart_threshold, part_size, upload_concurrency, max_attempts, sign_payload, "
          "connect_timeout_ms, request_timeout_ms)");
    }
  }

  if (!region_given) {
    o.region = lookup("AWS_REGION").value_or(lookup("AWS_DEFAULT_REGION").value_or("us-east-1"));
  }
  if (o.access_key.empty() != o.secret_key.empty()) {
    return tl::make_unexpected(std::string("s3:// URI: access_key and secret_key go together"));
  }
  if (o.access_key.empty()) {
    auto key = lookup("AWS_ACCESS_KEY_ID");
    auto secret = lookup("AWS_SECRET_ACCESS_KEY");
    if (!key || !secret) {
      return tl::make_unexpected(
          std::string("s3:// URI: no credentials: give access_key and secret_key, or set "
                      "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"));
    }
    o.access_key = std::move(*key);
    o.secret_key = std::move(*secret);
    if (o.session_token.empty()) o.session_token = lookup("AWS_SESSION_TOKEN").value_or("");
  }
  return o;
}

}  // namespace silt::storage
