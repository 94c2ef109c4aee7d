#include "handlers/data_waiters.h"

#include <algorithm>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace silt::handlers {

namespace asio = boost::asio;

data_waiters::waiter_ptr data_waiters::subscribe(const asio::any_io_executor& executor,
                                                 const std::vector<base::stream_id>& streams) {
  auto w = std::make_shared<waiter>(executor);
  w->streams_ = streams;
  base::lock_guard lock(mu_);
  for (base::stream_id s : streams) by_stream_[s].push_back(w);
  return w;
}

void data_waiters::unsubscribe(const waiter_ptr& w) {
  base::lock_guard lock(mu_);
  for (base::stream_id s : w->streams_) {
    auto it = by_stream_.find(s);
    if (it == by_stream_.end()) continue;
    auto& v = it->second;
    v.erase(std::remove_if(v.begin(), v.end(),
                           [&](const std::weak_ptr<waiter>& p) {
                             auto sp = p.lock();
                             return !sp || sp == w;
                           }),
            v.end());
    if (v.empty()) by_stream_.erase(it);
  }
}

asio::awaitable<bool> data_waiters::wait(const waiter_ptr& w, std::chrono::milliseconds timeout) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
  auto result = co_await (w->channel_.async_receive(asio::as_tuple(asio::use_awaitable)) ||
                          timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  co_return result.index() == 0;
}

void data_waiters::notify(base::stream_id stream_id) {
  std::vector<std::shared_ptr<waiter>> wake;
  {
    base::lock_guard lock(mu_);
    auto it = by_stream_.find(stream_id);
    if (it == by_stream_.end()) return;
    for (auto& p : it->second) {
      if (auto sp = p.lock()) wake.push_back(std::move(sp));
    }
    by_stream_.erase(it);
  }
  for (auto& w : wake) w->wake();
}

void data_waiters::notify_all() {
  std::vector<std::shared_ptr<waiter>> wake;
  {
    base::lock_guard lock(mu_);
    for (auto& [s, v] : by_stream_) {
      for (auto& p : v) {
        if (auto sp = p.lock()) wake.push_back(std::move(sp));
      }
    }
    by_stream_.clear();
  }
  for (auto& w : wake) w->wake();
}

}  // namespace silt::handlers
