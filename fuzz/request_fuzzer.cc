// libFuzzer target: any bytes as a request frame (after the 4-byte length). Decoding must
// never crash or read out of bounds; a frame that decodes must re-encode to bytes that decode
// and re-encode to themselves, with encoded_size() telling their exact length.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "protocol/generated/api_table.h"
#include "protocol/record_batch.h"
#include "protocol/request_header.h"

namespace {

using namespace silt::protocol;

template <typename Msg>
void check_stable(const Msg& m, int16_t version) {
  writer w;
  m.encode(w, version);
  if (!w.ok()) return;
  const auto once = w.take();
  if (once.size() != m.encoded_size(version)) std::abort();
  reader r(once);
  Msg again;
  again.decode(r, version);
  r.expect_end();
  if (!r.ok()) std::abort();
  writer w2;
  again.encode(w2, version);
  if (w2.take() != once) std::abort();
}

void walk_records(const std::optional<records_view>& records) {
  if (!records) return;
  batch_reader batches(records->bytes());
  for (int i = 0; i < 64; ++i) {
    auto next = batches.next();
    if (!next || !next->has_value()) return;
    auto decoded = decode_records(**next, 1 << 20);
    (void)decoded;
  }
}

template <typename Msg>
void inspect(const Msg& /*m*/) {}

void inspect(const produce_request& m) {
  for (const auto& t : m.topic_data) {
    for (const auto& p : t.partition_data) walk_records(p.records);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> frame(data, size);
  auto header = parse_request_header(frame);
  if (!header) return 0;
  const int16_t version = header->header.request_api_version;
  visit_api(header->header.request_api_key, [&](auto request_type, auto /*response_type*/) {
    using request = typename decltype(request_type)::type;
    if (version < request::min_version || version > request::max_version) return;
    reader r(frame.subspan(header->header_size));
    request m;
    m.decode(r, version);
    if (!r.ok()) return;
    inspect(m);
    check_stable(m, version);
  });
  return 0;
}
