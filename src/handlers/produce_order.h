// Produce requests of one connection append in the order they arrived. Kafka handles a
// connection's requests one at a time; Silt runs them concurrently (answering in order), so a
// produce that waits before its appends (for room in the WAL, for a partition's producer state
// to load) would otherwise let the next one overtake it: records out of order, and an
// idempotent producer's pipelined batches refused as out of sequence.
//
// A produce takes a ticket when it starts (before it can suspend), waits for its turn before
// its first append and releases the turn once its appends are issued (not durable: the next
// one may append while this one waits for the WAL). Every wait before the release is bounded
// by the request's timeout, so a turn is never held for ever. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include <boost/asio/awaitable.hpp>

#include "base/mutex.h"
#include "handlers/data_waiters.h"

namespace silt::handlers {

class produce_order {
 public:
  struct ticket {
    uint64_t connection = 0;
    uint64_t number = 0;
  };

  [[nodiscard]] ticket take(uint64_t connection_id);
  // Until every earlier ticket of the connection was released.
  [[nodiscard]] boost::asio::awaitable<void> wait_turn(ticket t);
  // Exactly once per ticket, waited for or not.
  void release(ticket t);

 private:
  struct line {
    uint64_t next = 0;            // the next ticket handed out
    uint64_t serving = 0;         // tickets below it are released
    std::set<uint64_t> released;  // released out of turn (never waited for)
    std::map<uint64_t, data_waiters::waiter_ptr> waiting;
  };
  base::mutex mu_;
  // Only while produces are in flight on the connection.
  std::unordered_map<uint64_t, line> lines_ GUARDED_BY(mu_);
};

// Releases a ticket when the produce ends, whichever way.
class produce_turn {
 public:
  produce_turn(produce_order& order, produce_order::ticket t) : order_(order), ticket_(t) {}
  produce_turn(const produce_turn&) = delete;
  produce_turn& operator=(const produce_turn&) = delete;
  ~produce_turn() { release(); }
  void release() {
    if (!released_) order_.release(ticket_);
    released_ = true;
  }
  [[nodiscard]] const produce_order::ticket& ticket() const { return ticket_; }

 private:
  produce_order& order_;
  produce_order::ticket ticket_;
  bool released_ = false;
};

}  // namespace silt::handlers
