"""ListOffsets v7 at the wire level: earliest (-2), latest (-1), max timestamp (-3, KIP-734)
and by timestamp, compared between Silt and the reference Kafka broker."""
import struct

import pytest

from conftest import SiltBroker, selected_brokers, start_silt
from test_rack_reads import wait_uploaded
from util import (Reader, compact_string, connect, create_topic, i8, i16, i32, i64,
                  produce_all, read_response, uvarint)

LIST_OFFSETS = 2




def list_offsets_v7(bootstrap, topic, timestamps, correlation_id=7):
    """{timestamp query: (error, timestamp, offset)} for partition 0 of `topic`."""
    parts = b"".join(i32(0) + i32(-1) + i64(ts) + b"\x00" for ts in timestamps)
    body = (i32(-1) + i8(0) + uvarint(2) + compact_string(topic) + uvarint(len(timestamps) + 1) +
            parts + b"\x00" + b"\x00")
    # Request header v2: api key, version, correlation id, client id (nullable string), tags.
    client = b"silt-tests"
    payload = (i16(LIST_OFFSETS) + i16(7) + i32(correlation_id) + i16(len(client)) + client +
               b"\x00" + body)
    s = connect(bootstrap)
    s.sendall(i32(len(payload)) + payload)
    corr, rest = read_response(s)
    s.close()
    assert corr == correlation_id
    r = Reader(rest)
    assert r.take(">B") == 0  # response header tags
    r.i32()  # throttle
    assert r.take(">B") == 2  # one topic
    name_len = r.take(">B") - 1
    r.pos += name_len
    n = r.take(">B") - 1
    out = {}
    for ts in timestamps[:n]:
        assert r.i32() == 0
        err, t, off, _epoch = r.i16(), r.i64(), r.i64(), r.i32()
        assert r.take(">B") == 0
        out[ts] = (err, t, off)
    return out


def test_list_offsets_kinds(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    t0 = 1_700_000_000_000
    produce_all(broker.bootstrap, topic_name,
                [{"value": b"%d" % i, "timestamp": t0 + d} for i, d in enumerate([5, 1, 9, 9, 2])],
                **{"linger.ms": 100})
    got = {}
    for q in [-2, -1, -3, t0 + 3, t0 + 9, t0 + 10]:
        got.update(list_offsets_v7(broker.bootstrap, topic_name, [q]))
    assert got[-2] == (0, -1, 0)
    assert got[-1] == (0, -1, 5)
    assert got[-3] == (0, t0 + 9, 2)
    assert got[t0 + 3] == (0, t0 + 5, 0)
    assert got[t0 + 9] == (0, t0 + 9, 2)
    assert got[t0 + 10] == (0, -1, -1)


def test_a_partition_asked_twice_is_invalid_request(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    # Kafka answers the partition once, with the error.
    got = list_offsets_v7(broker.bootstrap, topic_name, [-2, -1])
    assert [e for e, _, _ in got.values()] == [42]


def test_a_stream_the_store_cannot_read_is_kafka_storage_error(tmp_path):
    """A search by timestamp that cannot read the stream's objects answers
    KAFKA_STORAGE_ERROR (retriable), not "no such record" or a later record."""
    if "silt" not in selected_brokers():
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")
    b = SiltBroker(tmp_path, {"upload.interval.ms": "100"})
    topic = "unreadable"
    t0 = 1_700_000_000_000
    start_silt(b)
    try:
        create_topic(b.bootstrap, topic, 1)
        produce_all(b.bootstrap, topic,
                    [{"value": b"%d" % i, "timestamp": t0 + i} for i in range(5)])
        assert list_offsets_v7(b.bootstrap, topic, [t0 + 3])[t0 + 3] == (0, t0 + 3, 3)
        wait_uploaded(b)  # after a restart the records are only in the object store
        assert b.stop() == 0
        # Every object store call fails.
        b.env = {"SILT_TEST_STORE_FAULTS": "error=1"}
        b.start()
        got = list_offsets_v7(b.bootstrap, topic, [t0 + 3])
        assert got[t0 + 3][0] == 56, got  # KAFKA_STORAGE_ERROR
        # The offsets themselves come from the metadata.
        assert list_offsets_v7(b.bootstrap, topic, [-1])[-1] == (0, -1, 5)
        assert b.stop() == 0
        b.env = None
        b.start()
        assert list_offsets_v7(b.bootstrap, topic, [t0 + 3])[t0 + 3] == (0, t0 + 3, 3)
    finally:
        b.stop()
