// Stream store throughput: upload (WAL data -> stream-set objects in the local object store)
// and catch-up reads of that data back from the objects, through the block cache. Printed,
// never asserted. Usage: storage_bench [DIR] (default: ./storage-bench-data, removed after).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "protocol/record_batch.h"
#include "storage/stream_store.h"

namespace {

using namespace silt;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

std::vector<uint8_t> make_batch(int records, size_t value_size) {
  protocol::record_batch_builder b;
  std::vector<uint8_t> value(value_size);
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<uint8_t>(i * 7);
  for (int i = 0; i < records; ++i) b.add(1700000000000 + i, std::nullopt, value);
  return b.build();
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const fs::path dir = argc > 1 ? fs::path(argv[1]) : fs::path("storage-bench-data");
  fs::remove_all(dir);
  fs::create_directories(dir);
  constexpr int streams = 16;
  constexpr size_t total_bytes = size_t{1} << 30;  // 1 GiB through the store
  const auto batch = make_batch(64, 1024);         // ~64 KiB batches of 1 KiB records
  const size_t batches = total_bytes / batch.size();

  auto objects = storage::open_object_store("file://" + (dir / "objects").string());
  if (!objects) {
    std::fprintf(stderr, "%s\n", objects.error().c_str());
    return 1;
  }
  storage::stream_store_options o;
  o.wal.path = (dir / "wal").string();
  o.wal.capacity = uint64_t{2} << 30;
  o.metadata_uri = (dir / "catalog.db").string();
  o.log_cache_bytes = 0;  // every read below comes from objects
  o.block_cache_bytes = size_t{256} << 20;
  o.stream_object_bytes = UINT64_MAX;  // stream-set objects only
  o.background = false;
  auto store = storage::stream_store::open(o, **objects);
  if (!store) {
    std::fprintf(stderr, "%s\n", store.error().c_str());
    return 1;
  }
  auto& s = **store;

  // Fill: appends to 16 streams; every 64 MiB, wait for durability and upload what is there
  // (as the upload threshold would), timing appends and uploads apart.
  double append_s = 0;
  double upload_s = 0;
  constexpr size_t upload_every = size_t{64} << 20;
  size_t since_upload = 0;
  auto t = clock_type::now();
  for (size_t i = 0; i < batches; ++i) {
    auto done = std::make_shared<std::promise<void>>();
    auto durable = done->get_future();
    s.append(silt::base::stream_id(i % streams), batch, [done](auto) { done->set_value(); });
    since_upload += batch.size();
    if (since_upload >= upload_every || i + 1 == batches) {
      durable.wait();  // in order: everything before is durable too
      append_s += seconds_since(t);
      t = clock_type::now();
      if (auto r = s.run_upload_once(); !r) {
        std::fprintf(stderr, "upload: %s\n", r.error().c_str());
        return 1;
      }
      upload_s += seconds_since(t);
      since_upload = 0;
      t = clock_type::now();
    }
  }
  const double mib = static_cast<double>(batches * batch.size()) / (1 << 20);

  // Catch-up: each stream read from 0 to its end in 1 MiB fetches.
  t = clock_type::now();
  size_t read_bytes = 0;
  for (int stream = 0; stream < streams; ++stream) {
    silt::base::offset offset(0);
    for (;;) {
      auto r = s.read(silt::base::stream_id(stream), offset, 1 << 20);
      if (!r) {
        std::fprintf(stderr, "read: %s\n",
                     std::string(storage::stream_error_name(r.error())).c_str());
        return 1;
      }
      if (r->chunks.empty()) break;
      read_bytes += r->bytes();
      offset = r->next_offset;
    }
  }
  const double read_s = seconds_since(t);
  const auto st = s.stats();
  std::printf("stream store, %d streams, %.0f MiB of 64 KiB batches\n", streams, mib);
  std::printf("  %-34s %10.1f MiB/s\n", "append (WAL, durable)", mib / append_s);
  std::printf("  %-34s %10.1f MiB/s  (%llu stream-set objects)\n", "upload to local objects",
              mib / upload_s, static_cast<unsigned long long>(st.stream_set_objects));
  std::printf("  %-34s %10.1f MiB/s  (%llu GETs for %llu reads)\n", "catch-up read from objects",
              static_cast<double>(read_bytes) / (1 << 20) / read_s,
              static_cast<unsigned long long>(st.object_gets),
              static_cast<unsigned long long>(st.cold_reads));
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  std::printf("  %-34s %10.1f MiB  (log cache %zu MiB + block cache %zu MiB configured)\n",
              "peak RSS", static_cast<double>(usage.ru_maxrss) / 1024, o.log_cache_bytes >> 20,
              o.block_cache_bytes >> 20);
  s.close();
  fs::remove_all(dir);
  return 0;
}
