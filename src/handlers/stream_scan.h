// Walking a stream's batches from an offset to its durable end, for work that needs more than
// a fetch's worth (producer state replay, timestamp searches).
#pragma once

#include <cstdint>
#include <functional>

#include "base/ids.h"
#include "protocol/record_batch.h"
#include "storage/stream_store.h"

namespace silt::handlers {

// Calls fn with every whole batch that ends at or after `from`, in offset order, reading the
// stream a few MiB at a time; stops when fn returns false, at the end, or on a read error.
// False on a read error (the object store failing): the walk stopped short of the end.
[[nodiscard]] bool scan_batches(storage::stream_store& store, base::stream_id stream_id,
                                base::offset from,
                                const std::function<bool(const protocol::record_batch&)>& fn);

}  // namespace silt::handlers
