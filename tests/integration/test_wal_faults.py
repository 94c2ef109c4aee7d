"""Idempotent producers against a WAL whose writes fail and stall (Silt's SILT_TEST_WAL_FAULTS
injects them into real writes: a failed write lands in part and reports failure, a stalled one
is held back past the produce request's timeout).

A failed write must leave no trace, so the client's retry is appended; a write still in flight
when the request times out may land later, so the retry must wait for it and be answered as a
duplicate, not written twice. Every acknowledged record must read back exactly once, where the
acknowledgement said, also after a restart (WAL replay).
"""
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import SiltBroker
from util import QUIET, create_topic

PARTITIONS = 4


def produce(bootstrap, topic, count, **conf):
    """Produces `count` numbered values; returns ({value: (partition, offset)}, errors)."""
    acked, errors = {}, []
    lock = threading.Lock()

    def report(err, msg):
        with lock:
            if err is not None:
                errors.append(str(err))
            else:
                acked[msg.value()] = (msg.partition(), msg.offset())

    p = Producer({"bootstrap.servers": bootstrap, **QUIET, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 2, "batch.num.messages": 50,
                  "message.timeout.ms": 120000, **conf})
    for i in range(count):
        value = f"v{i:07d}".encode()
        while True:
            try:
                p.produce(topic, value, partition=i % PARTITIONS, on_delivery=report)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(150) == 0, "messages never acknowledged"
    return acked, errors


def read_back(bootstrap, topic, expected):
    c = Consumer({"bootstrap.servers": bootstrap, **QUIET, "group.id": "unused",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        seen = {}
        deadline = time.time() + 60
        while sum(len(v) for v in seen.values()) < expected and time.time() < deadline:
            for m in c.consume(1000, timeout=1):
                assert m.error() is None, m.error()
                seen.setdefault(m.value(), []).append((m.partition(), m.offset()))
        # Nothing beyond: a duplicate would show as more records than were produced.
        for m in c.consume(1000, timeout=2):
            assert m.error() is None, m.error()
            seen.setdefault(m.value(), []).append((m.partition(), m.offset()))
        return seen
    finally:
        c.close()


def test_idempotent_producer_over_failing_and_stalling_wal_writes(tmp_path):
    broker = SiltBroker(tmp_path, env={
        # One write in 20 fails, one in 20 stalls for 400 ms, past the 150 ms request timeout.
        "SILT_TEST_WAL_FAULTS": "fail=0.05,delay=0.05,delay_ms=400,seed=11"})
    broker.start()
    try:
        topic = "walfaults-" + uuid.uuid4().hex[:8]
        create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
        count = 20000
        acked, errors = produce(broker.bootstrap, topic, count, **{"request.timeout.ms": 150})
        assert not errors, errors[:5]
        assert len(acked) == count
        log = broker.log_text()
        assert "injecting WAL write faults" in log
        for attempt in ("running", "restarted"):
            seen = read_back(broker.bootstrap, topic, count)
            missing = [v for v in acked if v not in seen]
            assert not missing, f"{attempt}: {len(missing)} acknowledged records missing"
            twice = {v: w for v, w in seen.items() if len(w) > 1}
            assert not twice, f"{attempt}: written twice: {list(twice.items())[:5]}"
            wrong = [(v, seen[v][0], w) for v, w in acked.items() if seen[v][0] != w]
            assert not wrong, f"{attempt}: not where acknowledged: {wrong[:5]}"
            # Per partition, the values follow the order they were produced in.
            for p in range(PARTITIONS):
                values = sorted((o, v) for v, [(q, o)] in seen.items() if q == p)
                assert [v for _, v in values] == sorted(v for _, v in values)
            if attempt == "running":
                assert broker.stop() == 0
                broker.env = None
                broker.start()
    finally:
        broker.stop()
