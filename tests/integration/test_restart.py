"""Clean restart (SIGTERM, exit 0, start again): data, offsets, topics and configs survive,
and producing goes on at the next offsets. Silt only (`private_broker`)."""
import time

from confluent_kafka import TIMESTAMP_CREATE_TIME
from confluent_kafka.admin import ConfigResource

from util import (admin, consume_all, create_topic, produce_all, topic_names, wait_futures,
                  wait_topic, watermarks)

PARTITIONS = 3


def records(n, start=0, t0=1_700_000_000_000):
    return [{"partition": i % PARTITIONS, "key": b"key-%d" % i,
             "value": b"value-%d-" % i + b"z" * (i % 100),
             "headers": [("i", b"%d" % i), ("h", b"")], "timestamp": t0 + i}
            for i in range(start, start + n)]


def as_tuples(msgs):
    return [(m["partition"], m["offset"], m["key"], m["value"], list(m["headers"] or []),
             m["timestamp"]) for m in msgs]


def expected(delivered):
    return sorted((d["partition"], d["offset"], d["key"], d["value"], d["headers"],
                   (TIMESTAMP_CREATE_TIME, d["timestamp"][1])) for d in delivered)


def stop_ok(b):
    code = b.stop()
    log = getattr(b, "log_text", lambda: "")()
    assert code == 0, f"exit code {code} on SIGTERM:\n{log[-3000:]}"
    assert not b.alive()


def test_clean_restart_keeps_everything(private_broker, topic_name):
    b = private_broker
    create_topic(b.bootstrap, topic_name, partitions=PARTITIONS,
                 config={"retention.ms": "7200000"})
    gone = create_topic(b.bootstrap, topic_name + "-gone")
    a = admin(b.bootstrap)
    assert wait_futures(a.delete_topics([gone], operation_timeout=20)) == {gone: None}

    delivered = produce_all(b.bootstrap, topic_name, records(150), acks="all",
                            **{"compression.type": "lz4"})
    delivered += produce_all(b.bootstrap, topic_name, records(150, start=150), acks="all")
    want = expected(delivered)
    assert len(want) == 300
    assert as_tuples(consume_all(b.bootstrap, topic_name, PARTITIONS)) == want

    stop_ok(b)
    b.start()
    wait_topic(b.bootstrap, topic_name, PARTITIONS)

    for p in range(PARTITIONS):
        assert watermarks(b.bootstrap, topic_name, p) == (0, 100)
    assert as_tuples(consume_all(b.bootstrap, topic_name, PARTITIONS)) == want
    names = topic_names(b.bootstrap)
    assert topic_name in names and gone not in names
    r = ConfigResource("topic", topic_name)
    a = admin(b.bootstrap)  # keep the client alive while its future is pending
    assert a.describe_configs([r])[r].result(20)["retention.ms"].value == "7200000"

    # Producing continues at the next offsets.
    more = produce_all(b.bootstrap, topic_name, records(30, start=300), acks="all")
    for p in range(PARTITIONS):
        assert [d["offset"] for d in more if d["partition"] == p] == list(range(100, 110))
    want = sorted(want + expected(more))
    assert as_tuples(consume_all(b.bootstrap, topic_name, PARTITIONS)) == want

    # A second restart with nothing new in between changes nothing.
    stop_ok(b)
    b.start()
    wait_topic(b.bootstrap, topic_name, PARTITIONS)
    assert as_tuples(consume_all(b.bootstrap, topic_name, PARTITIONS)) == want


def test_restart_empty_and_fresh_topics(private_broker, topic_name):
    """A topic created just before the restart, with no data, comes back empty and usable;
    a broker restarted with no topics at all starts fine."""
    b = private_broker
    stop_ok(b)
    b.start()
    create_topic(b.bootstrap, topic_name, partitions=2)
    t0 = time.time()
    stop_ok(b)
    b.start()
    wait_topic(b.bootstrap, topic_name, 2)
    assert watermarks(b.bootstrap, topic_name, 0) == (0, 0)
    d = produce_all(b.bootstrap, topic_name, [{"partition": 1, "value": b"x"}], acks="all")
    assert d[0]["offset"] == 0
    assert time.time() - t0 < 60
