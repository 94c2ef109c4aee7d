#include "storage/cluster_marker.h"

#include <nlohmann/json.hpp>

namespace silt::storage {

namespace {

constexpr int64_t marker_version = 1;

tl::unexpected<cluster_marker_failure> failed(cluster_marker_error e, store_error cause,
                                              std::string found = {}) {
  return tl::make_unexpected(cluster_marker_failure{e, cause, std::move(found)});
}

}  // namespace

std::vector<uint8_t> encode_cluster_marker(std::string_view cluster_id) {
  nlohmann::json j;
  j["version"] = marker_version;
  j["cluster_id"] = std::string(cluster_id);
  // Cluster ids are base64url (config.cc); replace: never throw on bytes that are not UTF-8.
  const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return {text.begin(), text.end()};
}

tl::expected<std::string, std::string> decode_cluster_marker(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return tl::make_unexpected(std::string("it is empty"));
  if (bytes.size() > cluster_marker_max_bytes) {
    return tl::make_unexpected("it holds more than " + std::to_string(cluster_marker_max_bytes) +
                               " bytes");
  }
  // No exceptions: a document that does not parse comes back discarded. Its text is not quoted
  // in the error: it is not known to be text.
  const auto j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (j.is_discarded()) return tl::make_unexpected(std::string("it is not JSON"));
  if (!j.is_object()) return tl::make_unexpected(std::string("it is not a JSON object"));
  const auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer()) {
    return tl::make_unexpected(std::string("it has no integer \"version\""));
  }
  if (version->get<int64_t>() != marker_version) {
    return tl::make_unexpected("its version is " + std::to_string(version->get<int64_t>()) +
                               ", this broker reads version " + std::to_string(marker_version));
  }
  const auto id = j.find("cluster_id");
  if (id == j.end() || !id->is_string() || id->get_ref<const std::string&>().empty()) {
    return tl::make_unexpected(std::string("it has no non-empty string \"cluster_id\""));
  }
  return id->get<std::string>();
}

tl::expected<cluster_marker_claim, cluster_marker_failure> claim_cluster_marker(
    object_store& store, std::string_view cluster_id) {
  bool created = false;
  // Read; if absent, create and read again. The second read sees whichever marker won a race
  // of creators, this one's or another cluster's.
  for (int round = 0; round < 2; ++round) {
    // One byte more than a marker may hold: a larger object shows as one.
    auto got = store.get(cluster_marker_key, 0, cluster_marker_max_bytes + 1);
    if (got) {
      auto id = decode_cluster_marker(*got);
      if (!id) return failed(cluster_marker_error::corrupt, store_error::io, std::move(id.error()));
      if (*id != cluster_id) {
        return failed(cluster_marker_error::foreign, store_error::io, std::move(*id));
      }
      return created ? cluster_marker_claim::created : cluster_marker_claim::found;
    }
    if (got.error() != store_error::not_found) {
      return failed(cluster_marker_error::unreadable, got.error());
    }
    if (round == 1) break;
    // Succeeds also when a retry finds the bytes its lost first attempt wrote, or when a broker
    // of the same cluster wrote the same bytes first.
    auto put = store.put_if_absent(cluster_marker_key, encode_cluster_marker(cluster_id));
    if (put) {
      created = true;
    } else if (put.error() != store_error::already_exists) {
      return failed(cluster_marker_error::unreadable, put.error());
    }
  }
  // Written (or found taken) and then gone: deleted in between. Nothing is known yet.
  return failed(cluster_marker_error::unreadable, store_error::not_found);
}

std::string cluster_marker_message(const cluster_marker_failure& failure,
                                   std::string_view store_description,
                                   std::string_view cluster_id) {
  const std::string store(store_description);
  const std::string key(cluster_marker_key);
  const std::string id(cluster_id);
  const std::string untouched =
      ": refusing to start; nothing in the store was written or deleted. Give each cluster a "
      "store of its own (object.store.uri: another directory, bucket or container), see "
      "docs/operations.md, \"The cluster marker\"";
  switch (failure.error) {
    case cluster_marker_error::foreign:
      return "the object store " + store + " belongs to another cluster: its marker " + key +
             " names cluster " + failure.found +
             ", this broker's cluster (its metadata store) is " + id + untouched;
    case cluster_marker_error::corrupt:
      return "the object store " + store + " holds a " + key +
             " that is not a cluster marker this broker reads (" + failure.found +
             "): whether the store belongs to this broker's cluster " + id + " cannot be told" +
             untouched;
    case cluster_marker_error::unreadable:
      break;
  }
  return "cannot read the cluster marker " + key + " in the object store " + store + ": " +
         std::string(store_error_name(failure.cause));
}

}  // namespace silt::storage
