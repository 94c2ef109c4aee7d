#include "client_config.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string_view>

#include "base/mutex.h"

namespace silt::perf {

namespace {

// Java client properties librdkafka has no counterpart for and does not need: serializers,
// JMX and metrics plumbing, blocking behaviour of the Java API, the Java partitioner.
constexpr std::string_view java_only[] = {
    "key.serializer",
    "value.serializer",
    "key.deserializer",
    "value.deserializer",
    "max.block.ms",
    "interceptor.classes",
    "metric.reporters",
    "metrics.num.samples",
    "metrics.sample.window.ms",
    "metrics.recording.level",
    "auto.include.jmx.reporter",
    "enable.metrics.push",
    "partitioner.class",
    "partitioner.ignore.keys",
    "partitioner.adaptive.partitioning.enable",
    "partitioner.availability.timeout.ms",
    "default.api.timeout.ms",
    "client.dns.lookup",
    "max.poll.records",
    "retry.backoff.max.ms",
    "internal.leave.group.on.close",
    "exclude.internal.topics",
    "security.providers",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
    "ssl.keystore.type",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "sasl.login.callback.handler.class",
    "sasl.client.callback.handler.class",
    "sasl.login.class",
};

bool is_java_only(std::string_view key) {
  for (const auto name : java_only) {
    if (name == key) return true;
  }
  return false;
}

// Java names librdkafka spells differently, with the same value.
struct rename {
  std::string_view java;
  std::string_view librdkafka;
};
constexpr rename renamed[] = {
    {"fetch.max.wait.ms", "fetch.wait.max.ms"},
    {"max.request.size", "message.max.bytes"},
};

const rename* find_rename(std::string_view key) {
  for (const auto& r : renamed) {
    if (r.java == key) return &r;
  }
  return nullptr;
}

struct scratch_conf {
  rd_kafka_conf_t* c = rd_kafka_conf_new();
  scratch_conf() = default;
  scratch_conf(const scratch_conf&) = delete;
  scratch_conf& operator=(const scratch_conf&) = delete;
  ~scratch_conf() { rd_kafka_conf_destroy(c); }
};

// "org.apache.kafka.clients.consumer.CooperativeStickyAssignor,RangeAssignor" -> librdkafka
// names; empty when one has none.
std::string assignors(const std::string& java, std::string* unknown) {
  std::string out;
  size_t pos = 0;
  while (pos <= java.size()) {
    auto end = java.find(',', pos);
    if (end == std::string::npos) end = java.size();
    std::string item = java.substr(pos, end - pos);
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    const auto dot = item.rfind('.');
    const std::string cls = dot == std::string::npos ? item : item.substr(dot + 1);
    std::string name;
    if (cls == "RangeAssignor" || item == "range") name = "range";
    if (cls == "RoundRobinAssignor" || item == "roundrobin") name = "roundrobin";
    if (cls == "CooperativeStickyAssignor" || item == "cooperative-sticky") {
      name = "cooperative-sticky";
    }
    if (name.empty()) {
      *unknown = item;
      return {};
    }
    if (!out.empty()) out += ",";
    out += name;
    pos = end + 1;
  }
  return out;
}

// The value of `key="..."` in a JAAS line; empty when absent.
std::string jaas_value(const std::string& jaas, const std::string& key) {
  const auto at = jaas.find(key + "=\"");
  if (at == std::string::npos) return {};
  const auto start = at + key.size() + 2;
  const auto end = jaas.find('"', start);
  return end == std::string::npos ? std::string{} : jaas.substr(start, end - start);
}

}  // namespace

const char* to_string(client_role k) {
  switch (k) {
    case client_role::admin:
      return "admin";
    case client_role::producer:
      return "producer";
    case client_role::consumer:
      return "consumer";
  }
  return "?";
}

property_map merge(const property_map& common, const property_map& specific) {
  property_map out = common;
  for (const auto& [k, v] : specific) out[k] = v;
  return out;
}

tl::expected<librdkafka_properties, std::string> to_librdkafka(const property_map& props,
                                                               client_role kind) {
  librdkafka_properties out;
  const std::string who = to_string(kind);
  scratch_conf scratch;
  char err[512];
  auto set = [&](const std::string& k, const std::string& v) -> tl::expected<void, std::string> {
    const auto r = rd_kafka_conf_set(scratch.c, k.c_str(), v.c_str(), err, sizeof err);
    if (r != RD_KAFKA_CONF_OK) {
      return tl::make_unexpected(concat({who, " property ", k, "=", v, ": ", err}));
    }
    out.settings.emplace_back(k, v);
    return {};
  };

  for (const auto& [key, value] : props) {
    if (is_java_only(key)) {
      out.notes.push_back(concat({"ignored ", who, " property ", key, "=", value,
                                  ": Java clients only, librdkafka has no such setting"}));
      continue;
    }
    if (const rename* rn = find_rename(key); rn != nullptr) {
      const std::string to(rn->librdkafka);
      if (auto r = set(to, value); !r) return tl::make_unexpected(r.error());
      out.notes.push_back(
          concat({who, " property ", key, "=", value, " set as librdkafka's ", to}));
      continue;
    }
    if (key == "batch.size" && value == "0") {
      // Java's batch.size=0 turns batching off; librdkafka's batch.size starts at 1 byte.
      if (kind == client_role::producer) {
        if (auto r = set("batch.num.messages", "1"); !r) return tl::make_unexpected(r.error());
        out.notes.push_back(
            "producer property batch.size=0 (Java: no batching) set as librdkafka's "
            "batch.num.messages=1: librdkafka puts one partition's batch in a produce request, "
            "so every record goes in a request of its own, where the Java client would group "
            "the single-record batches of several partitions");
      }
      continue;
    }
    if (key == "buffer.memory") {
      char* end = nullptr;
      const long long bytes = std::strtoll(value.c_str(), &end, 10);
      if (end == value.c_str() || *end != '\0' || bytes <= 0) {
        return tl::make_unexpected(
            concat({who, " property buffer.memory=", value, ": not a positive number of bytes"}));
      }
      if (kind == client_role::producer) {
        const std::string kb = std::to_string((bytes + 1023) / 1024);
        if (auto r = set("queue.buffering.max.kbytes", kb); !r)
          return tl::make_unexpected(r.error());
        out.notes.push_back(concat({"producer property buffer.memory=", value,
                                    " set as librdkafka's queue.buffering.max.kbytes=", kb}));
      }
      continue;
    }
    if (key == "send.buffer.bytes" || key == "receive.buffer.bytes") {
      const std::string to = concat({"socket.", key});
      const std::string v = value == "-1" ? "0" : value;  // both: the OS default
      if (auto r = set(to, v); !r) return tl::make_unexpected(r.error());
      out.notes.push_back(
          concat({who, " property ", key, "=", value, " set as librdkafka's ", to, "=", v}));
      continue;
    }
    if (key == "partition.assignment.strategy") {
      std::string unknown;
      const std::string names = assignors(value, &unknown);
      if (names.empty()) {
        return tl::make_unexpected(concat({who, " property partition.assignment.strategy=", value,
                                           ": librdkafka has no assignor like ", unknown,
                                           " (it has range, roundrobin and cooperative-sticky)"}));
      }
      if (auto r = set(key, names); !r) return tl::make_unexpected(r.error());
      if (names != value) {
        out.notes.push_back(concat({who, " property partition.assignment.strategy=", value,
                                    " set as librdkafka's ", names}));
      }
      continue;
    }
    if (key == "sasl.jaas.config") {
      const auto user = jaas_value(value, "username");
      const auto password = jaas_value(value, "password");
      if (user.empty()) {
        return tl::make_unexpected(concat({who,
                                           " property sasl.jaas.config: librdkafka takes no JAAS "
                                           "configuration and no username=\"...\" was found in "
                                           "it to pass as sasl.username"}));
      }
      if (auto r = set("sasl.username", user); !r) return tl::make_unexpected(r.error());
      if (auto r = set("sasl.password", password); !r) return tl::make_unexpected(r.error());
      out.notes.push_back(concat(
          {who, " property sasl.jaas.config set as librdkafka's sasl.username and sasl.password"}));
      continue;
    }
    const auto r = rd_kafka_conf_set(scratch.c, key.c_str(), value.c_str(), err, sizeof err);
    if (r == RD_KAFKA_CONF_UNKNOWN) {
      out.notes.push_back(concat(
          {"ignored ", who, " property ", key, "=", value, ": librdkafka has no such property"}));
      continue;
    }
    if (r == RD_KAFKA_CONF_INVALID) {
      return tl::make_unexpected(concat({who, " property ", key, "=", value, ": ", err}));
    }
    out.settings.emplace_back(key, value);
  }

  if (kind == client_role::producer) {
    if (!props.contains("linger.ms") && !props.contains("queue.buffering.max.ms")) {
      if (auto r = set("linger.ms", "0"); !r) return tl::make_unexpected(r.error());
    }
    if (!props.contains("max.in.flight.requests.per.connection") &&
        !props.contains("max.in.flight")) {
      if (auto r = set("max.in.flight.requests.per.connection", "5"); !r) {
        return tl::make_unexpected(r.error());
      }
    }
    if (!props.contains("partitioner")) {
      if (auto r = set("partitioner", "murmur2_random"); !r) return tl::make_unexpected(r.error());
    }
    if (!props.contains("buffer.memory") && !props.contains("queue.buffering.max.kbytes")) {
      if (auto r = set("queue.buffering.max.kbytes", "32768"); !r) {
        return tl::make_unexpected(r.error());
      }
    }
  }
  return out;
}

namespace {

struct log_limiter {
  base::mutex mu;
  std::map<std::string, std::chrono::steady_clock::time_point> last GUARDED_BY(mu);
};

void log_line(const rd_kafka_t* /*rk*/, int level, const char* fac, const char* buf) {
  if (level > 4) return;  // LOG_WARNING
  static log_limiter limiter;
  const auto now = std::chrono::steady_clock::now();
  {
    base::lock_guard l(limiter.mu);
    auto [it, fresh] = limiter.last.try_emplace(fac, now);
    if (!fresh) {
      if (now - it->second < std::chrono::seconds(10)) return;
      it->second = now;
    }
  }
  std::fprintf(stderr, "silt-perf: librdkafka %s: %s\n", fac, buf);
}

}  // namespace

void log_to_stderr(rd_kafka_conf_t* conf) {
  rd_kafka_conf_set_log_cb(conf, &log_line);
}

tl::expected<conf_ptr, std::string> make_conf(const librdkafka_properties& p,
                                              const std::string& bootstrap) {
  conf_ptr conf(rd_kafka_conf_new());
  char err[512];
  for (const auto& [k, v] : p.settings) {
    if (rd_kafka_conf_set(conf.get(), k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      return tl::make_unexpected(concat({"property ", k, "=", v, ": ", err}));
    }
  }
  if (rd_kafka_conf_set(conf.get(), "bootstrap.servers", bootstrap.c_str(), err, sizeof err) !=
      RD_KAFKA_CONF_OK) {
    return tl::make_unexpected("bootstrap servers '" + bootstrap + "': " + err);
  }
  return conf;
}

}  // namespace silt::perf
