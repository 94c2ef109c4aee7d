// The write-ahead log: appends become durable here before they are acknowledged.
//
// A WAL is a preallocated ring on a file or block device, written with O_DIRECT through
// io_uring: concurrent appends are coalesced into one aligned write (group commit), up to
// `iodepth` writes are in flight, an optional IOPS cap paces them, and an append's callback
// runs only when it and every append before it are on stable storage (O_DSYNC, or fdatasync).
// Space is reclaimed only by trim(), which the caller issues once the data before a position
// has been committed elsewhere (in objects); when the ring is full, try_append() refuses with
// `full` (and the room callback says when to try again) and append() waits.
// Format: docs/formats/wal.md.
//
// A failed write fails its append and every append queued after it; the WAL then waits for
// the writes in flight, starts a new epoch at the failed write's position (so that whatever
// the failed writes left on the device is never replayed) and takes appends again. While it
// recovers, appends are refused with `io`; if the header writes of the new epoch fail too, it
// tries again every second.
//
// Threads: append() and trim() may be called from any thread. The WAL owns one I/O thread that
// submits writes through io_uring, or (io_engine::threads) writer threads that take and issue
// them, the I/O thread then persisting trims and recovering from failures; callbacks run on
// one of these, one at a time, in append order, and must be short (hand work off). A callback
// may call trim() and try_append() but not append() (it could wait for room that only the
// WAL's threads can make) nor close() (which joins them). open() replays the durable records before
// the WAL accepts appends.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

#include "base/histogram.h"
#include "base/ids.h"
#include "base/mutex.h"

namespace silt::storage::wal {

enum class wal_error : uint8_t {
  io,           // a read or write failed (appends are refused until the WAL has recovered)
  too_large,    // a record larger than the ring can ever hold
  full,         // no room before the trim point now (try_append only)
  closed,       // the WAL is shut down
  bad_options,  // capacity, block size or path unusable
  bad_format,   // the file is not a WAL of this format (bad magic, both header slots corrupt)
};

[[nodiscard]] std::string_view wal_error_name(wal_error e);

enum class sync_mode : uint8_t {
  dsync,      // O_DSYNC writes: each write is durable when it completes
  fdatasync,  // plain O_DIRECT writes followed by an fdatasync
};

// Who issues the data writes and waits for them.
enum class io_engine : uint8_t {
  // The I/O thread submits them through io_uring. On a device without FUA an O_DSYNC write is
  // a write and a cache flush, and the flush then runs in a kernel worker that the broker does
  // not schedule: behind busy threads it waits a whole scheduler slice (measured: p50 4 ms).
  uring,
  // The WAL's writer threads (one per write in flight) each issue one write with pwritev and
  // wait for it and its flush themselves, with a short scheduler slice so that they run as soon
  // as the device answers.
  threads,
};

class write_faults;

struct wal_options {
  std::string path;  // a file (created and pre-zeroed) or a block device
  // Bytes of the ring (rounded down to 4 KiB, at least 16 KiB), after an 8 KiB header. Applies
  // when the WAL is created; an existing WAL keeps the capacity it was created with. On a block
  // device it is clamped to the device's size less the header.
  uint64_t capacity = 1ull << 30;
  uint32_t iodepth = 32;                // writes in flight at most (threads: at most 16)
  uint32_t iops = 0;                    // writes per second at most; 0: no cap
  uint32_t max_write_bytes = 1u << 20;  // one coalesced write at most (a larger record is
                                        // written alone)
  sync_mode sync = sync_mode::dsync;
  io_engine engine = io_engine::threads;
  // Group commit across requests: while appends are small (their running average under
  // commit_delay_bytes), a batch waits up to this long after its first append for more appends
  // to share its write (until it holds 256 KiB); while they are big, it waits up to
  // big_append_delay (at most this long) for the first append of a later request. Either only
  // for as long as such waits gather appends of later requests at least half the time
  // (suspended while they do not); zero: written at once. Acknowledgements wait with it: this
  // trades their latency for fewer, larger writes when requests come one at a time.
  std::chrono::microseconds commit_delay{0};
  // How long a batch of big appends waits for the next request's (see commit_delay): about the
  // gap between the Produce requests of a producer that keeps several in flight, so that two
  // share one write, while a lone request that waits in vain pays at most this long (and only
  // until such misses suspend the waits).
  std::chrono::microseconds big_append_delay{300};
  bool direct = true;  // O_DIRECT (off only where the file system refuses it)
  // The nice value of the WAL's threads (an acknowledgement waits for them); 0: the process's.
  // Where the kernel refuses it they keep the process's (the broker checks and says so).
  int thread_nice = 0;
  // Faults to inject into data writes (tests); none when null.
  std::shared_ptr<write_faults> faults;
};

// Appends smaller than this on average wait for the commit delay (wal_options::commit_delay)
// to gather: the CPU a write costs is then more than twice that of the bytes it carries. Bigger
// ones (64 KiB records, full 64 KiB producer batches, Produce requests of a few dozen KiB) wait
// only for the next request's append (wal_options::big_append_delay).
constexpr uint64_t commit_delay_bytes = 24u << 10;

// What happens to one data write when faults are injected.
struct write_fault {
  bool fail = false;                   // the write lands only in part and reports failure
  std::chrono::milliseconds delay{0};  // the write is held back this long (a stalled device)
};

// Decides the fault of each data write, for tests of the code above the WAL: failed writes
// and stalls, drawn by probability from a seeded generator, or scripted (fail_next). Called
// by the WAL thread that takes the write, once per write, under the WAL's lock; thread-safe
// for the test that adjusts it.
class write_faults {
 public:
  struct options {
    uint64_t seed = 1;
    double fail_probability = 0;
    double delay_probability = 0;
    std::chrono::milliseconds delay{50};
  };
  explicit write_faults(const options& o);
  void set_options(const options& o);
  // The next `n` writes fail whatever the probabilities.
  void fail_next(uint32_t n);
  [[nodiscard]] write_fault next();
  [[nodiscard]] uint64_t failed() const;
  [[nodiscard]] uint64_t delayed() const;

 private:
  mutable base::mutex mu_;
  options options_ GUARDED_BY(mu_);
  uint64_t state_ GUARDED_BY(mu_);  // the generator (splitmix64)
  uint32_t scripted_ GUARDED_BY(mu_) = 0;
  uint64_t failed_ GUARDED_BY(mu_) = 0;
  uint64_t delayed_ GUARDED_BY(mu_) = 0;
};

// A position in the WAL's logical byte sequence (it grows forever; the ring wraps it).
using wal_position = uint64_t;

// One record as replayed at open(). The payload is valid only during the replay call.
struct replayed_record {
  wal_position position;  // where the record starts
  wal_position end;       // where the next one starts
  base::stream_id stream_id;
  base::offset offset;  // the stream offset the caller gave to append()
  std::span<const uint8_t> payload;
};

// Counters of the WAL's threads since open(), for metrics and tests.
struct wal_stats {
  uint64_t appends = 0;        // records made durable
  uint64_t writes = 0;         // coalesced data writes completed (a write that wraps the ring
                               // end is one write of two requests)
  uint64_t write_bytes = 0;    // bytes of those writes, padding included
  uint64_t syncs = 0;          // fdatasync requests completed (sync_mode::fdatasync only)
  uint64_t header_writes = 0;  // header slot writes (trim points persisted)
  uint64_t paced = 0;          // times a write waited for the IOPS cap
  uint64_t held = 0;           // writes whose batch waited for more appends (commit_delay)
  uint64_t held_gathered = 0;  // of those, the ones that paid: they gathered appends of a
                               // later request (arriving 50 us or more after the batch's first)
  uint64_t failed_writes = 0;  // data or header writes that failed
  uint64_t recoveries = 0;     // new epochs started after a failed write
  // Per completed data write, in microseconds: from the batch's first append to its
  // submission (filling, then waiting for a write slot or the IOPS cap), and from submission
  // to durability (the device, plus waiting for earlier writes to complete: durability is in
  // order).
  base::histogram_snapshot batch_wait_us;
  base::histogram_snapshot write_us;
};

class wal {
 public:
  using append_callback = std::function<void(tl::expected<wal_position, wal_error>)>;

  // Opens (creating and pre-zeroing when needed) the WAL and calls `replay` for every durable
  // record after the trim point, in order, before returning.
  [[nodiscard]] static tl::expected<std::unique_ptr<wal>, wal_error> open(
      const wal_options& options, const std::function<void(const replayed_record&)>& replay);

  virtual ~wal() = default;

  // Queues a record without waiting; `done` gets the position after the record (what to
  // trim() to once it is committed elsewhere) once the record and all before it are durable,
  // or wal_error::io when its write (or one before it) failed. The payload is copied before
  // try_append() returns. A record that is not queued is refused at once, and `done` is not
  // called: too_large (its frame of 40 bytes plus payload exceeds capacity less 12 KiB), full
  // (no room before the trim point, or too many writes waiting: try again when the room
  // callback runs), closed, or io while the WAL recovers from a failed write.
  [[nodiscard]] virtual tl::expected<void, wal_error> try_append(base::stream_id stream_id,
                                                                 base::offset offset,
                                                                 std::span<const uint8_t> payload,
                                                                 append_callback done) = 0;
  // The same, but waits while the ring has no room (backpressure), and a refusal goes to
  // `done`, on the calling thread.
  virtual void append(base::stream_id stream_id, base::offset offset,
                      std::span<const uint8_t> payload, append_callback done) = 0;
  // Called on one of the WAL's threads when room may have appeared after try_append() refused with
  // `full`, or the WAL has recovered from a failed write. Set before the first append.
  virtual void set_room_callback(std::function<void()> callback) = 0;

  // Allows the space before `position` to be reused; `position` must be a record boundary at
  // or before durable_end() (a position given to a callback, a replayed record's end, or
  // durable_end() itself). Persisted in the header (alternating slots) before the space is
  // reused; returns without waiting for that.
  virtual void trim(wal_position position) = 0;

  // The position up to which everything is durable.
  [[nodiscard]] virtual wal_position durable_end() const = 0;
  // The trim point persisted in the header (where the next open() starts replaying).
  [[nodiscard]] virtual wal_position trim_point() const = 0;
  // Bytes of the ring, as recorded in the header.
  [[nodiscard]] virtual uint64_t capacity() const = 0;
  [[nodiscard]] virtual wal_stats stats() const = 0;

  // Frees the write buffers kept for reuse that no write took since the previous call (the
  // fewest free in between), so that what a burst of writes allocated goes back once the WAL
  // is quieter. Returns the bytes freed. Any thread; call it now and then (every few seconds).
  virtual size_t release_idle_buffers() { return 0; }

  // Waits for queued appends to complete and the last trim point to be persisted, then stops
  // the WAL's threads. Appends after close() (or waiting for room when it is called) fail with
  // wal_error::closed. Idempotent; the destructor closes.
  virtual void close() = 0;
};

}  // namespace silt::storage::wal
