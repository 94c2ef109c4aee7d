#include "storage/wal/object_wal.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/crc32c.h"
#include "base/endian.h"
#include "base/log.h"
#include "base/sched.h"

namespace silt::storage::wal {
namespace {

constexpr uint8_t object_magic[8] = {'S', 'W', 'A', 'L', 'O', 'B', 'J', '1'};
constexpr size_t object_header_bytes = 24;  // magic, start, count, crc
constexpr size_t record_header_bytes = 24;  // length, stream, offset, crc
constexpr uint8_t trim_magic[8] = {'S', 'W', 'A', 'L', 'T', 'R', 'I', 'M'};
constexpr size_t trim_bytes = 20;  // magic, position, crc

uint32_t record_crc(base::stream_id stream, base::offset offset, std::span<const uint8_t> payload) {
  uint8_t head[16];
  base::store_be<uint64_t>(head, stream.value());
  base::store_be<int64_t>(head + 8, offset.value());
  return base::crc32c(payload, base::crc32c(head));
}

std::vector<uint8_t> encode_trim(wal_position position) {
  std::vector<uint8_t> out(trim_bytes);
  std::memcpy(out.data(), trim_magic, 8);
  base::store_be<uint64_t>(out.data() + 8, position);
  base::store_be<uint32_t>(out.data() + 16, base::crc32c({out.data(), 16}));
  return out;
}

std::optional<wal_position> decode_trim(std::span<const uint8_t> data) {
  if (data.size() != trim_bytes || std::memcmp(data.data(), trim_magic, 8) != 0) return {};
  if (base::load_be<uint32_t>(data.data() + 16) != base::crc32c(data.first(16))) return {};
  return base::load_be<uint64_t>(data.data() + 8);
}

// The start position a WAL object's key names; nullopt for other keys (the trim point).
std::optional<wal_position> start_of(std::string_view prefix, std::string_view key) {
  if (!key.starts_with(prefix)) return {};
  key.remove_prefix(prefix.size());
  if (key.size() != 24 || !key.ends_with(".wal")) return {};
  wal_position v = 0;
  for (const char c : key.substr(0, 20)) {
    if (c < '0' || c > '9') return {};
    v = v * 10 + static_cast<wal_position>(c - '0');
  }
  return v;
}

}  // namespace

std::string object_wal_key(std::string_view prefix, wal_position start) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%020" PRIu64 ".wal", start);
  return std::string(prefix) + digits;
}

std::string object_wal_trim_key(std::string_view prefix) {
  return std::string(prefix) + "trim";
}

uint64_t object_wal_frame_bytes(size_t payload_size) {
  return record_header_bytes + payload_size;
}

std::vector<uint8_t> encode_wal_object(wal_position start,
                                       const std::vector<replayed_record>& records) {
  size_t size = object_header_bytes;
  for (const auto& r : records) size += object_wal_frame_bytes(r.payload.size());
  std::vector<uint8_t> out(size);
  uint8_t* p = out.data();
  std::memcpy(p, object_magic, 8);
  base::store_be<uint64_t>(p + 8, start);
  base::store_be<uint32_t>(p + 16, static_cast<uint32_t>(records.size()));
  base::store_be<uint32_t>(p + 20, base::crc32c({p, 20}));
  p += object_header_bytes;
  for (const auto& r : records) {
    base::store_be<uint32_t>(p, static_cast<uint32_t>(r.payload.size()));
    base::store_be<uint64_t>(p + 4, r.stream_id.value());
    base::store_be<int64_t>(p + 12, r.offset.value());
    base::store_be<uint32_t>(p + 20, record_crc(r.stream_id, r.offset, r.payload));
    if (!r.payload.empty())
      std::memcpy(p + record_header_bytes, r.payload.data(), r.payload.size());
    p += object_wal_frame_bytes(r.payload.size());
  }
  return out;
}

tl::expected<decoded_wal_object, wal_error> decode_wal_object(std::span<const uint8_t> data) {
  const auto bad = tl::make_unexpected(wal_error::bad_format);
  if (data.size() < object_header_bytes || std::memcmp(data.data(), object_magic, 8) != 0) {
    return bad;
  }
  if (base::load_be<uint32_t>(data.data() + 20) != base::crc32c(data.first(20))) return bad;
  decoded_wal_object out;
  out.start = base::load_be<uint64_t>(data.data() + 8);
  const uint32_t count = base::load_be<uint32_t>(data.data() + 16);
  data = data.subspan(object_header_bytes);
  wal_position at = out.start;
  out.records.reserve(std::min<size_t>(count, data.size() / record_header_bytes));
  for (uint32_t i = 0; i < count; ++i) {
    if (data.size() < record_header_bytes) return bad;
    const uint32_t length = base::load_be<uint32_t>(data.data());
    if (data.size() - record_header_bytes < length) return bad;
    replayed_record r;
    r.stream_id = base::stream_id(base::load_be<uint64_t>(data.data() + 4));
    r.offset = base::offset(base::load_be<int64_t>(data.data() + 12));
    r.payload = data.subspan(record_header_bytes, length);
    if (base::load_be<uint32_t>(data.data() + 20) != record_crc(r.stream_id, r.offset, r.payload)) {
      return bad;
    }
    r.position = at;
    at += object_wal_frame_bytes(length);
    r.end = at;
    out.records.push_back(r);
    data = data.subspan(record_header_bytes + length);
  }
  if (!data.empty()) return bad;  // bytes after the last record
  out.end = at;
  return out;
}

tl::expected<object_wal_scan, wal_error> read_object_wal(
    object_store& store, std::string_view prefix,
    const std::function<void(const replayed_record&)>& replay) {
  auto listed = store.list(prefix);
  if (!listed) return tl::make_unexpected(wal_error::io);
  object_wal_scan scan;
  const std::string trim_key = object_wal_trim_key(prefix);
  std::vector<std::pair<wal_position, std::string>> objects;
  for (const auto& o : *listed) {
    if (o.key == trim_key) {
      auto data = store.get(o.key, 0, to_end);
      if (!data) return tl::make_unexpected(wal_error::io);
      auto trim = decode_trim(*data);
      if (!trim) return tl::make_unexpected(wal_error::bad_format);
      scan.trim_point = *trim;
    } else if (auto start = start_of(prefix, o.key)) {
      objects.emplace_back(*start, o.key);
    }
  }
  std::sort(objects.begin(), objects.end());
  scan.end = scan.trim_point;
  bool gap = false;
  for (const auto& [start, key] : objects) {
    if (gap) {
      scan.beyond_gap.push_back(key);
      continue;
    }
    auto data = store.get(key, 0, to_end);
    if (!data) return tl::make_unexpected(wal_error::io);
    auto object = decode_wal_object(*data);
    if (!object || object->start != start) return tl::make_unexpected(wal_error::bad_format);
    if (object->end <= scan.trim_point) continue;  // trimmed; its delete did not happen yet
    if (start > scan.end) {
      gap = true;
      scan.beyond_gap.push_back(key);
      continue;
    }
    for (const auto& r : object->records) {
      if (r.position >= scan.trim_point && replay) replay(r);
    }
    scan.objects[start] = object->end;
    scan.end = std::max(scan.end, object->end);
  }
  return scan;
}

tl::expected<std::unique_ptr<object_wal>, wal_error> object_wal::open(
    object_wal_options options, const std::function<void(const replayed_record&)>& replay) {
  if (!options.store || options.prefix.empty() || !options.prefix.ends_with('/') ||
      options.flush_bytes == 0 || options.max_in_flight == 0 || options.capacity == 0) {
    return tl::make_unexpected(wal_error::bad_options);
  }
  auto scan = read_object_wal(*options.store, options.prefix, replay);
  if (!scan) return tl::make_unexpected(scan.error());
  for (const auto& key : scan->beyond_gap) {
    // Never acknowledged; its key must be free for the appends to come.
    if (!options.store->remove(key)) return tl::make_unexpected(wal_error::io);
  }
  return std::unique_ptr<object_wal>(new object_wal(std::move(options), std::move(*scan)));
}

object_wal::object_wal(object_wal_options options, object_wal_scan scan)
    : options_(std::move(options)),
      next_(scan.end),
      durable_(scan.end),
      trim_point_(scan.trim_point),
      trim_wanted_(scan.trim_point),
      stored_(std::move(scan.objects)),
      outstanding_bytes_(scan.end - scan.trim_point) {
  // Everything above is set before the threads start.
  open_batch_.start = open_batch_.end = scan.end;
  threads_.emplace_back([this] {
    base::set_thread_name("silt-wal-flush");
    if (options_.thread_nice != 0) (void)base::set_thread_nice(options_.thread_nice);
    flush_loop();
  });
  for (uint32_t i = 0; i < options_.max_in_flight; ++i) {
    threads_.emplace_back([this, i] {
      base::set_thread_name("silt-wal-put" + std::to_string(i));
      if (options_.thread_nice != 0) (void)base::set_thread_nice(options_.thread_nice);
      write_loop();
    });
  }
}

object_wal::~object_wal() {
  close();
}

tl::expected<void, wal_error> object_wal::try_append(base::stream_id stream_id, base::offset offset,
                                                     std::span<const uint8_t> payload,
                                                     append_callback done) {
  const uint64_t frame = object_wal_frame_bytes(payload.size());
  std::lock_guard lock(mu_);
  if (closing_) return tl::make_unexpected(wal_error::closed);
  if (fenced_) return tl::make_unexpected(wal_error::io);
  if (frame > options_.capacity) return tl::make_unexpected(wal_error::too_large);
  if (outstanding_bytes_ + frame > options_.capacity) {
    full_refused_ = true;
    return tl::make_unexpected(wal_error::full);
  }
  const bool first = open_batch_.appends.empty();
  if (first) open_batch_.first_append = std::chrono::steady_clock::now();
  next_ += frame;
  outstanding_bytes_ += frame;
  open_batch_.end = next_;
  open_batch_.appends.push_back({stream_id, offset,
                                 std::vector<uint8_t>(payload.begin(), payload.end()),
                                 std::move(done), next_});
  if (open_batch_.end - open_batch_.start >= options_.flush_bytes) {
    seal();
  } else if (first) {
    wake_.notify_one();  // the flusher now waits for this batch's interval
  }
  return {};
}

void object_wal::seal() {
  auto b = std::make_shared<batch>(std::move(open_batch_));
  open_batch_ = batch{};
  open_batch_.start = open_batch_.end = b->end;
  sealed_.push_back(b);
  in_order_.push_back(b);
  writable_.notify_one();
}

void object_wal::append(base::stream_id stream_id, base::offset offset,
                        std::span<const uint8_t> payload, append_callback done) {
  for (;;) {
    auto r = try_append(stream_id, offset, payload, done);
    if (r) return;
    if (r.error() != wal_error::full) {
      done(tl::make_unexpected(r.error()));
      return;
    }
    std::unique_lock lock(mu_);
    room_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

void object_wal::set_room_callback(std::function<void()> callback) {
  std::lock_guard lock(mu_);
  room_callback_ = std::move(callback);
}

void object_wal::trim(wal_position position) {
  std::lock_guard lock(mu_);
  if (position > trim_wanted_ && position <= durable_) {
    trim_wanted_ = position;
    wake_.notify_one();
  }
}

wal_position object_wal::durable_end() const {
  std::lock_guard lock(mu_);
  return durable_;
}

wal_position object_wal::trim_point() const {
  std::lock_guard lock(mu_);
  return trim_point_;
}

wal_stats object_wal::stats() const {
  std::lock_guard lock(mu_);
  wal_stats out = stats_;
  out.batch_wait_us = batch_wait_us_.snapshot();
  out.write_us = write_us_.snapshot();
  return out;
}

bool object_wal::fenced() const {
  std::lock_guard lock(mu_);
  return fenced_;
}

void object_wal::flush_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    const bool has = !open_batch_.appends.empty();
    const auto due = open_batch_.first_append + options_.flush_interval;
    if (has && (closing_ || open_batch_.end - open_batch_.start >= options_.flush_bytes ||
                std::chrono::steady_clock::now() >= due)) {
      seal();
      continue;
    }
    if (trim_wanted_ > trim_point_) {
      // The trim point first, then the objects before it: a crash between the two leaves
      // objects that the next open skips.
      const wal_position to = trim_wanted_;
      lock.unlock();
      const bool saved = static_cast<bool>(
          options_.store->put(object_wal_trim_key(options_.prefix), encode_trim(to)));
      std::vector<wal_position> wholly_before;
      if (saved) {
        std::lock_guard relock(mu_);
        for (const auto& [start, end] : stored_) {
          if (end <= to) wholly_before.push_back(start);
        }
      }
      for (const wal_position start : wholly_before) {
        if (options_.store->remove(object_wal_key(options_.prefix, start))) {
          std::lock_guard relock(mu_);
          stored_.erase(start);
        }
      }
      lock.lock();
      if (saved) {
        outstanding_bytes_ -= std::min(outstanding_bytes_, to - trim_point_);
        trim_point_ = to;
        ++stats_.header_writes;
        room_.notify_all();
        if (full_refused_ && room_callback_) {
          full_refused_ = false;
          auto callback = room_callback_;
          lock.unlock();
          callback();
          lock.lock();
        }
      } else {
        lock.unlock();
        std::this_thread::sleep_for(options_.retry_delay);
        lock.lock();
      }
      continue;
    }
    if (closing_) {
      writable_.notify_all();
      return;
    }
    if (has) {
      wake_.wait_until(lock, due);
    } else {
      wake_.wait_for(lock, std::chrono::milliseconds(100));
    }
  }
}

void object_wal::write_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    writable_.wait(lock,
                   [&] { return !sealed_.empty() || (closing_ && open_batch_.appends.empty()); });
    if (sealed_.empty()) return;
    auto b = sealed_.front();
    sealed_.pop_front();
    lock.unlock();
    const bool ok = write_batch(*b);
    lock.lock();
    if (ok) {
      b->written = true;
      stored_[b->start] = b->end;
      ++stats_.writes;
      stats_.appends += b->appends.size();
      stats_.write_bytes += b->end - b->start;
    } else {
      b->given_up = true;
    }
    lock.unlock();
    complete_written();
    lock.lock();
  }
}

bool object_wal::write_batch(const batch& b) {
  std::vector<replayed_record> records;
  records.reserve(b.appends.size());
  for (const auto& a : b.appends) {
    records.push_back({0, 0, a.stream_id, a.offset, a.payload});
  }
  const auto data = encode_wal_object(b.start, records);
  const std::string key = object_wal_key(options_.prefix, b.start);
  const auto began = std::chrono::steady_clock::now();
  batch_wait_us_.record(base::micros(began - b.first_append));
  for (uint32_t attempt = 1;; ++attempt) {
    auto r = options_.store->put_if_absent(key, data);
    if (r) {
      write_us_.record(base::micros(std::chrono::steady_clock::now() - began));
      return true;
    }
    std::unique_lock lock(mu_);
    if (r.error() == store_error::already_exists) {
      if (!fenced_) {
        SILT_LOG(error,
                 "silt: WAL object %s was written by another writer: this WAL is fenced and "
                 "refuses appends",
                 key.c_str());
      }
      fenced_ = true;
      return false;
    }
    ++stats_.failed_writes;
    if (closing_) return false;
    if (attempt == 1) {
      SILT_LOG(warn, "silt: writing WAL object %s failed (%s); retrying until it succeeds",
               key.c_str(), std::string(store_error_name(r.error())).c_str());
    }
    wake_.wait_for(lock, options_.retry_delay);
  }
}

void object_wal::complete_written() {
  // Callbacks run in position order, one batch at a time: the finished batches at the front
  // of in_order_.
  std::lock_guard deliver(deliver_mu_);
  for (;;) {
    std::shared_ptr<batch> b;
    wal_error failure = wal_error::io;
    {
      std::lock_guard lock(mu_);
      if (in_order_.empty()) return;
      auto& front = in_order_.front();
      if (!front->written && !front->given_up) return;
      if (front->given_up) failure = fenced_ ? wal_error::io : wal_error::closed;
      b = front;
      in_order_.pop_front();
      if (b->written) durable_ = b->end;
    }
    for (auto& a : b->appends) {
      if (b->written) {
        a.done(a.end);
      } else {
        a.done(tl::make_unexpected(failure));
      }
    }
  }
}

void object_wal::close() {
  {
    std::lock_guard lock(mu_);
    if (closing_ && threads_.empty()) return;
    closing_ = true;
    wake_.notify_all();
    writable_.notify_all();
    room_.notify_all();
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  // What no writer took (sealed after the writers left) fails as closed.
  {
    std::lock_guard lock(mu_);
    for (auto& b : sealed_) b->given_up = true;
    sealed_.clear();
  }
  complete_written();
}

}  // namespace silt::storage::wal
