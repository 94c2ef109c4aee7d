"""Compacted topics (cleanup.policy=compact), on Silt and on the reference Kafka broker alike:
the latest record of each key survives with its offset, tombstones go after
delete.retention.ms, records without a key are refused, and a consumer reading from the start
goes through the gaps to the end. Both brokers run their cleaners with their defaults
(log.cleaner.backoff.ms 15 s); the topics roll their segments quickly (segment.ms) so that
what was produced a moment ago may be cleaned."""
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from util import consumer, create_topic, producer, produce_all

INVALID_RECORD = 87
COMPACTED = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
             "delete.retention.ms": "1000"}


def read_from_start(bootstrap, topic, timeout=20):
    """Every record of partition 0, from its start offset to its high watermark, as
    (offset, key, value)."""
    c = consumer(bootstrap, **{"enable.partition.eof": True, "auto.offset.reset": "earliest"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, low)])
        out = []
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF and m.offset() >= high:
                    return out
                continue
            out.append((m.offset(), m.key(), m.value()))
            if m.offset() + 1 >= high:
                return out
        raise AssertionError(f"read {len(out)} records of [{low}, {high}) within {timeout}s")
    finally:
        c.close()


def wait_compacted(bootstrap, topic, done, timeout=90):
    """Reads from the start until done(records) holds (the cleaner ran), up to `timeout`."""
    deadline = time.time() + timeout
    while True:
        records = read_from_start(bootstrap, topic)
        if done(records):
            return records
        assert time.time() < deadline, f"not compacted within {timeout}s: {len(records)} records"
        time.sleep(1)


def roll(bootstrap, topic):
    """Kafka rolls a segment (segment.ms) only when a record arrives after it is due: one more
    record, after the segment's time, makes the records before it cleanable."""
    time.sleep(0.3)
    produce_all(bootstrap, topic, [{"key": b"roll", "value": b"roll", "partition": 0}])


def test_the_latest_value_of_each_key_survives_with_its_offset(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, config=COMPACTED)
    keys = 50
    produced = produce_all(broker.bootstrap, topic_name,
                           [{"key": f"k{i % keys}".encode(), "value": f"v{i}".encode(),
                             "partition": 0} for i in range(2000)])
    latest = {r["key"]: (r["offset"], r["value"]) for r in produced}
    roll(broker.bootstrap, topic_name)
    records = wait_compacted(broker.bootstrap, topic_name, lambda rs: len(rs) <= keys + 1)
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(offsets)
    got = {k: (o, v) for o, k, v in records if k != b"roll"}
    assert got == latest


def test_tombstones_go_after_delete_retention(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, config=COMPACTED)
    produce_all(broker.bootstrap, topic_name,
                [{"key": f"k{i % 10}".encode(), "value": f"v{i}".encode(), "partition": 0}
                 for i in range(100)])
    # Tombstones (null values) for k3 and k7.
    p = producer(broker.bootstrap)
    for k in (b"k3", b"k7"):
        p.produce(topic_name, key=k, value=None, partition=0)
    assert p.flush(20) == 0
    roll(broker.bootstrap, topic_name)

    def only_tombstones_left(records):
        gone = [(k, v) for _, k, v in records if k in (b"k3", b"k7")]
        return len(records) <= 10 + 1 and gone == [(b"k3", None), (b"k7", None)]
    wait_compacted(broker.bootstrap, topic_name, only_tombstones_left)
    # A cleaning after delete.retention.ms removes the tombstones too (Kafka cleans again once
    # more data is dirty; Silt also when a kept tombstone's horizon passes).
    time.sleep(1.5)
    produce_all(broker.bootstrap, topic_name,
                [{"key": f"k{i % 10}".encode(), "value": f"w{i}".encode(), "partition": 0}
                 for i in range(10) if i % 10 not in (3, 7)])
    roll(broker.bootstrap, topic_name)
    records = wait_compacted(broker.bootstrap, topic_name,
                             lambda rs: not any(k in (b"k3", b"k7") for _, k, _ in rs))
    keys = sorted(k for _, k, _ in records if k != b"roll")
    assert keys == sorted(f"k{i}".encode() for i in range(10) if i not in (3, 7))


def test_a_record_without_key_is_refused(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, config=COMPACTED)
    p = producer(broker.bootstrap, **{"retries": 0})
    errors = []
    p.produce(topic_name, value=b"no key", partition=0,
              on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(20) == 0
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == INVALID_RECORD, errors[0]
    # Keyed records still go in.
    produce_all(broker.bootstrap, topic_name, [{"key": b"k", "value": b"v", "partition": 0}])


def test_a_topic_turned_compacted_later_is_compacted(broker, topic_name):
    from confluent_kafka.admin import AdminClient, ConfigResource
    create_topic(broker.bootstrap, topic_name, 1, config={"segment.ms": "100"})
    produced = produce_all(broker.bootstrap, topic_name,
                           [{"key": f"k{i % 5}".encode(), "value": f"v{i}".encode(),
                             "partition": 0} for i in range(200)])
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    # (AlterConfigs: Debian's confluent-kafka has no incremental form.)
    resource = ConfigResource("topic", topic_name, set_config=COMPACTED)
    for f in a.alter_configs([resource]).values():
        f.result(timeout=20)
    roll(broker.bootstrap, topic_name)
    records = wait_compacted(broker.bootstrap, topic_name, lambda rs: len(rs) <= 5 + 1)
    latest = {r["key"]: r["value"] for r in produced}
    assert {k: v for _, k, v in records if k != b"roll"} == latest


def test_an_unknown_cleanup_policy_is_refused(broker, topic_name):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    f = a.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=1,
                                  config={"cleanup.policy": "compress"})])[topic_name]
    with pytest.raises(KafkaException) as e:
        f.result(timeout=20)
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
