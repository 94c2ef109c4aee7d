"""Idempotent produce at the wire level: a retried batch is answered with its first offsets and
not written twice, a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch is refused,
and (Silt) the producer state survives a restart, after which a gap is first refused as for
leadership. Batches are built here byte by byte, so the
test controls sequences the way a retrying client would send them."""
import struct
import time

import crc32c
import pytest

from util import (Reader, array, connect, consume_all, create_topic, i16, i32, i64, i8,
                  read_response, request, string, varint)

PRODUCE, INIT_PRODUCER_ID = 0, 22
NONE, NOT_LEADER, OUT_OF_ORDER, INVALID_EPOCH = 0, 6, 45, 47



def batch(pid, epoch, seq, values, timestamp=1_700_000_000_000):
    """A record batch (magic 2) of `values` with producer id, epoch and base sequence."""
    records = b""
    for i, v in enumerate(values):
        body = i8(0) + varint(0) + varint(i) + varint(-1) + varint(len(v)) + v + varint(0)
        records += varint(len(body)) + body
    after_crc = (i16(0) + i32(len(values) - 1) + i64(timestamp) + i64(timestamp) + i64(pid) +
                 i16(epoch) + i32(seq) + i32(len(values)) + records)
    crc = struct.pack(">I", crc32c.crc32c(after_crc))
    rest = i32(-1) + i8(2) + crc + after_crc  # leader epoch, magic, crc, ...
    return i64(0) + i32(len(rest)) + rest


class Client:
    def __init__(self, bootstrap):
        self.sock = connect(bootstrap)
        self.corr = 0

    def call(self, api, version, body):
        self.corr += 1
        self.sock.sendall(request(api, version, self.corr, body))
        got = read_response(self.sock)
        assert got is not None, "connection closed"
        corr, rest = got
        assert corr == self.corr
        return Reader(rest)

    def init_producer_id(self):
        # Kafka answers COORDINATOR_LOAD_IN_PROGRESS (14) or NOT_COORDINATOR (16) while it
        # starts; clients retry.
        for _ in range(100):
            r = self.call(INIT_PRODUCER_ID, 0, string(None) + i32(60000))
            r.i32()  # throttle
            err = r.i16()
            if err not in (14, 15, 16):
                break
            time.sleep(0.2)
        assert err == NONE
        return r.i64(), r.i16()

    def produce(self, topic, partition, records):
        """Produce v3, acks=all: (error_code, base_offset)."""
        body = (string(None) + i16(-1) + i32(30000) +
                array([string(topic) + array([i32(partition) + i32(len(records)) + records])]))
        r = self.call(PRODUCE, 3, body)
        assert r.i32() == 1 and r.string() == topic and r.i32() == 1
        assert r.i32() == partition
        err, base = r.i16(), r.i64()
        return err, base

    def close(self):
        self.sock.close()


def values_of(bootstrap, topic, count):
    return [m["value"] for m in consume_all(bootstrap, topic, 1, count=count)]


def test_duplicates_gaps_and_epochs(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    c = Client(broker.bootstrap)
    pid, epoch = c.init_producer_id()
    assert c.produce(topic_name, 0, batch(pid, epoch, 0, [b"a", b"b"])) == (NONE, 0)
    assert c.produce(topic_name, 0, batch(pid, epoch, 2, [b"c"])) == (NONE, 2)
    # A retry of either of the last batches: the first offsets again, nothing written.
    assert c.produce(topic_name, 0, batch(pid, epoch, 0, [b"a", b"b"])) == (NONE, 0)
    assert c.produce(topic_name, 0, batch(pid, epoch, 2, [b"c"])) == (NONE, 2)
    # A gap in the sequence.
    err, _ = c.produce(topic_name, 0, batch(pid, epoch, 5, [b"x"]))
    assert err == OUT_OF_ORDER
    assert c.produce(topic_name, 0, batch(pid, epoch, 3, [b"d"])) == (NONE, 3)
    # An older epoch than the partition has seen.
    assert c.produce(topic_name, 0, batch(pid, epoch + 1, 0, [b"e"])) == (NONE, 4)
    err, _ = c.produce(topic_name, 0, batch(pid, epoch, 4, [b"f"]))
    assert err == INVALID_EPOCH
    c.close()
    assert values_of(broker.bootstrap, topic_name, 5) == [b"a", b"b", b"c", b"d", b"e"]


def test_producer_state_survives_restart(silt, topic_name):
    create_topic(silt.bootstrap, topic_name, 1)
    c = Client(silt.bootstrap)
    pid, epoch = c.init_producer_id()
    for seq in range(3):
        assert c.produce(topic_name, 0, batch(pid, epoch, seq, [b"v%d" % seq])) == (NONE, seq)
    c.close()
    silt.restart()
    c = Client(silt.bootstrap)
    # The last batch retried after the restart is still a duplicate; the next one follows.
    assert c.produce(topic_name, 0, batch(pid, epoch, 2, [b"v2"])) == (NONE, 2)
    # A gap moments after the broker began serving the partition (a restart, a move, a
    # takeover) is most likely a batch refused meanwhile and still to be retried: refused as
    # for leadership (retriable), not OUT_OF_ORDER_SEQUENCE_NUMBER, which librdkafka's
    # producer does not survive (or survives by bumping its epoch and writing its
    # unacknowledged batches again). Nothing is written.
    err, _ = c.produce(topic_name, 0, batch(pid, epoch, 7, [b"gap"]))
    assert err == NOT_LEADER
    assert c.produce(topic_name, 0, batch(pid, epoch, 3, [b"v3"])) == (NONE, 3)
    # A new producer id is not one handed out before the restart.
    pid2, _ = c.init_producer_id()
    assert pid2 != pid
    c.close()
    assert values_of(silt.bootstrap, topic_name, 4) == [b"v0", b"v1", b"v2", b"v3"]


def test_producer_state_survives_sigkill(silt, topic_name):
    create_topic(silt.bootstrap, topic_name, 1)
    c = Client(silt.bootstrap)
    pid, epoch = c.init_producer_id()
    for seq in range(3):
        assert c.produce(topic_name, 0, batch(pid, epoch, seq, [b"v%d" % seq])) == (NONE, seq)
    c.close()
    silt.kill()
    silt.start()
    c = Client(silt.bootstrap)
    assert c.produce(topic_name, 0, batch(pid, epoch, 1, [b"v1"])) == (NONE, 1)
    assert c.produce(topic_name, 0, batch(pid, epoch, 3, [b"v3"])) == (NONE, 3)
    c.close()
    assert values_of(silt.bootstrap, topic_name, 4) == [b"v0", b"v1", b"v2", b"v3"]
