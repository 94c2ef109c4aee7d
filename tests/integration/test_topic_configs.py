"""Topic configs the broker honours: max.message.bytes, message.timestamp.type, and (Silt,
whose retention works on uploaded ranges) retention.ms and retention.bytes."""
import time

from confluent_kafka import KafkaError, Producer

from conftest import SiltBroker
from util import consume_all, create_topic, produce_all, watermarks

MESSAGE_TOO_LARGE = 10


def test_max_message_bytes_refuses_larger_batches(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, {"max.message.bytes": "2000"})
    errors = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                  "message.send.max.retries": 0, "enable.idempotence": False})
    # One batch each (flush in between): the broker judges batches, not records.
    p.produce(topic_name, value=b"x" * 5000, on_delivery=lambda err, m: errors.append(err))
    assert p.flush(20) == 0
    p.produce(topic_name, value=b"small", on_delivery=lambda err, m: errors.append(err))
    assert p.flush(20) == 0
    codes = sorted(e.code() if e is not None else 0 for e in errors)
    assert codes == [0, KafkaError.MSG_SIZE_TOO_LARGE], errors
    # Only the small record was written.
    assert [m["value"] for m in consume_all(broker.bootstrap, topic_name, 1)] == [b"small"]


def test_log_append_time_replaces_producer_timestamps(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce_all(broker.bootstrap, topic_name,
                [{"value": b"a", "timestamp": 1_000_000_000_000}, {"value": b"b"}])
    after = int(time.time() * 1000)
    got = consume_all(broker.bootstrap, topic_name, 1)
    assert [m["value"] for m in got] == [b"a", b"b"]
    for m in got:
        ts_type, ts = m["timestamp"]
        assert ts_type == 2, m  # TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= ts <= after + 1000, m


def test_create_time_keeps_producer_timestamps(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    ts = int(time.time() * 1000) - 3_600_000
    produce_all(broker.bootstrap, topic_name, [{"value": b"a", "timestamp": ts}])
    (m,) = consume_all(broker.bootstrap, topic_name, 1)
    assert m["timestamp"] == (1, ts)


def fast_silt(tmp_path):
    b = SiltBroker(tmp_path, {"upload.interval.ms": "100", "log.retention.check.interval.ms": "200"})
    b.start()
    return b


def wait_start_offset(bootstrap, topic, want, timeout=20):
    deadline = time.time() + timeout
    low = None
    while time.time() < deadline:
        low, _ = watermarks(bootstrap, topic, 0)
        if low >= want:
            return low
        time.sleep(0.2)
    raise AssertionError(f"log start offset {low}, expected >= {want} within {timeout}s")


def test_retention_ms_drops_old_records(tmp_path, topic_name):
    b = fast_silt(tmp_path)
    try:
        # The newest data of a partition is never deleted by time while written within
        # segment.ms (its active segment, as Kafka's): a short one lets the old records go.
        create_topic(b.bootstrap, topic_name, 1, {"retention.ms": "60000", "segment.ms": "1000"})
        old = int(time.time() * 1000) - 3_600_000
        produce_all(b.bootstrap, topic_name, [{"value": b"old%d" % i, "timestamp": old}
                                              for i in range(50)])
        # Retention drops whole uploaded ranges (as Kafka drops whole segments): let the old
        # records go up in a range of their own first.
        time.sleep(1)
        produce_all(b.bootstrap, topic_name, [{"value": b"new"}])
        # The old records (older than retention.ms) go once uploaded; the new one stays.
        assert wait_start_offset(b.bootstrap, topic_name, 50) == 50
        assert [m["value"] for m in consume_all(b.bootstrap, topic_name, 1, start=50)] == [b"new"]
    finally:
        assert b.stop() == 0


def test_retention_bytes_keeps_the_newest_records(tmp_path, topic_name):
    b = fast_silt(tmp_path)
    try:
        create_topic(b.bootstrap, topic_name, 1, {"retention.bytes": "20000"})
        for i in range(10):  # ten uploads of about 10 KB each
            produce_all(b.bootstrap, topic_name, [{"value": b"%d" % i + b"x" * 1000}
                                                  for _ in range(10)])
            time.sleep(0.3)
        low = wait_start_offset(b.bootstrap, topic_name, 1)
        _, high = watermarks(b.bootstrap, topic_name, 0)
        assert high == 100
        assert 0 < low < 100, (low, high)
        # What is kept is the newest data, at most about retention.bytes of it plus one range.
        assert (high - low) * 1000 <= 20000 + 12000, (low, high)
    finally:
        assert b.stop() == 0
