// Kafka client properties as users write them for Java clients (AutoMQ's and OMB's tools are
// Java), turned into librdkafka's. A name librdkafka knows passes through; a Java name with a
// librdkafka equivalent is renamed (fetch.max.wait.ms -> fetch.wait.max.ms, buffer.memory ->
// queue.buffering.max.kbytes, batch.size=0 -> batch.num.messages=1, ...); a Java-only name
// (key.serializer, max.block.ms, ...) is dropped. Every rename and drop gives a note that the
// run's warnings repeat, so nothing disappears silently; a value librdkafka refuses is an
// error.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <librdkafka/rdkafka.h>
#include <tl/expected.hpp>

#include "workload.h"

namespace silt::perf {

enum class client_role { admin, producer, consumer };
[[nodiscard]] const char* to_string(client_role k);

struct librdkafka_properties {
  std::vector<std::pair<std::string, std::string>> settings;  // in the order to set them
  std::vector<std::string> notes;                             // renames and drops, for warnings
};

// `props` (Java names) as librdkafka settings for a client of `kind`. For producers, adds
// defaults of the Java producer where the properties leave them, so that a run compares with
// one of the Java tools:
//   linger.ms=0: librdkafka's 5 ms would add to every produce latency;
//   max.in.flight.requests.per.connection=5: librdkafka's million lets a producer with
//     linger.ms=0 send a request per record however loaded the broker is, where the Java
//     producer batches what accumulates while five requests are out (at 20,000 records/s
//     on a small machine: 9 ms median latency with 5, a second with a million);
//   queue.buffering.max.kbytes=32768, the Java buffer.memory of 32 MiB: librdkafka's 1 GiB
//     per producer, times 64 producers, is more than a load generator should hold;
//   partitioner=murmur2_random, the Java hash of keys (keyless records stay sticky).
[[nodiscard]] tl::expected<librdkafka_properties, std::string> to_librdkafka(
    const property_map& props, client_role kind);

// The common properties with the kind-specific ones over them.
[[nodiscard]] property_map merge(const property_map& common, const property_map& specific);

struct conf_deleter {
  void operator()(rd_kafka_conf_t* c) const { rd_kafka_conf_destroy(c); }
};
using conf_ptr = std::unique_ptr<rd_kafka_conf_t, conf_deleter>;

// A librdkafka configuration holding the settings, then `bootstrap` as bootstrap.servers.
[[nodiscard]] tl::expected<conf_ptr, std::string> make_conf(const librdkafka_properties& p,
                                                            const std::string& bootstrap);

// Sends the client's log lines to stderr as "silt-perf: librdkafka <FACILITY>: <message>",
// warnings and worse only, and one facility at most once every 10 s (an unreachable broker
// would otherwise fill the terminal while the run reports it in its warnings).
void log_to_stderr(rd_kafka_conf_t* conf);

}  // namespace silt::perf
