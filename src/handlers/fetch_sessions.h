// Incremental fetch sessions (KIP-227). A client that opens a session (session id 0, epoch 0)
// gets an id; its later fetches (same id, next epoch) name only partitions that changed and
// get back only partitions with news (records, a moved high watermark or log start, an
// error). The broker keeps each session's partitions and what it last told about them.
//
// Epochs follow Kafka's FetchManager: a request is accepted only with the session's current
// epoch, which then advances once (wrapping from INT32_MAX to 1); a request with any other
// epoch gets INVALID_FETCH_SESSION_EPOCH and changes nothing. When two requests of one session
// race, the second one to be checked fails, or, if it carries the next epoch already, the
// first one fails when it writes back its answer (Kafka's "possible duplicate request").
//
// At most `slots` sessions live at once. A new session takes the place of one that was not
// used for `eviction_ms`, or else of one older than that with fewer partitions, as Kafka's
// FetchSessionCache decides; if there is none, the client gets no session (id 0) and keeps
// sending full fetches.
//
// Thread-safe: mu_ guards the table; each session's `mu` guards its epoch and partitions. A
// fetch takes a session's lock to check and advance the epoch and copies what it needs, and
// takes it again to write back what its response said: nothing refers into a session across
// the long poll. Lock order: a session's `mu` is never held while calling into the table.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/ids.h"
#include "base/mutex.h"

namespace silt::handlers {

struct session_partition {
  base::offset fetch_offset{};
  int32_t max_bytes = 0;
  std::optional<base::offset> log_start_offset;  // the client's (unused by a single broker)
  // What the last response said; none: never answered, or an error (so that the partition is
  // answered again once the error is gone), or no log start.
  std::optional<base::offset> last_high_watermark;
  std::optional<base::offset> last_log_start;
};

// An offset field of a Fetch request or response, where -1 (any negative value) says none.
[[nodiscard]] inline std::optional<base::offset> known_offset(int64_t v) {
  return v < 0 ? std::nullopt : std::optional<base::offset>(v);
}

using session_key = std::pair<std::string, int32_t>;  // (topic, partition)

// The epoch a session expects after one with `epoch` was accepted.
[[nodiscard]] constexpr int32_t next_session_epoch(int32_t epoch) {
  return epoch == INT32_MAX ? 1 : epoch + 1;
}

// A session's partitions in the order its fetches read them, as Kafka's FetchSession keeps
// them: a partition the session gains goes last, and one whose response carried records moves
// last. A response fills up (fetch max bytes) with the first partitions that have records, so
// without the move a busy partition early in the order would starve the ones after it.
class session_partitions {
 public:
  session_partitions() = default;
  // Moved only: the index points into the list, whose nodes a move keeps.
  session_partitions(const session_partitions&) = delete;
  session_partitions& operator=(const session_partitions&) = delete;
  session_partitions(session_partitions&&) = default;
  session_partitions& operator=(session_partitions&&) = default;

  // The partition's entry; a new one is added last.
  session_partition& upsert(const session_key& key);
  [[nodiscard]] session_partition* find(const session_key& key);
  void erase(const session_key& key);
  // Read last by the next fetches (it gave records).
  void move_last(const session_key& key);
  [[nodiscard]] size_t size() const { return index_.size(); }
  [[nodiscard]] bool empty() const { return index_.empty(); }
  // In order.
  [[nodiscard]] auto begin() const { return order_.cbegin(); }
  [[nodiscard]] auto end() const { return order_.cend(); }

 private:
  using entries = std::list<std::pair<session_key, session_partition>>;
  entries order_;
  std::map<session_key, entries::iterator> index_;
};

inline constexpr size_t max_unknown_session_partitions = 1000;

struct fetch_session {
  fetch_session(int32_t session_id, int64_t created) : id(session_id), created_ms(created) {}
  const int32_t id;
  const int64_t created_ms;
  base::mutex mu;
  int32_t epoch GUARDED_BY(mu) = 1;  // the next request's
  session_partitions partitions GUARDED_BY(mu);
  // The partitions added while this broker did not know them (no such topic or partition),
  // at most max_unknown_session_partitions: a client cannot grow a session without bound
  // with names that exist nowhere.
  std::set<session_key> unknown GUARDED_BY(mu);
  // Copies of what the table's eviction needs, readable without `mu`.
  std::atomic<size_t> size{0};
  std::atomic<int64_t> last_used_ms{0};
};

class fetch_sessions {
 public:
  explicit fetch_sessions(int32_t slots = 1000,
                          std::chrono::milliseconds eviction = std::chrono::minutes(2))
      : slots_(slots), eviction_ms_(eviction.count()) {}
  void set_slots(int32_t slots);

  // A new session holding `partitions` (its next request must carry epoch 1), or nullptr when
  // sessions are disabled (slots = 0) or no session may be evicted to make room.
  [[nodiscard]] std::shared_ptr<fetch_session> create(session_partitions partitions,
                                                      int64_t now_ms);
  // The session with this id, now the most recently used, or nullptr.
  [[nodiscard]] std::shared_ptr<fetch_session> find(int32_t id, int64_t now_ms);
  void remove(int32_t id);
  [[nodiscard]] size_t size();

 private:
  // Drops one session to make room for one with `size` partitions; false if none may go.
  bool evict_locked(size_t size, int64_t now_ms) REQUIRES(mu_);

  base::mutex mu_;
  int32_t slots_ GUARDED_BY(mu_);
  const int64_t eviction_ms_;
  int32_t next_id_ GUARDED_BY(mu_) = 1;
  std::list<int32_t> lru_ GUARDED_BY(mu_);  // most recent at the back
  std::unordered_map<int32_t,
                     std::pair<std::shared_ptr<fetch_session>, std::list<int32_t>::iterator>>
      sessions_ GUARDED_BY(mu_);
};

}  // namespace silt::handlers
