// Idempotent producers: producer ids and, per partition (stream), the sequence numbers of each
// producer's last five batches, as Kafka keeps them (ProducerStateManager).
//
// A produce of an idempotent batch takes the stream's lock (lock_for()), check()s the batch,
// appends it to the stream store if it is new and begin()s it: check and offset assignment
// are one step. The batch is in flight until its WAL write ends; finish() then records it
// (durable) or forgets it (failed: the retry is appended again). Only durable batches are
// producer state: a retried batch that matches one of the last five is a duplicate, answered
// with the first write's offsets and not written again; one that matches a batch in flight
// waits for it (in_flight). Sequences continue from the last batch in flight, so that a
// producer may pipeline. A gap in the sequence is OUT_OF_ORDER_SEQUENCE_NUMBER; an old epoch
// INVALID_PRODUCER_EPOCH.
//
// Restarts: snapshot() stores, per stream, the state as of the stream's durable end (in the
// registry's blob table); the first use of a stream after a restart loads that snapshot and
// replays the batch headers written after it from the stream store, as Kafka rebuilds producer
// state from its log. Snapshots are taken periodically and at shutdown.
//
// Locking: each stream's state is guarded by one of 64 stripe mutexes (lock_for()), which the
// produce path holds for check, append and begin; the map of streams by its own mutex. A load
// (a catalog read and a replay that may read objects) holds neither while it reads: it installs
// what it read under the stripe, unless the stream was loaded or forgotten meanwhile.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <tl/expected.hpp>

#include "base/ids.h"
#include "base/mutex.h"
#include "metadata/topic_registry.h"
#include "protocol/generated/error_code.h"
#include "protocol/record_batch.h"
#include "storage/stream_store.h"

namespace silt::handlers {

class producer_state {
 public:
  struct batch_meta {
    int32_t first_seq = 0;
    int32_t last_seq = 0;
    base::offset first_offset{};
    base::offset last_offset{};
  };
  struct producer_entry {
    base::producer_epoch epoch{-1};
    std::deque<batch_meta> batches;  // the last five, oldest first
    int64_t last_timestamp = -1;     // of its last batch (expiration)
    // In the stream's state when it was loaded: the producer wrote before this broker began
    // serving the stream (elsewhere, or before a restart).
    bool found_at_load = false;
  };

  enum class verdict : uint8_t { append, duplicate, in_flight, reject };
  struct check_result {
    verdict v = verdict::append;
    protocol::error_code error = protocol::error_code::none;
    batch_meta duplicate;  // the first write's offsets, for a duplicate
    // OUT_OF_ORDER_SEQUENCE_NUMBER for a sequence beyond the expected one (batches missing
    // in between), not for one behind it.
    bool gap = false;
  };

  producer_state(metadata::topic_registry& registry, storage::stream_store& store,
                 int64_t expiration_ms);

  // A new producer id (epoch 0) for InitProducerId without a transactional id, or a bumped
  // epoch of `producer_id` when the client asks for one (KIP-360).
  [[nodiscard]] tl::expected<std::pair<base::producer_id, base::producer_epoch>,
                             protocol::error_code>
  init_producer(base::producer_id producer_id, base::producer_epoch producer_epoch);

  // Whether the stream's state is in memory. Before that, the first check() loads it: a
  // snapshot from the registry and a replay of the stream, which may read the object store.
  [[nodiscard]] bool loaded(base::stream_id stream_id);
  // Loads the stream's state (on a thread that may block), reading it without lock_for() and
  // installing it under it. False when the stream could not be read to its end (the object
  // store failing): nothing is loaded, and the stream's idempotent batches must be refused
  // (retriably) until a load succeeds, as they would be judged against a state that misses the
  // producers' last batches. Also false when the stream was forgotten on every try while it
  // was read (it kept changing hands).
  [[nodiscard]] bool load(base::stream_id stream_id) EXCLUDES(map_mu_, lock_for(stream_id));
  // Forgets the stream's state: the next use loads it again (another broker served the stream
  // meanwhile and stored its state). Takes lock_for().
  void forget(base::stream_id stream_id) EXCLUDES(map_mu_, lock_for(stream_id));
  // Forgets streams for good (their topic was deleted): their state leaves memory.
  void erase(const std::vector<base::stream_id>& stream_ids) EXCLUDES(map_mu_, refusals_mu_);
  // How many streams have state in memory (tests, and what a deleted topic leaves).
  [[nodiscard]] size_t stream_count() EXCLUDES(map_mu_);

  // The lock that makes check(), the append and record() one step for a stream: one of 64
  // stripes. The thread-safety analysis follows it by expression (lock_for(id) of the same id).
  [[nodiscard]] base::mutex& lock_for(base::stream_id stream_id) {
    return stripe_mu_[stream_id.value() % stripes];
  }

  // Checks an idempotent batch against the stream's producer state when it is in memory;
  // nullopt (nothing read) when it is not: the caller load()s it without the lock and tries
  // again. Caller holds lock_for().
  [[nodiscard]] std::optional<check_result> check_if_loaded(base::stream_id stream_id,
                                                            const protocol::record_batch_header& h)
      REQUIRES(lock_for(stream_id));
  // check_if_loaded() of a stream that is loaded: one not in memory gets a retriable
  // NOT_LEADER_OR_FOLLOWER rejection (it is never loaded under the lock). Caller holds
  // lock_for().
  [[nodiscard]] check_result check(base::stream_id stream_id,
                                   const protocol::record_batch_header& h)
      REQUIRES(lock_for(stream_id));
  // Records a durable batch at its assigned base offset; nothing when the stream's state is
  // not in memory. Caller holds lock_for().
  void record(base::stream_id stream_id, const protocol::record_batch_header& h,
              base::offset base_offset) REQUIRES(lock_for(stream_id));
  // Notes a batch appended at `base_offset` whose write is in flight (the caller found the
  // state in memory with check_if_loaded()). Caller holds lock_for().
  void begin(base::stream_id stream_id, const protocol::record_batch_header& h,
             base::offset base_offset) REQUIRES(lock_for(stream_id));
  // The write of a begun batch ended: durable at `durable_at`, it is recorded; failed (none),
  // it is forgotten with every batch of its producer begun after it (their writes fail too).
  // Nothing happens when the stream's state was forgotten meanwhile. Takes lock_for().
  void finish(base::stream_id stream_id, const protocol::record_batch_header& h,
              std::optional<base::offset> durable_at) EXCLUDES(lock_for(stream_id));

  // Leadership refusals. A producer pipelines: when its batch is refused with
  // NOT_LEADER_OR_FOLLOWER because the partition is changing hands here, its next batch may
  // arrive once the partition is served and find a gap in the sequence, which is that refused
  // batch still to come (its retry), not a lost one. Kafka's answer, OUT_OF_ORDER_SEQUENCE_NUMBER,
  // is fatal to librdkafka for the head-of-line batch; such a batch is refused the same way
  // instead, for refusal_window after the refusal. Both take their own lock.
  static constexpr std::chrono::seconds refusal_window{15};
  // Notes an idempotent batch refused for leadership.
  void note_refused(base::stream_id stream_id, const protocol::record_batch_header& h);
  // Whether a batch of h's producer and epoch with a lower sequence was refused for leadership
  // within refusal_window.
  [[nodiscard]] bool refused_before(base::stream_id stream_id,
                                    const protocol::record_batch_header& h);
  // Whether h's producer was found in the stream's state when it was loaded, within
  // refusal_window: this broker began serving the stream then (it started, took the stream
  // over or was handed it), and the producer's batches that the previous leader refused while
  // the stream changed hands are retried here. A batch that arrives ahead of such a retry
  // finds a gap that this broker never saw refused. Never loads. Caller holds lock_for().
  [[nodiscard]] bool loaded_recently(base::stream_id stream_id,
                                     const protocol::record_batch_header& h)
      REQUIRES(lock_for(stream_id));
  // Whether `checked`, OUT_OF_ORDER_SEQUENCE_NUMBER for h, is most likely a batch of h's
  // producer that was refused while the stream changed hands and is still to be retried
  // (refused_before(), or a gap ahead of a producer loaded_recently()): the caller refuses h
  // as for leadership instead, so that the producer sends again in order. Caller holds
  // lock_for().
  [[nodiscard]] bool retry_to_come(base::stream_id stream_id,
                                   const protocol::record_batch_header& h,
                                   const check_result& checked) REQUIRES(lock_for(stream_id));

  // Stores the durable state of every stream touched since the last snapshot.
  [[nodiscard]] tl::expected<void, std::string> snapshot();

  // Producer entries of a stream (tests, DescribeProducers later); empty when its state is not
  // in memory. Caller holds lock_for().
  [[nodiscard]] const std::unordered_map<base::producer_id, producer_entry>& producers(
      base::stream_id stream_id) REQUIRES(lock_for(stream_id));

 private:
  // A batch whose write is in flight.
  struct pending_batch {
    base::producer_epoch epoch{-1};
    batch_meta meta;
  };
  struct stream_producers {
    std::atomic<bool> loaded{false};
    std::chrono::steady_clock::time_point loaded_at;  // when `loaded` last became true
    // Moves at every forget(): a load that read the state before it does not install it.
    uint64_t generation = 0;
    bool dirty = false;
    std::unordered_map<base::producer_id, producer_entry> producers;
    std::unordered_map<base::producer_id, std::deque<pending_batch>> in_flight;  // append order
  };

  // The stream's entry, created (not loaded) when missing.
  std::shared_ptr<stream_producers> slot(base::stream_id stream_id) EXCLUDES(map_mu_);
  stream_producers* loaded_stream(base::stream_id stream_id)  // never loads; null if unloaded
      EXCLUDES(map_mu_);
  [[nodiscard]] check_result check_on(const stream_producers& sp,
                                      const protocol::record_batch_header& h);
  // Reads the stream's state: its snapshot and the batches written after it. No lock held.
  [[nodiscard]] bool read_state(base::stream_id stream_id,
                                std::unordered_map<base::producer_id, producer_entry>& producers);
  static void apply(std::unordered_map<base::producer_id, producer_entry>& m,
                    const protocol::record_batch_header& h, base::offset base_offset);

  metadata::topic_registry& registry_;
  storage::stream_store& store_;
  const int64_t expiration_ms_;

  static constexpr size_t stripes = 64;
  // Each stream's entry is guarded by its stripe, lock_for(): the functions that read or change
  // it require lock_for(stream_id); the map itself by map_mu_.
  std::array<base::mutex, stripes> stripe_mu_;
  base::mutex map_mu_;
  std::unordered_map<base::stream_id, std::shared_ptr<stream_producers>> streams_
      GUARDED_BY(map_mu_);

  // note_refused(): per stream, the lowest sequence refused per producer and epoch, and when.
  struct refusal {
    base::producer_id producer{-1};
    base::producer_epoch epoch{-1};
    int32_t first_seq = 0;
    std::chrono::steady_clock::time_point at;
  };
  static constexpr size_t max_refusals_per_stream = 64;
  static constexpr size_t max_refusal_streams = 1024;
  base::mutex refusals_mu_;
  std::unordered_map<base::stream_id, std::vector<refusal>> refusals_ GUARDED_BY(refusals_mu_);

  base::mutex id_mu_;
  int64_t next_id_ GUARDED_BY(id_mu_) = 0;
  int64_t id_limit_ GUARDED_BY(id_mu_) = 0;  // ids below it are reserved in the registry
};

}  // namespace silt::handlers
