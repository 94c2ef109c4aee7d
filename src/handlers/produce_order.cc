#include "handlers/produce_order.h"

#include <chrono>

#include <boost/asio/this_coro.hpp>

namespace silt::handlers {

namespace asio = boost::asio;

produce_order::ticket produce_order::take(uint64_t connection_id) {
  base::lock_guard lock(mu_);
  auto& l = lines_[connection_id];
  return {connection_id, l.next++};
}

asio::awaitable<void> produce_order::wait_turn(ticket t) {
  data_waiters::waiter_ptr w;
  {
    base::lock_guard lock(mu_);
    auto& l = lines_[t.connection];
    if (l.serving == t.number) co_return;  // the common case: nobody ahead
    w = std::make_shared<data_waiters::waiter>(co_await asio::this_coro::executor);
    l.waiting[t.number] = w;
  }
  for (;;) {
    // Woken by the release before it; the timeout only re-checks (every earlier produce's
    // waits end by its own timeout).
    (void)co_await data_waiters::wait(w, std::chrono::milliseconds(1000));
    base::lock_guard lock(mu_);
    auto& l = lines_[t.connection];
    if (l.serving == t.number) {
      l.waiting.erase(t.number);
      co_return;
    }
  }
}

void produce_order::release(ticket t) {
  data_waiters::waiter_ptr wake;
  {
    base::lock_guard lock(mu_);
    auto it = lines_.find(t.connection);
    if (it == lines_.end()) return;
    auto& l = it->second;
    if (t.number != l.serving) {
      // Ended before its turn came (it never appended): its turn passes when it comes.
      l.released.insert(t.number);
      l.waiting.erase(t.number);
      return;
    }
    ++l.serving;
    while (!l.released.empty() && *l.released.begin() == l.serving) {
      l.released.erase(l.released.begin());
      ++l.serving;
    }
    if (auto w = l.waiting.find(l.serving); w != l.waiting.end()) wake = w->second;
    if (l.serving == l.next && l.waiting.empty()) lines_.erase(it);
  }
  if (wake) wake->wake();
}

}  // namespace silt::handlers
