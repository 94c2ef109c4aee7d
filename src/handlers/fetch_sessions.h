// Incremental fetch sessions (KIP-227). A client that opens a session (session id 0, epoch 0)
// gets an id; its later fetches (same id, next epoch) name only partitions that changed and
// get back only partitions with news (records, a moved high watermark or log start, an
// error). The broker keeps each session's partitions and what it last told about them.
// At most `slots` sessions live at once; the least recently used is evicted, as Kafka does
// when its cache is full (the client then falls back to a full fetch).
//
// Thread-safe: mu_ guards the table; a session is used by one fetch at a time (its client
// waits for the answer before it sends the next epoch).
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace silt::handlers {

struct session_partition {
  int64_t fetch_offset = 0;
  int32_t max_bytes = 0;
  int64_t log_start_offset = -1;  // the client's (unused by a single broker)
  // What the last response said; -2: never answered.
  int64_t last_high_watermark = -2;
  int64_t last_log_start = -2;
};

struct fetch_session {
  int32_t id = 0;
  int32_t next_epoch = 1;
  // (topic, partition) in the order the client first named them.
  std::map<std::pair<std::string, int32_t>, session_partition> partitions;
};

class fetch_sessions {
 public:
  explicit fetch_sessions(int32_t slots = 1000) : slots_(slots) {}
  void set_slots(int32_t slots) { slots_ = slots; }

  // A new session (nullptr when sessions are disabled: slots = 0).
  [[nodiscard]] std::shared_ptr<fetch_session> create();
  // The session with this id, or nullptr.
  [[nodiscard]] std::shared_ptr<fetch_session> find(int32_t id);
  void remove(int32_t id);

 private:
  std::mutex mu_;
  int32_t slots_;
  int32_t next_id_ = 1;     // guarded by mu_
  std::list<int32_t> lru_;  // guarded by mu_; most recent at the back
  std::unordered_map<int32_t,
                     std::pair<std::shared_ptr<fetch_session>, std::list<int32_t>::iterator>>
      sessions_;  // guarded by mu_
};

}  // namespace silt::handlers
