#include "handlers/stream_scan.h"

namespace silt::handlers {

bool scan_batches(storage::stream_store& store, base::stream_id stream_id, base::offset from,
                  const std::function<bool(const protocol::record_batch&)>& fn) {
  const base::offset end = store.offsets(stream_id).end_offset;
  base::offset offset = std::max(from, store.offsets(stream_id).start_offset);
  while (offset < end) {
    auto r = store.read(stream_id, offset, size_t{4} << 20);
    if (!r) return false;
    if (r->chunks.empty()) return true;
    for (auto chunk : r->chunks) {
      protocol::batch_reader br(chunk);
      for (;;) {
        auto b = br.next();
        if (!b || !*b) break;
        if (base::offset((*b)->header.last_offset()) < offset) continue;
        if (!fn(**b)) return true;
      }
    }
    if (r->next_offset <= offset) return true;
    offset = r->next_offset;
  }
  return true;
}

}  // namespace silt::handlers
