#include "coordinator/offset_writer.h"

#include <algorithm>

#include <boost/asio/post.hpp>

namespace silt::coordinator {

offset_writer::offset_writer(metadata::group_store& store, boost::asio::any_io_executor executor,
                             observer applied)
    : store_(store), executor_(std::move(executor)), applied_(std::move(applied)) {}

void offset_writer::write(metadata::shard_write w, callback done) {
  {
    base::lock_guard lock(mu_);
    queue_.push_back({std::move(w), std::move(done)});
    if (flushing_) return;  // the running flush takes it next
    flushing_ = true;
  }
  boost::asio::post(executor_, [this] { flush(); });
}

void offset_writer::flush() {
  for (;;) {
    std::vector<pending> batch;
    {
      base::lock_guard lock(mu_);
      if (queue_.empty()) {
        flushing_ = false;
        return;
      }
      batch.swap(queue_);
    }
    // The writes in the order they were queued: the store applies them in that order, so a
    // commit and a later deletion of the same offset end as the deletion.
    std::vector<metadata::shard_write> writes;
    writes.reserve(batch.size());
    for (auto& p : batch) writes.push_back(std::move(p.write));
    const auto fenced = store_.apply(writes);
    for (size_t i = 0; i < batch.size(); ++i) {
      protocol::error_code e = protocol::error_code::none;
      if (!fenced) {
        e = fenced.error() == metadata::group_store_error::fenced
                ? protocol::error_code::not_coordinator
                : protocol::error_code::coordinator_not_available;
      } else if (std::find(fenced->begin(), fenced->end(), writes[i].shard) != fenced->end()) {
        e = protocol::error_code::not_coordinator;
      }
      if (e == protocol::error_code::none && applied_) applied_(writes[i]);
      batch[i].done(e);
    }
  }
}

}  // namespace silt::coordinator
