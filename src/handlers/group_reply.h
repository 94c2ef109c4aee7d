// A coordinator answer awaited by a handler: the coordinator calls back (on whatever thread
// completes the join, sync or write) and the handler's coroutine resumes on its own executor.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace silt::handlers {

template <typename T>
class group_reply {
 public:
  explicit group_reply(const boost::asio::any_io_executor& ex)
      : channel_(std::make_shared<channel>(ex, 1)) {}

  // What the coordinator calls, exactly once.
  [[nodiscard]] std::function<void(T)> callback() const {
    return
        [ch = channel_](T value) { ch->try_send(boost::system::error_code{}, std::move(value)); };
  }
  // The value, once called back.
  [[nodiscard]] boost::asio::awaitable<T> get() {
    co_return co_await channel_->async_receive(boost::asio::use_awaitable);
  }

 private:
  using channel = boost::asio::experimental::concurrent_channel<void(boost::system::error_code, T)>;
  std::shared_ptr<channel> channel_;
};

}  // namespace silt::handlers
