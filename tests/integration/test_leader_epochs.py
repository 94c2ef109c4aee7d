"""Leader epochs: a partition's epoch grows when a broker takes it (here: at each start), and
requests naming an older or newer epoch get FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH as
Kafka answers them. OffsetForLeaderEpoch tells where each epoch ended."""
from util import (Reader, array, connect, create_topic, i8, i32, i64, produce_all,
                  read_response, request, string, wait_topic)

METADATA = 3
LIST_OFFSETS = 2
OFFSET_FOR_LEADER_EPOCH = 23
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75


def call(bootstrap, api, version, body):
    s = connect(bootstrap)
    try:
        s.sendall(request(api, version, 7, body))
        corr, rest = read_response(s)
        assert corr == 7
        return Reader(rest)
    finally:
        s.close()


def leader_epoch(bootstrap, topic):
    """The leader epoch of partition 0 from Metadata v7."""
    r = call(bootstrap, METADATA, 7, array([string(topic)]) + i8(0))
    r.i32()  # throttle
    for _ in range(r.i32()):  # brokers
        r.i32(), r.string(), r.i32(), r.string()
    r.string()  # cluster id
    r.i32()  # controller
    assert r.i32() == 1
    assert r.i16() == 0
    assert r.string() == topic
    r.i8()  # internal
    assert r.i32() == 1
    assert r.i16() == 0
    assert r.i32() == 0  # partition
    r.i32()  # leader
    epoch = r.i32()
    return epoch


def list_latest(bootstrap, topic, current_epoch):
    """(error, offset, leader_epoch) of ListOffsets v4 latest for partition 0."""
    body = i32(-1) + i8(0) + array([string(topic) + array([i32(0) + i32(current_epoch) + i64(-1)])])
    r = call(bootstrap, LIST_OFFSETS, 4, body)
    r.i32()
    assert r.i32() == 1
    assert r.string() == topic
    assert r.i32() == 1
    assert r.i32() == 0
    error = r.i16()
    r.i64()  # timestamp
    return error, r.i64(), r.i32()


def epoch_end(bootstrap, topic, current_epoch, epoch):
    """(error, leader_epoch, end_offset) of OffsetForLeaderEpoch v3 for partition 0."""
    body = i32(-1) + array([string(topic) + array([i32(0) + i32(current_epoch) + i32(epoch)])])
    r = call(bootstrap, OFFSET_FOR_LEADER_EPOCH, 3, body)
    r.i32()
    assert r.i32() == 1
    assert r.string() == topic
    assert r.i32() == 1
    error = r.i16()
    assert r.i32() == 0
    return error, r.i32(), r.i64()


def test_epochs_grow_across_restarts_and_fence_older_ones(private_broker, topic_name):
    b = private_broker
    create_topic(b.bootstrap, topic_name, partitions=1)
    produce_all(b.bootstrap, topic_name, [{"value": b"a%d" % i, "partition": 0} for i in range(5)])
    first = leader_epoch(b.bootstrap, topic_name)
    assert first >= 0

    b.restart()
    wait_topic(b.bootstrap, topic_name, 1)
    produce_all(b.bootstrap, topic_name, [{"value": b"b%d" % i, "partition": 0} for i in range(3)])
    second = leader_epoch(b.bootstrap, topic_name)
    assert second > first

    assert list_latest(b.bootstrap, topic_name, first)[0] == FENCED_LEADER_EPOCH
    assert list_latest(b.bootstrap, topic_name, second + 1)[0] == UNKNOWN_LEADER_EPOCH
    assert list_latest(b.bootstrap, topic_name, second) == (0, 8, second)
    assert list_latest(b.bootstrap, topic_name, -1) == (0, 8, second)

    # The first epoch ended where the restart left the log; the current one ends at its end.
    assert epoch_end(b.bootstrap, topic_name, second, first) == (0, first, 5)
    assert epoch_end(b.bootstrap, topic_name, second, second) == (0, second, 8)
    assert epoch_end(b.bootstrap, topic_name, -1, second + 3) == (0, -1, -1)
    assert epoch_end(b.bootstrap, topic_name, first, first)[0] == FENCED_LEADER_EPOCH
