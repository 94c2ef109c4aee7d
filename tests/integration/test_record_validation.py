"""Records inside a batch are checked, not only its header and CRC: a batch whose CRC is right
but whose records are malformed, or whose compressed payload does not decompress, is refused
for its partition, while the other partitions of the request are written and the connection
goes on serving. Batches are built here byte by byte (CRC32C recomputed, as a careless or
hostile client would) and sent with Produce v8, whose response carries error_message.

What the reference Kafka 4.1.1 answers, which Silt matches:
  - records that are cut short, miscounted or followed by extra bytes: INVALID_RECORD (87)
    (DefaultRecord.readFrom, DefaultRecordBatch's record iterator);
  - a gzip, snappy, lz4 or zstd payload that does not decompress: UNKNOWN_SERVER_ERROR (-1)
    (the codec's IOException wrapped in a KafkaException, which ReplicaManager does not map);
  - a record whose timestamp is out of range while the batch header's are not:
    INVALID_TIMESTAMP (32) (LogValidator.validateTimestamp checks every record).
Where they differ on purpose: offset deltas other than 0, 1, ... Kafka stores an uncompressed
batch as sent and rebuilds a compressed one; Silt stores the client's bytes unchanged and so
refuses the batch with INVALID_RECORD.
"""
import gzip
import struct
import time

import crc32c
import lz4.frame
import pytest
import zstandard

from util import (Reader, array, connect, consume_all, create_topic, i16, i32, i64, i8,
                  read_response, request, string, varint, watermarks)

PRODUCE = 0
NONE, UNKNOWN_SERVER_ERROR, INVALID_TIMESTAMP, INVALID_RECORD = 0, -1, 32, 87
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4



def record(offset_delta, value, timestamp_delta=0):
    body = (i8(0) + varint(timestamp_delta) + varint(offset_delta) + varint(-1) +
            varint(len(value)) + value + varint(0))
    return varint(len(body)) + body


def records(n):
    return b"".join(record(i, b"v%d" % i) for i in range(n))


def compress(codec, data):
    if codec == GZIP:
        return gzip.compress(data)
    if codec == LZ4:
        return lz4.frame.compress(data)
    if codec == ZSTD:
        return zstandard.ZstdCompressor().compress(data)
    assert codec == 0
    return data


def batch(payload, count, codec=0, timestamp=None):
    """A magic 2 batch of `count` records whose records section (after any compression) is
    `payload`, with a correct CRC whatever the payload holds."""
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    after_crc = (i16(codec) + i32(count - 1) + i64(ts) + i64(ts) + i64(-1) + i16(-1) + i32(-1) +
                 i32(count) + payload)
    crc = struct.pack(">I", crc32c.crc32c(after_crc))
    rest = i32(-1) + i8(2) + crc + after_crc  # leader epoch, magic, crc, ...
    return i64(0) + i32(len(rest)) + rest


class Client:
    """One connection, reused for every request of a test."""

    def __init__(self, bootstrap):
        self.sock = connect(bootstrap, timeout=30)
        self.corr = 0

    def produce(self, topic, partitions):
        """Produce v8, acks=all. partitions: {index: records}. Returns {index: (error_code,
        base_offset, error_message)}."""
        self.corr += 1
        parts = [i32(p) + i32(len(r)) + r for p, r in sorted(partitions.items())]
        body = string(None) + i16(-1) + i32(30000) + array([string(topic) + array(parts)])
        self.sock.sendall(request(PRODUCE, 8, self.corr, body))
        got = read_response(self.sock)
        assert got is not None, "the broker closed the connection"
        corr, rest = got
        assert corr == self.corr
        r = Reader(rest)
        assert r.i32() == 1 and r.string() == topic
        out = {}
        for _ in range(r.i32()):
            index, err, base = r.i32(), r.i16(), r.i64()
            r.i64()  # log_append_time_ms
            r.i64()  # log_start_offset
            for _ in range(r.i32()):  # record_errors
                r.i32()
                r.string()
            out[index] = (err, base, r.string())
        return out

    def close(self):
        self.sock.close()


@pytest.fixture
def client_and_topic(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    c = Client(broker.bootstrap)
    yield c, topic_name
    c.close()


def refused_alone(broker, client, topic, bad, expected_error):
    """Produces `bad` to partition 0 and a good batch to partition 1 in one request: partition 0
    gets `expected_error` and nothing is written to it, partition 1 is written, and the
    connection then serves another produce. Returns partition 0's error message."""
    p0_before = watermarks(broker.bootstrap, topic, 0)[1]
    p1_before = watermarks(broker.bootstrap, topic, 1)[1]
    res = client.produce(topic, {0: bad, 1: batch(records(2), 2)})
    err, base, message = res[0]
    assert (err, base) == (expected_error, -1), res
    assert res[1][:2] == (NONE, p1_before), res
    # The same connection goes on: a good batch to the refused partition is written.
    again = client.produce(topic, {0: batch(records(1), 1)})
    assert again[0][:2] == (NONE, p0_before), again
    assert watermarks(broker.bootstrap, topic, 0)[1] == p0_before + 1
    assert watermarks(broker.bootstrap, topic, 1)[1] == p1_before + 2
    return message


def test_garbage_records_with_a_valid_crc(broker, client_and_topic):
    c, topic = client_and_topic
    message = refused_alone(broker, c, topic, batch(bytes(range(7, 47)), 3), INVALID_RECORD)
    if broker.kind == "silt":
        assert message and message.startswith("record 0: "), message
    # Consumers see only the good batches.
    got = consume_all(broker.bootstrap, topic, 2)
    assert sorted(m["value"] for m in got) == [b"v0", b"v0", b"v1"]


@pytest.mark.parametrize("codec", [LZ4, ZSTD, GZIP, SNAPPY], ids=["lz4", "zstd", "gzip", "snappy"])
def test_compressed_payload_that_does_not_decompress(broker, client_and_topic, codec):
    c, topic = client_and_topic
    good = compress(codec if codec != SNAPPY else 0, records(3))
    payloads = [
        b"not a compressed stream at all",
        # The codec's magic, then garbage.
        {LZ4: b"\x04\x22\x4d\x18", ZSTD: b"\x28\xb5\x2f\xfd", GZIP: b"\x1f\x8b",
         SNAPPY: b"\xff\xff\xff\xff"}[codec] + b"garbage after the magic",
    ]
    if codec != SNAPPY:
        payloads.append(good[:-5])  # a valid stream cut short
    for payload in payloads:
        message = refused_alone(broker, c, topic, batch(payload, 3, codec), UNKNOWN_SERVER_ERROR)
        if broker.kind == "silt":
            assert message and "do not decompress" in message, message


@pytest.mark.parametrize("codec", [0, LZ4, ZSTD], ids=["none", "lz4", "zstd"])
def test_malformed_records(broker, client_and_topic, codec):
    """After decompression, the same checks as for an uncompressed batch."""
    c, topic = client_and_topic
    cases = {
        "more counted than there are": (records(2), 3),
        "fewer counted than there are": (records(3), 2),
        "a byte after the last record": (records(3) + b"\x00", 3),
        "the last record cut short": (records(3)[:-3], 3),
    }
    for name, (section, count) in cases.items():
        message = refused_alone(broker, c, topic, batch(compress(codec, section), count, codec),
                                INVALID_RECORD)
        if broker.kind == "silt":
            assert message and message.startswith("record "), (name, message)


@pytest.mark.parametrize("codec", [0, LZ4, ZSTD, GZIP], ids=["none", "lz4", "zstd", "gzip"])
def test_well_formed_batches_of_every_codec_are_written(broker, client_and_topic, codec):
    c, topic = client_and_topic
    res = c.produce(topic, {0: batch(compress(codec, records(3)), 3, codec)})
    assert res[0][:2] == (NONE, 0), res
    got = consume_all(broker.bootstrap, topic, [0])
    assert [m["value"] for m in got] == [b"v0", b"v1", b"v2"]
    assert [m["offset"] for m in got] == [0, 1, 2]


def test_record_timestamp_out_of_range(broker, client_and_topic):
    """The header's timestamps are in range, a record's (2 hours ahead, past the default
    message.timestamp.after.max.ms of 1 hour) is not."""
    c, topic = client_and_topic
    ahead = 2 * 3600 * 1000
    section = record(0, b"now") + record(1, b"later", timestamp_delta=ahead)
    refused_alone(broker, c, topic, batch(section, 2), INVALID_TIMESTAMP)


@pytest.mark.parametrize("codec", [0, ZSTD], ids=["none", "zstd"])
def test_offset_deltas_out_of_order(broker, client_and_topic, codec):
    c, topic = client_and_topic
    section = record(0, b"a") + record(2, b"b") + record(1, b"c")
    bad = batch(compress(codec, section), 3, codec)
    if broker.kind == "kafka":
        # Kafka 4.1.1 writes an uncompressed batch as sent and fails rebuilding a compressed
        # one (UnsupportedOperationException from its key-skipping iterator).
        res = c.produce(topic, {0: bad})
        assert res[0][0] == (NONE if codec == 0 else UNKNOWN_SERVER_ERROR), res
        return
    message = refused_alone(broker, c, topic, bad, INVALID_RECORD)
    assert message == "record 1: offset delta 2, expected 1", message


def test_two_batches_for_one_partition(broker, client_and_topic):
    """From Produce v3 on a partition's records are exactly one batch
    (ProduceRequest.validateRecords); two well-formed ones are refused together."""
    c, topic = client_and_topic
    message = refused_alone(broker, c, topic, batch(records(1), 1) + batch(records(2), 2),
                            INVALID_RECORD)
    if broker.kind == "silt":
        assert "exactly one record batch" in message, message
