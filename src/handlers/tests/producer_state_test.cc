// Idempotent producer state over a real stream store (WAL file, local object store, SQLite):
// duplicates, gaps, epochs, and the state surviving a restart through snapshots and replay.
#include "handlers/producer_state.h"

#include <future>

#include <gtest/gtest.h>

#include "metadata/stream_catalog.h"
#include "metadata/topic_registry.h"
#include "protocol/record_batch.h"
#include "storage/object/faulty_store.h"
#include "storage/object/local_store.h"
#include "storage/wal/tests/test_util.h"

namespace silt::handlers {
namespace {

base::stream_id sid(uint64_t v) {
  return base::stream_id(v);
}

base::offset off(int64_t v) {
  return base::offset(v);
}

// Named streams: the thread-safety analysis matches lock_for(stream1) with a check(stream1, ...)
// that requires it (an argument computed by a call, stream1, matches nothing).
constexpr base::stream_id stream1{1};

using protocol::error_code;
using verdict = producer_state::verdict;

std::vector<uint8_t> idempotent_batch(int64_t pid, int16_t epoch, int32_t seq, int count) {
  protocol::record_batch_builder b;
  b.producer(pid, epoch, seq);
  for (int i = 0; i < count; ++i) {
    const std::string v = "v" + std::to_string(seq + i);
    b.add(1700000000000 + i, std::nullopt,
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size()));
  }
  return b.build();
}

protocol::record_batch_header header_of(const std::vector<uint8_t>& batch) {
  protocol::batch_reader r(batch);
  auto b = r.next();
  EXPECT_TRUE(b && *b);
  return (**b).header;
}

class ProducerStateTest : public ::testing::Test {
 protected:
  // With `on_call`, the store's objects are read and written through a faulty_store that
  // calls it after every call (and injects nothing), and the log cache keeps nothing uploaded.
  void open(std::function<void(storage::store_operation, std::string_view)> on_call = {}) {
    auto objects = storage::local_store::open(dir_.path("objects"));
    ASSERT_TRUE(objects);
    objects_ = std::move(*objects);
    storage::object_store* used = objects_.get();
    storage::stream_store_options o;
    if (on_call) {
      storage::faulty_store_options fo;
      fo.after_inner_call = std::move(on_call);
      faulty_ = std::make_unique<storage::faulty_store>(*objects_, fo);
      used = faulty_.get();
      o.log_cache_bytes = 0;
    }
    o.wal.path = dir_.path("wal");
    o.wal.capacity = 16u << 20;
    o.metadata_uri = dir_.path("meta.db");
    o.background = false;
    auto s = storage::stream_store::open(o, *used);
    ASSERT_TRUE(s) << s.error();
    store_ = std::move(*s);
    auto r = metadata::topic_registry::open(dir_.path("meta.db"));
    ASSERT_TRUE(r) << r.error();
    registry_ = std::move(*r);
    state_ = std::make_unique<producer_state>(*registry_, *store_, 86400000);
  }
  void close() {
    store_->close();
    ASSERT_TRUE(state_->snapshot());
    state_.reset();
    registry_.reset();
    store_.reset();
    objects_.reset();
  }
  // Checks and, when new, appends and records a batch; returns the verdict and base offset.
  std::pair<producer_state::check_result, base::offset> produce(base::stream_id stream,
                                                                std::vector<uint8_t> b) {
    const auto h = header_of(b);
    EXPECT_TRUE(state_->load(stream));  // as the handler: loaded without the lock
    base::lock_guard lock(state_->lock_for(stream));
    auto c = state_->check(stream, h);
    if (c.v != verdict::append) return {c, off(-1)};
    std::promise<void> done;
    auto owner = std::make_shared<std::vector<uint8_t>>(std::move(b));
    auto base = store_->append(stream, owner, *owner, [&](auto) { done.set_value(); });
    EXPECT_TRUE(base);
    done.get_future().wait();
    state_->record(stream, h, *base);
    return {c, *base};
  }

  // As the produce handler does: checks a new batch, appends it and begin()s it; returns its
  // base offset once the write is durable, before (and without) the handler's finish().
  base::offset begin_until_durable(base::stream_id stream, const std::vector<uint8_t>& b) {
    const auto h = header_of(b);
    std::promise<void> durable;
    base::offset at{-1};
    EXPECT_TRUE(state_->load(stream));
    {
      base::lock_guard lock(state_->lock_for(stream));
      EXPECT_EQ(state_->check(stream, h).v, verdict::append);
      auto owner = std::make_shared<std::vector<uint8_t>>(b);
      auto base = store_->append(stream, owner, *owner, [&](auto) { durable.set_value(); });
      EXPECT_TRUE(base);
      if (!base) return at;
      at = *base;
      state_->begin(stream, h, at);
    }
    durable.get_future().wait();
    return at;
  }

  storage::wal::testing::test_dir dir_;
  std::unique_ptr<storage::object_store> objects_;
  std::unique_ptr<storage::faulty_store> faulty_;
  std::unique_ptr<storage::stream_store> store_;
  std::unique_ptr<metadata::topic_registry> registry_;
  std::unique_ptr<producer_state> state_;
};

TEST_F(ProducerStateTest, SequencesInOrderAreAppended) {
  open();
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 0, 0, 3)).second, off(0));
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 0, 3, 2)).second, off(3));
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 0, 5, 1)).second, off(5));
}

TEST_F(ProducerStateTest, RetriedBatchIsADuplicateWithItsFirstOffsets) {
  open();
  produce(stream1, idempotent_batch(7, 0, 0, 3));
  produce(stream1, idempotent_batch(7, 0, 3, 2));
  auto [c, base] = produce(stream1, idempotent_batch(7, 0, 0, 3));
  EXPECT_EQ(c.v, verdict::duplicate);
  EXPECT_EQ(c.duplicate.first_offset, off(0));
  EXPECT_EQ(c.duplicate.last_offset, off(2));
  EXPECT_EQ(store_->offsets(stream1).end_offset, off(5));  // not written twice
}

TEST_F(ProducerStateTest, GapIsOutOfOrder) {
  open();
  produce(stream1, idempotent_batch(7, 0, 0, 3));
  auto [c, base] = produce(stream1, idempotent_batch(7, 0, 5, 1));
  EXPECT_EQ(c.v, verdict::reject);
  EXPECT_EQ(c.error, error_code::out_of_order_sequence_number);
}

TEST_F(ProducerStateTest, AGapAheadIsToldFromASequenceBehind) {
  open();
  produce(stream1, idempotent_batch(7, 0, 0, 3));
  for (int i = 0; i < 5; ++i) produce(stream1, idempotent_batch(7, 0, 3 + i, 1));
  // Expected next: 8. Ahead of it, batches are missing; behind it (older than the last five
  // batches), the batch is neither new nor a known duplicate.
  auto ahead = produce(stream1, idempotent_batch(7, 0, 12, 1)).first;
  EXPECT_EQ(ahead.error, error_code::out_of_order_sequence_number);
  EXPECT_TRUE(ahead.gap);
  auto behind = produce(stream1, idempotent_batch(7, 0, 1, 2)).first;
  EXPECT_EQ(behind.error, error_code::out_of_order_sequence_number);
  EXPECT_FALSE(behind.gap);
}

TEST_F(ProducerStateTest, AGapAcrossTheSequenceWrapIsAhead) {
  open();
  produce(stream1, idempotent_batch(7, 0, INT32_MAX - 1, 1));  // next: INT32_MAX, then 0
  auto c = produce(stream1, idempotent_batch(7, 0, 3, 1)).first;
  EXPECT_EQ(c.error, error_code::out_of_order_sequence_number);
  EXPECT_TRUE(c.gap);
}

TEST_F(ProducerStateTest, AProducerFoundWhenTheStateIsLoadedIsLoadedRecently) {
  open();
  const auto h7 = header_of(idempotent_batch(7, 0, 9, 1));
  const auto h8 = header_of(idempotent_batch(8, 0, 9, 1));
  {
    base::lock_guard lock(state_->lock_for(stream1));
    EXPECT_FALSE(state_->loaded_recently(stream1, h7));  // never loaded
  }
  produce(stream1, idempotent_batch(7, 0, 0, 3));
  {
    // Loaded empty (a new stream): producer 7 first wrote here.
    base::lock_guard lock(state_->lock_for(stream1));
    EXPECT_FALSE(state_->loaded_recently(stream1, h7));
  }
  // Another broker served the stream meanwhile: not loaded, and loaded_recently() does not
  // load it.
  state_->forget(stream1);
  {
    base::lock_guard lock(state_->lock_for(stream1));
    EXPECT_FALSE(state_->loaded_recently(stream1, h7));
  }
  // Loaded again: producer 7's batch is found, producer 8 is new.
  EXPECT_TRUE(state_->load(stream1));
  base::lock_guard lock(state_->lock_for(stream1));
  EXPECT_TRUE(state_->loaded_recently(stream1, h7));
  EXPECT_FALSE(state_->loaded_recently(stream1, h8));
}

TEST_F(ProducerStateTest, AGapAheadOfAProducerLoadedRecentlyIsARetryToCome) {
  open();
  produce(stream1, idempotent_batch(7, 0, 0, 3));
  for (int i = 0; i < 5; ++i) produce(stream1, idempotent_batch(7, 0, 3 + i, 1));
  state_->forget(stream1);  // another broker served it; it comes back
  const auto ahead = header_of(idempotent_batch(7, 0, 12, 1));
  const auto behind = header_of(idempotent_batch(7, 0, 1, 2));
  ASSERT_TRUE(state_->load(stream1));
  base::lock_guard lock(state_->lock_for(stream1));
  const auto a = state_->check(stream1, ahead);
  EXPECT_TRUE(state_->retry_to_come(stream1, ahead, a));
  const auto b = state_->check(stream1, behind);
  EXPECT_EQ(b.error, error_code::out_of_order_sequence_number);
  EXPECT_FALSE(state_->retry_to_come(stream1, behind, b));
  // Not for a verdict other than OUT_OF_ORDER_SEQUENCE_NUMBER.
  const auto next = header_of(idempotent_batch(7, 0, 8, 1));
  EXPECT_FALSE(state_->retry_to_come(stream1, next, state_->check(stream1, next)));
}

TEST_F(ProducerStateTest, AGapAfterALeadershipRefusalOfTheSameProducerIsNoted) {
  open();
  produce(stream1, idempotent_batch(7, 0, 0, 3));
  // The batch at sequence 3 was refused while the partition changed hands.
  state_->note_refused(stream1, header_of(idempotent_batch(7, 0, 3, 2)));
  EXPECT_TRUE(state_->refused_before(stream1, header_of(idempotent_batch(7, 0, 5, 1))));
  // Not the refused batch itself, nor another epoch, producer or stream.
  EXPECT_FALSE(state_->refused_before(stream1, header_of(idempotent_batch(7, 0, 3, 2))));
  EXPECT_FALSE(state_->refused_before(stream1, header_of(idempotent_batch(7, 1, 5, 1))));
  EXPECT_FALSE(state_->refused_before(stream1, header_of(idempotent_batch(8, 0, 5, 1))));
  EXPECT_FALSE(state_->refused_before(sid(2), header_of(idempotent_batch(7, 0, 5, 1))));
  // A later refusal of the same producer keeps the lowest sequence.
  state_->note_refused(stream1, header_of(idempotent_batch(7, 0, 5, 1)));
  EXPECT_TRUE(state_->refused_before(stream1, header_of(idempotent_batch(7, 0, 4, 1))));
}

TEST_F(ProducerStateTest, OldEpochIsRejectedAndNewEpochStartsAtZero) {
  open();
  produce(stream1, idempotent_batch(7, 1, 0, 1));
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 0, 1, 1)).first.error,
            error_code::invalid_producer_epoch);
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 2, 4, 1)).first.error,
            error_code::out_of_order_sequence_number);
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 2, 0, 1)).first.v, verdict::append);
}

TEST_F(ProducerStateTest, OnlyTheLastFiveBatchesAreRemembered) {
  open();
  for (int i = 0; i < 7; ++i) produce(stream1, idempotent_batch(7, 0, i, 1));
  // Batch 0 is forgotten: a retry of it is out of order, batch 2 is still a duplicate.
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 0, 0, 1)).first.v, verdict::reject);
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 0, 2, 1)).first.v, verdict::duplicate);
}

TEST_F(ProducerStateTest, StateSurvivesARestartFromSnapshotAndReplay) {
  open();
  produce(stream1, idempotent_batch(7, 0, 0, 2));
  ASSERT_TRUE(state_->snapshot());
  // Written after the snapshot: found again by replaying the stream.
  produce(stream1, idempotent_batch(7, 0, 2, 2));
  produce(sid(2), idempotent_batch(8, 0, 0, 1));
  store_->close();
  state_.reset();
  registry_.reset();
  store_.reset();
  objects_.reset();
  open();
  auto [c1, b1] = produce(stream1, idempotent_batch(7, 0, 2, 2));
  EXPECT_EQ(c1.v, verdict::duplicate);
  EXPECT_EQ(c1.duplicate.first_offset, off(2));
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 0, 0, 2)).first.v, verdict::duplicate);
  EXPECT_EQ(produce(sid(2), idempotent_batch(8, 0, 0, 1)).first.v, verdict::duplicate);
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 0, 4, 1)).second, off(4));
  close();
}

TEST_F(ProducerStateTest, CorruptSnapshotIsRebuiltFromTheStream) {
  open();
  produce(stream1, idempotent_batch(7, 0, 0, 2));
  close();
  {
    auto c = metadata::stream_catalog::open(dir_.path("meta.db"));
    ASSERT_TRUE(c);
    auto blob = (*c)->producer_state(stream1);
    ASSERT_TRUE(blob && blob->size() > 20);
    blob->resize(blob->size() - 3);  // truncated
    ASSERT_TRUE((*c)->put_producer_state(stream1, base::node_id(-1), base::leader_epoch(0), *blob));
  }
  open();
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 0, 0, 2)).first.v, verdict::duplicate);
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 0, 2, 1)).second, off(2));
  close();
}

// The handler's steps without the store: check, then begin (in flight), then finish.
TEST_F(ProducerStateTest, ABatchInFlightIsNotProducerStateUntilItIsDurable) {
  open();
  const auto b0 = header_of(idempotent_batch(7, 0, 0, 3));
  const auto b1 = header_of(idempotent_batch(7, 0, 3, 2));
  ASSERT_TRUE(state_->load(stream1));
  {
    base::lock_guard lock(state_->lock_for(stream1));
    ASSERT_EQ(state_->check(stream1, b0).v, verdict::append);
    state_->begin(stream1, b0, off(0));
    // A retry of it waits for its write; the next batch may follow it at once (pipelining).
    EXPECT_EQ(state_->check(stream1, b0).v, verdict::in_flight);
    ASSERT_EQ(state_->check(stream1, b1).v, verdict::append);
    state_->begin(stream1, b1, off(3));
  }
  state_->finish(stream1, b0, off(0));
  {
    base::lock_guard lock(state_->lock_for(stream1));
    auto c = state_->check(stream1, b0);
    EXPECT_EQ(c.v, verdict::duplicate);
    EXPECT_EQ(c.duplicate.first_offset, off(0));
    EXPECT_EQ(state_->check(stream1, b1).v, verdict::in_flight);
  }
  state_->finish(stream1, b1, off(3));
  {
    base::lock_guard lock(state_->lock_for(stream1));
    EXPECT_EQ(state_->check(stream1, b1).v, verdict::duplicate);
    EXPECT_EQ(state_->check(stream1, header_of(idempotent_batch(7, 0, 5, 1))).v, verdict::append);
  }
}

// The store's durable end moves before the write's callback records the batch (finish()): a
// snapshot taken in between must not claim to cover it, or the state read again (a restart, a
// takeover, the stream handed to another broker) misses the batch, and the producer's next
// one is judged out of order.
TEST_F(ProducerStateTest,
       ASnapshotBetweenAWritesDurabilityAndItsCallbackLeavesTheBatchToTheReplay) {
  open();
  produce(stream1, idempotent_batch(7, 0, 0, 2));
  const auto batch = idempotent_batch(7, 0, 2, 3);
  const auto h = header_of(batch);
  ASSERT_EQ(begin_until_durable(stream1, batch), off(2));
  ASSERT_EQ(store_->offsets(stream1).end_offset, off(5));
  ASSERT_TRUE(state_->snapshot());  // before the callback's finish()
  state_->finish(stream1, h, off(2));
  state_->forget(stream1);  // read again: the snapshot, then the stream after what it covers
  auto [retry, at] = produce(stream1, idempotent_batch(7, 0, 2, 3));
  EXPECT_EQ(retry.v, verdict::duplicate);
  EXPECT_EQ(retry.duplicate.first_offset, off(2));
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 0, 5, 1)).second, off(5));
  close();
}

// The stream went to another broker while a write was in flight: its callback records nothing
// and loads nothing (the stream may be another broker's by now); the next load finds the
// batch in the stream, once.
TEST_F(ProducerStateTest, ABatchDurableAfterItsStreamWasForgottenIsFoundByTheNextLoad) {
  open();
  produce(stream1, idempotent_batch(7, 0, 0, 2));
  const auto batch = idempotent_batch(7, 0, 2, 3);
  const auto h = header_of(batch);
  ASSERT_EQ(begin_until_durable(stream1, batch), off(2));
  state_->forget(stream1);
  state_->finish(stream1, h, off(2));
  EXPECT_FALSE(state_->loaded(stream1));
  auto [retry, at] = produce(stream1, idempotent_batch(7, 0, 2, 3));
  EXPECT_EQ(retry.v, verdict::duplicate);
  EXPECT_EQ(retry.duplicate.first_offset, off(2));
  {
    base::lock_guard lock(state_->lock_for(stream1));
    const auto& batches = state_->producers(stream1).at(base::producer_id(7)).batches;
    ASSERT_EQ(batches.size(), 2u);  // [0, 1] and [2, 4], each once
    EXPECT_EQ(batches.back().first_seq, 2);
  }
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 0, 5, 1)).second, off(5));
  close();
}

TEST_F(ProducerStateTest, AFailedWriteLeavesNoTraceAndItsRetryIsAppended) {
  open();
  const auto b0 = header_of(idempotent_batch(7, 0, 0, 3));
  const auto b1 = header_of(idempotent_batch(7, 0, 3, 2));
  const auto b2 = header_of(idempotent_batch(7, 0, 5, 1));
  ASSERT_TRUE(state_->load(stream1));
  {
    base::lock_guard lock(state_->lock_for(stream1));
    ASSERT_EQ(state_->check(stream1, b0).v, verdict::append);
    state_->begin(stream1, b0, off(0));
  }
  state_->finish(stream1, b0, off(0));
  {
    base::lock_guard lock(state_->lock_for(stream1));
    ASSERT_EQ(state_->check(stream1, b1).v, verdict::append);
    state_->begin(stream1, b1, off(3));
    ASSERT_EQ(state_->check(stream1, b2).v, verdict::append);
    state_->begin(stream1, b2, off(5));
  }
  // b1's write fails, and with it b2's (written after it).
  state_->finish(stream1, b1, std::nullopt);
  {
    base::lock_guard lock(state_->lock_for(stream1));
    EXPECT_EQ(state_->check(stream1, b1).v, verdict::append);  // not a duplicate: never written
    const auto c2 = state_->check(stream1, b2);
    EXPECT_EQ(c2.v, verdict::reject);  // b1 must come first
    EXPECT_EQ(c2.error, error_code::out_of_order_sequence_number);
  }
  state_->finish(stream1, b2, std::nullopt);  // its own failure changes nothing more
  {
    base::lock_guard lock(state_->lock_for(stream1));
    EXPECT_EQ(state_->check(stream1, b1).v, verdict::append);
    EXPECT_EQ(state_->check(stream1, b0).v, verdict::duplicate);
  }
}

TEST_F(ProducerStateTest, ProducerIdsAreNeverHandedOutTwiceAcrossRestarts) {
  open();
  auto a = state_->init_producer(base::producer_id(-1), base::producer_epoch(-1));
  auto b = state_->init_producer(base::producer_id(-1), base::producer_epoch(-1));
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->first, b->first);
  close();
  open();
  auto c = state_->init_producer(base::producer_id(-1), base::producer_epoch(-1));
  ASSERT_TRUE(c);
  EXPECT_GT(c->first, b->first);
  auto bumped = state_->init_producer(c->first, base::producer_epoch(0));
  ASSERT_TRUE(bumped);
  EXPECT_EQ(bumped->first, c->first);
  EXPECT_EQ(bumped->second, base::producer_epoch(1));
  close();
}

}  // namespace
}  // namespace silt::handlers

namespace silt::handlers {
namespace {

// A load reads the snapshot and replays the stream (here from objects) without the stream's
// stripe: appends of idempotent batches to the 1/64 of streams that share it go on meanwhile.
TEST_F(ProducerStateTest, ALoadReadsTheStreamWithoutHoldingItsStripe) {
  std::atomic<int> gets{0};
  std::atomic<int> stripe_taken{0};
  std::atomic<bool> watch{false};
  open([&](storage::store_operation op, std::string_view) {
    if (op != storage::store_operation::get || !watch) return;
    ++gets;
    // From another thread: is the stripe free while the load reads?
    const bool free = std::async(std::launch::async, [&] {
                        auto& m = state_->lock_for(stream1);
                        if (!m.try_lock()) return false;
                        m.unlock();
                        return true;
                      }).get();
    if (!free) ++stripe_taken;
  });
  produce(stream1, idempotent_batch(7, 0, 0, 3));
  produce(stream1, idempotent_batch(7, 0, 3, 2));
  ASSERT_TRUE(store_->run_upload_once());  // to an object, and out of the log cache
  state_->forget(stream1);
  watch = true;
  ASSERT_TRUE(state_->load(stream1));
  watch = false;
  EXPECT_GT(gets.load(), 0);
  EXPECT_EQ(stripe_taken.load(), 0);
  // What it read was installed: a retry is a duplicate, the next batch follows.
  auto [retry, at] = produce(stream1, idempotent_batch(7, 0, 3, 2));
  EXPECT_EQ(retry.v, verdict::duplicate);
  EXPECT_EQ(retry.duplicate.first_offset, off(3));
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 0, 5, 1)).second, off(5));
}

// A stream forgotten while its state is read (it changed hands) is read again: what was read
// before the forget is not installed.
TEST_F(ProducerStateTest, AStreamForgottenWhileItsStateIsReadIsReadAgain) {
  std::atomic<int> forgets{0};
  open([&](storage::store_operation op, std::string_view) {
    if (op == storage::store_operation::get && forgets.fetch_add(1) == 0) {
      std::async(std::launch::async, [&] { state_->forget(stream1); }).get();
    }
  });
  produce(stream1, idempotent_batch(7, 0, 0, 3));
  ASSERT_TRUE(store_->run_upload_once());
  state_->forget(stream1);
  forgets = 0;
  ASSERT_TRUE(state_->load(stream1));
  EXPECT_GE(forgets.load(), 2);  // read twice
  EXPECT_EQ(produce(stream1, idempotent_batch(7, 0, 0, 3)).first.v, verdict::duplicate);
}

// A deleted topic's streams leave the producer state: nothing of them stays in memory.
TEST_F(ProducerStateTest, ErasedStreamsLeaveNothingInMemory) {
  open();
  for (uint64_t s = 1; s <= 3; ++s) produce(sid(s), idempotent_batch(7, 0, 0, 3));
  const auto h = header_of(idempotent_batch(7, 0, 3, 1));
  state_->note_refused(sid(2), h);
  EXPECT_EQ(state_->stream_count(), 3u);
  state_->erase({stream1, sid(2)});
  EXPECT_EQ(state_->stream_count(), 1u);
  EXPECT_FALSE(state_->loaded(stream1));
  EXPECT_FALSE(state_->refused_before(sid(2), header_of(idempotent_batch(7, 0, 4, 1))));
  EXPECT_TRUE(state_->loaded(sid(3)));
  // A write in flight when its stream was erased records nothing, and creates nothing.
  state_->finish(stream1, h, off(3));
  EXPECT_EQ(state_->stream_count(), 1u);
}

}  // namespace
}  // namespace silt::handlers
