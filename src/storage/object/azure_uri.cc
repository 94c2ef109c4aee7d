// parse_azure_uri (declared in azure_store.h).

#include "storage/object/azure_store.h"
#include "storage/object/uri.h"

namespace silt::storage {

tl::expected<azure_options, std::string> parse_azure_uri(std::string_view text,
                                                         const uri::env_lookup& env) {
  const uri::env_lookup& lookup = env ? env : uri::env_lookup(uri::system_env);
  constexpr std::string_view scheme = "azblob://";
  if (!text.starts_with(scheme)) return tl::make_unexpected(std::string("not an azblob:// URI"));
  auto rest = text.substr(scheme.size());
  const size_t q = rest.find('?');
  auto container = rest.substr(0, q);
  if (container.ends_with('/')) container.remove_suffix(1);
  if (!valid_azure_container_name(container)) {
    return tl::make_unexpected("azblob:// URI: container name '" + std::string(container) +
                               "' is invalid (3-63 characters: a-z, 0-9, single '-')");
  }
  azure_options o;
  o.container = std::string(container);
  const auto params = uri::parse_query(q == std::string_view::npos ? "" : rest.substr(q + 1));
  if (!params) {
    return tl::make_unexpected(std::string("azblob:// URI: malformed %-escape in the query"));
  }
  for (const auto& [name, value] : *params) {
    const auto bad_value = [&, &name = name, &value = value](std::string_view want) {
      return tl::make_unexpected(uri::bad_parameter("azblob://", name, value, want));
    };
    const auto number = [&value = value](auto& field) {
      return uri::parse_number_into(value, field);
    };
    if (name == "endpoint") {
      o.endpoint = value;
    } else if (name == "account") {
      o.account = value;
    } else if (name == "key") {
      o.key = value;
    } else if (name == "sas") {
      o.sas = value;
    } else if (name == "create_container") {
      const auto b = uri::parse_flag(value);
      if (!b) return bad_value("true or false");
      o.create_container = *b;
    } else if (name == "block_threshold" || name == "block_size") {
      if (!number(name == "block_size" ? o.block_size : o.block_threshold))
        return bad_value("a number of bytes");
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
          "azblob:// URI: unknown parameter '" + name +
          "' (known: endpoint, account, key, sas, create_container, block_threshold, "
          "block_size, upload_concurrency, max_attempts, connect_timeout_ms, "
          "request_timeout_ms)");
    }
  }
  if (o.account.empty()) o.account = lookup("AZURE_STORAGE_ACCOUNT").value_or("");
  if (o.account.empty()) {
    return tl::make_unexpected(
        std::string("azblob:// URI: no account: give account= or set AZURE_STORAGE_ACCOUNT"));
  }
  if (!o.key.empty() && !o.sas.empty()) {
    return tl::make_unexpected(std::string("azblob:// URI: give key or sas, not both"));
  }
  if (o.key.empty() && o.sas.empty()) {
    o.key = lookup("AZURE_STORAGE_KEY").value_or("");
    if (o.key.empty()) o.sas = lookup("AZURE_STORAGE_SAS_TOKEN").value_or("");
    if (o.key.empty() && o.sas.empty()) {
      return tl::make_unexpected(
          std::string("azblob:// URI: no credentials: give key or sas, or set AZURE_STORAGE_KEY "
                      "or AZURE_STORAGE_SAS_TOKEN"));
    }
  }
  return o;
}

}  // namespace silt::storage
