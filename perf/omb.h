// `silt-perf omb`: runs OpenMessaging Benchmark workload files with an OMB Kafka driver file,
//
//   silt-perf omb --driver DRIVER.yaml [--bootstrap-server H] [--output FILE.json]
//                 [--reporting-interval S] WORKLOAD.yaml...
//
// one workload after the other. The workload fields are OMB's Workload.java (topics,
// partitionsPerTopic, keyDistributor, messageSize, payloadFile, useRandomizedPayloads,
// randomBytesRatio, randomizedPayloadPoolSize, subscriptionsPerTopic, consumerPerSubscription,
// producersPerTopic, producerRate, consumerBacklogSizeGB, backlogDrainRatio,
// testDurationMinutes, warmupDurationMinutes; producerStartRate of some forks), with OMB's
// defaults; a file may hold several workloads as YAML documents. The driver's fields are
// those of OMB's Kafka driver (name, driverClass (ignored), replicationFactor, and the Java
// properties blocks topicConfig, commonConfig, producerConfig, consumerConfig);
// bootstrap.servers comes from commonConfig unless --bootstrap-server is given. Fields silt-perf
// does not know are ignored with a warning, never silently.
//
// As in OMB: producerRate 0 searches for the maximum sustainable rate (rate_control.h);
// testDurationMinutes 0 or absent runs the test until interrupted; progress every 10 s. Unlike
// OMB, a backlog (consumerBacklogSizeGB) is built and read after the test phase and reported
// on its own (the catch-up phase) rather than inside the test.
#pragma once

#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "workload.h"

namespace silt::perf {

struct omb_driver {
  std::string name;
  std::string bootstrap_servers;  // from commonConfig
  int replication_factor = -1;
  property_map topic_config;
  property_map common_config;  // without bootstrap.servers
  property_map producer_config;
  property_map consumer_config;
  std::vector<std::string> notes;  // ignored fields and lenient readings
};

// `source` names the file in errors.
[[nodiscard]] tl::expected<omb_driver, std::string> parse_omb_driver(const std::string& yaml,
                                                                     const std::string& source);

// The workloads of one file (one per YAML document), each with the driver applied. A relative
// payloadFile is looked for in the current directory, then beside the workload file
// (`source`); one that cannot be found is replaced by a random payload, with a note. `notes`
// receives one entry per workload.
[[nodiscard]] tl::expected<std::vector<workload>, std::string> parse_omb_workloads(
    const std::string& yaml, const std::string& source, const omb_driver& driver,
    std::vector<std::vector<std::string>>& notes);

// The OMB field behind each workload field, for validate()'s messages.
[[nodiscard]] const field_names& omb_field_names();

struct omb_options {
  std::string driver;
  std::string bootstrap_server;
  std::string output;
  double reporting_interval_s = 10;
  std::vector<std::string> workloads;
  bool help = false;
};
[[nodiscard]] tl::expected<omb_options, std::string> parse_omb_args(
    const std::vector<std::string>& args);

// The report path of the i-th of n workloads: `output` itself when n is 1, else with
// "-<i>-<name>" before its extension.
[[nodiscard]] std::string omb_output_path(const std::string& output, size_t i, size_t n,
                                          const std::string& name);

// The arguments after `omb`; returns the exit code (the first non-zero of the workloads').
[[nodiscard]] int omb_main(const std::vector<std::string>& args);

}  // namespace silt::perf
