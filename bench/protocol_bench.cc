// Protocol codec throughput on 1 MiB of record data, beside memcpy of the same bytes.
// Printed, never asserted. Run: build/bench/protocol_bench
#include <cstring>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "protocol/generated/fetch_response.h"
#include "protocol/generated/produce_request.h"
#include "protocol/record_batch.h"

namespace {

using namespace silt::protocol;

// One record batch of 1 MiB of values (1,024 records of 1 KiB), uncompressed.
const std::vector<uint8_t>& batch() {
  static const std::vector<uint8_t> b = [] {
    record_batch_builder builder;
    const std::vector<uint8_t> value(1024, 'v');
    for (int i = 0; i < 1024; ++i) {
      const std::string key = "key-" + std::to_string(i);
      builder.add(
          1700000000000 + i,
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(key.data()), key.size()),
          std::span<const uint8_t>(value));
    }
    return builder.build();
  }();
  return b;
}

std::vector<uint8_t> produce_frame() {
  produce_request p;
  p.acks = -1;
  p.timeout_ms = 30000;
  auto& t = p.topic_data.emplace_back();
  t.name = "bench-topic";
  auto& part = t.partition_data.emplace_back();
  part.index = 0;
  part.records = records_view(batch());
  writer w(p.encoded_size(9));
  p.encode(w, 9);
  return w.take();
}

fetch_response fetch_message() {
  fetch_response f;
  auto& t = f.responses.emplace_back();
  t.topic = "bench-topic";
  auto& p = t.partitions.emplace_back();
  p.partition_index = 0;
  p.high_watermark = 1000;
  p.records = records_view(batch());
  return f;
}

// Reports throughput in MiB/s (of the frame or batch handled per iteration).
void report_mib_per_second(benchmark::State& state, size_t bytes_per_iteration) {
  state.counters["MiB/s"] =
      benchmark::Counter(static_cast<double>(bytes_per_iteration) *
                             static_cast<double>(state.iterations()) / (1024.0 * 1024.0),
                         benchmark::Counter::kIsRate);
}

void BM_Memcpy(benchmark::State& state) {
  const auto& src = batch();
  std::vector<uint8_t> dst(src.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  report_mib_per_second(state, src.size());
}
BENCHMARK(BM_Memcpy);

// What a broker does with a produce: decode the request, then validate each batch (CRC).
void BM_ProduceDecodeAndValidate(benchmark::State& state) {
  const auto frame = produce_frame();
  for (auto _ : state) {
    reader r(frame);
    produce_request p;
    p.decode(r, 9);
    batch_reader batches(p.topic_data[0].partition_data[0].records->bytes());
    auto b = batches.next();
    benchmark::DoNotOptimize(b);
  }
  report_mib_per_second(state, frame.size());
}
BENCHMARK(BM_ProduceDecodeAndValidate);

void BM_ProduceDecode(benchmark::State& state) {
  const auto frame = produce_frame();
  for (auto _ : state) {
    reader r(frame);
    produce_request p;
    p.decode(r, 9);
    benchmark::DoNotOptimize(p);
  }
  report_mib_per_second(state, frame.size());
}
BENCHMARK(BM_ProduceDecode);

void BM_ProduceReencode(benchmark::State& state) {
  const auto frame = produce_frame();
  reader r(frame);
  produce_request p;
  p.decode(r, 9);
  for (auto _ : state) {
    writer w(p.encoded_size(9));
    p.encode(w, 9);
    benchmark::DoNotOptimize(w.buffer().data());
  }
  report_mib_per_second(state, frame.size());
}
BENCHMARK(BM_ProduceReencode);

// A Fetch response copied into one buffer, as a plain write() would need.
void BM_FetchResponseEncodeCopy(benchmark::State& state) {
  const auto f = fetch_message();
  const size_t n = f.encoded_size(12);
  for (auto _ : state) {
    writer w(n);
    f.encode(w, 12);
    benchmark::DoNotOptimize(w.buffer().data());
  }
  report_mib_per_second(state, n);
}
BENCHMARK(BM_FetchResponseEncodeCopy);

// The same response with the records referenced (sent later with writev/sendmsg).
void BM_FetchResponseEncodeZeroCopy(benchmark::State& state) {
  const auto f = fetch_message();
  const size_t n = f.encoded_size(12);
  for (auto _ : state) {
    writer w(256);
    w.set_zero_copy_threshold(4096);
    f.encode(w, 12);
    benchmark::DoNotOptimize(w.segments().data());
  }
  report_mib_per_second(state, n);
}
BENCHMARK(BM_FetchResponseEncodeZeroCopy);

void BM_FetchResponseDecode(benchmark::State& state) {
  const auto f = fetch_message();
  writer w;
  f.encode(w, 12);
  const auto frame = w.take();
  for (auto _ : state) {
    reader r(frame);
    fetch_response back;
    back.decode(r, 12);
    benchmark::DoNotOptimize(back);
  }
  report_mib_per_second(state, frame.size());
}
BENCHMARK(BM_FetchResponseDecode);

}  // namespace

BENCHMARK_MAIN();
