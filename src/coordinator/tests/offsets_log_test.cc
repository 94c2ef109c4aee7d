#include "coordinator/offsets_log.h"

#include <gtest/gtest.h>

#include "protocol/reader.h"
#include "protocol/record_batch.h"

namespace silt::coordinator {
namespace {

struct record_seen {
  int64_t offset = 0;
  int64_t timestamp = 0;
  std::vector<uint8_t> key;
  std::optional<std::vector<uint8_t>> value;
};

// The records of one read, checked as a client checks them (framing, CRC, records).
std::vector<record_seen> records_of(const offsets_log::read_result& r) {
  std::vector<record_seen> out;
  if (!r.batch) return out;
  protocol::batch_reader reader(*r.batch);
  for (;;) {
    auto b = reader.next();
    EXPECT_TRUE(b.has_value());
    if (!b || !*b) break;
    auto recs = protocol::decode_records(**b);
    EXPECT_TRUE(recs.has_value());
    if (!recs) break;
    for (const auto& rec : *recs) {
      record_seen s;
      s.offset = (**b).header.base_offset + rec.offset_delta;
      s.timestamp = (**b).header.base_timestamp + rec.timestamp_delta;
      s.key.assign(rec.key->begin(), rec.key->end());
      if (rec.value) s.value.emplace(rec.value->begin(), rec.value->end());
      out.push_back(std::move(s));
    }
  }
  return out;
}

metadata::committed_offset offset(std::string group, std::string topic, int32_t partition,
                                  int64_t o, int64_t at = 1000) {
  return {{std::move(group), std::move(topic), partition}, o, -1, "", at, -1};
}

std::vector<uint8_t> classic_record(int32_t generation) {
  protocol::writer w;
  w.int8(1);
  w.int32(generation);
  w.int64(500);
  w.string("consumer", true);
  w.string("range", true);
  w.string("m1", true);
  w.array_length(1, true);
  w.string("m1", true);
  w.null_string(true);
  w.string("client", true);
  w.string("/127.0.0.1", true);
  w.int32(45000);
  w.int32(300000);
  w.array_length(2, true);
  w.string("roundrobin", true);
  w.bytes(std::vector<uint8_t>{9}, true);
  w.string("range", true);
  w.bytes(std::vector<uint8_t>{1, 2, 3}, true);
  w.bytes(std::vector<uint8_t>{4, 5}, true);
  return w.take();
}

TEST(OffsetsRecords, AnOffsetCommitIsKafkasKeyAndValueVersion4) {
  EXPECT_EQ(offset_commit_key("g", "t", 2),
            (std::vector<uint8_t>{0, 1, 0, 1, 'g', 0, 1, 't', 0, 0, 0, 2}));
  auto o = offset("g", "t", 2, 7);
  o.leader_epoch = 3;
  o.metadata = "m";
  const auto v = offset_commit_value(o);
  protocol::reader r(v);
  EXPECT_EQ(r.int16(), 4);
  EXPECT_EQ(r.int64(), 7);
  EXPECT_EQ(r.int32(), 3);
  EXPECT_EQ(r.string(true), "m");
  EXPECT_EQ(r.int64(), 1000);
  EXPECT_EQ(r.uvarint(), 0u);  // tagged fields
  r.expect_end();
  EXPECT_TRUE(r.ok());
}

TEST(OffsetsRecords, ACommitWithAnExpiryIsValueVersion1) {
  auto o = offset("g", "t", 0, 7);
  o.expire_ms = 5000;
  const auto v = offset_commit_value(o);
  protocol::reader r(v);
  EXPECT_EQ(r.int16(), 1);
  EXPECT_EQ(r.int64(), 7);
  EXPECT_EQ(r.string(false), "");
  EXPECT_EQ(r.int64(), 1000);
  EXPECT_EQ(r.int64(), 5000);
  r.expect_end();
  EXPECT_TRUE(r.ok());
}

TEST(OffsetsRecords, AClassicGroupIsGroupMetadataVersion3WithTheChosenProtocolsMetadata) {
  const auto g = group_metadata("grp", classic_record(4));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->type, offsets_record_type::group_metadata);
  EXPECT_EQ(g->key, (std::vector<uint8_t>{0, 2, 0, 3, 'g', 'r', 'p'}));
  protocol::reader r(g->value);
  EXPECT_EQ(r.int16(), 3);
  EXPECT_EQ(r.string(false), "consumer");
  EXPECT_EQ(r.int32(), 4);
  EXPECT_EQ(r.nullable_string(false, true), "range");
  EXPECT_EQ(r.nullable_string(false, true), "m1");
  EXPECT_EQ(r.int64(), 500);
  EXPECT_EQ(r.array_length(false, 1), 1);
  EXPECT_EQ(r.string(false), "m1");
  EXPECT_EQ(r.nullable_string(false, true), std::nullopt);
  EXPECT_EQ(r.string(false), "client");
  EXPECT_EQ(r.string(false), "/127.0.0.1");
  EXPECT_EQ(r.int32(), 300000);  // rebalance timeout first, as Kafka's schema has it
  EXPECT_EQ(r.int32(), 45000);
  EXPECT_EQ(r.bytes(false), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(r.bytes(false), (std::vector<uint8_t>{4, 5}));
  r.expect_end();
  EXPECT_TRUE(r.ok());
}

TEST(OffsetsRecords, ACorruptGroupRecordGivesNoRecord) {
  auto data = classic_record(1);
  data.pop_back();
  EXPECT_FALSE(group_metadata("g", data));
  EXPECT_FALSE(group_metadata("g", std::vector<uint8_t>{7}));
  EXPECT_FALSE(group_metadata("g", {}));
}

TEST(OffsetsLog, AShardStartsWithASnapshotAtItsEpochsBaseOffset) {
  offsets_log log(3);
  metadata::group_store::loaded state;
  state.groups.push_back({"g", classic_record(2)});
  state.offsets.push_back(offset("g", "t", 0, 5));
  log.load(1, base::leader_epoch(2), state, 9000);
  EXPECT_FALSE(log.offsets(0));
  const auto b = log.offsets(1);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->start, int64_t{2} << 40);
  EXPECT_EQ(b->end, b->start + 2);
  auto r = log.read(1, b->start, 1 << 20);
  ASSERT_TRUE(r);
  const auto recs = records_of(*r);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].offset, b->start);
  EXPECT_EQ(recs[0].key, group_metadata_key(offsets_record_type::group_metadata, "g"));
  EXPECT_EQ(recs[1].key, offset_commit_key("g", "t", 0));
  EXPECT_EQ(recs[1].timestamp, 1000);
  EXPECT_EQ(log.read(1, b->start - 1, 100).error(), offsets_log::read_error::out_of_range);
  EXPECT_EQ(log.read(1, b->end + 1, 100).error(), offsets_log::read_error::out_of_range);
  EXPECT_EQ(log.read(0, 0, 100).error(), offsets_log::read_error::not_held);
}

TEST(OffsetsLog, DurableWritesAppendInStoreOrderAndOtherEpochsAreIgnored) {
  offsets_log log(1);
  log.load(0, base::leader_epoch(0), {}, 0);
  metadata::shard_write w;
  w.shard = 0;
  w.epoch = base::leader_epoch(0);
  w.offsets.push_back(offset("g", "t", 0, 1));
  w.offsets.push_back(offset("g", "t", 1, 2));
  log.apply(w, 2000);
  metadata::shard_write stale = w;
  stale.epoch = base::leader_epoch(1);
  log.apply(stale, 2000);
  EXPECT_EQ(log.offsets(0)->end, 2);
  metadata::shard_write del;
  del.shard = 0;
  del.epoch = base::leader_epoch(0);
  del.deleted_groups.push_back("g");
  del.deleted_offsets.push_back({"other", "t", 0});  // never committed: nothing to delete
  log.apply(del, 3000);
  auto r = log.read(0, 2, 1 << 20);
  ASSERT_TRUE(r);
  const auto recs = records_of(*r);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].key, offset_commit_key("g", "t", 0));
  EXPECT_FALSE(recs[0].value);
  EXPECT_EQ(recs[1].key, offset_commit_key("g", "t", 1));
  EXPECT_FALSE(recs[1].value);
  EXPECT_EQ(recs[1].timestamp, 3000);
}

TEST(OffsetsLog, AReadStopsAtItsByteLimitButGivesOneRecord) {
  offsets_log log(1);
  log.load(0, base::leader_epoch(0), {}, 0);
  metadata::shard_write w;
  w.epoch = base::leader_epoch(0);
  for (int i = 0; i < 10; ++i) w.offsets.push_back(offset("g", "t", i, i));
  log.apply(w, 0);
  auto one = log.read(0, 3, 1);
  ASSERT_TRUE(one);
  EXPECT_EQ(records_of(*one).size(), 1u);
  auto all = log.read(0, 3, 1 << 20);
  EXPECT_EQ(records_of(*all).size(), 7u);
  auto none = log.read(0, 10, 1 << 20);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->batch);
}

TEST(OffsetsLog, CompactionKeepsTheLatestOfEachKeyAndTheTailWithStableOffsets) {
  offsets_log log(1, 4);
  log.load(0, base::leader_epoch(0), {}, 0);
  for (int i = 0; i < 100; ++i) {
    metadata::shard_write w;
    w.epoch = base::leader_epoch(0);
    w.offsets.push_back(offset("g", "t", i % 3, i, i));
    log.apply(w, 0);
  }
  metadata::shard_write del;
  del.epoch = base::leader_epoch(0);
  del.deleted_offsets.push_back({"g", "t", 2});
  log.apply(del, 0);
  const auto b = log.offsets(0);
  EXPECT_EQ(b->start, 0);
  EXPECT_EQ(b->end, 101);
  auto r = log.read(0, 0, 1 << 20);
  const auto recs = records_of(*r);
  EXPECT_LE(recs.size(), 2 * 3 + 4u);
  // Offsets only increase, and the last record of each key is there with its offset.
  for (size_t i = 1; i < recs.size(); ++i) EXPECT_LT(recs[i - 1].offset, recs[i].offset);
  std::map<std::vector<uint8_t>, int64_t> last;
  for (const auto& s : recs) last[s.key] = s.offset;
  EXPECT_EQ(last[offset_commit_key("g", "t", 0)], 99);
  EXPECT_EQ(last[offset_commit_key("g", "t", 1)], 97);
  EXPECT_EQ(last[offset_commit_key("g", "t", 2)], 100);  // its tombstone, in the tail
  // A read from inside a gap starts at the next record kept.
  auto mid = log.read(0, 50, 1 << 20);
  ASSERT_TRUE(mid);
  EXPECT_GE(records_of(*mid).front().offset, 50);
}

TEST(OffsetsLog, ADeletedTopicsOffsetsGetTombstonesAndADroppedShardIsGone) {
  offsets_log log(2);
  metadata::group_store::loaded state;
  state.offsets.push_back(offset("g", "gone", 0, 5));
  state.offsets.push_back(offset("g", "kept", 0, 5));
  log.load(1, base::leader_epoch(0), state, 0);
  log.forget_topic("gone", 7);
  auto r = log.read(1, 2, 1 << 20);
  const auto recs = records_of(*r);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].key, offset_commit_key("g", "gone", 0));
  EXPECT_FALSE(recs[0].value);
  log.drop(1);
  EXPECT_FALSE(log.offsets(1));
}

TEST(OffsetsLog, FindsTheFirstRecordAtATimestampAndTheLatestTimestamp) {
  offsets_log log(1);
  log.load(0, base::leader_epoch(0), {}, 0);
  metadata::shard_write w;
  w.epoch = base::leader_epoch(0);
  w.offsets.push_back(offset("g", "t", 0, 1, 100));
  w.offsets.push_back(offset("g", "t", 1, 1, 300));
  w.offsets.push_back(offset("g", "t", 2, 1, 200));
  log.apply(w, 0);
  EXPECT_EQ(log.offset_for_time(0, 150)->offset, 1);
  EXPECT_EQ(log.offset_for_time(0, 400)->offset, -1);
  EXPECT_EQ(log.offset_for_time(0, -3)->offset, 1);
  EXPECT_EQ(log.offset_for_time(0, -3)->timestamp, 300);
}

}  // namespace
}  // namespace silt::coordinator
