// Writes committed offsets and group changes to the group store in batches: whatever queues
// while a transaction runs goes into the next one, so a thousand commits a second cost a few
// transactions, not a thousand (group commit, as the WAL does for records).
//
// Ownership: write() may be called from any thread; the transactions run one at a time on the
// executor given (the blocking pool), never on a network thread. Each write's callback runs
// there once its transaction has ended. Lifecycle: the executor must outlive the writer's
// last flush; the owner drains the pool before destroying it.
#pragma once

#include <functional>
#include <mutex>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "base/mutex.h"
#include "metadata/group_store.h"
#include "protocol/generated/error_code.h"

namespace silt::coordinator {

class offset_writer {
 public:
  // The outcome of one write: none, NOT_COORDINATOR (the shard moved to another broker) or
  // COORDINATOR_NOT_AVAILABLE (the database failed; nothing was written).
  using callback = std::function<void(protocol::error_code)>;

  // Called with each write once the store has applied it, in the order applied, before its
  // callback (the offsets topic's view follows the store with it: offsets_log.h).
  using observer = std::function<void(const metadata::shard_write&)>;

  offset_writer(metadata::group_store& store, boost::asio::any_io_executor executor,
                observer applied = nullptr);

  // Queues `w`; `done` runs once it is durable or refused.
  void write(metadata::shard_write w, callback done);

 private:
  struct pending {
    metadata::shard_write write;
    callback done;
  };
  void flush();

  metadata::group_store& store_;
  boost::asio::any_io_executor executor_;
  const observer applied_;
  base::mutex mu_;
  std::vector<pending> queue_ GUARDED_BY(mu_);
  bool flushing_ GUARDED_BY(mu_) = false;
};

}  // namespace silt::coordinator
