"""Failover: a broker killed with SIGKILL while an idempotent acks=all producer writes. Its
lease lapses, the surviving broker takes its WAL over (reads it, appends what was not in the
object store yet to its own WAL) and serves its partitions; no acknowledged record is lost or
written twice, and committed group offsets stay. The killed broker, restarted, rejoins and
serves nothing it no longer owns. With the WALs in the object store (wal.type=object) the
takeover lists the dead broker's WAL objects instead of reading its disk. Both the controller and the other broker are killed in turn
(each coordinates some of the groups); the time from each kill to every partition taking a produce
again is printed."""
import threading
import time

import pytest
from confluent_kafka import Producer

from test_membership import SESSION_MS, partition_leader_epochs, produce_v10, \
    shared_brokers, shared_store_brokers, wait_listed  # noqa: F401 (a fixture)
from test_partition_moves import committed_offsets, consume_group, find_coordinator, \
    wait_spread
from test_record_validation import batch, records
from util import check_acknowledged, create_topic, produce_all

PARTITIONS = 4


class LoadProducer:
    """An idempotent acks=all librdkafka producer writing `prefix`N to every partition in turn
    (or to those in `only`), pausing `pause` s every `every` records, until stopped."""

    def __init__(self, bootstrap, topic, partitions=PARTITIONS, prefix=b"m-", every=20,
                 pause=0.01, only=None):
        self.topic, self.prefix = topic, prefix
        self.targets = list(only if only is not None else range(partitions))
        self.every, self.pause = every, pause
        self.acked, self.errors = [], []
        self.left = None
        self.stop_event = threading.Event()
        self.p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                           "acks": "all", "linger.ms": 5, "message.timeout.ms": 300000,
                           "retry.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
                           "topic.metadata.refresh.interval.ms": 1000,
                           # A slow broker (the sanitizers) makes records wait here: a
                           # bounded backlog keeps the final flush short.
                           "queue.buffering.max.kbytes": 65536})
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def done(self, err, msg):
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))

    def run(self):
        i = 0
        while not self.stop_event.is_set():
            try:
                self.p.produce(self.topic, value=self.prefix + b"%d" % i,
                               partition=self.targets[i % len(self.targets)],
                               on_delivery=self.done)
            except BufferError:  # the backlog is full: wait for acknowledgements, try again
                self.p.poll(0.05)
                continue
            i += 1
            self.p.poll(0)
            if i % self.every == 0:
                time.sleep(self.pause)
        self.left = self.p.flush(300)

    def stop(self):
        self.stop_event.set()
        self.thread.join(320)
        assert not self.thread.is_alive()
        assert self.left == 0, f"{self.left} records never acknowledged"


def wait_served(bootstrap, topic, killed, timeout):
    """Waits until every partition's leader (as `bootstrap` reports it) is a live broker that
    takes a produce; returns the seconds since `killed`."""
    pending = set(range(PARTITIONS))
    deadline = time.time() + timeout
    while pending:
        assert time.time() < deadline, f"partitions {sorted(pending)} not served again"
        leaders = partition_leader_epochs(bootstrap, topic)
        for p in sorted(pending):
            err, _, _ = leaders.get(p, (-1, -1, -1))
            if err == 0 and produce_v10(bootstrap, topic, p, batch(records(1), 1))[0] == 0:
                pending.discard(p)
        time.sleep(0.02)
    return time.time() - killed


@pytest.fixture(params=["file", "object"])
def wal_type_brokers(request, tmp_path):
    """shared_store_brokers with their WALs on disk (wal.type=file) or in the shared object
    store (wal.type=object), where taking one over is a listing."""
    yield from shared_brokers(tmp_path, {"wal.type": request.param})


def test_a_killed_brokers_wal_is_taken_over_and_nothing_acknowledged_is_lost(
        wal_type_brokers):
    (a, b), _ = wal_type_brokers
    brokers = {1: a, 2: b}
    topic = "failover"
    create_topic(a.bootstrap, topic, partitions=PARTITIONS)
    wait_spread(a.bootstrap, topic, PARTITIONS, [1, 2])
    produce_all(a.bootstrap, topic, [{"value": b"g%d" % i, "partition": i % PARTITIONS}
                                     for i in range(40)], acks="all")
    consume_group(b.bootstrap, topic, "kept", 40)
    committed = committed_offsets(b.bootstrap, "kept", topic, PARTITIONS)
    assert committed == {p: 10 for p in range(PARTITIONS)}, committed

    timings = []
    load = LoadProducer(f"{a.bootstrap},{b.bootstrap}", topic)
    try:
        # Node 1 (the controller) first, then node 2.
        for dead, survivor in ((1, 2), (2, 1)):
            time.sleep(1.5)
            acked_before = len(load.acked)
            brokers[dead].kill()
            killed = time.time()
            timings.append(wait_served(brokers[survivor].bootstrap, topic, killed, 60))
            leaders = partition_leader_epochs(brokers[survivor].bootstrap, topic)
            assert {n for _, n, _ in leaders.values()} == {survivor}, leaders
            # The dead broker's groups moved to the survivor, offsets intact.
            deadline = time.time() + 20
            while find_coordinator(brokers[survivor].bootstrap, "kept") != (0, survivor):
                assert time.time() < deadline, "the survivor did not coordinate the groups"
                time.sleep(0.1)
            assert committed_offsets(brokers[survivor].bootstrap, "kept", topic,
                                     PARTITIONS) == committed
            deadline = time.time() + 30
            while len(load.acked) < acked_before + 500:
                assert time.time() < deadline, "the producer made no progress after the kill"
                time.sleep(0.05)
            # Restarted on its WAL, the dead broker rejoins as a new member; what its WAL held
            # was taken over, and it leads only what the controller gives it afterwards.
            brokers[dead].start()
            wait_listed(brokers[survivor].bootstrap,
                        {n: (("127.0.0.1", br.port, rack)) for n, br, rack in
                         ((1, a, "zone-a"), (2, b, "zone-b"))}, timeout=20)
            wait_spread(brokers[survivor].bootstrap, topic, PARTITIONS, [1, 2], timeout=30)
    finally:
        load.stop()
    assert not load.errors, load.errors[:5]
    assert len(load.acked) > 2000
    check_acknowledged(a.bootstrap, topic, PARTITIONS, load.acked)
    assert committed_offsets(a.bootstrap, "kept", topic, PARTITIONS) == committed
    for node, broker in brokers.items():
        text = broker.log_text()
        assert "took over" in text and "beyond their committed ends" in text, \
            f"node {node} took no WAL over:\n{text[-3000:]}"
    print(f"kills: every partition served again after "
          f"{', '.join(f'{t:.2f}' for t in timings)} s (session timeout {SESSION_MS} ms); "
          f"{len(load.acked)} records acknowledged, none lost or duplicated")
