"""confluent-kafka-python (librdkafka) and kafka-python against the broker: every codec,
keys, headers, offsets, CreateTime timestamps, acks, idempotence, metadata, list offsets,
and long-polling fetches. Consumers use assign mode only (no consumer groups)."""
import threading
import time

import pytest
from confluent_kafka import OFFSET_END, TIMESTAMP_CREATE_TIME, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition

from util import (METADATA, Reader, array, client_works, connect, consume_all, consumer,
                  create_topic, i8, produce_all, producer, read_response, request, string,
                  topic_names, wait_topic, watermarks)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3


def make_records(n, partitions=PARTITIONS, t0=None, null_header=False):
    """n records spread round-robin over partitions, with keys, headers (a repeated key and
    an empty value) and CreateTime timestamps an hour in the past (so a broker that stamps
    its own time is caught).

    null_header adds a header with a null value. confluent-kafka 1.7 crashes the interpreter
    (a refcount bug) when it *consumes* such a header, so only kafka-python reads those."""
    t0 = t0 if t0 is not None else int(time.time() * 1000) - 3600_000
    out = []
    for i in range(n):
        headers = [("seq", str(i).encode()), ("dup", b"a"), ("dup", b"b"), ("empty", b"")]
        if null_header:
            headers.append(("null", None))
        out.append({
            "partition": i % partitions,
            "key": f"key-{i}".encode(),
            # Compressible, of varying length.
            "value": (f"value-{i}-" + "abcdefgh" * (i % 40)).encode(),
            "headers": headers,
            "timestamp": t0 + i * 7,
        })
    return out


def expected_offsets(records):
    """Assigns the offsets records produced in order must get: 0, 1, ... per partition."""
    nxt = {}
    out = []
    for r in records:
        off = nxt.get(r["partition"], 0)
        nxt[r["partition"]] = off + 1
        out.append({**r, "offset": off})
    return sorted(out, key=lambda r: (r["partition"], r["offset"]))


def check_consumed(got, expected):
    assert len(got) == len(expected), f"{len(got)} messages, expected {len(expected)}"
    for g, e in zip(got, expected):
        where = f"partition {e['partition']} offset {e['offset']}"
        assert (g["partition"], g["offset"]) == (e["partition"], e["offset"]), where
        assert g["key"] == e["key"], where
        assert g["value"] == e["value"], where
        assert list(g["headers"] or []) == list(e["headers"]), where
        assert g["timestamp"] == (TIMESTAMP_CREATE_TIME, e["timestamp"]), where


# ---------------------------------------------------------------------------- kafka-python

def kp_producer(broker, **conf):
    return KafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000,
                         max_block_ms=20000, linger_ms=5, **conf)


def kp_produce(broker, topic, records, **conf):
    p = kp_producer(broker, **conf)
    try:
        futs = [p.send(topic, value=r["value"], key=r["key"], headers=r["headers"],
                       partition=r["partition"], timestamp_ms=r["timestamp"]) for r in records]
        p.flush(timeout=20)
        return [f.get(timeout=20) for f in futs]
    finally:
        p.close(timeout=10)


def kp_consumer(broker, **conf):
    conf = {"fetch_max_wait_ms": 100, "request_timeout_ms": 30000, **conf}
    return KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                         enable_auto_commit=False, **conf)


def kp_consume(broker, topic, partitions, count, timeout=20):
    c = kp_consumer(broker)
    try:
        tps = [KTopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        got = []
        deadline = time.time() + timeout
        while len(got) < count and time.time() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                for m in recs:
                    got.append({"partition": m.partition, "offset": m.offset, "key": m.key,
                                "value": m.value, "headers": m.headers,
                                "timestamp": (m.timestamp_type + 1, m.timestamp)})
        assert len(got) == count, f"kafka-python got {len(got)} of {count} messages"
        return sorted(got, key=lambda d: (d["partition"], d["offset"]))
    finally:
        c.close()


# ---------------------------------------------------------------------------- codecs

@pytest.mark.parametrize("codec", CODECS)
def test_confluent_codec(broker, topic_name, codec):
    create_topic(broker.bootstrap, topic_name, partitions=PARTITIONS)
    records = make_records(90)
    delivered = produce_all(broker.bootstrap, topic_name, records, **{"compression.type": codec,
                                                                      "linger.ms": 20})
    expected = expected_offsets(records)
    assert sorted((d["partition"], d["offset"]) for d in delivered) == \
        [(e["partition"], e["offset"]) for e in expected]
    assert all(d["timestamp"] == (TIMESTAMP_CREATE_TIME, r["timestamp"])
               for d, r in zip(delivered, records))
    check_consumed(consume_all(broker.bootstrap, topic_name, PARTITIONS), expected)
    # kafka-python decodes what librdkafka compressed.
    check_consumed(kp_consume(broker, topic_name, PARTITIONS, len(records)), expected)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_codec(broker, topic_name, codec):
    create_topic(broker.bootstrap, topic_name, partitions=PARTITIONS)
    records = make_records(90)
    metas = kp_produce(broker, topic_name, records,
                       compression_type=None if codec == "none" else codec)
    expected = expected_offsets(records)
    assert sorted((m.partition, m.offset) for m in metas) == \
        [(e["partition"], e["offset"]) for e in expected]
    check_consumed(kp_consume(broker, topic_name, PARTITIONS, len(records)), expected)
    check_consumed(consume_all(broker.bootstrap, topic_name, PARTITIONS), expected)


def test_null_header_value(broker, topic_name):
    """A header with a null value (length -1) survives: produced by librdkafka (kafka-python
    cannot send one), read back by kafka-python."""
    create_topic(broker.bootstrap, topic_name)
    records = [{"partition": 0, "key": b"k", "value": b"v", "timestamp": 1_700_000_000_000,
                "headers": [("a", None), ("b", b"")]}]
    produce_all(broker.bootstrap, topic_name, records, **{"compression.type": "lz4"})
    produce_all(broker.bootstrap, topic_name, records)
    check_consumed(kp_consume(broker, topic_name, 1, 2),
                   [{**records[0], "offset": 0}, {**records[0], "offset": 1}])


# ---------------------------------------------------------------------------- acks, idempotence

@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_acks(broker, topic_name, acks):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    records = make_records(40, partitions=2)
    delivered = produce_all(broker.bootstrap, topic_name, records, acks=acks)
    if acks != "0":
        assert sorted((d["partition"], d["offset"]) for d in delivered) == \
            [(e["partition"], e["offset"]) for e in expected_offsets(records)]
    # With acks=0 nothing is acknowledged, but on loopback everything arrives, in order.
    check_consumed(consume_all(broker.bootstrap, topic_name, 2, count=len(records)),
                   expected_offsets(records))


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_kafka_python_acks(broker, topic_name, acks):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    records = make_records(40, partitions=2)
    kp_produce(broker, topic_name, records, acks=acks)
    check_consumed(kp_consume(broker, topic_name, 2, len(records)), expected_offsets(records))


def test_idempotent_producer(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    records = [{"partition": i % 2, "key": b"k%d" % i, "value": b"v%d" % i} for i in range(400)]
    delivered = produce_all(broker.bootstrap, topic_name, records, **{
        "enable.idempotence": True, "linger.ms": 2, "batch.num.messages": 20})
    for p in range(2):
        offs = [d["offset"] for d in delivered if d["partition"] == p]
        assert offs == list(range(200)), f"partition {p}: offsets {offs[:10]}..."
    got = consume_all(broker.bootstrap, topic_name, 2)
    assert [(g["partition"], g["offset"], g["value"]) for g in got] == \
        sorted((i % 2, i // 2, b"v%d" % i) for i in range(400))


# ---------------------------------------------------------------------------- metadata

def test_metadata(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=4)
    md = client_works(broker.bootstrap)
    assert len(md.brokers) == 1
    (b,) = md.brokers.values()
    assert (b.host, b.port) == ("127.0.0.1", broker.port)
    t = md.topics[topic_name]
    assert t.error is None
    assert sorted(t.partitions) == [0, 1, 2, 3]
    for p in t.partitions.values():
        assert p.leader == b.id and p.replicas == [b.id] and p.isrs == [b.id]
    # kafka-python sees the same.
    c = kp_consumer(broker)
    try:
        assert topic_name in c.topics()
        assert c.partitions_for_topic(topic_name) == {0, 1, 2, 3}
    finally:
        c.close()
    # An unknown topic is reported as such when auto-creation is not asked for.
    missing = topic_name + "-missing"
    c = consumer(broker.bootstrap, **{"allow.auto.create.topics": False})
    try:
        md = c.list_topics(topic=missing, timeout=10)
    finally:
        c.close()
    assert md.topics[missing].error is not None
    assert md.topics[missing].error.code() == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert missing not in topic_names(broker.bootstrap)


def test_auto_create_on_produce(broker, topic_name):
    """librdkafka's producer asks for auto-creation in Metadata; the broker creates the topic
    with the default partition count (1) and the record is delivered to it."""
    assert topic_name not in topic_names(broker.bootstrap)
    delivered = produce_all(broker.bootstrap, topic_name, [{"key": b"k", "value": b"auto"}])
    assert (delivered[0]["partition"], delivered[0]["offset"]) == (0, 0)
    wait_topic(broker.bootstrap, topic_name, 1)
    got = consume_all(broker.bootstrap, topic_name, 1)
    assert [(g["key"], g["value"]) for g in got] == [(b"k", b"auto")]


def test_concurrent_auto_creations_of_one_topic_all_find_it(broker, topic_name):
    """Several Metadata requests auto-create one topic at once (clients retry a slow Metadata,
    or several start together). Silt answers each with the topic and its partition, the
    requests that find it being created included; Kafka answers UNKNOWN_TOPIC_OR_PARTITION
    (retriable: the client asks again) until the new topic has its leader."""
    body = array([string(topic_name)]) + i8(1)  # Metadata v4: topics, allow auto-creation
    answers, errors = [], []
    start = threading.Barrier(8)

    def ask(n):
        try:
            with connect(broker.bootstrap, timeout=20) as s:
                start.wait(10)
                s.sendall(request(METADATA, 4, 100 + n, body))
                corr, rest = read_response(s)
            r = Reader(rest)
            r.i32()  # throttle
            for _ in range(r.i32()):  # brokers
                r.i32(), r.string(), r.i32(), r.string()
            r.string(), r.i32()  # cluster id, controller
            assert r.i32() == 1
            err, name, _ = r.i16(), r.string(), r.i8()
            answers.append((err, name, r.i32()))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert len(answers) == 8
    ok = {(0, topic_name, 1)}
    if broker.kind == "kafka":
        ok |= {(3, topic_name, 0), (5, topic_name, 0)}
    assert set(answers) <= ok, answers
    wait_topic(broker.bootstrap, topic_name, 1)


# ---------------------------------------------------------------------------- list offsets

def test_list_offsets(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    t0 = int(time.time() * 1000) - 600_000
    records = [{"partition": 0, "value": b"v%d" % i, "timestamp": t0 + 1000 * i}
               for i in range(10)]
    produce_all(broker.bootstrap, topic_name, records)
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 10)
    assert watermarks(broker.bootstrap, topic_name, 1) == (0, 0)

    c = consumer(broker.bootstrap)
    try:
        def lookup(ts, partition=0):
            (res,) = c.offsets_for_times([TopicPartition(topic_name, partition, ts)], timeout=10)
            assert res.error is None
            return res.offset
        assert lookup(t0 - 5000) == 0            # before the first record
        assert lookup(t0) == 0                   # exact match
        assert lookup(t0 + 3500) == 4            # first record with timestamp >= ts
        assert lookup(t0 + 9000) == 9
        assert lookup(t0 + 9001) == OFFSET_END   # after the last one: -1
        assert lookup(t0, partition=1) == OFFSET_END
    finally:
        c.close()

    kc = kp_consumer(broker)
    try:
        tp0, tp1 = KTopicPartition(topic_name, 0), KTopicPartition(topic_name, 1)
        assert kc.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert kc.end_offsets([tp0, tp1]) == {tp0: 10, tp1: 0}
        res = kc.offsets_for_times({tp0: t0 + 3500, tp1: t0})
        assert res[tp0].offset == 4 and res[tp0].timestamp == t0 + 4000
        assert res[tp1] is None
        res = kc.offsets_for_times({tp0: t0 + 99_000})
        assert res[tp0] is None
    finally:
        kc.close()


# ---------------------------------------------------------------------------- long poll

def test_long_poll_fetch(broker, topic_name):
    """A consumer waiting at the end of the log (fetch.wait.max.ms far longer than the test
    allows) gets a new record promptly: the broker must answer a waiting Fetch as soon as
    data arrives, not when the wait expires."""
    create_topic(broker.bootstrap, topic_name)
    c = consumer(broker.bootstrap, **{"fetch.wait.max.ms": 20000, "socket.timeout.ms": 60000})
    p = producer(broker.bootstrap, **{"linger.ms": 0})
    try:
        assert len(p.list_topics(topic=topic_name, timeout=10).topics[topic_name].partitions) == 1
        c.assign([TopicPartition(topic_name, 0, 0)])
        # Let the consumer get its (empty) first answers and park a long-poll Fetch.
        assert c.poll(1.5) is None
        sent = {}

        def produce_later():
            time.sleep(1.0)
            sent["t"] = time.time()
            p.produce(topic_name, value=b"wake up", partition=0)
            p.flush(10)

        th = threading.Thread(target=produce_later)
        th.start()
        m = None
        deadline = time.time() + 15
        while m is None and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                m = None
        got_at = time.time()
        th.join()
        assert m is not None, "record not received within 15 s"
        assert m.value() == b"wake up" and m.offset() == 0
        latency = got_at - sent["t"]
        assert latency < 3.0, f"long-poll fetch answered {latency:.2f}s after the produce"
    finally:
        c.close()


def test_kafka_python_long_poll(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    c = kp_consumer(broker, fetch_max_wait_ms=20000)
    try:
        tp = KTopicPartition(topic_name, 0)
        c.assign([tp])
        c.seek(tp, 0)
        assert c.poll(timeout_ms=1500) == {}
        sent = {}

        def produce_later():
            time.sleep(1.0)
            sent["t"] = time.time()
            produce_all(broker.bootstrap, topic_name, [{"value": b"hello", "partition": 0}],
                        **{"linger.ms": 0})

        th = threading.Thread(target=produce_later)
        th.start()
        recs = []
        deadline = time.time() + 15
        while not recs and time.time() < deadline:
            for rs in c.poll(timeout_ms=500).values():
                recs += rs
        got_at = time.time()
        th.join()
        assert [r.value for r in recs] == [b"hello"]
        assert got_at - sent["t"] < 3.0, f"answered {got_at - sent['t']:.2f}s after produce"
    finally:
        c.close()
