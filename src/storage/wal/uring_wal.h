// The WAL after recovery: appends are framed into batches by the calling threads and written
// through io_uring by one I/O thread or, with io_engine::threads, by writer threads that take
// each batch from the queue themselves (see wal.h for the contract).
//
// Failures: a failed write fails every batch after it; once nothing is in flight the I/O
// thread writes a new epoch's header (two slots, one after the other) with its start at the
// first failed batch, and appends resume there (see wal.h and docs/formats/wal.md).
//
// Ownership: the fields under "shared" belong to mu_ (the queue, the in-flight batches in
// position order, the IOPS bucket); the callbacks' order to retire_mu_; the io_uring and the
// header buffer to the I/O thread; counters and the durable end are atomics that anyone may
// read. A batch taken from the queue belongs to the thread that writes it until its writes are
// done; then whichever WAL thread sees the oldest batch in flight done retires what completed,
// in order, and runs the callbacks. Lifecycle: start() launches the I/O thread (and the
// writers), close() (or the destructor) drains them and joins them.
//
// Hand-offs: an appender reserves space in the open batch under mu_ and copies its frame
// outside it. With writer threads, the appender that completes a batch worth writing wakes an
// idle writer directly (a condition variable), and a writer that finished a write takes
// whatever queued behind it before it sleeps: an append costs one wake-up, of the thread that
// writes it. The I/O thread then only persists trims and recovers from failures. With
// io_uring, the I/O thread sleeps in io_uring; it is woken through an eventfd that it reads
// with io_uring, and only when it asked to be (wake_on_), so a burst of appends costs one
// wake-up, not one per record; while writes are in flight, completions pick up what queued
// behind them. Either way, while writes are in flight only a batch big enough to be worth a
// write in a free slot is written at once; smaller ones wait for the next completion and grow.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <liburing.h>
#include <tl/expected.hpp>

#include "base/ids.h"
#include "base/mutex.h"
#include "storage/wal/aligned_buffer.h"
#include "storage/wal/ring_file.h"
#include "storage/wal/token_bucket.h"
#include "storage/wal/wal.h"
#include "storage/wal/wal_format.h"

namespace silt::storage::wal {

class uring_wal final : public wal {
 public:
  using clock_type = std::chrono::steady_clock;

  struct initial_state {
    format::header_slot header;  // the slot open() wrote last (new epoch)
    int header_index = 0;        // where it was written
    wal_position end = 0;        // where appends resume
    std::vector<uint8_t> tail;   // bytes [align_down(end), end)
  };

  [[nodiscard]] static tl::expected<std::unique_ptr<uring_wal>, wal_error> start(
      ring_file file, const wal_options& options, const initial_state& state);

  uring_wal(const uring_wal&) = delete;
  uring_wal& operator=(const uring_wal&) = delete;
  ~uring_wal() override;

  [[nodiscard]] tl::expected<void, wal_error> try_append(base::stream_id stream_id,
                                                         base::offset offset,
                                                         std::span<const uint8_t> payload,
                                                         append_callback done) override;
  void append(base::stream_id stream_id, base::offset offset, std::span<const uint8_t> payload,
              append_callback done) override;
  void set_room_callback(std::function<void()> callback) override;
  void trim(wal_position position) override;
  [[nodiscard]] wal_position durable_end() const override;
  [[nodiscard]] wal_position trim_point() const override;
  [[nodiscard]] uint64_t capacity() const override { return capacity_; }
  [[nodiscard]] wal_stats stats() const override;
  size_t release_idle_buffers() override;
  void close() override;

 private:
  struct batch;

  enum class op_kind : uint8_t { wake, write, sync, header_write, header_sync };

  // What a completion's user_data points at.
  struct io_op {
    op_kind kind = op_kind::wake;
    batch* owner = nullptr;
    uint32_t len = 0;  // bytes a write must report
  };

  struct pending_append {
    append_callback done;
    wal_position end;
  };

  // One write request: a batch is one, or two when it wraps the ring end.
  struct write_request {
    uint8_t* data = nullptr;
    uint64_t bytes = 0;    // what must be written
    uint64_t written = 0;  // what is asked for (less when a failure is injected)
    uint64_t file_offset = 0;
  };

  // One coalesced write: frames from `start` (block-aligned) on, then padding.
  struct batch {
    wal_position start = 0;
    aligned_buffer buf;
    uint64_t used = 0;    // bytes of frames (and of a rewritten tail) from start
    uint64_t tail = 0;    // bytes of a rewritten tail at the start (the first write of an epoch)
    uint32_t copies = 0;  // appenders still copying their frame in
    bool sealed = false;  // takes no more frames
    std::vector<pending_append> appends;
    // The I/O thread's, once submitted.
    uint32_t ops_left = 0;
    bool failed = false;
    uint64_t write_bytes = 0;
    bool held = false;            // waited for more appends (commit delay)
    uint32_t arrivals = 0;        // appends well after the first (commit delay)
    bool fault_drawn = false;     // injected fault decided (faults_ only)
    bool inject_failure = false;  // the write lands in part and fails
    std::chrono::steady_clock::time_point held_until;  // an injected stall
    std::chrono::steady_clock::time_point opened;      // first append
    std::chrono::steady_clock::time_point submitted;   // handed to io_uring
    std::array<io_op, 3> ops{};  // up to two writes (wrapping the ring end) and a sync
    std::array<write_request, 2> requests{};
    uint32_t request_count = 0;
  };

  uring_wal(ring_file file, const wal_options& options, const initial_state& state);

  [[nodiscard]] tl::expected<void, wal_error> enqueue(base::stream_id stream_id,
                                                      base::offset offset,
                                                      std::span<const uint8_t> payload,
                                                      append_callback& done, bool wait);
  [[nodiscard]] tl::expected<void, wal_error> init_ring();
  void run();
  void reap();
  void finish_batches() EXCLUDES(retire_mu_);
  void retire() REQUIRES(retire_mu_);
  // What the front of the queue allows now (the caller checked that a write slot is free and
  // no failure is pending).
  struct front_state {
    batch* taken = nullptr;  // sealed, in inflight_; its writes now belong to the caller
    clock_type::duration wait = clock_type::duration::zero();  // paced or held until then
    bool copies = false;  // sealed, but appenders are still copying into it
    bool held = false;    // waits for more appends (commit delay) until `wait` has passed
  };
  [[nodiscard]] front_state take_front(clock_type::time_point now) REQUIRES(mu_);
  // Whether the unsealed batch `b` waits for more appends now (the commit delay).
  [[nodiscard]] bool hold(batch& b, clock_type::time_point now) REQUIRES(mu_);
  // The appends are big for the commit delay (commit_delay_bytes and more on average).
  [[nodiscard]] bool big_appends() const REQUIRES(mu_);
  // How long a batch may be held after its first append.
  [[nodiscard]] clock_type::duration hold_limit() const REQUIRES(mu_);
  // A held batch has gathered enough, or waited long enough, to be written.
  [[nodiscard]] bool hold_over(const batch& b, clock_type::time_point now) const REQUIRES(mu_);
  // A batch is written (commit delay only): a held one's wait paid or not, which decides on
  // the next ones; another one counts down a suspension.
  void batch_taken(const batch& b) REQUIRES(mu_);
  void prepare_requests(batch& b);
  void finish_header();
  void submit_batch(batch& b);
  void submit_header(const format::header_slot& slot, bool epoch_step);
  void header_failed();
  [[nodiscard]] format::header_slot begin_recovery() REQUIRES(mu_);
  void finish_recovery();
  void remember_rewind(const batch& b) REQUIRES(mu_);
  void arm_wake();
  void signal();
  void seal(batch& b) REQUIRES(mu_);
  [[nodiscard]] bool has_work_to_drain() const REQUIRES(mu_);
  [[nodiscard]] aligned_buffer take_buffer(uint64_t size) REQUIRES(mu_);
  static void fail_appends(batch& b, wal_error e);
  void start_writers();
  void stop_writers();
  void writer_run();
  [[nodiscard]] batch* writer_take(bool just_wrote);
  [[nodiscard]] bool worth_waking_writer(const batch& b) const REQUIRES(mu_);
  void write_batch(batch& b);
  void finish_written(batch& b);
  [[nodiscard]] io_uring_sqe* next_sqe();

  // Fixed after start().
  ring_file file_;
  const uint64_t capacity_;
  const uint32_t iodepth_;
  const uint64_t standard_buffer_;
  const bool fdatasync_;
  const bool threaded_;    // io_engine::threads
  const int thread_nice_;  // of the I/O and writer threads (wal_options::thread_nice)
  const uint64_t wake_bytes_;
  const clock_type::duration commit_delay_;
  const clock_type::duration big_append_delay_;  // at most commit_delay_
  const std::shared_ptr<write_faults> faults_;
  std::function<void()> room_callback_;  // set before the first append

  // Shared, guarded by mu_.
  mutable base::mutex mu_;
  std::condition_variable room_cv_;  // appenders waiting for ring room or a queue slot
  // Unsubmitted, in position order; the back may be open.
  std::deque<std::unique_ptr<batch>> queue_ GUARDED_BY(mu_);
  wal_position next_start_ GUARDED_BY(mu_) = 0;  // start of the batch after the last sealed one
  wal_position persisted_trim_ GUARDED_BY(mu_) = 0;
  wal_position requested_trim_ GUARDED_BY(mu_) = 0;
  // Of the frames appended now; written by the I/O thread (under mu_), read by appenders (under
  // mu_) and by the I/O thread (without it).
  std::atomic<uint32_t> epoch_{0};
  uint32_t room_waiters_ GUARDED_BY(mu_) = 0;
  // A try_append() was refused for room since the last callback.
  bool room_wanted_ GUARDED_BY(mu_) = false;
  // What the I/O thread, about to sleep, wants to be woken for.
  enum class wake_on : uint8_t {
    nothing,    // it will wake anyway: its write slots are full, or it paces for the IOPS cap
    any_work,   // fewer than eager_writes writes in flight: any append (or trim) is worth a
                // write now
    big_batch,  // more writes in flight and slots free, or the front batch held for the
                // commit delay: wake it for a batch of wake_bytes_, smaller ones wait for the
                // next completion or the delay's end and grow meanwhile
  };
  wake_on wake_on_ GUARDED_BY(mu_) = wake_on::nothing;
  // The commit delay's account of its recent waits: each that did not pay (gathered no append of
  // a later request) adds one, each that did takes one off; at hold_misses_allowed, waits are
  // suspended for the next hold_suspension_ writes, a number that doubles with each suspension
  // in a row.
  uint32_t hold_misses_ GUARDED_BY(mu_) = 0;
  uint32_t hold_suspended_ GUARDED_BY(mu_) = 0;  // writes still to go without waits
  bool hold_probing_ GUARDED_BY(mu_) = false;    // the next wait is the first after one
  uint32_t hold_suspension_ GUARDED_BY(mu_) = 0;
  // The running average of the appends' frame sizes (commit delay only).
  int64_t append_bytes_avg_ GUARDED_BY(mu_) = static_cast<int64_t>(commit_delay_bytes);
  bool closing_ GUARDED_BY(mu_) = false;
  // A write failed: appends refused until the new epoch is durable.
  bool failed_ GUARDED_BY(mu_) = false;
  bool recovery_abandoned_ GUARDED_BY(mu_) = false;  // a header write failed while closing
  bool stopped_ GUARDED_BY(mu_) = false;
  std::vector<aligned_buffer> free_buffers_ GUARDED_BY(mu_);
  size_t free_low_water_ GUARDED_BY(mu_) = 0;  // since the last release_idle_buffers()
  token_bucket bucket_ GUARDED_BY(mu_);
  // Submitted batches, in position order; retired from the front by whichever WAL thread sees
  // it complete: the I/O thread (io_uring) or a writer.
  std::deque<std::unique_ptr<batch>> inflight_ GUARDED_BY(mu_);
  // Writer threads (io_engine::threads): those asleep, waiting for a batch worth writing.
  std::condition_variable writers_cv_;
  uint32_t idle_writers_ GUARDED_BY(mu_) = 0;
  // The writer (one at most) asleep until the front batch's hold is over; an append that ends
  // the hold wakes it, not another writer (which would leave it to wake at its time for
  // nothing). Counted in idle_writers_.
  std::condition_variable holder_cv_;
  bool holder_asleep_ GUARDED_BY(mu_) = false;
  bool writers_stop_ GUARDED_BY(mu_) = false;
  // Where writing resumes after a failure: the first failed batch's start, with the rewritten
  // tail it began with (if any), which the first write of the new epoch must carry again.
  std::optional<wal_position> rewind_start_ GUARDED_BY(mu_);
  std::vector<uint8_t> rewind_tail_ GUARDED_BY(mu_);

  // Callbacks run under retire_mu_, which keeps them in append order; it is taken before mu_,
  // never while holding it.
  base::mutex retire_mu_;
  bool io_failed_ GUARDED_BY(retire_mu_) = false;  // a retired batch failed: fail all after it
  // inflight_.size(), for the I/O thread's decisions under mu_.
  std::atomic<size_t> inflight_count_{0};

  // The I/O thread's.
  io_uring ring_{};
  bool ring_ready_ = false;
  int wake_fd_ = -1;
  io_op wake_op_{};
  uint64_t wake_value_ = 0;
  bool wake_armed_ = false;
  int epoch_steps_ = 0;                // header slots still to write for a new epoch
  format::header_slot recovery_slot_;  // the new epoch's header (its sequence aside)
  clock_type::time_point retry_at_{};  // the next attempt at the new epoch's header
  aligned_buffer header_buf_;
  format::header_slot header_;          // the last slot written durably
  format::header_slot pending_header_;  // the slot being written
  bool pending_epoch_step_ = false;     // it is a step of a new epoch (else a trim)
  int next_header_index_ = 0;           // the slot that is not current
  bool header_inflight_ = false;
  bool header_failed_ = false;
  uint32_t header_ops_left_ = 0;
  std::array<io_op, 2> header_ops_{};

  std::thread thread_;
  base::mutex close_mu_;  // serializes close()
  std::vector<std::thread> writers_;

  // Readable from any thread.
  std::atomic<wal_position> durable_end_{0};
  std::atomic<wal_position> trim_point_{0};
  std::atomic<uint64_t> appends_{0};
  std::atomic<uint64_t> writes_{0};
  std::atomic<uint64_t> write_bytes_{0};
  std::atomic<uint64_t> syncs_{0};
  std::atomic<uint64_t> header_writes_{0};
  std::atomic<uint64_t> paced_{0};
  std::atomic<uint64_t> held_{0};
  std::atomic<uint64_t> held_gathered_{0};
  std::atomic<uint64_t> failed_writes_{0};
  std::atomic<uint64_t> recoveries_{0};
  base::histogram batch_wait_us_;
  base::histogram write_us_;
};

}  // namespace silt::storage::wal
