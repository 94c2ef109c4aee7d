#include "storage/wal/uring_wal.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>
#include <utility>

#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sched.h"

namespace silt::storage::wal {

namespace {

// Unsubmitted batches at most: one filling and a few waiting for a write slot. More would only
// hold memory; appenders wait instead.
constexpr size_t max_queued_batches = 4;
// While writes are in flight, a batch this big is sent at once into a free slot rather than
// waiting for the next completion: bigger batches cost fewer, cheaper writes, and this is
// where another write in flight starts to pay (measured: README.md).
constexpr uint64_t wake_batch_bytes = 256u << 10;
// Below this many writes in flight any append is written at once: a lone write in flight
// would otherwise hold the next append for its whole duration (the p99 of a paced stream of
// 64 KiB produces), while under load there are more in flight and batches still grow.
constexpr size_t eager_writes = 2;
// The commit delay (wal_options::commit_delay): waits that did not pay, less those that did,
// before waits are suspended (misses come in runs, e.g. while a client pauses, and a short
// run should not stop waits that pay otherwise); the writes of the first suspension, doubled
// for each one in a row up to the last. Counted in writes, so that a busy WAL tries again
// soon. A producer that waits for each acknowledgement before sending on (so that nothing can
// join its batch) pays for a few waits, then for one in every 1,024 writes.
constexpr uint32_t hold_misses_allowed = 8;
constexpr uint32_t first_hold_suspension = 64;
constexpr uint32_t last_hold_suspension = 1024;
// A wait pays when it gathers appends that arrive at least separate_arrival after the batch's
// first (one request's appends, or those of requests read from a socket together, come within
// microseconds of each other and would have shared the write anyway; later ones would have
// found the write in flight and waited for the next).
constexpr std::chrono::microseconds separate_arrival{50};
// Appends are small for the commit delay when their running average (over about this many) is.
constexpr int64_t append_average_over = 16;
// One write (and so one frame) at most: a write system call moves less than 2 GiB.
constexpr uint64_t max_write = 1ull << 30;
// After a header write failed, the next attempt waits this long.
constexpr std::chrono::milliseconds header_retry_delay{1000};
// Writer threads at most (io_engine::threads): one per write in flight.
constexpr uint32_t max_writer_threads = 16;
// The scheduler slice of the writer threads: the kernel's shortest, so that they run as soon as
// the device answers.
constexpr std::chrono::microseconds short_slice{100};

using clock = token_bucket::clock;

}  // namespace

tl::expected<std::unique_ptr<uring_wal>, wal_error> uring_wal::start(ring_file file,
                                                                     const wal_options& options,
                                                                     const initial_state& state) {
  std::unique_ptr<uring_wal> w(new uring_wal(std::move(file), options, state));
  if (auto r = w->init_ring(); !r) return tl::unexpected(r.error());
  if (w->threaded_) w->start_writers();
  w->thread_ = std::thread([p = w.get()] {
    base::set_thread_name("silt-wal-io");
    if (p->thread_nice_ != 0) (void)base::set_thread_nice(p->thread_nice_);
    p->run();
  });
  return w;
}

uring_wal::uring_wal(ring_file file, const wal_options& options, const initial_state& state)
    : file_(std::move(file)),
      capacity_(state.header.capacity),
      iodepth_(options.engine == io_engine::threads ? std::min(options.iodepth, max_writer_threads)
                                                    : options.iodepth),
      standard_buffer_(
          std::min<uint64_t>(format::align_down(options.max_write_bytes), state.header.capacity)),
      fdatasync_(options.sync == sync_mode::fdatasync),
      threaded_(options.engine == io_engine::threads),
      thread_nice_(options.thread_nice),
      wake_bytes_(std::min<uint64_t>(wake_batch_bytes, standard_buffer_)),
      commit_delay_(options.commit_delay),
      big_append_delay_(std::min<clock::duration>(options.commit_delay, options.big_append_delay)),
      faults_(options.faults),
      bucket_(options.iops, clock::now()),
      header_buf_(format::block_size),
      header_(state.header),
      next_header_index_(state.header_index ^ 1) {
  hold_suspension_ = first_hold_suspension;
  persisted_trim_ = state.header.trim_point;
  requested_trim_ = state.header.trim_point;
  epoch_ = state.header.epoch;
  trim_point_.store(state.header.trim_point);
  durable_end_.store(state.end);
  next_start_ = state.end;
  if (!state.tail.empty()) {
    // The block holding the end of the last good frame is rewritten by the first write, whose
    // first frame goes right after it: replay must find no gap there.
    auto b = std::make_unique<batch>();
    b->start = format::align_down(state.end);
    b->buf = take_buffer(standard_buffer_);
    b->used = state.tail.size();
    b->tail = state.tail.size();
    std::memcpy(b->buf.data(), state.tail.data(), state.tail.size());
    queue_.push_back(std::move(b));
  }
}

uring_wal::~uring_wal() {
  close();
}

tl::expected<void, wal_error> uring_wal::init_ring() {
  // Each batch needs up to three entries, the header two, the wake-up read one.
  const unsigned entries = iodepth_ * 3 + 4;
  if (const int rc = io_uring_queue_init(entries, &ring_, 0); rc < 0) {
    SILT_LOG(error, "silt: WAL: io_uring_queue_init(%u) failed: %s", entries,
             std::error_code(-rc, std::generic_category()).message().c_str());
    return tl::unexpected(wal_error::io);
  }
  ring_ready_ = true;
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    SILT_LOG(error, "silt: WAL: eventfd failed: %s",
             std::error_code(errno, std::generic_category()).message().c_str());
    return tl::unexpected(wal_error::io);
  }
  wake_op_.kind = op_kind::wake;
  header_ops_[0].kind = op_kind::header_write;
  header_ops_[1].kind = op_kind::header_sync;
  return {};
}

void uring_wal::append(base::stream_id stream_id, base::offset offset,
                       std::span<const uint8_t> payload, append_callback done) {
  if (auto r = enqueue(stream_id, offset, payload, done, true); !r) done(tl::unexpected(r.error()));
}

tl::expected<void, wal_error> uring_wal::try_append(base::stream_id stream_id, base::offset offset,
                                                    std::span<const uint8_t> payload,
                                                    append_callback done) {
  return enqueue(stream_id, offset, payload, done, false);
}

void uring_wal::set_room_callback(std::function<void()> callback) {
  base::lock_guard lock(mu_);
  room_callback_ = std::move(callback);
}

tl::expected<void, wal_error> uring_wal::enqueue(base::stream_id stream_id, base::offset offset,
                                                 std::span<const uint8_t> payload,
                                                 append_callback& done, bool wait) {
  const uint64_t frame = format::frame_header_size + payload.size();
  if (frame > std::min(capacity_ - format::ring_slack, max_write)) {
    return tl::unexpected(wal_error::too_large);
  }
  batch* b = nullptr;
  wal_position pos = 0;
  uint32_t epoch = 0;
  {
    base::unique_lock lock(mu_);
    for (;;) {
      if (closing_) return tl::unexpected(wal_error::closed);
      if (failed_) return tl::unexpected(wal_error::io);
      batch* open = !queue_.empty() && !queue_.back()->sealed ? queue_.back().get() : nullptr;
      if (open != nullptr) {
        const wal_position at = open->start + open->used;
        const wal_position write_end = format::padded_end(at + frame);
        if (write_end - open->start > open->buf.size()) {
          if (!open->appends.empty()) {
            seal(*open);
            continue;
          }
          // The rewritten tail after a cut, and a record larger than its buffer: the tail must
          // go out with a record (a write of the tail alone would not be checked for room),
          // so the buffer grows.
          aligned_buffer bigger(write_end - open->start);
          std::memcpy(bigger.data(), open->buf.data(), open->used);
          open->buf = std::move(bigger);
        }
        if (write_end <= persisted_trim_ + capacity_) {
          b = open;
          pos = at;
          break;
        }
      } else if (queue_.size() < max_queued_batches) {
        const wal_position write_end = format::padded_end(next_start_ + frame);
        if (write_end <= persisted_trim_ + capacity_) {
          auto fresh = std::make_unique<batch>();
          fresh->opened = clock::now();
          fresh->start = next_start_;
          fresh->buf = take_buffer(write_end - next_start_);
          b = fresh.get();
          pos = next_start_;
          queue_.push_back(std::move(fresh));
          break;
        }
      }
      // No room before the trim point, or too many batches waiting: backpressure.
      if (!wait) {
        room_wanted_ = true;
        return tl::unexpected(wal_error::full);
      }
      ++room_waiters_;
      lock.wait(room_cv_);
      --room_waiters_;
    }
    epoch = epoch_;
    if (commit_delay_ > clock::duration::zero()) {
      // What a wait for the commit delay gathers: the appends of one request come together
      // and would have shared the write anyway; those of later ones arrive apart (the first
      // append is none, however long it took to get here since it opened the batch).
      if (!b->appends.empty() && clock::now() - b->opened >= separate_arrival) ++b->arrivals;
      append_bytes_avg_ += (static_cast<int64_t>(frame) - append_bytes_avg_) / append_average_over;
    }
    b->used += frame;
    ++b->copies;
    b->appends.push_back({std::move(done), pos + frame});
  }
  // The frame is built outside the lock so that appenders copy in parallel; the batch is not
  // written before `copies` is back to zero.
  format::frame_header h;
  h.type = format::frame_type::record;
  h.length = static_cast<uint32_t>(payload.size());
  h.position = pos;
  h.epoch = epoch;
  h.stream_id = stream_id;
  h.offset = offset;
  format::encode_record(h, payload, b->buf.data() + (pos - b->start));
  bool wake = false;
  bool wake_writer = false;
  bool wake_holder = false;
  {
    base::lock_guard lock(mu_);
    --b->copies;
    if (b->copies == 0) {
      if (threaded_) {
        // A failed WAL's I/O thread may be waiting for these copies to fail the batch.
        wake = failed_;
        wake_writer = !failed_ && idle_writers_ > 0 && worth_waking_writer(*b);
        // The held front batch is the holder's to write: when this append joined it, or went
        // to a new batch because it sealed the front (full), which the holder takes first.
        wake_holder =
            wake_writer && holder_asleep_ && (queue_.front().get() == b || queue_.front()->sealed);
      } else if (wake_on_ == wake_on::any_work ||
                 (wake_on_ == wake_on::big_batch &&
                  (b->used >= wake_bytes_ || (b->held && hold_over(*b, clock::now()))))) {
        wake_on_ = wake_on::nothing;
        wake = true;
      }
    }
  }
  // Outside the lock, which the woken thread takes first.
  if (wake_holder) {
    holder_cv_.notify_one();
  } else if (wake_writer) {
    writers_cv_.notify_one();
  }
  if (wake) signal();
  return {};
}

void uring_wal::trim(wal_position position) {
  bool wake = false;
  {
    base::lock_guard lock(mu_);
    if (stopped_ || position <= requested_trim_) return;
    const wal_position durable = durable_end_.load(std::memory_order_acquire);
    assert(position <= durable && "trim() beyond the durable end");
    if (position > durable) return;
    requested_trim_ = position;
    // With io_uring and writes in flight, the trim is seen at the next completion. Writer
    // threads do not wake the I/O thread for their completions.
    if (threaded_) {
      wake = true;
    } else if (wake_on_ == wake_on::any_work) {
      wake_on_ = wake_on::nothing;
      wake = true;
    }
  }
  if (wake) signal();
}

wal_position uring_wal::durable_end() const {
  return durable_end_.load(std::memory_order_acquire);
}

wal_position uring_wal::trim_point() const {
  return trim_point_.load(std::memory_order_acquire);
}

wal_stats uring_wal::stats() const {
  wal_stats s;
  s.appends = appends_.load(std::memory_order_relaxed);
  s.writes = writes_.load(std::memory_order_relaxed);
  s.write_bytes = write_bytes_.load(std::memory_order_relaxed);
  s.syncs = syncs_.load(std::memory_order_relaxed);
  s.header_writes = header_writes_.load(std::memory_order_relaxed);
  s.paced = paced_.load(std::memory_order_relaxed);
  s.held = held_.load(std::memory_order_relaxed);
  s.held_gathered = held_gathered_.load(std::memory_order_relaxed);
  s.failed_writes = failed_writes_.load(std::memory_order_relaxed);
  s.recoveries = recoveries_.load(std::memory_order_relaxed);
  s.batch_wait_us = batch_wait_us_.snapshot();
  s.write_us = write_us_.snapshot();
  return s;
}

void uring_wal::close() {
  base::lock_guard closing(close_mu_);
  assert(std::this_thread::get_id() != thread_.get_id() && "close() from a WAL callback");
  bool wake = false;
  {
    base::lock_guard lock(mu_);
    if (stopped_) return;
    closing_ = true;
    if (threaded_ || wake_on_ != wake_on::nothing) {
      wake_on_ = wake_on::nothing;
      wake = true;
    }
    if (room_waiters_ > 0) room_cv_.notify_all();
  }
  // Writers write what is queued, whatever its size, before the I/O thread exits.
  writers_cv_.notify_all();
  holder_cv_.notify_all();
  if (wake) signal();
  if (thread_.joinable()) thread_.join();
  stop_writers();
  {
    base::lock_guard lock(mu_);
    stopped_ = true;
  }
  if (ring_ready_) io_uring_queue_exit(&ring_);
  ring_ready_ = false;
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
  file_.close();
}

void uring_wal::signal() {
  // Cannot fail short of a counter overflow, which would still leave the thread woken.
  (void)::eventfd_write(wake_fd_, 1);
}

void uring_wal::seal(batch& b) {
  b.sealed = true;
  next_start_ = format::padded_end(b.start + b.used);
}

bool uring_wal::has_work_to_drain() const {
  return std::any_of(queue_.begin(), queue_.end(),
                     [](const auto& b) { return !b->appends.empty(); });
}

size_t uring_wal::release_idle_buffers() {
  std::vector<aligned_buffer> idle;
  {
    base::lock_guard lock(mu_);
    // free_buffers_ is used as a stack: those at its bottom stayed untouched.
    const auto n = static_cast<std::ptrdiff_t>(std::min(free_low_water_, free_buffers_.size()));
    idle.assign(std::make_move_iterator(free_buffers_.begin()),
                std::make_move_iterator(free_buffers_.begin() + n));
    free_buffers_.erase(free_buffers_.begin(), free_buffers_.begin() + n);
    free_low_water_ = free_buffers_.size();
  }
  size_t bytes = 0;
  for (const auto& b : idle) bytes += b.size();
  return bytes;  // (freed as `idle` goes, outside the lock)
}

aligned_buffer uring_wal::take_buffer(uint64_t size) {
  if (size > standard_buffer_) return aligned_buffer(size);
  if (!free_buffers_.empty()) {
    aligned_buffer buf = std::move(free_buffers_.back());
    free_buffers_.pop_back();
    free_low_water_ = std::min(free_low_water_, free_buffers_.size());
    return buf;
  }
  return aligned_buffer(standard_buffer_);
}

void uring_wal::fail_appends(batch& b, wal_error e) {
  for (auto& a : b.appends) a.done(tl::unexpected(e));
  b.appends.clear();
}

io_uring_sqe* uring_wal::next_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (sqe == nullptr) {
    // The ring is sized for everything in flight, so this only flushes what is queued.
    (void)io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

void uring_wal::arm_wake() {
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_read(sqe, wake_fd_, &wake_value_, sizeof wake_value_, 0);
  io_uring_sqe_set_data(sqe, &wake_op_);
  wake_armed_ = true;
}

uring_wal::front_state uring_wal::take_front(clock::time_point now) {
  batch& b = *queue_.front();
  if (faults_ && !b.fault_drawn) {
    const write_fault f = faults_->next();
    b.fault_drawn = true;
    b.inject_failure = f.fail;
    if (f.delay > clock::duration::zero()) b.held_until = now + f.delay;
  }
  if (b.held_until > now) return {.wait = b.held_until - now};
  if (hold(b, now)) return {.wait = b.opened + hold_limit() - now, .held = true};
  const auto pace = bucket_.wait_time(now);
  if (pace > clock::duration::zero()) {
    paced_.fetch_add(1, std::memory_order_relaxed);
    return {.wait = pace};
  }
  // From here on appends go to the next batch; the last copies into this one finish.
  if (!b.sealed) seal(b);
  if (b.copies > 0) return {.copies = true};
  if (commit_delay_ > clock::duration::zero()) batch_taken(b);
  const uint64_t len = format::padded_end(b.start + b.used) - b.start;
  bucket_.take(b.start % capacity_ + len > capacity_ ? 2 : 1, now);
  std::unique_ptr<batch> taken = std::move(queue_.front());
  queue_.pop_front();
  // In flight before its writes start, as they may finish at once; until then it must not
  // look complete to a thread retiring the batches before it.
  taken->ops_left = 1;
  batch* p = taken.get();
  inflight_.push_back(std::move(taken));
  inflight_count_.fetch_add(1, std::memory_order_acq_rel);
  return {.taken = p};
}

bool uring_wal::hold(batch& b, clock::time_point now) {
  if (commit_delay_ <= clock::duration::zero() || b.sealed || closing_ || b.appends.empty() ||
      hold_suspended_ > 0 || hold_over(b, now)) {
    return false;
  }
  b.held = true;
  return true;
}

bool uring_wal::big_appends() const {
  return append_bytes_avg_ >= static_cast<int64_t>(commit_delay_bytes);
}

clock::duration uring_wal::hold_limit() const {
  return big_appends() ? big_append_delay_ : commit_delay_;
}

bool uring_wal::hold_over(const batch& b, clock::time_point now) const {
  // Small appends gather until the batch is worth a write of its own; big ones (each worth
  // one) until a later request's has joined: one write for two requests costs the first one
  // the gap between them, at most big_append_delay_.
  return b.used >= wake_bytes_ || now >= b.opened + hold_limit() ||
         (b.arrivals > 0 && big_appends());
}

void uring_wal::batch_taken(const batch& b) {
  if (!b.held) {
    if (hold_suspended_ > 0) --hold_suspended_;
    return;
  }
  held_.fetch_add(1, std::memory_order_relaxed);
  if (b.arrivals > 0) {
    held_gathered_.fetch_add(1, std::memory_order_relaxed);
    if (hold_misses_ > 0) --hold_misses_;
    hold_probing_ = false;
    hold_suspension_ = first_hold_suspension;
    return;
  }
  if (!hold_probing_ && ++hold_misses_ < hold_misses_allowed) return;
  // Suspended; the first wait after it decides alone: a miss suspends anew, for twice as long.
  hold_suspended_ = hold_suspension_;
  hold_suspension_ = std::min(2 * hold_suspension_, last_hold_suspension);
  hold_misses_ = 0;
  hold_probing_ = true;
}

void uring_wal::prepare_requests(batch& b) {
  const wal_position frames_end = b.start + b.used;
  const wal_position end = format::padded_end(frames_end);
  if (end > frames_end) format::encode_padding(frames_end, end, epoch_, b.buf.data() + b.used);
  const uint64_t len = end - b.start;
  const uint64_t at = b.start % capacity_;
  const uint64_t first = std::min(len, capacity_ - at);
  b.write_bytes = len;
  b.request_count = 0;
  auto add_request = [&](uint8_t* data, uint64_t bytes, uint64_t ring_at) {
    // An injected failure writes the first half (whole blocks) and so comes back short.
    const uint64_t written =
        b.inject_failure && b.request_count == 0 ? format::align_down(bytes / 2) : bytes;
    b.requests[b.request_count++] = {data, bytes, written, format::ring_offset + ring_at};
  };
  add_request(b.buf.data(), first, at);
  // A write past the ring's end continues at its start.
  if (first < len) add_request(b.buf.data() + first, len - first, 0);
  b.submitted = clock::now();
}

void uring_wal::submit_batch(batch& b) {
  prepare_requests(b);
  uint32_t n = 0;
  for (uint32_t i = 0; i < b.request_count; ++i) {
    const write_request& r = b.requests[i];
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_write(sqe, file_.fd(), r.data, static_cast<unsigned>(r.written), r.file_offset);
    b.ops[n] = {op_kind::write, &b, static_cast<uint32_t>(r.bytes)};
    io_uring_sqe_set_data(sqe, &b.ops[n]);
    // The datasync must start after the write(s) it makes durable.
    if (fdatasync_) sqe->flags |= IOSQE_IO_LINK;
    ++n;
  }
  if (fdatasync_) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_fsync(sqe, file_.fd(), IORING_FSYNC_DATASYNC);
    b.ops[n] = {op_kind::sync, &b, 0};
    io_uring_sqe_set_data(sqe, &b.ops[n]);
    ++n;
  }
  b.ops_left = n;
}

void uring_wal::start_writers() {
  writers_.reserve(iodepth_);  // one writer per write in flight
  for (uint32_t i = 0; i < iodepth_; ++i) {
    writers_.emplace_back([this, i] {
      base::set_thread_name("silt-wal-w" + std::to_string(i));
      if (thread_nice_ != 0) (void)base::set_thread_nice(thread_nice_);
      (void)base::set_scheduler_slice(short_slice);
      writer_run();
    });
  }
}

void uring_wal::stop_writers() {
  {
    base::lock_guard lock(mu_);
    writers_stop_ = true;
  }
  writers_cv_.notify_all();
  holder_cv_.notify_all();
  for (auto& t : writers_) t.join();
  writers_.clear();
}

bool uring_wal::worth_waking_writer(const batch& b) const {
  const size_t inflight = inflight_count_.load(std::memory_order_acquire);
  if (inflight >= iodepth_) return false;
  // A sealed batch is full or waited for by the writer that sealed it; below eager_writes any
  // append is written at once; with more in flight, a small batch waits for the next
  // completion, which takes it grown.
  if (closing_ || b.sealed || b.used >= wake_bytes_) return true;
  // A held batch waits until its hold is over (a writer sleeps until its time limit).
  if (b.held && !hold_over(b, clock::now())) return false;
  return inflight < eager_writes;
}

void uring_wal::writer_run() {
  bool just_wrote = false;
  for (;;) {
    batch* b = writer_take(just_wrote);
    // Stopping comes after the I/O thread has drained: nothing is left to write.
    if (b == nullptr) return;
    prepare_requests(*b);
    write_batch(*b);
    finish_written(*b);
    just_wrote = true;
  }
}

uring_wal::batch* uring_wal::writer_take(bool just_wrote) {
  batch* taken = nullptr;
  std::function<void()> room_callback;
  {
    base::unique_lock lock(mu_);
    for (;;) {
      if (writers_stop_) return nullptr;
      clock::time_point until{};
      bool holds = false;
      // A writer that has just written takes whatever queued behind its write; one that was
      // asleep, only what it would have been woken for, and a held batch once its commit delay
      // is over (until then one writer sleeps until that time, the others until woken). A
      // failure is the I/O thread's.
      if (!failed_ && inflight_count_.load(std::memory_order_acquire) < iodepth_ &&
          !queue_.empty() && !queue_.front()->appends.empty() &&
          (just_wrote || queue_.front()->held || worth_waking_writer(*queue_.front()))) {
        const auto now = clock::now();
        const front_state f = take_front(now);
        if (f.taken != nullptr) {
          taken = f.taken;
          break;
        }
        // Otherwise the last appender still copying wakes a writer.
        if (f.wait > clock::duration::zero()) until = now + f.wait;
        holds = f.held;
      }
      just_wrote = false;
      ++idle_writers_;
      if (holds && !holder_asleep_) {
        holder_asleep_ = true;
        lock.wait_until(holder_cv_, until);
        holder_asleep_ = false;
      } else if (until != clock::time_point{} && !holds) {
        lock.wait_until(writers_cv_, until);
      } else {
        lock.wait(writers_cv_);
      }
      --idle_writers_;
    }
    if (room_waiters_ > 0) room_cv_.notify_all();
    if (room_wanted_) {
      room_wanted_ = false;
      room_callback = room_callback_;
    }
  }
  if (room_callback) room_callback();
  return taken;
}

void uring_wal::finish_written(batch& b) {
  {
    base::lock_guard retire_lock(retire_mu_);
    if (b.failed) {
      // Appends are refused until the WAL has recovered (as reap() does for io_uring).
      base::lock_guard lock(mu_);
      failed_ = true;
      if (room_waiters_ > 0) room_cv_.notify_all();
    }
    b.ops_left = 0;
    retire();  // `b` may be gone from here on
  }
  // The I/O thread waits for completions only to recover from a failure or to exit.
  bool wake = false;
  {
    base::lock_guard lock(mu_);
    wake = closing_ || failed_;
  }
  if (wake) signal();
}

void uring_wal::write_batch(batch& b) {
  for (uint32_t i = 0; i < b.request_count && !b.failed; ++i) {
    const write_request& r = b.requests[i];
    ssize_t n = 0;
    do {
      n = ::pwrite(file_.fd(), r.data, r.written, static_cast<off_t>(r.file_offset));
    } while (n < 0 && errno == EINTR);
    // Like a short completion through io_uring, a short write fails the batch.
    if (n < 0 || static_cast<uint64_t>(n) != r.bytes) b.failed = true;
  }
  if (fdatasync_ && !b.failed) {
    if (::fdatasync(file_.fd()) != 0) {
      b.failed = true;
    } else {
      syncs_.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

void uring_wal::submit_header(const format::header_slot& slot, bool epoch_step) {
  format::encode_header_slot(slot, header_buf_.span());
  pending_header_ = slot;
  pending_epoch_step_ = epoch_step;
  header_failed_ = false;
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_write(sqe, file_.fd(), header_buf_.data(), format::block_size,
                      static_cast<uint64_t>(next_header_index_) * format::block_size);
  io_uring_sqe_set_data(sqe, &header_ops_[0]);
  header_ops_left_ = 1;
  if (fdatasync_) {
    sqe->flags |= IOSQE_IO_LINK;
    sqe = next_sqe();
    io_uring_prep_fsync(sqe, file_.fd(), IORING_FSYNC_DATASYNC);
    io_uring_sqe_set_data(sqe, &header_ops_[1]);
    header_ops_left_ = 2;
  }
  header_inflight_ = true;
}

void uring_wal::reap() {
  io_uring_cqe* cqe = nullptr;
  unsigned head = 0;
  unsigned seen = 0;
  bool failure = false;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    ++seen;
    if (cqe->user_data == LIBURING_UDATA_TIMEOUT) continue;
    auto* op = static_cast<io_op*>(io_uring_cqe_get_data(cqe));
    const int res = cqe->res;
    switch (op->kind) {
      case op_kind::wake:
        wake_armed_ = false;
        break;
      case op_kind::write:
        if (res < 0 || static_cast<uint32_t>(res) != op->len) {
          op->owner->failed = true;
          failure = true;
        }
        --op->owner->ops_left;
        break;
      case op_kind::sync:
        if (res < 0) {
          op->owner->failed = true;
          failure = true;
        } else {
          syncs_.fetch_add(1, std::memory_order_relaxed);
        }
        --op->owner->ops_left;
        break;
      case op_kind::header_write:
        if (res != static_cast<int>(format::block_size)) header_failed_ = true;
        --header_ops_left_;
        break;
      case op_kind::header_sync:
        if (res < 0) header_failed_ = true;
        --header_ops_left_;
        break;
    }
  }
  io_uring_cq_advance(&ring_, seen);
  if (header_inflight_ && header_ops_left_ == 0) {
    header_inflight_ = false;
    if (header_failed_) {
      header_failed();
    } else {
      finish_header();
    }
  }
  if (failure) {
    // Appends are refused until the WAL has recovered; queued batches are failed once the
    // writes before them have reported.
    base::lock_guard lock(mu_);
    failed_ = true;
    if (room_waiters_ > 0) room_cv_.notify_all();
  }
  finish_batches();
}

void uring_wal::header_failed() {
  // The slot written may be torn; the other one is still current, so the next header write
  // goes to the same slot again (next_header_index_ unchanged).
  failed_writes_.fetch_add(1, std::memory_order_relaxed);
  retry_at_ = clock::now() + header_retry_delay;
  base::lock_guard lock(mu_);
  failed_ = true;
  // Closing does not wait for a disk that keeps failing.
  if (closing_) recovery_abandoned_ = true;
  if (room_waiters_ > 0) room_cv_.notify_all();
}

void uring_wal::finish_header() {
  header_writes_.fetch_add(1, std::memory_order_relaxed);
  header_ = pending_header_;
  next_header_index_ ^= 1;
  if (pending_epoch_step_) {
    if (--epoch_steps_ == 0) finish_recovery();
    return;
  }
  trim_point_.store(header_.trim_point, std::memory_order_release);
  std::function<void()> callback;
  {
    base::lock_guard lock(mu_);
    persisted_trim_ = header_.trim_point;
    if (room_waiters_ > 0) room_cv_.notify_all();
    if (room_wanted_) {
      room_wanted_ = false;
      callback = room_callback_;
    }
  }
  if (callback) callback();
}

void uring_wal::remember_rewind(const batch& b) {
  if (rewind_start_) return;
  rewind_start_ = b.start;
  rewind_tail_.assign(b.buf.data(), b.buf.data() + b.tail);
}

format::header_slot uring_wal::begin_recovery() {
  // Caller holds mu_; nothing is in flight and no batch holds appends. Writing resumes where
  // the first failed write began: what the failed writes left there belongs to the old epoch,
  // which replay does not accept at or after the new epoch's start.
  if (rewind_start_) {
    next_start_ = *rewind_start_;
    queue_.clear();
    if (!rewind_tail_.empty()) {
      auto b = std::make_unique<batch>();
      b->start = *rewind_start_;
      b->buf = take_buffer(standard_buffer_);
      b->used = b->tail = rewind_tail_.size();
      std::memcpy(b->buf.data(), rewind_tail_.data(), rewind_tail_.size());
      queue_.push_back(std::move(b));
    }
    rewind_start_.reset();
    rewind_tail_.clear();
  }
  const wal_position resume =
      queue_.empty() ? next_start_ : queue_.front()->start + queue_.front()->used;
  format::header_slot next = header_;
  next.epoch = header_.epoch + 1;
  next.epoch_start = resume;
  epoch_steps_ = 2;
  return next;
}

void uring_wal::finish_recovery() {
  recoveries_.fetch_add(1, std::memory_order_relaxed);
  {
    base::lock_guard retire_lock(retire_mu_);
    io_failed_ = false;
  }
  std::function<void()> callback;
  {
    base::lock_guard lock(mu_);
    epoch_ = header_.epoch;
    failed_ = false;
    room_wanted_ = false;
    callback = room_callback_;
    if (room_waiters_ > 0) room_cv_.notify_all();
  }
  writers_cv_.notify_all();
  holder_cv_.notify_all();
  if (callback) callback();
}

void uring_wal::finish_batches() {
  base::lock_guard retire_lock(retire_mu_);
  retire();
}

void uring_wal::retire() {
  std::vector<std::unique_ptr<batch>> done;
  {
    base::lock_guard lock(mu_);
    while (!inflight_.empty() && inflight_.front()->ops_left == 0) {
      done.push_back(std::move(inflight_.front()));
      inflight_.pop_front();
    }
  }
  if (done.empty()) return;
  const auto now = clock::now();
  for (auto& b : done) {
    if (b->failed) {
      failed_writes_.fetch_add(1, std::memory_order_relaxed);
      io_failed_ = true;
    }
    if (io_failed_) {
      {
        base::lock_guard lock(mu_);
        remember_rewind(*b);
      }
      fail_appends(*b, wal_error::io);
      continue;
    }
    durable_end_.store(b->start + b->used, std::memory_order_release);
    writes_.fetch_add(1, std::memory_order_relaxed);
    write_bytes_.fetch_add(b->write_bytes, std::memory_order_relaxed);
    appends_.fetch_add(b->appends.size(), std::memory_order_relaxed);
    if (b->opened != clock::time_point{}) {  // not the rewritten tail of open()
      batch_wait_us_.record(base::micros(b->submitted - b->opened));
      write_us_.record(base::micros(now - b->submitted));
    }
    for (auto& a : b->appends) a.done(a.end);
  }
  base::lock_guard lock(mu_);
  for (auto& b : done) {
    // As many as can be in use at once: a fresh buffer costs a page fault per 4 KiB written.
    if (b->buf.size() == standard_buffer_ && free_buffers_.size() < iodepth_ + max_queued_batches) {
      free_buffers_.push_back(std::move(b->buf));
    }
  }
  // Under mu_, where the WAL's threads decide whether a write slot is free or it is drained;
  // only now, once the callbacks (and a failed batch's rewind) are done.
  inflight_count_.fetch_sub(done.size(), std::memory_order_acq_rel);
}

void uring_wal::run() {
  std::vector<batch*> ready;
  std::vector<std::unique_ptr<batch>> doomed;
  for (;;) {
    reap();
    ready.clear();
    doomed.clear();
    bool write_header = false;
    bool epoch_step = false;
    format::header_slot header_next;
    clock::duration wait = clock::duration::zero();
    bool waiting_for_copies = false;
    bool holding = false;
    bool exit = false;
    std::function<void()> room_callback;
    {
      base::lock_guard lock(mu_);
      const auto now = clock::now();
      while (!queue_.empty()) {
        batch& b = *queue_.front();
        // A rewritten tail with nothing after it yet is not worth a write. (Batches are
        // sealed only with appends in them.)
        if (b.appends.empty()) break;
        if (failed_) {
          // The batches before it report first, in order.
          if (inflight_count_.load(std::memory_order_acquire) > 0) break;
          if (!b.sealed) seal(b);
          if (b.copies > 0) {
            waiting_for_copies = true;
            break;
          }
          remember_rewind(b);
          doomed.push_back(std::move(queue_.front()));
          queue_.pop_front();
          continue;
        }
        // Writer threads take batches themselves.
        if (threaded_ || inflight_count_.load(std::memory_order_acquire) >= iodepth_) break;
        const front_state f = take_front(now);
        if (f.taken == nullptr) {
          wait = f.wait;
          waiting_for_copies = f.copies;
          holding = f.held;
          break;
        }
        ready.push_back(f.taken);
      }
      if (!ready.empty() || !doomed.empty()) {
        if (room_waiters_ > 0) room_cv_.notify_all();
        if (room_wanted_) {
          room_wanted_ = false;
          room_callback = room_callback_;
        }
      }
      const size_t inflight = inflight_count_.load(std::memory_order_acquire);
      const bool drained =
          doomed.empty() && inflight == 0 && !header_inflight_ && !has_work_to_drain();
      if (failed_ && !recovery_abandoned_ && drained) {
        // Recovery: the new epoch's header, one slot after the other, then appends again (also
        // when closing, so that what the failed writes left is never replayed).
        if (now < retry_at_ && !closing_) {
          wait = retry_at_ - now;
        } else {
          if (epoch_steps_ == 0) recovery_slot_ = begin_recovery();
          header_next = recovery_slot_;
          header_next.sequence = header_.sequence + 1;
          write_header = true;
          epoch_step = true;
        }
      } else if (!header_inflight_ && !failed_ && requested_trim_ > persisted_trim_) {
        header_next = header_;
        header_next.sequence = header_.sequence + 1;
        header_next.trim_point = requested_trim_;
        write_header = true;
      }
      // Header writes are few (one per trim at most, coalesced); they take from the IOPS budget
      // but never wait for it.
      if (write_header) bucket_.take(1, now);
      exit = closing_ && drained && !write_header;
      if (threaded_ || exit || inflight >= iodepth_ ||
          (wait > clock::duration::zero() && !holding)) {
        // Writer threads wake this thread themselves when it has work.
        wake_on_ = wake_on::nothing;
      } else if (!holding && (inflight < eager_writes || waiting_for_copies)) {
        wake_on_ = wake_on::any_work;
      } else {
        // A held front batch waits out its commit delay (a timed wait) unless it grows first.
        wake_on_ = wake_on::big_batch;
      }
    }
    if (exit) break;
    if (room_callback) room_callback();
    for (auto& b : doomed) fail_appends(*b, wal_error::io);
    for (batch* b : ready) submit_batch(*b);
    if (write_header) submit_header(header_next, epoch_step);
    if (!wake_armed_) arm_wake();
    if (!doomed.empty()) {
      // Failing them changed the state without any I/O to wake this thread (recovery, or
      // exit when closing, may now begin): look again before sleeping.
      (void)io_uring_submit(&ring_);
      continue;
    }
    int rc = 0;
    if (wait > clock::duration::zero()) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
      __kernel_timespec ts{};
      ts.tv_sec = ns / 1'000'000'000;
      ts.tv_nsec = ns % 1'000'000'000;
      io_uring_cqe* cqe = nullptr;
      rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
    } else {
      rc = io_uring_submit_and_wait(&ring_, 1);
    }
    if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      base::lock_guard lock(mu_);
      failed_ = true;
      if (room_waiters_ > 0) room_cv_.notify_all();
    }
  }
}

}  // namespace silt::storage::wal
