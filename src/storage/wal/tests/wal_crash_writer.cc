// The process that the crash test kills: appends records of known contents from a few threads
// with real syncs and prints "stream offset end" for each acknowledged record, until killed.
//
// Usage: wal_crash_writer PATH dsync|fdatasync IODEPTH THREADS FIRST_STREAM CAPACITY
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "storage/wal/tests/test_util.h"
#include "storage/wal/wal.h"

namespace {

using silt::storage::wal::replayed_record;
using silt::storage::wal::sync_mode;
using silt::storage::wal::wal;
using silt::storage::wal::wal_error;
using silt::storage::wal::wal_options;
using silt::storage::wal::wal_position;
using silt::storage::wal::testing::crash_record_size;
using silt::storage::wal::testing::payload_for;

// Appends in flight per thread: enough for group commit to coalesce.
constexpr std::ptrdiff_t window = 16;

void write_line(const char* line, size_t len) {
  while (len > 0) {
    const ssize_t n = ::write(STDOUT_FILENO, line, len);
    if (n <= 0) ::_exit(4);
    line += n;
    len -= static_cast<size_t>(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s PATH dsync|fdatasync IODEPTH THREADS FIRST_STREAM CAPACITY\n",
                 argv[0]);
    return 2;
  }
  wal_options options;
  options.path = argv[1];
  options.sync = std::string(argv[2]) == "fdatasync" ? sync_mode::fdatasync : sync_mode::dsync;
  options.iodepth = static_cast<uint32_t>(std::atoi(argv[3]));
  const int threads = std::atoi(argv[4]);
  const uint64_t first_stream = std::strtoull(argv[5], nullptr, 10);
  options.capacity = std::strtoull(argv[6], nullptr, 10);
  options.max_write_bytes = 256u << 10;

  // Like a broker that has uploaded what it replayed, keep only the last quarter ring of it.
  std::vector<wal_position> replayed_ends;
  auto opened =
      wal::open(options, [&](const replayed_record& r) { replayed_ends.push_back(r.end); });
  if (!opened) {
    std::fprintf(stderr, "open: %s\n", std::string(wal_error_name(opened.error())).c_str());
    return 3;
  }
  wal& w = **opened;
  const uint64_t capacity = w.capacity();
  wal_position trimmed = w.trim_point();
  for (const wal_position end : replayed_ends) {
    if (w.durable_end() - end >= capacity / 4) trimmed = end;
  }
  w.trim(trimmed);

  // Trim state belongs to the I/O thread, where callbacks run.
  std::deque<wal_position> acked_ends;
  auto on_ack = [&](uint64_t stream, int64_t offset, wal_position end) {
    char line[96];
    const int len = std::snprintf(
        line, sizeof line, "%llu %lld %llu\n", static_cast<unsigned long long>(stream),
        static_cast<long long>(offset), static_cast<unsigned long long>(end));
    write_line(line, static_cast<size_t>(len));
    acked_ends.push_back(end);
    if (end - trimmed > capacity / 2) {
      wal_position target = trimmed;
      while (!acked_ends.empty() && end - acked_ends.front() > capacity / 4) {
        target = acked_ends.front();
        acked_ends.pop_front();
      }
      if (target > trimmed) {
        w.trim(target);
        trimmed = target;
      }
    }
  };

  std::vector<std::thread> appenders;
  appenders.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    appenders.emplace_back([&, stream = first_stream + static_cast<uint64_t>(t)] {
      auto slots = std::make_unique<std::counting_semaphore<window>>(window);
      for (int64_t offset = 0;; ++offset) {
        slots->acquire();
        w.append(silt::base::stream_id(stream), silt::base::offset(offset),
                 payload_for(stream, offset, crash_record_size(stream, offset)),
                 [&, stream, offset, s = slots.get()](tl::expected<wal_position, wal_error> r) {
                   if (!r) ::_exit(5);
                   on_ack(stream, offset, *r);
                   s->release();
                 });
      }
    });
  }
  // Never meant to get here: the test kills the process long before.
  std::this_thread::sleep_for(std::chrono::seconds(30));
  ::_exit(0);
}
