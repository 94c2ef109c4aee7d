// The cluster marker: one small object at the root of the object store, `cluster.json`, that
// names the cluster whose data the store holds (docs/formats/cluster-marker.md).
//
// Object keys carry no cluster id, so two clusters (two metadata stores) given one store would
// overwrite each other's objects, and each one's sweep would delete what its catalog does not
// know. A broker therefore claims the store before it writes, reads or deletes anything in it:
// it reads the marker, creates it with a conditional create when there is none (of clusters
// starting at once, one wins), reads it again, and goes on only when it names its own cluster.
//
// Pure functions over an object store: no state, any thread; the store's calls block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "storage/object/object_store.h"

namespace silt::storage {

// The marker's key, at the root of the store, next to objects/ and wal/.
inline constexpr std::string_view cluster_marker_key = "cluster.json";
// The largest marker a reader takes; anything larger is not a marker.
inline constexpr size_t cluster_marker_max_bytes = 4096;

enum class cluster_marker_error : uint8_t {
  unreadable,  // the store failed (after its own retries): not known yet, try again later
  foreign,     // the marker names another cluster
  corrupt,     // the object under the key is not a marker this version reads
};

struct cluster_marker_failure {
  cluster_marker_error error = cluster_marker_error::unreadable;
  store_error cause = store_error::io;  // unreadable: what the store said
  std::string found;                    // foreign: the id the marker names; corrupt: why
};

enum class cluster_marker_claim : uint8_t {
  found,    // the marker was there, naming this cluster
  created,  // there was none: this call wrote it
};

// The marker's bytes for a cluster id.
[[nodiscard]] std::vector<uint8_t> encode_cluster_marker(std::string_view cluster_id);
// The cluster id a marker names, or why the bytes are not a marker (for an error message:
// never the bytes themselves).
[[nodiscard]] tl::expected<std::string, std::string> decode_cluster_marker(
    std::span<const uint8_t> bytes);

// Claims `store` for `cluster_id`: reads the marker; when there is none, creates it with
// put_if_absent and reads it again. Succeeds only when the marker names `cluster_id`. Neither
// writes nor deletes anything else, and writes the marker only where there was none.
[[nodiscard]] tl::expected<cluster_marker_claim, cluster_marker_failure> claim_cluster_marker(
    object_store& store, std::string_view cluster_id);

// What a failed claim means, for the broker's log and its refusal to start: names the store
// (`store_description`: describe(), which carries no credential), the marker, the cluster id
// it names and `cluster_id`.
[[nodiscard]] std::string cluster_marker_message(const cluster_marker_failure& failure,
                                                 std::string_view store_description,
                                                 std::string_view cluster_id);

}  // namespace silt::storage
