"""Admin operations through confluent-kafka's AdminClient (and DeleteRecords over a raw
socket, which neither Python client has): the results and error codes must match Kafka's."""
import time

from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

from util import (INVALID_CONFIG, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
                  TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION, admin, consume_all,
                  create_topic, delete_records, produce_all, topic_names, wait_futures,
                  wait_topic, watermarks)

OFFSET_OUT_OF_RANGE = 1
TOPIC_EXCEPTION = 17  # INVALID_TOPIC_EXCEPTION


def create(a, *topics, **kwargs):
    return wait_futures(a.create_topics(list(topics), operation_timeout=20, **kwargs))


def code(err):
    return None if err is None else err.code()


def topic_config(a, topic):
    r = ConfigResource("topic", topic)
    return a.describe_configs([r])[r].result(timeout=20)


def test_create_with_partitions_and_configs(broker, topic_name):
    a = admin(broker.bootstrap)
    errs = create(a, NewTopic(topic_name, num_partitions=3, replication_factor=1,
                              config={"retention.ms": "123456", "max.message.bytes": "200000"}))
    assert errs == {topic_name: None}
    wait_topic(broker.bootstrap, topic_name, 3)
    cfg = topic_config(a, topic_name)
    assert cfg["retention.ms"].value == "123456"
    assert not cfg["retention.ms"].is_default
    assert cfg["max.message.bytes"].value == "200000"
    # Defaults are described too.
    assert cfg["cleanup.policy"].value == "delete"
    assert cfg["cleanup.policy"].is_default


def test_create_validate_only(broker, topic_name):
    a = admin(broker.bootstrap)
    errs = create(a, NewTopic(topic_name, num_partitions=2, replication_factor=1,
                              config={"retention.ms": "60000"}), validate_only=True)
    assert errs == {topic_name: None}
    assert topic_name not in topic_names(broker.bootstrap)
    # validate_only still validates.
    errs = create(a, NewTopic(topic_name, num_partitions=2, replication_factor=1,
                              config={"retention.ms": "soon"}), validate_only=True)
    assert code(errs[topic_name]) == INVALID_CONFIG
    assert topic_name not in topic_names(broker.bootstrap)


def test_create_errors(broker, topic_name):
    a = admin(broker.bootstrap)
    create_topic(broker.bootstrap, topic_name, partitions=2)
    errs = create(a, NewTopic(topic_name, num_partitions=1, replication_factor=1))
    assert code(errs[topic_name]) == TOPIC_ALREADY_EXISTS

    cases = {
        topic_name + "-p0": (NewTopic(topic_name + "-p0", 0, 1), INVALID_PARTITIONS),
        topic_name + "-rf3": (NewTopic(topic_name + "-rf3", 1, 3), INVALID_REPLICATION_FACTOR),
        topic_name + "-bad": (NewTopic(topic_name + "-bad", 1, 1,
                                       config={"retention.ms": "abc"}), INVALID_CONFIG),
        topic_name + "-unk": (NewTopic(topic_name + "-unk", 1, 1,
                                       config={"no.such.config": "1"}), INVALID_CONFIG),
        "bad name!": (NewTopic("bad name!", 1, 1), TOPIC_EXCEPTION),
        "x" * 250: (NewTopic("x" * 250, 1, 1), TOPIC_EXCEPTION),
    }
    errs = create(a, *[nt for nt, _ in cases.values()])
    assert {k: code(v) for k, v in errs.items()} == {k: c for k, (_, c) in cases.items()}
    names = topic_names(broker.bootstrap)
    assert not any(k in names for k in cases)


def test_create_partitions(broker, topic_name):
    a = admin(broker.bootstrap)
    create_topic(broker.bootstrap, topic_name, partitions=1)
    produce_all(broker.bootstrap, topic_name, [{"partition": 0, "value": b"before"}])
    errs = wait_futures(a.create_partitions([NewPartitions(topic_name, 4)]))
    assert errs == {topic_name: None}
    wait_topic(broker.bootstrap, topic_name, 4)
    # The new partitions are usable; the old one kept its data.
    produce_all(broker.bootstrap, topic_name,
                [{"partition": p, "value": b"p%d" % p} for p in range(4)])
    got = consume_all(broker.bootstrap, topic_name, 4)
    assert [(g["partition"], g["offset"], g["value"]) for g in got] == \
        [(0, 0, b"before"), (0, 1, b"p0"), (1, 0, b"p1"), (2, 0, b"p2"), (3, 0, b"p3")]
    # Not an increase, and an unknown topic.
    errs = wait_futures(a.create_partitions([NewPartitions(topic_name, 4)]))
    assert code(errs[topic_name]) == INVALID_PARTITIONS
    errs = wait_futures(a.create_partitions([NewPartitions(topic_name, 2)]))
    assert code(errs[topic_name]) == INVALID_PARTITIONS
    missing = topic_name + "-missing"
    errs = wait_futures(a.create_partitions([NewPartitions(missing, 2)]))
    assert code(errs[missing]) == UNKNOWN_TOPIC_OR_PARTITION


def test_describe_and_alter_configs(broker, topic_name):
    a = admin(broker.bootstrap)
    create_topic(broker.bootstrap, topic_name, config={"retention.ms": "123456"})
    assert topic_config(a, topic_name)["retention.ms"].value == "123456"

    r = ConfigResource("topic", topic_name, set_config={"retention.ms": "99999"})
    assert wait_futures(a.alter_configs([r])) == {r: None}
    assert topic_config(a, topic_name)["retention.ms"].value == "99999"

    r = ConfigResource("topic", topic_name, set_config={"retention.ms": "xx"})
    assert code(wait_futures(a.alter_configs([r]))[r]) == INVALID_CONFIG
    assert topic_config(a, topic_name)["retention.ms"].value == "99999"

    # validate_only leaves the value alone.
    r = ConfigResource("topic", topic_name, set_config={"retention.ms": "5000"})
    assert wait_futures(a.alter_configs([r], validate_only=True)) == {r: None}
    assert topic_config(a, topic_name)["retention.ms"].value == "99999"

    missing = ConfigResource("topic", topic_name + "-missing")
    err = wait_futures(a.describe_configs([missing]))[missing]
    assert code(err) == UNKNOWN_TOPIC_OR_PARTITION
    r = ConfigResource("topic", topic_name + "-missing", set_config={"retention.ms": "5"})
    assert code(wait_futures(a.alter_configs([r]))[r]) == UNKNOWN_TOPIC_OR_PARTITION


def test_delete_topics(broker, topic_name):
    a = admin(broker.bootstrap)
    create_topic(broker.bootstrap, topic_name, partitions=2)
    produce_all(broker.bootstrap, topic_name, [{"partition": 1, "value": b"x"}])
    assert wait_futures(a.delete_topics([topic_name], operation_timeout=20)) == \
        {topic_name: None}
    deadline = time.time() + 20
    while topic_name in topic_names(broker.bootstrap):
        assert time.time() < deadline, "deleted topic still listed after 20 s"
        time.sleep(0.1)
    errs = wait_futures(a.delete_topics([topic_name], operation_timeout=20))
    assert code(errs[topic_name]) == UNKNOWN_TOPIC_OR_PARTITION
    # The name can be used again, and the new topic starts empty.
    create_topic(broker.bootstrap, topic_name, partitions=1)
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)


def test_delete_records(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    produce_all(broker.bootstrap, topic_name,
                [{"partition": 0, "value": b"v%d" % i} for i in range(10)])
    assert delete_records(broker.bootstrap, topic_name, {0: 4, 1: 0}) == {0: (4, 0), 1: (0, 0)}
    assert watermarks(broker.bootstrap, topic_name, 0) == (4, 10)
    got = consume_all(broker.bootstrap, topic_name, [0], start=4)
    assert [(g["offset"], g["value"]) for g in got] == [(i, b"v%d" % i) for i in range(4, 10)]
    # Past the high watermark: OFFSET_OUT_OF_RANGE with low watermark -1.
    assert delete_records(broker.bootstrap, topic_name, {0: 11}) == {0: (-1, OFFSET_OUT_OF_RANGE)}
    # Unknown partition and topic.
    assert delete_records(broker.bootstrap, topic_name, {7: 1}) == \
        {7: (-1, UNKNOWN_TOPIC_OR_PARTITION)}
    assert delete_records(broker.bootstrap, topic_name + "-missing", {0: 1}) == \
        {0: (-1, UNKNOWN_TOPIC_OR_PARTITION)}
    # -1 means the high watermark.
    assert delete_records(broker.bootstrap, topic_name, {0: -1}) == {0: (10, 0)}
    assert watermarks(broker.bootstrap, topic_name, 0) == (10, 10)
    # Producing goes on at the next offset.
    d = produce_all(broker.bootstrap, topic_name, [{"partition": 0, "value": b"after"}])
    assert d[0]["offset"] == 10


def test_create_many(broker, topic_name):
    """Several topics created in one request all appear in one listing."""
    a = admin(broker.bootstrap)
    names = [f"{topic_name}-{i}" for i in range(5)]
    errs = create(a, *[NewTopic(n, i + 1, 1) for i, n in enumerate(names)])
    assert errs == {n: None for n in names}
    for i, n in enumerate(names):
        wait_topic(broker.bootstrap, n, i + 1)
    assert set(names) <= topic_names(broker.bootstrap)
