"""Group coordinators spread over the brokers of a cluster: the controller places the group
coordinator's shards on the live brokers, each broker coordinates the groups of its shards
(FindCoordinator names the same broker through either), answers NOT_COORDINATOR for the
others and lists only its own in ListGroups, while the admin client's listing, which asks
every broker (kafka-consumer-groups --list), has them all. A broker that stops hands its groups to the other with their
committed offsets."""
import struct
import time

from test_cli_tools import tool
from test_groups import GROUP_COMMAND
from test_membership import shared_store_brokers  # noqa: F401 (a fixture)
from test_partition_moves import committed_offsets, consume_group, find_coordinator
from util import (array, connect, create_topic, i16, i32, i64, produce_all, read_response, request,
                  string, topic_names)

NOT_COORDINATOR = 16
PARTITIONS = 2
GROUPS = [f"spread-{i}" for i in range(24)]


def coordinators(bootstrap):
    return {g: find_coordinator(bootstrap, g) for g in GROUPS}


def shard_of(group, shards=50):
    """Kafka's partition of __consumer_offsets for a group: the Java hash of its id."""
    h = 0
    for c in group.encode():
        h = (h * 31 + c) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % shards


def offsets_topic_leaders(bootstrap):
    """The leader of each partition of __consumer_offsets, as Metadata names it."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("__consumer_offsets", timeout=10)
    return {p: m.leader for p, m in md.topics["__consumer_offsets"].partitions.items()}


def list_groups_v0(bootstrap):
    """ListGroups v0 at one broker: (error code, the group ids it lists)."""
    payload = i16(16) + i16(0) + i32(41) + string("silt-tests")
    with connect(bootstrap) as s:
        s.sendall(i32(len(payload)) + payload)
        corr, body = read_response(s)
    assert corr == 41
    err, count = struct.unpack_from(">hi", body, 0)
    at, out = 6, set()
    for _ in range(max(count, 0)):
        for field in range(2):  # group id, protocol type
            (n,) = struct.unpack_from(">h", body, at)
            at += 2
            if field == 0:
                out.add(body[at:at + n].decode())
            at += n
    return err, out


def offset_fetch_v1_error(bootstrap, group, topic):
    """OffsetFetch v1 of partition 0 of `topic`: the partition's error code."""
    payload = (i16(9) + i16(1) + i32(42) + string("silt-tests") + string(group) + i32(1) +
               string(topic) + i32(1) + i32(0))
    with connect(bootstrap) as s:
        s.sendall(i32(len(payload)) + payload)
        corr, body = read_response(s)
    assert corr == 42
    (tcount,) = struct.unpack_from(">i", body, 0)
    assert tcount == 1
    (n,) = struct.unpack_from(">h", body, 4)
    at = 6 + n + 4  # topic name, partition count
    _, _, mlen = struct.unpack_from(">iqh", body, at)
    (err,) = struct.unpack_from(">h", body, at + 14 + max(mlen, 0))
    return err


def test_groups_are_coordinated_by_both_brokers_and_move_with_a_stopping_one(
        shared_store_brokers):
    (a, b), _ = shared_store_brokers
    topic = "group-shards"
    create_topic(a.bootstrap, topic, partitions=PARTITIONS)
    produce_all(a.bootstrap, topic, [{"value": b"v%d" % i, "partition": i % PARTITIONS}
                                     for i in range(20)], acks="all")
    # Both brokers name one coordinator per group, and each coordinates some of them.
    deadline = time.time() + 15
    while True:
        via_a, via_b = coordinators(a.bootstrap), coordinators(b.bootstrap)
        if via_a == via_b and all(e == 0 for e, _ in via_a.values()) and \
                {n for _, n in via_a.values()} == {1, 2}:
            break
        assert time.time() < deadline, f"coordinators through 1: {via_a}, through 2: {via_b}"
        time.sleep(0.1)
    on = {n: [g for g, (_, m) in via_a.items() if m == n] for n in (1, 2)}
    bootstrap = {1: a.bootstrap, 2: b.bootstrap}

    # A group of each broker consumes and commits through either bootstrap broker.
    for n in (1, 2):
        consume_group(bootstrap[3 - n], topic, on[n][0], 20)
        assert committed_offsets(bootstrap[n], on[n][0], topic, PARTITIONS) == \
            {p: 10 for p in range(PARTITIONS)}
        # The other broker does not coordinate it.
        assert offset_fetch_v1_error(bootstrap[3 - n], on[n][0], topic) == NOT_COORDINATOR
        assert offset_fetch_v1_error(bootstrap[n], on[n][0], topic) == 0
    # __consumer_offsets in Metadata: each group's partition is led by its coordinator.
    for via in (a.bootstrap, b.bootstrap):
        leaders = offsets_topic_leaders(via)
        assert len(leaders) == 50
        assert {leaders[shard_of(g)] for g in on[1]} == {1}, leaders
        assert {leaders[shard_of(g)] for g in on[2]} == {2}, leaders
    # Each broker lists its own groups; the admin client asks both and lists them all.
    assert list_groups_v0(a.bootstrap) == (0, {on[1][0]})
    assert list_groups_v0(b.bootstrap) == (0, {on[2][0]})
    listed = tool(GROUP_COMMAND, "--bootstrap-server", a.bootstrap, "--list").stdout.split()
    assert sorted(listed) == sorted([on[1][0], on[2][0]]), listed
    # kafka-consumer-groups --describe finds the group's coordinator through the other broker.
    described = tool(GROUP_COMMAND, "--bootstrap-server", a.bootstrap, "--describe", "--group",
                     on[2][0]).stdout
    rows = [line.split() for line in described.splitlines() if line.startswith(on[2][0])]
    assert sorted((r[1], r[2], r[3]) for r in rows) == \
        [(topic, str(p), "10") for p in range(PARTITIONS)], described

    # Broker 1 stops cleanly: broker 2 coordinates its groups, their offsets intact.
    assert a.stop() == 0
    deadline = time.time() + 10
    while find_coordinator(b.bootstrap, on[1][0]) != (0, 2):
        assert time.time() < deadline, find_coordinator(b.bootstrap, on[1][0])
        time.sleep(0.1)
    for n in (1, 2):
        assert committed_offsets(b.bootstrap, on[n][0], topic, PARTITIONS) == \
            {p: 10 for p in range(PARTITIONS)}
    assert list_groups_v0(b.bootstrap) == (0, {on[1][0], on[2][0]})
    assert coordinators(b.bootstrap) == {g: (0, 2) for g in GROUPS}


def commit_v2(bootstrap, group, topic, offset):
    """OffsetCommit v2 of partition 0 of `topic` by a committer outside group management: the
    partition's error code."""
    body = (string(group) + i32(-1) + string("") + i64(-1) +
            array([string(topic) + array([i32(0) + i64(offset) + string("")])]))
    with connect(bootstrap) as s:
        s.sendall(request(8, 2, 43, body))
        corr, rest = read_response(s)
    assert corr == 43
    (n,) = struct.unpack_from(">h", rest, 4)
    (err,) = struct.unpack_from(">h", rest, 6 + n + 4 + 4)
    return err


def test_offsets_topic_is_listed_by_a_broker_that_never_saw_a_group(shared_store_brokers):
    """Kafka's __consumer_offsets exists for every broker once a group stored something: a
    broker that was never asked for a coordinator lists it too (kafka-topics --describe)."""
    (a, b), _ = shared_store_brokers
    topic = "offsets-listed"
    create_topic(a.bootstrap, topic)
    # A group coordinated by broker 1, found and committed to through broker 1 only.
    deadline = time.time() + 15
    while (found := [g for g in GROUPS if find_coordinator(a.bootstrap, g) == (0, 1)]) == []:
        assert time.time() < deadline, "broker 1 coordinates no group"
        time.sleep(0.1)
    assert "__consumer_offsets" not in topic_names(b.bootstrap)
    assert commit_v2(a.bootstrap, found[0], topic, 7) == 0
    assert "__consumer_offsets" in topic_names(a.bootstrap)
    deadline = time.time() + 10
    while "__consumer_offsets" not in topic_names(b.bootstrap):
        assert time.time() < deadline, "broker 2 does not list __consumer_offsets"
        time.sleep(0.2)
