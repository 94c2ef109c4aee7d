// Fetches waiting for data (long polls): a fetch that has less than min_bytes registers for
// the streams it reads and sleeps until one of them grows or max_wait_ms passes.
//
// notify() runs on a WAL thread after an append is durable; wait() runs on a
// connection's strand. Registration happens before the fetch's last check for data, so a
// notification can never fall between the check and the sleep.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>

#include "base/ids.h"
#include "base/mutex.h"

namespace silt::handlers {

class data_waiters {
 public:
  class waiter;
  using waiter_ptr = std::shared_ptr<waiter>;

  // A key that is not a stream (stream ids never come near it): the WAL may have room again,
  // or has recovered from a failed write.
  static constexpr base::stream_id wal_room{UINT64_MAX};

  // Registers interest in `streams` on behalf of a coroutine running on `executor`.
  [[nodiscard]] waiter_ptr subscribe(const boost::asio::any_io_executor& executor,
                                     const std::vector<base::stream_id>& streams);
  // Sleeps until a subscribed stream was notified (true) or `timeout` passed (false).
  [[nodiscard]] static boost::asio::awaitable<bool> wait(const waiter_ptr& w,
                                                         std::chrono::milliseconds timeout);
  // Drops the registration (also done by the destructor of the last waiter_ptr).
  void unsubscribe(const waiter_ptr& w);

  // A stream has new durable data.
  void notify(base::stream_id stream_id);
  // Wakes every waiter (shutdown).
  void notify_all();

 private:
  base::mutex mu_;
  std::unordered_map<base::stream_id, std::vector<std::weak_ptr<waiter>>> by_stream_
      GUARDED_BY(mu_);
};

class data_waiters::waiter {
 public:
  explicit waiter(const boost::asio::any_io_executor& ex) : channel_(ex, 1) {}
  void wake() { channel_.try_send(boost::system::error_code{}); }

 private:
  friend class data_waiters;
  boost::asio::experimental::concurrent_channel<void(boost::system::error_code)> channel_;
  std::vector<base::stream_id> streams_;
};

}  // namespace silt::handlers
