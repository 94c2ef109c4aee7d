// What the cluster tests share: a member's options with short intervals, and waiting for a
// condition.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include "cluster/membership.h"

namespace silt::cluster::testing {

// Node `id` on localhost, rack r0/r1, heartbeats every 50 ms, a 500 ms session.
inline membership_options member_options(int32_t id) {
  membership_options o;
  o.self.node = base::node_id(id);
  o.self.host = "localhost";
  o.self.port = 9000 + id;
  o.self.rack = "r" + std::to_string(id % 2);
  o.self.wal_location = "/wal/" + std::to_string(id);
  o.self.machine = metadata::same_machine_id();
  o.heartbeat_interval = std::chrono::milliseconds(50);
  o.session_timeout = std::chrono::milliseconds(500);
  return o;
}

// Whether done() holds within `within`, polled every 10 ms.
template <typename F>
bool eventually(F done, std::chrono::milliseconds within = std::chrono::milliseconds(5000)) {
  const auto end = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace silt::cluster::testing
