#include "omb.h"

#include <cctype>
#include <filesystem>

#include <yaml-cpp/yaml.h>

namespace silt::perf {

namespace {

namespace fs = std::filesystem;

bool top_level_key(const std::string& line) {
  if (line.empty() || !(std::isalpha(static_cast<unsigned char>(line[0])) || line[0] == '_')) {
    return false;
  }
  size_t i = 0;
  while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_'))
    ++i;
  return i < line.size() && line[i] == ':' && (i + 1 == line.size() || line[i + 1] == ' ');
}

// Driver files copied from web pages often lose the indentation of their `key: |` blocks,
// which makes them invalid YAML. Indents the lines after such a key up to the next top-level
// key; empty when there was nothing to mend.
std::string reindent_blocks(const std::string& text) {
  std::string out;
  bool in_block = false;
  bool changed = false;
  size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (top_level_key(line) || (!line.empty() && line[0] == '#' && !in_block)) {
      const auto bar = line.find_last_not_of(' ');
      in_block =
          top_level_key(line) && bar != std::string::npos && (line[bar] == '|' || line[bar] == '>');
      out += line + "\n";
      continue;
    }
    if (in_block && !line.empty() && line[0] != ' ') {
      out += "  " + line + "\n";
      changed = true;
      continue;
    }
    out += line + "\n";
  }
  return changed ? out : std::string{};
}

tl::expected<std::vector<YAML::Node>, std::string> load_yaml(const std::string& text,
                                                             const std::string& source,
                                                             std::vector<std::string>* notes) {
  try {
    return YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    const std::string mended = reindent_blocks(text);
    if (!mended.empty()) {
      try {
        auto docs = YAML::LoadAll(mended);
        if (notes) {
          notes->push_back(source +
                           ": the lines under its `key: |` blocks were not indented (not valid "
                           "YAML); read each block as the lines up to the next key");
        }
        return docs;
      } catch (const YAML::Exception&) {
      }
    }
    return tl::make_unexpected(source + ": " + e.what());
  }
}

// A scalar field as T, or an error naming the file, the field and the value.
template <typename T>
tl::expected<T, std::string> get(const YAML::Node& n, const std::string& key,
                                 const std::string& source, const char* what) {
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    std::string text = n.IsScalar() ? n.Scalar() : std::string("(not a scalar)");
    return tl::make_unexpected(source + ": " + key + ": '" + text + "' is not " + what);
  }
}

tl::expected<property_map, std::string> properties_block(const YAML::Node& n,
                                                         const std::string& key,
                                                         const std::string& source) {
  if (n.IsNull()) return property_map{};
  if (n.IsMap()) {  // also accept a YAML mapping
    property_map out;
    for (const auto& kv : n) out[kv.first.as<std::string>()] = kv.second.as<std::string>();
    return out;
  }
  auto text = get<std::string>(n, key, source, "a properties text block");
  if (!text) return tl::make_unexpected(text.error());
  auto props = parse_properties_text(*text);
  if (!props) return tl::make_unexpected(source + ": " + key + ": " + props.error());
  return props;
}

}  // namespace

tl::expected<omb_driver, std::string> parse_omb_driver(const std::string& yaml,
                                                       const std::string& source) {
  omb_driver d;
  auto docs = load_yaml(yaml, source, &d.notes);
  if (!docs) return tl::make_unexpected(docs.error());
  if (docs->size() != 1 || !(*docs)[0].IsMap()) {
    return tl::make_unexpected(source + ": a driver file holds one YAML mapping");
  }
  for (const auto& kv : (*docs)[0]) {
    const auto key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "name") {
      auto s = get<std::string>(v, key, source, "text");
      if (!s) return tl::make_unexpected(s.error());
      d.name = *s;
    } else if (key == "driverClass") {
      // OMB picks its Java driver by this; silt-perf always speaks Kafka.
    } else if (key == "replicationFactor") {
      auto n = get<int>(v, key, source, "an integer");
      if (!n) return tl::make_unexpected(n.error());
      d.replication_factor = *n;
    } else if (key == "topicConfig" || key == "commonConfig" || key == "producerConfig" ||
               key == "consumerConfig") {
      auto props = properties_block(v, key, source);
      if (!props) return tl::make_unexpected(props.error());
      auto& to = key == "topicConfig"      ? d.topic_config
                 : key == "commonConfig"   ? d.common_config
                 : key == "producerConfig" ? d.producer_config
                                           : d.consumer_config;
      to = std::move(*props);
    } else {
      d.notes.push_back(concat({source, ": ignored driver field ", key,
                                " (silt-perf reads name, replicationFactor and the four config "
                                "blocks)"}));
    }
  }
  if (const auto it = d.common_config.find("bootstrap.servers"); it != d.common_config.end()) {
    d.bootstrap_servers = it->second;
    d.common_config.erase(it);
  }
  return d;
}

const field_names& omb_field_names() {
  static const field_names names = {
      {"bootstrap_servers", "bootstrap.servers (driver commonConfig, or --bootstrap-server)"},
      {"topics", "topics"},
      {"partitions_per_topic", "partitionsPerTopic"},
      {"replication_factor", "replicationFactor (driver)"},
      {"producers_per_topic", "producersPerTopic"},
      {"groups_per_topic", "subscriptionsPerTopic"},
      {"consumers_per_group", "consumerPerSubscription"},
      {"record_size", "messageSize"},
      {"random_ratio", "randomBytesRatio"},
      {"random_pool_size", "randomizedPayloadPoolSize"},
      {"send_rate", "producerRate"},
      {"search_start_rate", "producerStartRate"},
      {"warmup_s", "warmupDurationMinutes (in seconds)"},
      {"test_s", "testDurationMinutes (in seconds)"},
      {"reporting_interval_s", "--reporting-interval"},
      {"backlog_bytes", "consumerBacklogSizeGB (in bytes)"},
      {"backlog_drain_ratio", "backlogDrainRatio"},
  };
  return names;
}

tl::expected<std::vector<workload>, std::string> parse_omb_workloads(
    const std::string& yaml, const std::string& source, const omb_driver& driver,
    std::vector<std::vector<std::string>>& notes) {
  auto docs = load_yaml(yaml, source, nullptr);
  if (!docs) return tl::make_unexpected(docs.error());
  std::vector<workload> out;
  for (size_t doc = 0; doc < docs->size(); ++doc) {
    const YAML::Node& n = (*docs)[doc];
    if (n.IsNull()) continue;  // an empty document, e.g. after a trailing ---
    const std::string where =
        docs->size() > 1 ? source + " (document " + std::to_string(doc + 1) + ")" : source;
    if (!n.IsMap()) return tl::make_unexpected(where + ": a workload is a YAML mapping");
    std::vector<std::string> wn;
    workload w;
    // OMB's defaults (Workload.java): unset counts are 0, which validate() then names.
    w.name = fs::path(source).stem().string();
    w.topics = 0;
    w.partitions_per_topic = 0;
    w.producers_per_topic = 0;
    w.groups_per_topic = 0;
    w.consumers_per_group = 0;
    w.record_size = 0;
    w.send_rate = 0;
    w.warmup_s = 60;
    w.test_s = 0;
    w.reporting_interval_s = 10;
    w.fill = payload_fill::zeros;
    bool randomized = false;
    double random_bytes_ratio = 0;
    int pool_size = 0;
    bool test_set = false;
    std::string payload_file;

    for (const auto& kv : n) {
      const auto key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      tl::expected<void, std::string> r;
      auto as_int = [&](int& to) -> tl::expected<void, std::string> {
        auto x = get<long long>(v, key, where, "an integer");
        if (!x) return tl::make_unexpected(x.error());
        if (*x < INT32_MIN || *x > INT32_MAX) {
          return tl::make_unexpected(concat({where, ": ", key, ": ", std::to_string(*x)}) +
                                     " is out of range");
        }
        to = static_cast<int>(*x);
        return {};
      };
      auto as_double = [&](double& to, double scale) -> tl::expected<void, std::string> {
        auto x = get<double>(v, key, where, "a number");
        if (!x) return tl::make_unexpected(x.error());
        to = *x * scale;
        return {};
      };
      if (key == "name") {
        auto s = get<std::string>(v, key, where, "text");
        if (!s) return tl::make_unexpected(s.error());
        w.name = *s;
      } else if (key == "topics") {
        r = as_int(w.topics);
      } else if (key == "partitionsPerTopic") {
        r = as_int(w.partitions_per_topic);
      } else if (key == "keyDistributor") {
        auto s = get<std::string>(v, key, where, "text");
        if (!s) return tl::make_unexpected(s.error());
        const auto k = parse_key_distributor(*s);
        if (!k) {
          return tl::make_unexpected(where + ": keyDistributor: '" + *s +
                                     "' is not NO_KEY, KEY_ROUND_ROBIN or RANDOM_NANO");
        }
        w.keys = *k;
      } else if (key == "messageSize") {
        r = as_int(w.record_size);
      } else if (key == "payloadFile") {
        auto s = get<std::string>(v, key, where, "a path");
        if (!s) return tl::make_unexpected(s.error());
        payload_file = *s;
      } else if (key == "useRandomizedPayloads") {
        auto b = get<bool>(v, key, where, "true or false");
        if (!b) return tl::make_unexpected(b.error());
        randomized = *b;
      } else if (key == "randomBytesRatio") {
        r = as_double(random_bytes_ratio, 1);
      } else if (key == "randomizedPayloadPoolSize") {
        r = as_int(pool_size);
      } else if (key == "subscriptionsPerTopic") {
        r = as_int(w.groups_per_topic);
      } else if (key == "consumerPerSubscription") {
        r = as_int(w.consumers_per_group);
      } else if (key == "producersPerTopic") {
        r = as_int(w.producers_per_topic);
      } else if (key == "producerRate") {
        r = as_double(w.send_rate, 1);
      } else if (key == "producerStartRate") {
        r = as_double(w.search_start_rate, 1);
      } else if (key == "consumerBacklogSizeGB") {
        r = as_double(w.backlog_bytes, 1024.0 * 1024 * 1024);  // OMB: GB of 1024^3 bytes
      } else if (key == "backlogDrainRatio") {
        r = as_double(w.backlog_drain_ratio, 1);
      } else if (key == "testDurationMinutes") {
        r = as_double(w.test_s, 60);
        test_set = true;
      } else if (key == "warmupDurationMinutes") {
        r = as_double(w.warmup_s, 60);
      } else {
        wn.push_back(concat({where, ": ignored workload field ", key}));
      }
      if (!r) return tl::make_unexpected(r.error());
    }

    if (randomized) {
      w.random_ratio = random_bytes_ratio;
      w.random_pool_size = pool_size;
      if (!payload_file.empty())
        wn.push_back(where + ": useRandomizedPayloads: payloadFile not used");
    } else if (!payload_file.empty()) {
      fs::path p(payload_file);
      if (!fs::exists(p) && p.is_relative()) {
        const fs::path beside = fs::path(source).parent_path() / p;
        if (fs::exists(beside)) p = beside;
      }
      if (fs::exists(p)) {
        w.payload_file = p.string();
      } else {
        wn.push_back(concat({where, ": payloadFile ", payload_file}) +
                     " not found (here or beside the workload file): records carry random "
                     "bytes of messageSize instead");
        w.random_ratio = 1;
        w.random_pool_size = 1;
      }
    } else {
      w.random_ratio = 1;  // no payload given: one random payload
      w.random_pool_size = 1;
    }
    if (!test_set || w.test_s == 0) {
      wn.push_back(where +
                   ": no testDurationMinutes: the test runs until interrupted (Ctrl-C), as in OMB");
      w.test_s = 0;
    }

    w.bootstrap_servers = driver.bootstrap_servers;
    w.replication_factor = driver.replication_factor;
    w.common_configs = driver.common_config;
    w.topic_configs = driver.topic_config;
    w.producer_configs = driver.producer_config;
    w.consumer_configs = driver.consumer_config;
    out.push_back(std::move(w));
    notes.push_back(std::move(wn));
  }
  if (out.empty()) return tl::make_unexpected(source + ": no workload in it");
  return out;
}

}  // namespace silt::perf
