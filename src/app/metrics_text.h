// The broker's metrics in Prometheus text format, for the metrics endpoint (metrics.listener):
// request rates and latencies per API, bytes in and out per topic, the WAL, uploads, the
// object store, the caches, groups, connections and the process. Kafka's names (as its JMX
// exporter spells them) where Kafka has the metric, `silt_` names for the rest; every
// metric is listed in docs/operations.md.
//
// Reads counters and snapshots only (atomics and short locks): safe on the thread that serves
// the endpoint.
#pragma once

#include <string>

#include "app/node.h"
#include "net/server.h"

namespace silt::app {

[[nodiscard]] std::string render_metrics(node& broker, net::server& server);

}  // namespace silt::app
