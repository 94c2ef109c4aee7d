// A coordinator answer awaited by a handler: the coordinator calls back (on whatever thread
// completes the join, sync or write) and the handler's coroutine resumes on its own executor.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
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
  // The value, once called back. For answers whose time the state machine bounds (a join is
  // answered by its rebalance timeout at the latest, and at shutdown).
  [[nodiscard]] boost::asio::awaitable<T> get() {
    co_return co_await channel_->async_receive(boost::asio::use_awaitable);
  }
  // The value, or none when `timeout` passed first (a write to a database that does not answer).
  [[nodiscard]] boost::asio::awaitable<std::optional<T>> get_for(
      std::chrono::milliseconds timeout) {
    using namespace boost::asio::experimental::awaitable_operators;
    namespace asio = boost::asio;
    asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
    auto result = co_await (channel_->async_receive(asio::as_tuple(asio::use_awaitable)) ||
                            timer.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (result.index() != 0) co_return std::nullopt;
    co_return std::move(std::get<1>(std::get<0>(result)));
  }

 private:
  using channel = boost::asio::experimental::concurrent_channel<void(boost::system::error_code, T)>;
  std::shared_ptr<channel> channel_;
};

}  // namespace silt::handlers
