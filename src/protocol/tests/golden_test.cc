// Frames captured from real clients talking to Apache Kafka (tests/data/captures, see its
// README) decode to the fields the capture's manifest records and re-encode to the same bytes.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "protocol/generated/api_table.h"
#include "protocol/generated/response_header.h"
#include "protocol/record_batch.h"
#include "protocol/request_header.h"

namespace silt::protocol {
namespace {

using json = nlohmann::json;

std::string captures_dir() {
  return std::string(SILT_TEST_DATA) + "/captures";
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

json manifest() {
  std::ifstream in(captures_dir() + "/manifest.json");
  return json::parse(in);
}

std::string text(std::span<const uint8_t> b) {
  return {b.begin(), b.end()};
}

std::string uuid_text(const uuid& u) {
  std::string s;
  char hex[3];
  for (size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    std::snprintf(hex, sizeof hex, "%02x", u.bytes[i]);
    s += hex;
  }
  return s;
}

compression_codec codec_named(const std::string& name) {
  static const std::map<std::string, compression_codec> codecs = {
      {"none", compression_codec::none},
      {"gzip", compression_codec::gzip},
      {"snappy", compression_codec::snappy},
      {"lz4", compression_codec::lz4},
      {"zstd", compression_codec::zstd}};
  return codecs.at(name);
}

// Checks every batch of `records` against expect["batches"], records included.
void check_batches(const std::optional<records_view>& records, const json& expect) {
  if (!expect.contains("batches")) return;
  ASSERT_TRUE(records.has_value());
  EXPECT_EQ(records->size(), expect["records_size"].get<size_t>());
  batch_reader batches(records->bytes());
  size_t i = 0;
  for (;;) {
    auto next = batches.next();
    ASSERT_TRUE(next.has_value()) << batch_error_name(next.error());
    if (!next->has_value()) break;
    const record_batch& b = **next;
    ASSERT_LT(i, expect["batches"].size());
    const json& eb = expect["batches"][i++];
    EXPECT_EQ(b.header.base_offset, eb["base_offset"].get<int64_t>());
    EXPECT_EQ(b.header.batch_length, eb["batch_length"].get<int32_t>());
    EXPECT_EQ(b.header.crc, eb["crc"].get<uint32_t>());
    EXPECT_EQ(b.header.attributes, eb["attributes"].get<int16_t>());
    EXPECT_EQ(b.header.codec(), codec_named(eb["codec"]));
    EXPECT_EQ(b.header.last_offset_delta, eb["last_offset_delta"].get<int32_t>());
    EXPECT_EQ(b.header.producer_id, eb["producer_id"].get<int64_t>());
    EXPECT_EQ(b.header.producer_epoch, eb["producer_epoch"].get<int16_t>());
    EXPECT_EQ(b.header.base_sequence, eb["base_sequence"].get<int32_t>());
    EXPECT_EQ(b.header.base_timestamp, eb["base_timestamp"].get<int64_t>());
    EXPECT_EQ(b.header.max_timestamp, eb["max_timestamp"].get<int64_t>());
    EXPECT_EQ(b.header.records_count, eb["record_count"].get<int32_t>());
    auto decoded = decode_records(b);
    ASSERT_TRUE(decoded.has_value()) << batch_error_name(decoded.error());
    const auto& recs = decoded->records();
    ASSERT_EQ(recs.size(), eb["keys"].size());
    for (size_t r = 0; r < recs.size(); ++r) {
      ASSERT_TRUE(recs[r].key.has_value());
      ASSERT_TRUE(recs[r].value.has_value());
      EXPECT_EQ(text(*recs[r].key), eb["keys"][r].get<std::string>());
      EXPECT_EQ(text(*recs[r].value), eb["values"][r].get<std::string>());
      EXPECT_EQ(recs[r].offset_delta, static_cast<int32_t>(r));
    }
  }
  EXPECT_EQ(i, expect["batches"].size());
}

// Fields beyond the headers, for the APIs whose captures record them.
template <typename T>
void check_fields(const T& /*message*/, const json& /*expect*/) {}

void check_fields(const api_versions_request& m, const json& e) {
  EXPECT_EQ(m.client_software_name, e["client_software_name"].get<std::string>());
  EXPECT_EQ(m.client_software_version, e["client_software_version"].get<std::string>());
}

void check_fields(const api_versions_response& m, const json& e) {
  EXPECT_EQ(m.error_code, e["error_code"].get<int16_t>());
  EXPECT_EQ(m.throttle_time_ms, e["throttle_time_ms"].get<int32_t>());
  EXPECT_EQ(m.api_keys.size(), e["api_key_count"].get<size_t>());
  for (const auto& sample : e["api_keys_sample"]) {
    const auto it = std::find_if(m.api_keys.begin(), m.api_keys.end(), [&](const auto& k) {
      return k.api_key == sample[0].get<int16_t>();
    });
    ASSERT_NE(it, m.api_keys.end()) << "api key " << sample[0];
    EXPECT_EQ(it->min_version, sample[1].get<int16_t>());
    EXPECT_EQ(it->max_version, sample[2].get<int16_t>());
  }
  if (e.contains("finalized_features_epoch")) {
    EXPECT_EQ(m.finalized_features_epoch, e["finalized_features_epoch"].get<int64_t>());
    EXPECT_EQ(m.finalized_features.size(), e["finalized_features"].size());
    for (const auto& f : m.finalized_features) {
      EXPECT_EQ(f.max_version_level, e["finalized_features"][f.name].get<int16_t>()) << f.name;
    }
  }
}

void check_fields(const metadata_request& m, const json& e) {
  EXPECT_EQ(m.allow_auto_topic_creation, e["allow_auto_topic_creation"].get<bool>());
  if (e["topics"].is_null()) {
    EXPECT_FALSE(m.topics.has_value());  // all topics
    return;
  }
  ASSERT_TRUE(m.topics.has_value());
  ASSERT_EQ(m.topics->size(), e["topics"].size());
  for (size_t i = 0; i < m.topics->size(); ++i) {
    EXPECT_EQ((*m.topics)[i].name, e["topics"][i].get<std::string>());
  }
}

void check_fields(const metadata_response& m, const json& e) {
  ASSERT_EQ(m.brokers.size(), e["brokers"].size());
  for (size_t i = 0; i < m.brokers.size(); ++i) {
    EXPECT_EQ(m.brokers[i].node_id, e["brokers"][i][0].get<int32_t>());
    EXPECT_EQ(m.brokers[i].host, e["brokers"][i][1].get<std::string>());
    EXPECT_EQ(m.brokers[i].port, e["brokers"][i][2].get<int32_t>());
  }
  EXPECT_EQ(m.cluster_id, e["cluster_id"].get<std::string>());
  EXPECT_EQ(m.controller_id, e["controller_id"].get<int32_t>());
  ASSERT_EQ(m.topics.size(), e["topics"].size());
  for (size_t i = 0; i < m.topics.size(); ++i) {
    const json& et = e["topics"][i];
    if (!et.is_object()) continue;
    EXPECT_EQ(m.topics[i].name, et["name"].get<std::string>());
    EXPECT_EQ(m.topics[i].error_code, et["error_code"].get<int16_t>());
    if (et.contains("topic_id")) {
      EXPECT_EQ(uuid_text(m.topics[i].topic_id), et["topic_id"]);
    }
    EXPECT_EQ(m.topics[i].partitions.size(), et["partitions"].size());
  }
}

void check_fields(const produce_request& m, const json& e) {
  if (e["transactional_id"].is_null()) {
    EXPECT_FALSE(m.transactional_id.has_value());
  } else {
    EXPECT_EQ(m.transactional_id, e["transactional_id"].get<std::string>());
  }
  EXPECT_EQ(m.acks, e["acks"].get<int16_t>());
  EXPECT_EQ(m.timeout_ms, e["timeout_ms"].get<int32_t>());
  ASSERT_EQ(m.topic_data.size(), 1u);
  EXPECT_EQ(m.topic_data[0].name, e["topic"].get<std::string>());
  ASSERT_EQ(m.topic_data[0].partition_data.size(), 1u);
  const auto& p = m.topic_data[0].partition_data[0];
  EXPECT_EQ(p.index, e["partition"].get<int32_t>());
  check_batches(p.records, e);
}

void check_fields(const produce_response& m, const json& e) {
  ASSERT_EQ(m.responses.size(), 1u);
  EXPECT_EQ(m.responses[0].name, e["topic"].get<std::string>());
  ASSERT_EQ(m.responses[0].partition_responses.size(), 1u);
  const auto& p = m.responses[0].partition_responses[0];
  EXPECT_EQ(p.index, e["partition"].get<int32_t>());
  EXPECT_EQ(p.error_code, e["error_code"].get<int16_t>());
  EXPECT_EQ(p.base_offset, e["base_offset"].get<int64_t>());
  EXPECT_EQ(p.log_start_offset, e["log_start_offset"].get<int64_t>());
  EXPECT_EQ(m.throttle_time_ms, e["throttle_time_ms"].get<int32_t>());
}

void check_fields(const fetch_request& m, const json& e) {
  EXPECT_EQ(m.max_wait_ms, e["max_wait_ms"].get<int32_t>());
  EXPECT_EQ(m.min_bytes, e["min_bytes"].get<int32_t>());
  EXPECT_EQ(m.max_bytes, e["max_bytes"].get<int32_t>());
  EXPECT_EQ(m.isolation_level, e["isolation_level"].get<int8_t>());
  EXPECT_EQ(m.session_id, e["session_id"].get<int32_t>());
  EXPECT_EQ(m.session_epoch, e["session_epoch"].get<int32_t>());
  ASSERT_EQ(m.topics.size(), e["topic_count"].get<size_t>());
  if (m.topics.empty()) return;
  if (e.contains("topic_id")) {
    EXPECT_EQ(uuid_text(m.topics[0].topic_id), e["topic_id"].get<std::string>());
  } else {
    EXPECT_EQ(m.topics[0].topic, e["topic"].get<std::string>());
  }
  ASSERT_FALSE(m.topics[0].partitions.empty());
  EXPECT_EQ(m.topics[0].partitions[0].partition, e["partition"].get<int32_t>());
  EXPECT_EQ(m.topics[0].partitions[0].fetch_offset, e["fetch_offset"].get<int64_t>());
  EXPECT_EQ(m.topics[0].partitions[0].partition_max_bytes, e["partition_max_bytes"].get<int32_t>());
}

void check_fields(const fetch_response& m, const json& e) {
  EXPECT_EQ(m.error_code, e["error_code"].get<int16_t>());
  EXPECT_EQ(m.session_id, e["session_id"].get<int32_t>());
  ASSERT_EQ(m.responses.size(), e["topic_count"].get<size_t>());
  if (m.responses.empty()) return;
  if (e.contains("topic_id")) {
    EXPECT_EQ(uuid_text(m.responses[0].topic_id), e["topic_id"].get<std::string>());
  } else {
    EXPECT_EQ(m.responses[0].topic, e["topic"].get<std::string>());
  }
  ASSERT_FALSE(m.responses[0].partitions.empty());
  const auto& p = m.responses[0].partitions[0];
  EXPECT_EQ(p.partition_index, e["partition"].get<int32_t>());
  EXPECT_EQ(p.error_code, e["partition_error_code"].get<int16_t>());
  EXPECT_EQ(p.high_watermark, e["high_watermark"].get<int64_t>());
  EXPECT_EQ(p.last_stable_offset, e["last_stable_offset"].get<int64_t>());
  EXPECT_EQ(p.log_start_offset, e["log_start_offset"].get<int64_t>());
  check_batches(p.records, e);
}

void check_fields(const list_offsets_request& m, const json& e) {
  EXPECT_EQ(m.isolation_level, e["isolation_level"].get<int8_t>());
  ASSERT_EQ(m.topics.size(), 1u);
  EXPECT_EQ(m.topics[0].name, e["topic"].get<std::string>());
  ASSERT_EQ(m.topics[0].partitions.size(), 1u);
  EXPECT_EQ(m.topics[0].partitions[0].partition_index, e["partition"].get<int32_t>());
  EXPECT_EQ(m.topics[0].partitions[0].timestamp, e["timestamp"].get<int64_t>());
}

void check_fields(const list_offsets_response& m, const json& e) {
  ASSERT_EQ(m.topics.size(), 1u);
  EXPECT_EQ(m.topics[0].name, e["topic"].get<std::string>());
  ASSERT_EQ(m.topics[0].partitions.size(), 1u);
  const auto& p = m.topics[0].partitions[0];
  EXPECT_EQ(p.partition_index, e["partition"].get<int32_t>());
  EXPECT_EQ(p.error_code, e["error_code"].get<int16_t>());
  EXPECT_EQ(p.offset, e["offset"].get<int64_t>());
  EXPECT_EQ(p.timestamp, e["timestamp"].get<int64_t>());
}

void check_fields(const init_producer_id_request& m, const json& e) {
  EXPECT_FALSE(m.transactional_id.has_value());
  EXPECT_EQ(m.transaction_timeout_ms, e["transaction_timeout_ms"].get<int32_t>());
}

void check_fields(const init_producer_id_response& m, const json& e) {
  EXPECT_EQ(m.error_code, e["error_code"].get<int16_t>());
  EXPECT_EQ(m.producer_id, e["producer_id"].get<int64_t>());
  EXPECT_EQ(m.producer_epoch, e["producer_epoch"].get<int16_t>());
}

// Decodes the body of `frame` (after `offset` bytes of header) as Msg, checks that it fills
// the frame and that header + body re-encode to the captured bytes.
template <typename Header, typename Msg>
void check_frame(const std::vector<uint8_t>& frame, const Header& header, int16_t header_version,
                 size_t offset, int16_t version, const json& expect) {
  reader r(std::span<const uint8_t>(frame).subspan(offset));
  Msg m;
  m.decode(r, version);
  r.expect_end();
  ASSERT_TRUE(r.ok()) << decode_error_name(r.error());
  writer w(frame.size());
  header.encode(w, header_version);
  m.encode(w, version);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w.take(), frame) << "re-encoding differs";
  EXPECT_EQ(header.encoded_size(header_version) + m.encoded_size(version), frame.size());
  check_fields(m, expect);
}

class Golden : public ::testing::TestWithParam<json> {};

TEST_P(Golden, DecodesToTheRecordedFieldsAndReencodesToTheSameBytes) {
  const json& entry = GetParam();
  const auto frame = read_file(captures_dir() + "/" + entry["file"].get<std::string>());
  ASSERT_EQ(frame.size(), entry["size"].get<size_t>());
  const int16_t key = entry["api_key"];
  const int16_t version = entry["api_version"];
  const json& expect = entry["expect"];
  bool known = false;
  if (entry["kind"] == "request") {
    auto parsed = parse_request_header(frame);
    ASSERT_TRUE(parsed.has_value()) << decode_error_name(parsed.error());
    EXPECT_EQ(parsed->header.request_api_key, key);
    EXPECT_EQ(parsed->header.request_api_version, version);
    EXPECT_EQ(parsed->header.correlation_id, expect["correlation_id"].get<int32_t>());
    EXPECT_EQ(parsed->header.client_id, expect["client_id"].get<std::string>());
    known = visit_api(key, [&](auto request_type, auto /*response_type*/) {
      using request = typename decltype(request_type)::type;
      check_frame<request_header, request>(frame, parsed->header, parsed->header_version,
                                           parsed->header_size, version, expect);
    });
  } else {
    const int16_t header_version = response_header_version(key, version);
    reader r(frame);
    response_header header;
    header.decode(r, header_version);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(header.correlation_id, expect["correlation_id"].get<int32_t>());
    known = visit_api(key, [&](auto /*request_type*/, auto response_type) {
      using response = typename decltype(response_type)::type;
      check_frame<response_header, response>(frame, header, header_version,
                                             frame.size() - r.remaining(), version, expect);
    });
  }
  EXPECT_TRUE(known) << "api key " << key;
}

std::string case_name(const ::testing::TestParamInfo<json>& info) {
  std::string name = info.param["file"].get<std::string>();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Captures, Golden, ::testing::ValuesIn(manifest().get<std::vector<json>>()),
                         case_name);

TEST(GoldenManifest, CoversBothClientsAndEveryCodec) {
  std::map<std::string, int> seen;
  for (const auto& e : manifest()) {
    const std::string file = e["file"];
    seen[file.substr(0, file.find('/'))]++;
    if (e["expect"].contains("batches")) {
      for (const auto& b : e["expect"]["batches"]) seen["codec:" + b["codec"].get<std::string>()]++;
    }
  }
  EXPECT_GT(seen["librdkafka"], 0);
  EXPECT_GT(seen["java"], 0);
  for (const char* codec : {"none", "gzip", "snappy", "lz4", "zstd"}) {
    EXPECT_GT(seen[std::string("codec:") + codec], 0) << codec;
  }
}

}  // namespace
}  // namespace silt::protocol
