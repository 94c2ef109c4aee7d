// Kafka's own records of its internal topic __consumer_offsets, built from what Silt's group
// store keeps (docs/formats/offsets-topic.md): the keys and values Apache Kafka's group
// coordinator writes, so that tools that read the topic (OffsetsMessageFormatter, lag monitors)
// read Silt's view of it (coordinator/offsets_log.h) as they read Kafka's.
//
// A key is an INT16 record type followed by the key's fields at version 0 (not flexible); a
// value is an INT16 version followed by its fields; a deletion is a key without a value (a
// tombstone). Pure functions: no state, callable from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "metadata/group_store.h"

namespace silt::coordinator {

// Kafka's CoordinatorRecordType ids of the records served.
enum class offsets_record_type : int16_t {
  offset_commit = 1,            // OffsetCommitKey / OffsetCommitValue
  group_metadata = 2,           // GroupMetadataKey / GroupMetadataValue (classic groups)
  consumer_group_metadata = 3,  // ConsumerGroupMetadataKey / Value (KIP-848 groups)
};

// OffsetCommitKey: the group, topic and partition an offset is committed for.
[[nodiscard]] std::vector<uint8_t> offset_commit_key(std::string_view group, std::string_view topic,
                                                     int32_t partition);
// OffsetCommitValue at the version Kafka 4.1 writes: 4 (flexible: offset, leader epoch, compact
// metadata, commit timestamp, no tagged fields), or 1 (with the expire timestamp) for a commit
// that carried an explicit expiry.
[[nodiscard]] std::vector<uint8_t> offset_commit_value(const metadata::committed_offset& o);

// The key and value of a group's own record, from its state as the group store keeps it
// (docs/formats/group-record.md): a classic group (kind 1) gives GroupMetadataKey and
// GroupMetadataValue version 3; a consumer group (kind 2) ConsumerGroupMetadataKey and
// ConsumerGroupMetadataValue version 0 (its group epoch). None for a record that cannot be read.
struct group_metadata_record {
  offsets_record_type type = offsets_record_type::group_metadata;
  std::vector<uint8_t> key;
  std::vector<uint8_t> value;
};
[[nodiscard]] std::optional<group_metadata_record> group_metadata(std::string_view group,
                                                                  std::span<const uint8_t> data);
// The key of a group's record of `type` (for its tombstone).
[[nodiscard]] std::vector<uint8_t> group_metadata_key(offsets_record_type type,
                                                      std::string_view group);

}  // namespace silt::coordinator
