// The run's topics through the admin API: created with their partitions, replication factor
// and topic configs (rd_kafka_CreateTopics), or found when they exist, then awaited until the
// metadata shows every partition with a leader. Nothing is deleted unless asked.
#pragma once

#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "client_config.h"
#include "producers.h"
#include "workload.h"

namespace silt::perf {

// The workload's topics (topic_prefix set), ready to use. A topic that exists is used when it
// has the partitions asked for, or when reuse_topics says to take it as it is; else it is an
// error. `notes` says which topics existed and what could not be applied to them.
[[nodiscard]] tl::expected<std::vector<topic_layout>, std::string> prepare_topics(
    const workload& w, const librdkafka_properties& admin, std::vector<std::string>& notes);

[[nodiscard]] tl::expected<void, std::string> delete_topics(const std::vector<std::string>& names,
                                                            const librdkafka_properties& admin,
                                                            const std::string& bootstrap);

}  // namespace silt::perf
