"""Incremental fetch sessions (KIP-227) at the wire level, with Fetch v12: a session's epoch
advances exactly once per accepted request, idle long polls keep the session, a wrong epoch
or id is refused without changing the session, and of two racing requests of one session the
stale one is refused, as Kafka's FetchManager does. Compared between Silt and Kafka."""
import threading
import time

from util import (FETCH, Reader, compact_string, connect, create_topic, i8, i16, i32, i64,
                  produce_all, read_response, uvarint)

FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71


def fetch_v12(sock, session_id, epoch, partitions=(), forgotten=(), max_wait_ms=0,
              correlation_id=1, max_bytes=1 << 20):
    """Sends one Fetch v12 and returns (error, session_id, {(topic, partition): (error, high
    watermark, record bytes)}), the partitions in response order. partitions: (topic,
    partition, fetch_offset) tuples; forgotten: (topic, partition) tuples; max_bytes: the
    response's."""
    by_topic = {}
    for t, p, off in partitions:
        by_topic.setdefault(t, []).append(
            i32(p) + i32(-1) + i64(off) + i32(-1) + i64(-1) + i32(1 << 20) + b"\x00")
    topics = uvarint(len(by_topic) + 1) + b"".join(
        compact_string(t) + uvarint(len(ps) + 1) + b"".join(ps) + b"\x00"
        for t, ps in by_topic.items())
    forgot_by_topic = {}
    for t, p in forgotten:
        forgot_by_topic.setdefault(t, []).append(i32(p))
    forgot = uvarint(len(forgot_by_topic) + 1) + b"".join(
        compact_string(t) + uvarint(len(ps) + 1) + b"".join(ps) + b"\x00"
        for t, ps in forgot_by_topic.items())
    body = (i32(-1) + i32(max_wait_ms) + i32(1) + i32(max_bytes) + i8(0) + i32(session_id) +
            i32(epoch) + topics + forgot + compact_string("") + b"\x00")
    client = b"silt-tests"
    payload = (i16(FETCH) + i16(12) + i32(correlation_id) + i16(len(client)) + client + b"\x00" +
               body)
    sock.sendall(i32(len(payload)) + payload)
    resp = read_response(sock)
    assert resp is not None, "connection closed on Fetch"
    corr, rest = resp
    assert corr == correlation_id
    r = Reader(rest)
    r.skip_tags()  # response header
    r.i32()  # throttle
    error, sid = r.i16(), r.i32()
    out = {}
    for _ in range(r.uvarint() - 1):
        n = r.uvarint() - 1
        topic = r.data[r.pos:r.pos + n].decode()
        r.pos += n
        for _ in range(r.uvarint() - 1):
            p, perr, hw = r.i32(), r.i16(), r.i64()
            r.i64()  # last stable offset
            r.i64()  # log start offset
            aborted = r.uvarint()
            for _ in range(max(aborted - 1, 0)):
                r.i64()
                r.i64()
                r.skip_tags()
            r.i32()  # preferred read replica
            size = r.uvarint() - 1
            r.pos += max(size, 0)
            r.skip_tags()
            out[(topic, p)] = (perr, hw, max(size, 0))
        r.skip_tags()
    r.skip_tags()
    return error, sid, out


def open_session(sock, topic):
    err, sid, parts = fetch_v12(sock, 0, 0, [(topic, 0, 0), (topic, 1, 0)])
    assert err == 0 and sid != 0, (err, sid)
    assert set(parts) == {(topic, 0), (topic, 1)}
    return sid


def test_session_epochs_advance_once_per_accepted_request(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    with connect(broker.bootstrap) as s:
        sid = open_session(s, topic_name)
        # Idle long polls: nothing new, nothing answered, the session lives on.
        for epoch in (1, 2, 3):
            err, got_sid, parts = fetch_v12(s, sid, epoch, max_wait_ms=300)
            assert (err, got_sid, parts) == (0, sid, {}), epoch
        # A repeated epoch, a skipped one and an unknown session are refused and change nothing.
        assert fetch_v12(s, sid, 3)[0] == INVALID_FETCH_SESSION_EPOCH
        assert fetch_v12(s, sid, 5)[0] == INVALID_FETCH_SESSION_EPOCH
        assert fetch_v12(s, sid + 1000, 4)[0] == FETCH_SESSION_ID_NOT_FOUND
        produce_all(broker.bootstrap, topic_name, [{"value": b"x", "partition": 1}])
        err, got_sid, parts = fetch_v12(s, sid, 4, max_wait_ms=2000)
        assert (err, got_sid) == (0, sid)
        assert list(parts) == [(topic_name, 1)] and parts[(topic_name, 1)][:2] == (0, 1)
        assert parts[(topic_name, 1)][2] > 0
        # The client moves its offset: answered only when there is news again.
        err, _, parts = fetch_v12(s, sid, 5, [(topic_name, 1, 1)], max_wait_ms=200)
        assert (err, parts) == (0, {})
        # Forgetting every partition closes the session.
        err, got_sid, parts = fetch_v12(s, sid, 6, forgotten=[(topic_name, 0), (topic_name, 1)])
        assert (err, got_sid, parts) == (0, 0, {})
        assert fetch_v12(s, sid, 7)[0] == FETCH_SESSION_ID_NOT_FOUND
        # Epoch -1 fetches without a session.
        err, got_sid, parts = fetch_v12(s, 0, -1, [(topic_name, 1, 0)])
        assert (err, got_sid) == (0, 0) and parts[(topic_name, 1)][2] > 0


def test_an_error_partition_is_answered_again_once_the_error_is_gone(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    produce_all(broker.bootstrap, topic_name, [{"value": b"x", "partition": 0}])
    with connect(broker.bootstrap) as s:
        sid = open_session(s, topic_name)
        err, _, parts = fetch_v12(s, sid, 1, [(topic_name, 0, 5)])
        assert err == 0 and parts[(topic_name, 0)][0] == 1  # OFFSET_OUT_OF_RANGE
        err, _, parts = fetch_v12(s, sid, 2, [(topic_name, 0, 1)], max_wait_ms=200)
        assert err == 0 and parts[(topic_name, 0)][:2] == (0, 1)


def test_a_partition_that_gave_records_is_read_after_the_others(broker, topic_name):
    """A response too small for every partition's records must not go to the same partition
    each time: in a session, a partition that gave records moves behind the others, as
    Kafka's IncrementalFetchContext does, so that a busy partition cannot starve the rest."""
    create_topic(broker.bootstrap, topic_name, 2)
    # Three batches of one record in each partition.
    produce_all(broker.bootstrap, topic_name,
                [{"value": b"v" * 1000, "partition": p} for p in (0, 1) for _ in range(3)],
                **{"batch.num.messages": 1, "linger.ms": 0})
    with connect(broker.bootstrap) as s:
        # Room for one batch only (the first partition with records gets one anyway, KIP-74).
        err, sid, parts = fetch_v12(s, 0, 0, [(topic_name, 0, 0), (topic_name, 1, 0)],
                                    max_bytes=1)
        assert err == 0 and sid != 0, (err, sid)
        assert parts[(topic_name, 0)][2] > 0 and parts[(topic_name, 1)][2] == 0, parts
        # The session reads in request order: partition 0 again, which then moves last ...
        err, _, parts = fetch_v12(s, sid, 1, [(topic_name, 0, 1)], max_bytes=1)
        assert err == 0 and parts[(topic_name, 0)][2] > 0, parts
        assert parts.get((topic_name, 1), (0, 3, 0))[2] == 0, parts
        # ... so that partition 1 has its turn, though partition 0 has records left.
        err, _, parts = fetch_v12(s, sid, 2, [(topic_name, 0, 2)], max_bytes=1)
        assert err == 0 and parts[(topic_name, 1)][2] > 0, parts
        assert parts.get((topic_name, 0), (0, 3, 0))[2] == 0, parts
        # And then partition 0 again.
        err, _, parts = fetch_v12(s, sid, 3, [(topic_name, 1, 1)], max_bytes=1)
        assert err == 0 and parts[(topic_name, 0)][2] > 0, parts
        assert parts.get((topic_name, 1), (0, 3, 0))[2] == 0, parts


def test_of_two_racing_requests_of_one_session_the_stale_one_is_refused(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    with connect(broker.bootstrap) as a, connect(broker.bootstrap) as b:
        sid = open_session(a, topic_name)
        # A long poll with epoch 1 is accepted (the session expects 2 from then on) ...
        slow = {}
        t = threading.Thread(target=lambda: slow.update(r=fetch_v12(a, sid, 1, max_wait_ms=3000)))
        t.start()
        time.sleep(1.0)
        # ... so the same epoch again is refused at once, while the next one is accepted,
        assert fetch_v12(b, sid, 1)[0] == INVALID_FETCH_SESSION_EPOCH
        err, got_sid, _ = fetch_v12(b, sid, 2)
        assert (err, got_sid) == (0, sid)
        # and the long poll, overtaken, is refused when it answers.
        t.join(10)
        assert not t.is_alive()
        assert slow["r"][0] == INVALID_FETCH_SESSION_EPOCH
        # The session goes on at the epoch after the last accepted request.
        assert fetch_v12(b, sid, 3)[0] == 0
        assert fetch_v12(b, sid, 3)[0] == INVALID_FETCH_SESSION_EPOCH


def test_many_racing_requests_advance_the_epoch_once_each(broker, topic_name):
    """Clients that race the same epoch from many connections: exactly one wins each epoch."""
    create_topic(broker.bootstrap, topic_name, 2)
    socks = [connect(broker.bootstrap) for _ in range(4)]
    try:
        sid = open_session(socks[0], topic_name)
        for epoch in range(1, 21):
            results = [None] * len(socks)

            def go(i, epoch=epoch):
                results[i] = fetch_v12(socks[i], sid, epoch, correlation_id=epoch)[0]

            threads = [threading.Thread(target=go, args=(i,)) for i in range(len(socks))]
            for th in threads:
                th.start()
            for th in threads:
                th.join(10)
            assert sorted(results) == [0] + [INVALID_FETCH_SESSION_EPOCH] * (len(socks) - 1), \
                (epoch, results)
    finally:
        for s in socks:
            s.close()


def test_a_session_keeps_at_most_a_thousand_partitions_that_exist_nowhere(silt_shared,
                                                                         topic_name):
    """Silt-only: Kafka keeps whatever partitions a session names. Silt keeps at most 1,000 that
    no topic has, so that a client cannot grow a session without bound with made-up names;
    the others are not kept, and existing partitions are kept as ever."""
    create_topic(silt_shared.bootstrap, topic_name, 2)
    with connect(silt_shared.bootstrap) as s:
        sid = open_session(s, topic_name)
        epoch = 1
        for batch in range(3):
            made_up = [(f"nowhere-{topic_name}", batch * 500 + i, 0) for i in range(500)]
            err, _, _ = fetch_v12(s, sid, epoch, made_up, max_bytes=64 << 20)
            assert err == 0
            epoch += 1
        # Every partition with an error is answered again each time: those kept.
        err, got_sid, parts = fetch_v12(s, sid, epoch, max_bytes=64 << 20)
        assert (err, got_sid) == (0, sid)
        kept = [k for k in parts if k[0].startswith("nowhere-")]
        assert len(kept) == 1000, len(kept)
        # Existing partitions still join the session.
        produce_all(silt_shared.bootstrap, topic_name, [{"value": b"x", "partition": 1}])
        err, _, parts = fetch_v12(s, sid, epoch + 1, [(topic_name, 1, 0)], max_bytes=64 << 20)
        assert err == 0 and parts[(topic_name, 1)][2] > 0
