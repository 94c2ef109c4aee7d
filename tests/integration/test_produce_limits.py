"""What one Produce request may make the broker do is bounded. Silt-only: Kafka appends a
partition named twice once (the last copy) and decompresses whatever a request carries.

- A partition named more than once in one request is refused each time with INVALID_REQUEST
  and nothing is appended: its batches would otherwise be checked, and decompressed, once per
  copy.
- The compressed batches of one request decompress to at most 64 MiB in all, or 32 times the
  request's size when that is more: small batches that each expand to megabytes are refused
  with MESSAGE_TOO_LARGE once the request's share is used, the others are written.
"""
import os

import zstandard

from test_record_validation import NONE, ZSTD, batch, record
from util import Reader, array, connect, create_topic, i16, i32, read_response, request, string
from util import watermarks

PRODUCE = 0
INVALID_REQUEST, MESSAGE_TOO_LARGE = 42, 10


def produce(bootstrap, topic, parts):
    """One Produce v8 (acks=all) of [(partition, records)] in that order, duplicates allowed;
    [(partition, error, base offset, message)] in response order."""
    body = string(None) + i16(-1) + i32(30000) + array(
        [string(topic) + array([i32(p) + i32(len(r)) + r for p, r in parts])])
    with connect(bootstrap, timeout=60) as s:
        s.sendall(request(PRODUCE, 8, 5, body))
        got = read_response(s)
    assert got is not None and got[0] == 5, "no Produce answer"
    r = Reader(got[1])
    out = []
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            index, err, base = r.i32(), r.i16(), r.i64()
            r.i64()  # log_append_time_ms
            r.i64()  # log_start_offset
            for _ in range(r.i32()):  # record_errors
                r.i32()
                r.string()
            out.append((index, err, base, r.string()))
    return out


def test_a_partition_named_twice_is_refused_each_time_and_nothing_appended(silt_shared,
                                                                           topic_name):
    create_topic(silt_shared.bootstrap, topic_name, partitions=2)
    one = batch(record(0, b"v"), 1)
    got = produce(silt_shared.bootstrap, topic_name, [(0, one), (1, one), (0, one)])
    assert [(p, e) for p, e, _, _ in got] == [(0, INVALID_REQUEST), (1, NONE),
                                              (0, INVALID_REQUEST)], got
    assert "more than once" in got[0][3]
    assert watermarks(silt_shared.bootstrap, topic_name, 0)[1] == 0
    assert watermarks(silt_shared.bootstrap, topic_name, 1)[1] == 1


def test_a_request_decompresses_to_at_most_its_share(silt_shared, topic_name):
    partitions = 20
    create_topic(silt_shared.bootstrap, topic_name, partitions=partitions)
    # 8 MiB of zeros in one record, a few hundred bytes compressed.
    bomb = batch(zstandard.ZstdCompressor().compress(record(0, bytes(8 << 20))), 1, codec=ZSTD)
    assert len(bomb) < 4096
    got = produce(silt_shared.bootstrap, topic_name, [(p, bomb) for p in range(partitions)])
    written = [p for p, e, _, _ in got if e == NONE]
    refused = [(p, e, m) for p, e, _, m in got if e != NONE]
    # 64 MiB in all: seven records of a little more than 8 MiB each.
    assert written == list(range(7)), got
    assert all(e == MESSAGE_TOO_LARGE and "decompress" in m for _, e, m in refused), refused
    assert len(refused) == partitions - 7


def test_a_request_of_large_compressed_batches_is_written(silt_shared, topic_name):
    """Over 1 MiB of compressed batches: checked off the network thread, written as any."""
    create_topic(silt_shared.bootstrap, topic_name, partitions=2)
    big = [batch(zstandard.ZstdCompressor().compress(record(0, os.urandom(700 << 10))), 1,
                 codec=ZSTD) for _ in range(2)]
    got = produce(silt_shared.bootstrap, topic_name, [(0, big[0]), (1, big[1])])
    assert [(p, e) for p, e, _, _ in got] == [(0, NONE), (1, NONE)], got
    assert watermarks(silt_shared.bootstrap, topic_name, 1)[1] == 1
