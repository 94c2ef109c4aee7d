// A write-ahead log in object storage (wal.type=object): no local disk at all.
//
// Appends are grouped for flush_interval or until flush_bytes are waiting, whichever comes
// first, into one WAL object per flush, written with put_if_absent under
// PREFIX/<start position, 20 digits>.wal; an append's callback runs once its object and every
// object before it are stored. Up to max_in_flight objects are written at a time. A write
// that fails is retried (the same key and bytes, so that a lost reply is harmless) until it
// succeeds or the WAL closes; meanwhile appends queue up to `capacity` bytes and are then
// refused with `full`. A key found taken by other bytes means another writer uses this prefix:
// the WAL is fenced, fails what is queued with `io` and refuses every later append.
//
// trim(position) records the trim point in PREFIX/trim and deletes the objects wholly before
// it. open() lists the prefix and replays the records after the trim point, up to the first
// gap (objects past a gap were written out of order by a writer that crashed; none of them was
// acknowledged): those are deleted, and appends continue after the last object replayed.
// A takeover by another broker is the same listing (read_object_wal).
// Format: docs/formats/wal-object.md.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "storage/object/object_store.h"
#include "storage/wal/wal.h"

namespace silt::storage::wal {

struct object_wal_options {
  object_store* store = nullptr;  // must outlive the WAL
  std::string prefix;             // e.g. "wal/node-1/"; ends with '/'
  std::chrono::milliseconds flush_interval{10};
  uint64_t flush_bytes = 4ull << 20;
  uint32_t max_in_flight = 4;
  // Bytes appended but not yet trimmed at most (what the uploads have not caught up with).
  uint64_t capacity = 1ull << 30;
  // Waits between attempts of a failed object write.
  std::chrono::milliseconds retry_delay{200};
  // The nice value of the WAL's threads, as wal_options::thread_nice.
  int thread_nice = 0;
};

// The key of the WAL object that starts at `start`, and of the trim point, under `prefix`.
[[nodiscard]] std::string object_wal_key(std::string_view prefix, wal_position start);
[[nodiscard]] std::string object_wal_trim_key(std::string_view prefix);

// One WAL object: its records (payloads view into `data`, the object's bytes).
struct decoded_wal_object {
  wal_position start = 0;
  wal_position end = 0;
  std::vector<replayed_record> records;
};
// Encodes the records appended as one object (start position, then each record's stream,
// offset and payload); the inverse of decode_wal_object.
[[nodiscard]] std::vector<uint8_t> encode_wal_object(wal_position start,
                                                     const std::vector<replayed_record>& records);
// bad_format when the bytes are not a whole, intact WAL object.
[[nodiscard]] tl::expected<decoded_wal_object, wal_error> decode_wal_object(
    std::span<const uint8_t> data);
// Bytes a record of `payload_size` takes in an object (its share of the position space).
[[nodiscard]] uint64_t object_wal_frame_bytes(size_t payload_size);

// Reads the WAL under `prefix` as open() would, calling `replay` for each record after the
// trim point, in order, up to the first gap; returns the end of the last object replayed
// (the trim point when there is none) and the keys past the gap.
struct object_wal_scan {
  wal_position trim_point = 0;
  wal_position end = 0;
  std::map<wal_position, wal_position> objects;  // start -> end of each object replayed
  std::vector<std::string> beyond_gap;
};
[[nodiscard]] tl::expected<object_wal_scan, wal_error> read_object_wal(
    object_store& store, std::string_view prefix,
    const std::function<void(const replayed_record&)>& replay);

class object_wal final : public wal {
 public:
  [[nodiscard]] static tl::expected<std::unique_ptr<object_wal>, wal_error> open(
      object_wal_options options, const std::function<void(const replayed_record&)>& replay);
  ~object_wal() override;

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
  [[nodiscard]] uint64_t capacity() const override { return options_.capacity; }
  [[nodiscard]] wal_stats stats() const override;
  void close() override;

  // Whether another writer took a key of this WAL (see the file comment).
  [[nodiscard]] bool fenced() const;

 private:
  struct pending {
    base::stream_id stream_id;
    base::offset offset;
    std::vector<uint8_t> payload;
    append_callback done;
    wal_position end = 0;
  };
  struct batch {
    wal_position start = 0;
    wal_position end = 0;
    std::vector<pending> appends;
    std::chrono::steady_clock::time_point first_append;
    bool written = false;
    bool given_up = false;  // the write failed for good (fenced, or closing)
  };

  object_wal(object_wal_options options, object_wal_scan scan);
  // Moves the open batch to the writers (mu_ held).
  void seal();
  void flush_loop();
  void write_loop();
  // Writes `b`'s object until it is stored; false when the WAL is fenced or closing.
  bool write_batch(const batch& b);
  void complete_written();

  const object_wal_options options_;
  std::mutex deliver_mu_;  // callbacks run one batch at a time, in order
  mutable std::mutex mu_;
  std::condition_variable wake_;      // the flusher: a batch to seal, or closing
  std::condition_variable writable_;  // the writers: a sealed batch, or closing
  std::condition_variable room_;      // append(): room, or closing
  std::function<void()> room_callback_;
  batch open_batch_;                             // filling (guarded by mu_)
  std::deque<std::shared_ptr<batch>> sealed_;    // waiting for a writer
  std::deque<std::shared_ptr<batch>> in_order_;  // sealed, in position order, until completed
  wal_position next_ = 0;                        // where the next record starts
  wal_position durable_ = 0;
  wal_position trim_point_ = 0;
  wal_position trim_wanted_ = 0;
  std::map<wal_position, wal_position> stored_;  // start -> end of the objects not deleted
  uint64_t outstanding_bytes_ = 0;               // appended, not trimmed
  bool closing_ = false;
  bool fenced_ = false;
  bool full_refused_ = false;
  wal_stats stats_;                // the counters; the histograms are below
  base::histogram batch_wait_us_;  // first append of a batch -> its object's first PUT
  base::histogram write_us_;       // the PUTs of one object, retries included
  std::vector<std::thread> threads_;
};

}  // namespace silt::storage::wal
