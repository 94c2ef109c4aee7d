"""Silt brokers sharing one metadata store and one object store: the controller spreads a new
topic's partitions over the live brokers, Kafka's kafka-reassign-partitions tool moves one and
sees the move complete, and moves made while an idempotent acks=all producer writes lose and
duplicate nothing (each move's time, from the request to the new owner acknowledging a produce,
and the producer's worst latency are printed). The controller's broker coordinates the groups,
and another takes them over, offsets intact, when it stops."""
import statistics
import struct
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from test_cli_tools import tool
from test_idempotence import Client as IdempotentClient, batch as idempotent_batch
from test_membership import Flex, partition_leader_epochs, partition_leaders, produce_v10, \
    shared_store_brokers  # noqa: F401 (a fixture)
from test_record_validation import batch, records
from util import check_acknowledged, compact_string, connect, consume_all, create_topic, i16, \
    i32, produce_all, read_response, string, uvarint

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def alter_reassignments(bootstrap, topic, moves):
    """AlterPartitionReassignments v0: {partition: [replicas] or None}. Returns
    (top-level error, {partition: (error code, message)})."""
    parts = b"".join(
        i32(p) + (uvarint(0) if r is None else uvarint(len(r) + 1) + b"".join(map(i32, r))) +
        uvarint(0) for p, r in moves.items())
    body = (i32(30000) + uvarint(2) + compact_string(topic) + uvarint(len(moves) + 1) + parts +
            uvarint(0) + uvarint(0))
    payload = i16(45) + i16(0) + i32(21) + string("silt-tests") + uvarint(0) + body
    with connect(bootstrap) as s:
        s.sendall(i32(len(payload)) + payload)
        corr, rest = read_response(s)
    assert corr == 21
    r = Flex(rest)
    r.tags(lambda tag, r: None)
    r.take(">i")  # throttle
    top = r.take(">h")
    r.string()
    out = {}
    for _ in range(r.uvarint() - 1):
        r.string()
        for _ in range(r.uvarint() - 1):
            p, err, msg = r.take(">i"), r.take(">h"), r.string()
            r.tags(lambda tag, r: None)
            out[p] = (err, msg)
        r.tags(lambda tag, r: None)
    return top, out


def wait_spread(bootstrap, topic, partitions, nodes, timeout=15):
    """Waits until every broker in `nodes` leads about as many partitions as the others."""
    deadline = time.time() + timeout
    leaders = None
    while time.time() < deadline:
        leaders = partition_leaders(bootstrap, topic)
        if leaders and all(e == 0 for e, _ in leaders.values()):
            counts = [sum(1 for _, n in leaders.values() if n == node) for node in nodes]
            if max(counts) - min(counts) <= 1 and sum(counts) == partitions:
                return {p: n for p, (_, n) in leaders.items()}
        time.sleep(0.05)
    pytest.fail(f"partitions of {topic} not spread over {nodes}: {leaders}")


def test_a_new_topic_is_spread_and_the_reassign_tool_moves_a_partition(shared_store_brokers,
                                                                        tmp_path):
    (a, b), _ = shared_store_brokers
    topic = "spread"
    create_topic(a.bootstrap, topic, partitions=4)
    leaders = wait_spread(b.bootstrap, topic, 4, [1, 2])
    moved = next(p for p, n in leaders.items() if n == 1)
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"%s","partition":%d,"replicas":[2]}]}'
                    % (topic, moved))
    out = tool(REASSIGN, "--bootstrap-server", a.bootstrap, "--reassignment-json-file", plan,
               "--execute").stdout
    assert f"Successfully started partition reassignment for {topic}-{moved}" in out, out
    deadline = time.time() + 20
    while True:
        out = tool(REASSIGN, "--bootstrap-server", b.bootstrap, "--reassignment-json-file", plan,
                   "--verify").stdout
        if f"Reassignment of partition {topic}-{moved} is completed" in out:
            break
        assert time.time() < deadline, out
        time.sleep(0.2)
    # Moved (and the controller may have moved another back to keep the count even).
    err, leader, epoch = partition_leader_epochs(a.bootstrap, topic)[moved]
    assert (err, leader) == (0, 2)
    assert epoch >= 1

    # Bad requests: an unknown partition, a broker that is not live, an empty list, and a
    # cancellation with nothing to cancel.
    top, res = alter_reassignments(a.bootstrap, topic, {9: [1], 0: [7], 1: [], 2: None})
    assert top == 0
    assert res[9][0] == 3, res  # UNKNOWN_TOPIC_OR_PARTITION
    assert res[0][0] == 39 and "not live" in res[0][1], res  # INVALID_REPLICA_ASSIGNMENT
    assert res[1][0] == 39, res
    assert res[2][0] == 85, res  # NO_REASSIGNMENT_IN_PROGRESS


def test_moves_under_an_idempotent_producer_lose_and_duplicate_nothing(shared_store_brokers):
    (a, b), _ = shared_store_brokers
    bootstrap = {1: a.bootstrap, 2: b.bootstrap}
    topic = "moves-under-load"
    create_topic(a.bootstrap, topic, partitions=4)
    wait_spread(a.bootstrap, topic, 4, [1, 2])

    acked, errors, latencies = [], [], []
    stop = threading.Event()

    def produce():
        p = Producer({"bootstrap.servers": a.bootstrap, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000,
                      "retry.backoff.ms": 20, "topic.metadata.refresh.interval.ms": 1000})

        def done(err, msg, sent):
            if err is not None:
                errors.append(str(err))
            else:
                acked.append((msg.partition(), msg.offset(), msg.value()))
                latencies.append(time.time() - sent)

        i = 0
        while not stop.is_set():
            sent = time.time()
            p.produce(topic, value=b"m-%d" % i, partition=i % 4,
                      on_delivery=lambda err, msg, sent=sent: done(err, msg, sent))
            i += 1
            p.poll(0)
            if i % 20 == 0:
                time.sleep(0.01)
        assert p.flush(60) == 0

    t = threading.Thread(target=produce)
    t.start()
    timings = []
    try:
        time.sleep(1.0)
        for _ in range(6):
            (_, owner, epoch) = partition_leader_epochs(a.bootstrap, topic)[0]
            to = 2 if owner == 1 else 1
            start = time.time()
            top, res = alter_reassignments(a.bootstrap, topic, {0: [to]})
            assert top == 0 and res[0][0] == 0, res
            # Until the new owner acknowledges a produce of its own.
            while True:
                err, _, _ = produce_v10(bootstrap[to], topic, 0, batch(records(1), 1))
                if err == 0:
                    break
                assert time.time() - start < 10, f"partition 0 not served by {to} after 10 s"
                time.sleep(0.005)
            timings.append(time.time() - start)
            time.sleep(0.5)
    finally:
        stop.set()
        t.join(90)
    assert not errors, errors[:5]
    assert len(acked) > 1000
    check_acknowledged(a.bootstrap, topic, 4, acked)
    print(f"{len(timings)} moves, request to the new owner acknowledging: median "
          f"{statistics.median(timings) * 1000:.0f} ms, worst {max(timings) * 1000:.0f} ms; "
          f"{len(acked)} records acknowledged, producer latency max "
          f"{max(latencies) * 1000:.0f} ms, p99 "
          f"{sorted(latencies)[int(len(latencies) * 0.99)] * 1000:.0f} ms")


def test_a_sequence_gap_at_the_new_leader_is_refused_as_for_leadership(shared_store_brokers):
    """A producer's batch refused by the old leader while the partition moved is retried at the
    new one; if the batch after it gets there first, the new leader (which never saw the
    refusal) answers NOT_LEADER_OR_FOLLOWER, retriable, instead of
    OUT_OF_ORDER_SEQUENCE_NUMBER, which librdkafka's idempotent producer does not survive (or
    survives by bumping its epoch and writing its unacknowledged batches again)."""
    (a, b), _ = shared_store_brokers
    brokers = {1: a, 2: b}
    topic = "gap"
    create_topic(a.bootstrap, topic, partitions=1)
    deadline = time.time() + 15
    while (leaders := partition_leaders(a.bootstrap, topic)).get(0, (-1, -1))[0] != 0:
        assert time.time() < deadline, leaders
        time.sleep(0.05)
    old = leaders[0][1]
    new = 2 if old == 1 else 1
    c = IdempotentClient(brokers[old].bootstrap)
    pid, epoch = c.init_producer_id()
    assert c.produce(topic, 0, idempotent_batch(pid, epoch, 0, [b"a", b"b"])) == (0, 0)
    c.close()

    top, res = alter_reassignments(a.bootstrap, topic, {0: [new]})
    assert top == 0 and res[0][0] == 0, res
    c = IdempotentClient(brokers[new].bootstrap)
    deadline = time.time() + 20
    while (got := c.produce(topic, 0, idempotent_batch(-1, -1, -1, [b"plain"])))[0] != 0:
        assert time.time() < deadline, f"the new leader does not take the partition: {got}"
        time.sleep(0.1)
    assert got == (0, 2)
    # Sequence 2 was refused by the old leader; sequence 3 arrives first.
    assert c.produce(topic, 0, idempotent_batch(pid, epoch, 3, [b"d"]))[0] == 6
    assert c.produce(topic, 0, idempotent_batch(pid, epoch, 2, [b"c"])) == (0, 3)
    assert c.produce(topic, 0, idempotent_batch(pid, epoch, 3, [b"d"])) == (0, 4)
    # The old leader's batch retried: a duplicate with its offsets.
    assert c.produce(topic, 0, idempotent_batch(pid, epoch, 0, [b"a", b"b"])) == (0, 0)
    c.close()
    got = consume_all(b.bootstrap, topic, 1, count=5)
    assert [m["value"] for m in got] == [b"a", b"b", b"plain", b"c", b"d"]


def test_groups_are_coordinated_by_the_controller_and_survive_its_stop(shared_store_brokers):
    (a, b), _ = shared_store_brokers
    topic = "grouped"
    create_topic(a.bootstrap, topic, partitions=2)
    wait_spread(a.bootstrap, topic, 2, [1, 2])
    sent = [{"value": b"g%d" % i, "partition": i % 2} for i in range(200)]
    produce_all(b.bootstrap, topic, sent, acks="all")
    # Node 1 started first and holds the controller lease: both brokers send clients to it.
    for bootstrap in (a.bootstrap, b.bootstrap):
        assert find_coordinator(bootstrap, "g") == (0, 1)
    got = consume_group(b.bootstrap, topic, "g", 200)
    assert sorted(m for m in got) == sorted(r["value"] for r in sent)
    committed = committed_offsets(b.bootstrap, "g", topic, 2)
    assert committed == {0: 100, 1: 100}, committed

    # The controller stops: the other broker takes the role and the groups, offsets intact.
    assert a.stop() == 0
    deadline = time.time() + 10
    while find_coordinator(b.bootstrap, "g") != (0, 2):
        assert time.time() < deadline, "node 2 did not become the group coordinator"
        time.sleep(0.1)
    assert committed_offsets(b.bootstrap, "g", topic, 2) == {0: 100, 1: 100}
    a.start()


def consume_group(bootstrap, topic, group, count, timeout=30):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out = []
    deadline = time.time() + timeout
    try:
        while len(out) < count and time.time() < deadline:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            out.append(m.value())
        c.commit(asynchronous=False)
    finally:
        c.close()
    assert len(out) == count, f"consumed {len(out)} of {count}"
    return out


def committed_offsets(bootstrap, group, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got}


def find_coordinator(bootstrap, group):
    """FindCoordinator v1 for a group: (error code, node id)."""
    payload = i16(10) + i16(1) + i32(31) + string("silt-tests") + string(group) + b"\x00"
    with connect(bootstrap) as s:
        s.sendall(i32(len(payload)) + payload)
        corr, rest = read_response(s)
    assert corr == 31
    err, mlen = struct.unpack_from(">hh", rest, 4)
    (node,) = struct.unpack_from(">i", rest, 8 + max(mlen, 0))
    return err, node
