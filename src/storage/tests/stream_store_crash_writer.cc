// Appends to a stream store until killed, with uploads, compaction and retention running in
// the background; prints "stream base_offset count" for every acknowledged append. Used by
// stream_store_crash_test.cc. Usage: stream_store_crash_writer DIR SEED [PUTS]
// With PUTS, the writer kills itself (SIGKILL) right after its PUTS-th object is written,
// before the store learns that the PUT succeeded and can commit it; it prints "put KEY" first.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <unistd.h>

#include "protocol/record_batch.h"
#include "storage/object/faulty_store.h"
#include "storage/stream_store.h"

using namespace silt;

namespace {

constexpr int streams = 4;

std::vector<uint8_t> batch(uint64_t stream, int64_t first, int count) {
  protocol::record_batch_builder b;
  for (int i = 0; i < count; ++i) {
    const std::string value = "s" + std::to_string(stream) + "-" + std::to_string(first + i);
    b.add(1700000000000 + first + i, std::nullopt,
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
  }
  return b.build();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s DIR SEED [PUTS]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  auto objects = storage::open_object_store("file://" + dir + "/objects");
  if (!objects) return 1;
  storage::faulty_store_options kill_after_put;
  if (argc == 4) {
    // Shared: the store calls a copy of the hook.
    auto left = std::make_shared<std::atomic<int>>(std::atoi(argv[3]));
    kill_after_put.after_inner_call = [left](storage::store_operation op, std::string_view key) {
      if (op != storage::store_operation::put || !key.starts_with("objects/") || --*left != 0) {
        return;
      }
      std::printf("put %.*s\n", static_cast<int>(key.size()), key.data());
      std::fflush(stdout);
      std::raise(SIGKILL);
    };
  }
  storage::faulty_store store_objects(**objects, kill_after_put);
  storage::stream_store_options o;
  o.wal.path = dir + "/wal";
  o.wal.capacity = 2 << 20;  // small: the ring wraps and appends wait for uploads
  o.metadata_uri = dir + "/catalog.db";
  o.log_cache_bytes = 256 << 10;
  o.object_block_size = 8192;
  o.upload_threshold_bytes = 64 << 10;
  o.upload_interval = std::chrono::milliseconds(10);
  o.compaction_interval = std::chrono::milliseconds(50);
  o.delete_delay = std::chrono::milliseconds(0);
  // The sweep as often as compaction and without a grace period: only the serialisation of
  // the background tasks keeps it away from objects not committed yet.
  o.sweep_interval = std::chrono::milliseconds(50);
  o.sweep_grace = std::chrono::milliseconds(0);
  auto store = storage::stream_store::open(o, store_objects);
  if (!store) {
    std::fprintf(stderr, "open: %s\n", store.error().c_str());
    return 1;
  }
  std::mutex out_mu;
  std::vector<std::thread> threads;
  threads.reserve(streams);
  for (int t = 0; t < streams; ++t) {
    threads.emplace_back([&, t] {
      const auto stream = base::stream_id(static_cast<uint64_t>(t));
      std::mt19937 rng(static_cast<unsigned>(std::atoi(argv[2]) * 31 + t));
      // Values carry their offset; continue where the stream ends.
      base::offset next = (*store)->offsets(stream).end_offset;
      for (;;) {
        const int count = 1 + static_cast<int>(rng() % 5);
        std::mutex m;
        std::condition_variable cv;
        bool done = false;
        bool ok = false;
        (*store)->append(stream, batch(stream.value(), next.value(), count), [&](auto r) {
          ok = r.has_value();
          if (r) {
            std::lock_guard lock(out_mu);
            std::printf("%llu %lld %d\n", static_cast<unsigned long long>(stream.value()),
                        static_cast<long long>(r->value()), count);
            std::fflush(stdout);
          }
          std::lock_guard lock(m);
          done = true;
          cv.notify_one();
        });
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return done; });
        if (ok) {
          next += count;
        } else {
          // Refused (the WAL is full until an upload makes room): the same records again.
          lock.unlock();
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
}
