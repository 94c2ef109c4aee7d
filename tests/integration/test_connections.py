"""Many concurrent connections, and pipelined requests answered in order."""
import random
import resource
import time

from util import (FETCH, METADATA, api_versions_request, client_works, connect, create_topic,
                  i8, i32, i64, metadata_request, parse_api_versions_v0, read_response,
                  request, string, array)

CONNECTIONS = 1000
BATCH = 25


def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft >= need, f"RLIMIT_NOFILE {soft} < {need}"


def test_thousand_concurrent_connections(broker):
    raise_nofile(CONNECTIONS + 512)
    socks = []
    try:
        t0 = time.time()
        # Connect in batches, reading a batch's answers before opening the next: Kafka's
        # accept backlog is 50, and a full backlog costs a 1 s SYN retransmission.
        for first in range(0, CONNECTIONS, BATCH):
            batch = range(first, min(first + BATCH, CONNECTIONS))
            for i in batch:
                s = connect(broker.bootstrap, timeout=20)
                s.sendall(api_versions_request(i, 0))
                socks.append(s)
            for i in batch:
                resp = read_response(socks[i])
                assert resp is not None, f"connection {i} closed"
                corr, body = resp
                assert corr == i
                err, apis = parse_api_versions_v0(body)
                assert err == 0 and METADATA in apis
        # All of them are still open at once: a request on every one, then the answers.
        for i, s in enumerate(socks):
            s.sendall(metadata_request(100_000 + i))
        for i, s in enumerate(socks):
            resp = read_response(s)
            assert resp is not None and resp[0] == 100_000 + i, f"connection {i}"
        # A normal client is served while they are all open.
        client_works(broker.bootstrap)
        assert time.time() - t0 < 60
    finally:
        for s in socks:
            s.close()
    client_works(broker.bootstrap)


def test_pipelined_requests_answered_in_order(broker):
    rng = random.Random(7)
    corrs = rng.sample(range(1, 1 << 30), 20)  # not increasing: order must follow requests
    frames = b"".join(api_versions_request(c, 0) if i % 2 == 0 else metadata_request(c)
                      for i, c in enumerate(corrs))
    with connect(broker.bootstrap) as s:
        s.sendall(frames)
        got = []
        for _ in corrs:
            resp = read_response(s)
            assert resp is not None, f"closed after {len(got)} responses"
            got.append(resp[0])
        assert got == corrs


def fetch_v4(correlation_id, topic, partition, offset, max_wait_ms):
    body = (i32(-1) + i32(max_wait_ms) + i32(1) + i32(1 << 20) + i8(0) +
            array([string(topic) + array([i32(partition) + i64(offset) + i32(1 << 20)])]))
    return request(FETCH, 4, correlation_id, body)


def test_pipelined_behind_a_waiting_fetch(broker, topic_name):
    """A Fetch that waits (empty partition, min_bytes 1) is answered before the requests
    pipelined behind it on the same connection, although those are quick."""
    create_topic(broker.bootstrap, topic_name)
    with connect(broker.bootstrap) as s:
        t0 = time.time()
        s.sendall(fetch_v4(1, topic_name, 0, 0, 800) + api_versions_request(2, 0) +
                  metadata_request(3, [topic_name]))
        order = []
        for _ in range(3):
            resp = read_response(s)
            assert resp is not None
            order.append((resp[0], time.time() - t0))
        assert [c for c, _ in order] == [1, 2, 3]
        assert order[0][1] >= 0.6, f"empty Fetch answered after {order[0][1]:.2f}s, not waited"
        assert order[0][1] < 5
