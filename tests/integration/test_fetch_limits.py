"""Fetch within its limits, as Kafka's (KIP-74): a response carries at most `max_bytes` of
records and a partition at most its `partition_max_bytes`, except that the first batch of the
first partition with data is returned whole even when it alone exceeds them, so that a consumer
always progresses. librdkafka refuses a response larger than its receive limit
(`receive.message.max.bytes`, at least `fetch.max.bytes` + 512), so a broker that answers more
leaves it stuck. Compared between Silt and Kafka."""
import os
import struct

from util import (FETCH, Reader, array, connect, consume_all, create_topic, i8, i32, i64,
                  produce_all, read_response, request, string)

RECORD = 900 * 1024
PARTITIONS = 4
PER_PARTITION = 3


def fill(bootstrap, topic):
    create_topic(bootstrap, topic, PARTITIONS)
    produce_all(bootstrap, topic,
                [{"value": os.urandom(RECORD), "partition": p}
                 for p in range(PARTITIONS) for _ in range(PER_PARTITION)],
                timeout=60, **{"linger.ms": 0, "compression.type": "none"})


def fetch_v4(bootstrap, topic, max_bytes, partition_max_bytes):
    """One Fetch v4 of every partition from offset 0: [(partition, error, record bytes)] in
    response order."""
    body = (i32(-1) + i32(0) + i32(1) + i32(max_bytes) + i8(0) +
            array([string(topic) + array([i32(p) + i64(0) + i32(partition_max_bytes)
                                          for p in range(PARTITIONS)])]))
    with connect(bootstrap) as s:
        s.sendall(request(FETCH, 4, 7, body))
        resp = read_response(s)
    assert resp is not None and resp[0] == 7, "no Fetch answer"
    r = Reader(resp[1])
    r.i32()  # throttle_time_ms
    out = []
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            p, err = r.i32(), r.i16()
            r.i64()  # high watermark
            r.i64()  # last stable offset
            for _ in range(max(r.i32(), 0)):  # aborted transactions
                r.i64()
                r.i64()
            size = max(r.i32(), 0)
            out.append((p, err, r.data[r.pos:r.pos + size]))
            r.pos += size
    return out


def first_batch_size(records):
    """The size of the first record batch in `records` (its length field plus 12)."""
    assert len(records) >= 12
    return struct.unpack_from(">i", records, 8)[0] + 12


def test_a_response_holds_no_more_than_max_bytes_but_the_first_batch(broker, topic_name):
    fill(broker.bootstrap, topic_name)
    parts = fetch_v4(broker.bootstrap, topic_name, 1_000_000, 20_000_000)
    assert all(err == 0 for _, err, _ in parts), parts
    with_data = [(p, recs) for p, _, recs in parts if recs]
    assert with_data, "no records"
    # The first partition with data progresses: its first batch whole, above max_bytes alone
    # if need be.
    first = with_data[0][1]
    assert len(first) >= first_batch_size(first) > RECORD
    total = sum(len(recs) for _, recs in with_data)
    assert total <= max(1_000_000, first_batch_size(first)), \
        [(p, len(recs)) for p, recs in with_data]


def test_a_partition_holds_no_more_than_its_limit_but_the_first_batch(broker, topic_name):
    fill(broker.bootstrap, topic_name)
    parts = fetch_v4(broker.bootstrap, topic_name, 50_000_000, 100_000)
    assert all(err == 0 for _, err, _ in parts), parts
    with_data = [(p, recs) for p, _, recs in parts if recs]
    assert with_data, "no records"
    first = with_data[0][1]
    assert len(first) == first_batch_size(first), "more than one batch over the partition limit"
    for p, recs in with_data[1:]:
        assert len(recs) <= 100_000, (p, len(recs))


def test_librdkafka_consumes_records_larger_than_half_its_fetch_limit(broker, topic_name):
    fill(broker.bootstrap, topic_name)
    got = consume_all(broker.bootstrap, topic_name, PARTITIONS, count=PARTITIONS * PER_PARTITION,
                      timeout=60, **{"fetch.max.bytes": 1_000_000,
                                     "max.partition.fetch.bytes": 20_000_000,
                                     "receive.message.max.bytes": 1_000_512})
    assert sorted((m["partition"], m["offset"]) for m in got) == \
        [(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)]
    assert all(len(m["value"]) == RECORD for m in got)
