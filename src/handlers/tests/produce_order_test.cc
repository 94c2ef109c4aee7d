// A connection's produces take their turns in arrival order, whichever order they reach
// wait_turn() and release() in.
#include "handlers/produce_order.h"

#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <gtest/gtest.h>

namespace silt::handlers {
namespace {

namespace asio = boost::asio;

TEST(ProduceOrder, TurnsFollowTicketsAcrossSuspensions) {
  asio::io_context io;
  produce_order order;
  std::vector<std::string> appended;
  const auto t0 = order.take(7);
  const auto t1 = order.take(7);
  const auto t2 = order.take(7);
  const auto other = order.take(8);  // another connection: its own line
  // The second and third are ready first; the first waits (as for room in the WAL) before it
  // appends.
  auto produce = [&](produce_order::ticket t, std::string name,
                     int delay_ms) -> asio::awaitable<void> {
    produce_turn turn(order, t);
    asio::steady_timer timer(io, std::chrono::milliseconds(delay_ms));
    co_await timer.async_wait(asio::use_awaitable);
    co_await order.wait_turn(turn.ticket());
    appended.push_back(name);
    turn.release();
  };
  asio::co_spawn(io, produce(t2, "third", 0), asio::detached);
  asio::co_spawn(io, produce(t1, "second", 5), asio::detached);
  asio::co_spawn(io, produce(t0, "first", 50), asio::detached);
  asio::co_spawn(io, produce(other, "other", 0), asio::detached);
  io.run();
  EXPECT_EQ(appended, (std::vector<std::string>{"other", "first", "second", "third"}));
}

TEST(ProduceOrder, ATicketReleasedWithoutAppendingPassesItsTurn) {
  asio::io_context io;
  produce_order order;
  const auto t0 = order.take(1);
  const auto t1 = order.take(1);
  const auto t2 = order.take(1);
  order.release(t1);  // failed validation: never waited
  bool done = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await order.wait_turn(t2);
        done = true;
        order.release(t2);
      },
      asio::detached);
  io.poll();
  EXPECT_FALSE(done);  // t0 still holds the turn
  order.release(t0);
  io.run();
  EXPECT_TRUE(done);
  // The line is gone, and a new produce goes at once.
  const auto t3 = order.take(1);
  bool next = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await order.wait_turn(t3);
        next = true;
        order.release(t3);
      },
      asio::detached);
  io.restart();
  io.run();
  EXPECT_TRUE(next);
}

}  // namespace
}  // namespace silt::handlers
