#include "coordinator/offsets_records.h"

#include "protocol/reader.h"
#include "protocol/writer.h"

namespace silt::coordinator {

namespace {

// The kinds of group records (docs/formats/group-record.md).
constexpr int8_t classic_kind = 1;
constexpr int8_t consumer_kind = 2;

// Versions of the values Kafka 4.1 writes.
constexpr int16_t offset_commit_value_version = 4;  // the first flexible one
constexpr int16_t offset_commit_value_version_with_expiry = 1;
constexpr int16_t group_metadata_value_version = 3;
constexpr int16_t consumer_group_metadata_value_version = 0;

void put_nullable(protocol::writer& w, const std::optional<std::string>& s) {
  if (s) {
    w.string(*s, false);
  } else {
    w.null_string(false);
  }
}

std::optional<group_metadata_record> classic_metadata(std::string_view group,
                                                      std::span<const uint8_t> data) {
  protocol::reader r(data);
  (void)r.int8();
  const int32_t generation = r.int32();
  const int64_t state_since = r.int64();
  const std::string protocol_type = r.string(true);
  const std::optional<std::string> protocol = r.nullable_string(true, true);
  const std::string leader = r.string(true);
  protocol::writer v;
  v.int16(group_metadata_value_version);
  v.string(protocol_type, false);
  v.int32(generation);
  put_nullable(v, protocol);
  put_nullable(v, leader.empty() ? std::nullopt : std::optional<std::string>(leader));
  v.int64(state_since);
  const int32_t members = r.array_length(true, 4);
  v.array_length(static_cast<size_t>(std::max(members, 0)), false);
  for (int32_t i = 0; i < members && r.ok(); ++i) {
    const std::string member_id = r.string(true);
    const std::optional<std::string> instance_id = r.nullable_string(true, true);
    const std::string client_id = r.string(true);
    const std::string client_host = r.string(true);
    const int32_t session_timeout = r.int32();
    const int32_t rebalance_timeout = r.int32();
    // Kafka keeps the member's metadata of the chosen protocol as its subscription.
    std::vector<uint8_t> subscription;
    const int32_t protocols = r.array_length(true, 2);
    for (int32_t k = 0; k < protocols && r.ok(); ++k) {
      std::string name = r.string(true);
      std::vector<uint8_t> metadata = r.bytes(true);
      if (protocol && name == *protocol) subscription = std::move(metadata);
    }
    const std::vector<uint8_t> assignment = r.bytes(true);
    v.string(member_id, false);
    put_nullable(v, instance_id);
    v.string(client_id, false);
    v.string(client_host, false);
    v.int32(rebalance_timeout);
    v.int32(session_timeout);
    v.bytes(subscription, false);
    v.bytes(assignment, false);
  }
  r.expect_end();
  if (!r.ok() || !v.ok()) return std::nullopt;
  return group_metadata_record{offsets_record_type::group_metadata,
                               group_metadata_key(offsets_record_type::group_metadata, group),
                               v.take()};
}

std::optional<group_metadata_record> consumer_metadata(std::string_view group,
                                                       std::span<const uint8_t> data) {
  protocol::reader r(data);
  (void)r.int8();
  const int32_t group_epoch = r.int32();
  if (!r.ok()) return std::nullopt;
  protocol::writer v;
  v.int16(consumer_group_metadata_value_version);
  v.int32(group_epoch);
  v.uvarint(0);  // no tagged fields
  return group_metadata_record{
      offsets_record_type::consumer_group_metadata,
      group_metadata_key(offsets_record_type::consumer_group_metadata, group), v.take()};
}

}  // namespace

std::vector<uint8_t> offset_commit_key(std::string_view group, std::string_view topic,
                                       int32_t partition) {
  protocol::writer w;
  w.int16(static_cast<int16_t>(offsets_record_type::offset_commit));
  w.string(group, false);
  w.string(topic, false);
  w.int32(partition);
  return w.take();
}

std::vector<uint8_t> offset_commit_value(const metadata::committed_offset& o) {
  protocol::writer w;
  const bool expiry = o.expire_ms >= 0;
  w.int16(expiry ? offset_commit_value_version_with_expiry : offset_commit_value_version);
  w.int64(o.offset);
  if (!expiry) w.int32(o.leader_epoch);
  w.string(o.metadata, !expiry);
  w.int64(o.commit_ms);
  if (expiry) {
    w.int64(o.expire_ms);
  } else {
    w.uvarint(0);  // no tagged fields
  }
  return w.take();
}

std::vector<uint8_t> group_metadata_key(offsets_record_type type, std::string_view group) {
  protocol::writer w;
  w.int16(static_cast<int16_t>(type));
  w.string(group, false);
  return w.take();
}

std::optional<group_metadata_record> group_metadata(std::string_view group,
                                                    std::span<const uint8_t> data) {
  if (data.empty()) return std::nullopt;
  if (data[0] == classic_kind) return classic_metadata(group, data);
  if (data[0] == consumer_kind) return consumer_metadata(group, data);
  return std::nullopt;
}

}  // namespace silt::coordinator
