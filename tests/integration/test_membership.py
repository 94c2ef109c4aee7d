"""Cluster membership: Silt brokers sharing one metadata store (PostgreSQL when the run has
one, else one SQLite file) list each other in Metadata with their racks, drop a broker killed
with SIGKILL once its lease lapses, take it back when it restarts, and refuse a second
broker with a node id that is live. A topic created through one broker is seen by the other,
spread over both by the controller, and served to clients that bootstrap from either."""
import struct
import subprocess
import time

import pytest

from conftest import POSTGRES_URI, SiltBroker, free_port, fresh_postgres_database, \
    selected_brokers, start_silt
from test_record_validation import Client, batch, records
from util import admin, compact_string, connect, consume_all, create_topic, i16, i32, \
    metadata_request, produce_all, read_response, string, uvarint, wait_futures

NOT_LEADER_OR_FOLLOWER = 6

HEARTBEAT_MS = 200
SESSION_MS = 1500


def metadata_v7(bootstrap, topics):
    """A Metadata v7 response body after its throttle time (no topic auto-creation)."""
    with connect(bootstrap) as s:
        s.sendall(metadata_request(7, topics=topics, version=7))
        corr, body = read_response(s)
    assert corr == 7
    return body[4:]


def listed_brokers(bootstrap):
    """{node id: (host, port, rack)} from a Metadata request for no topics."""
    return parse_brokers(metadata_v7(bootstrap, []))[0]


def partition_leaders(bootstrap, topic):
    """{partition: (error code, leader id)} of `topic` from a Metadata request, or None
    when the broker does not know the topic."""
    got = partition_leader_epochs(bootstrap, topic)
    return None if got is None else {p: (e, leader) for p, (e, leader, _) in got.items()}


def partition_leader_epochs(bootstrap, topic):
    """{partition: (error code, leader id, leader epoch)}, or None for an unknown topic."""
    body = metadata_v7(bootstrap, [topic])
    _, at = parse_brokers(body)
    (clen,) = struct.unpack_from(">h", body, at)
    at += 2 + max(clen, 0) + 4  # cluster id, controller id
    (count,) = struct.unpack_from(">i", body, at)
    at += 4
    assert count == 1
    err, nlen = struct.unpack_from(">hh", body, at)
    at += 4 + nlen + 1  # name, is_internal
    (parts,) = struct.unpack_from(">i", body, at)
    at += 4
    out = {}
    for _ in range(max(parts, 0)):
        perr, index, leader, epoch, nreplicas = struct.unpack_from(">hiiii", body, at)
        at += 18 + 4 * nreplicas
        for _ in range(2):  # isr, offline replicas
            (n,) = struct.unpack_from(">i", body, at)
            at += 4 + 4 * max(n, 0)
        out[index] = (perr, leader, epoch)
    return None if err != 0 else out


def parse_brokers(body):
    (count,) = struct.unpack_from(">i", body, 0)
    at = 4
    out = {}
    for _ in range(count):
        node, hlen = struct.unpack_from(">ih", body, at)
        at += 6
        host = body[at:at + hlen].decode()
        at += hlen
        port, rlen = struct.unpack_from(">ih", body, at)
        at += 6
        rack = None
        if rlen >= 0:
            rack = body[at:at + rlen].decode()
            at += rlen
        out[node] = (host, port, rack)
    return out, at


def wait_listed(bootstrap, expected, timeout=10.0):
    deadline = time.time() + timeout
    seen = None
    while time.time() < deadline:
        seen = listed_brokers(bootstrap)
        if seen == expected:
            return
        time.sleep(0.05)
    pytest.fail(f"{bootstrap} lists {seen}, expected {expected}")


TWO_RACKS = ((1, "zone-a"), (2, "zone-b"))


def shared_brokers(tmp_path, settings=None, nodes=TWO_RACKS):
    """Brokers (by default nodes 1 and 2, racks zone-a and zone-b; `nodes`: (node id, rack)
    pairs) sharing a metadata store and an object store, with `settings` on all; yields them
    and their common settings, stopped and their logs checked afterwards. The body of
    fixtures."""
    if "silt" not in selected_brokers():
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")
    uri = fresh_postgres_database() if POSTGRES_URI else f"sqlite://{tmp_path}/shared.db"
    common = {"metadata.store.uri": uri,
              "object.store.uri": f"file://{tmp_path}/objects",
              "broker.heartbeat.interval.ms": str(HEARTBEAT_MS),
              "broker.session.timeout.ms": str(SESSION_MS), **(settings or {})}
    brokers = []
    for node, rack in nodes:
        d = tmp_path / f"broker{node}"
        d.mkdir()
        brokers.append(SiltBroker(d, {**common, "node.id": str(node), "broker.rack": rack}))
    for b in brokers:
        start_silt(b)
    # Each lists the others once it has read their registrations (a heartbeat later): a
    # test that moves a partition to the other broker before that is refused (not live).
    every = {node: ("127.0.0.1", b.port, rack) for (node, rack), b in zip(nodes, brokers)}
    for b in brokers:
        wait_listed(b.bootstrap, every)
    yield brokers, common
    for b in brokers:
        if b.alive():
            assert b.stop() == 0, b.log_text()[-4000:]
        b.check_log()


@pytest.fixture
def shared_store_brokers(tmp_path):
    yield from shared_brokers(tmp_path)


def test_brokers_sharing_a_store_list_each_other_and_drop_a_dead_one(shared_store_brokers):
    (a, b), _ = shared_store_brokers
    both = {1: ("127.0.0.1", a.port, "zone-a"), 2: ("127.0.0.1", b.port, "zone-b")}
    wait_listed(a.bootstrap, both)
    wait_listed(b.bootstrap, both)

    b.kill()
    killed = time.time()
    wait_listed(a.bootstrap, {1: both[1]}, timeout=SESSION_MS / 1000 + 10)
    print(f"a killed broker left the list after {time.time() - killed:.2f} s "
          f"(session timeout {SESSION_MS} ms)")

    # Restarted on its own WAL, it replaces its dead registration and is listed again.
    b.start()
    wait_listed(a.bootstrap, both)
    wait_listed(b.bootstrap, both)
    assert "registered with a live lease" not in b.log_text()


def test_each_listener_lists_the_other_brokers_on_that_listener(tmp_path):
    """As Kafka advertises brokers per listener: a client that came through a broker's second
    listener is told of the other brokers at their endpoints of that listener, not at their
    first listener's (which may speak another security protocol)."""
    if "silt" not in selected_brokers():
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")
    uri = fresh_postgres_database() if POSTGRES_URI else f"sqlite://{tmp_path}/shared.db"
    brokers, external = [], {}
    for node in (1, 2):
        d = tmp_path / f"broker{node}"
        d.mkdir()
        b = SiltBroker(d, {"metadata.store.uri": uri,
                           "object.store.uri": f"file://{tmp_path}/objects",
                           "broker.heartbeat.interval.ms": str(HEARTBEAT_MS),
                           "broker.session.timeout.ms": str(SESSION_MS),
                           "node.id": str(node)})
        external[node] = free_port()
        b.overrides["listeners"] = (f"PLAINTEXT://127.0.0.1:{b.port},"
                                    f"EXTERNAL://127.0.0.1:{external[node]}")
        b.overrides["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT"
        brokers.append(b)
    try:
        for b in brokers:
            start_silt(b)
        internal = {n: ("127.0.0.1", b.port, None) for n, b in zip((1, 2), brokers)}
        outside = {n: ("127.0.0.1", external[n], None) for n in (1, 2)}
        for n, b in zip((1, 2), brokers):
            wait_listed(b.bootstrap, internal)
            wait_listed(f"127.0.0.1:{external[n]}", outside)
    finally:
        for b in brokers:
            if b.alive():
                assert b.stop() == 0, b.log_text()[-4000:]
            b.check_log()


def test_a_live_node_id_is_refused_to_another_broker(shared_store_brokers, tmp_path):
    (a, _), common = shared_store_brokers
    d = tmp_path / "impostor"
    d.mkdir()
    impostor = SiltBroker(d, {**common, "node.id": "1"})
    proc = subprocess.run(impostor.command(), cwd=d, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "node.id 1 is registered with a live lease" in proc.stderr, proc.stderr
    assert "registered by a live broker" in proc.stderr, proc.stderr
    # The broker that holds the node id goes on.
    wait_listed(a.bootstrap, {1: ("127.0.0.1", a.port, "zone-a"),
                              2: listed_brokers(a.bootstrap)[2]})


def test_a_second_broker_on_the_same_wal_is_refused(silt):
    proc = subprocess.run(silt.command()[:1] + [
        "--override", f"data.dir={silt.data_dir}", "--override",
        f"listeners=PLAINTEXT://127.0.0.1:0"], cwd=silt.workdir, capture_output=True, text=True,
        timeout=60)
    assert proc.returncode != 0
    assert "is in use by another broker process" in proc.stderr, proc.stderr


class Flex:
    """Reads the flexible (compact) encoding of a response."""

    def __init__(self, b):
        self.b, self.at = b, 0

    def take(self, fmt):
        (v,) = struct.unpack_from(fmt, self.b, self.at)
        self.at += struct.calcsize(fmt)
        return v

    def uvarint(self):
        shift = value = 0
        while True:
            byte = self.b[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def string(self):
        n = self.uvarint() - 1
        if n < 0:
            return None
        v = self.b[self.at:self.at + n].decode()
        self.at += n
        return v

    def tags(self, read):
        """Calls read(tag, self) for each tagged field."""
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            end = self.at + size
            read(tag, self)
            self.at = end


def produce_v10(bootstrap, topic, partition, batch_bytes):
    """One Produce v10 (flexible, KIP-951 fields) of one batch, acks=all. Returns (error code,
    current leader (id, epoch) or None, {node id: (host, port, rack)} of node_endpoints)."""
    part = i32(partition) + uvarint(len(batch_bytes) + 1) + batch_bytes + uvarint(0)
    body = (uvarint(0) + i16(-1) + i32(30000) + uvarint(2) + compact_string(topic) +
            uvarint(2) + part + uvarint(0) + uvarint(0))
    payload = i16(0) + i16(10) + i32(11) + string("silt-tests") + uvarint(0) + body
    with connect(bootstrap) as s:
        s.sendall(i32(len(payload)) + payload)
        corr, rest = read_response(s)
    assert corr == 11
    r = Flex(rest)
    r.tags(lambda tag, r: None)  # response header
    assert r.uvarint() == 2 and r.string() == topic
    assert r.uvarint() == 2
    assert r.take(">i") == partition
    err = r.take(">h")
    r.take(">q"), r.take(">q"), r.take(">q")
    for _ in range(r.uvarint() - 1):  # record errors
        r.take(">i")
        r.string()
        r.tags(lambda tag, r: None)
    r.string()  # error message
    leader = []
    r.tags(lambda tag, r: leader.append((r.take(">i"), r.take(">i"))) if tag == 0 else None)
    r.tags(lambda tag, r: None)  # topic
    r.take(">i")  # throttle time
    endpoints = {}

    def read_endpoints(tag, r):
        if tag != 0:
            return
        for _ in range(r.uvarint() - 1):
            node, host, port, rack = r.take(">i"), r.string(), r.take(">i"), r.string()
            r.tags(lambda tag, r: None)
            endpoints[node] = (host, port, rack)

    r.tags(read_endpoints)
    return err, (leader[0] if leader else None), endpoints


def test_a_topic_created_through_one_broker_is_served_through_both(shared_store_brokers):
    (a, b), _ = shared_store_brokers
    topic = "shared-topic"
    create_topic(a.bootstrap, topic, partitions=3)
    # The controller spreads the partitions over both brokers; both see the same leaders.
    deadline = time.time() + 10
    leaders = None
    while time.time() < deadline:
        leaders = partition_leaders(b.bootstrap, topic)
        if leaders and {n for _, n in leaders.values()} == {1, 2} and \
                partition_leaders(a.bootstrap, topic) == leaders:
            break
        time.sleep(0.05)
    assert leaders and {n for _, n in leaders.values()} == {1, 2}, leaders
    on_a = sorted(p for p, (_, n) in leaders.items() if n == 1)

    # Clients that know only the other broker find the leader through it.
    sent = [{"value": b"v%d" % i, "partition": i % 3} for i in range(300)]
    produce_all(b.bootstrap, topic, sent, acks="all")
    got = consume_all(b.bootstrap, topic, 3, count=300)
    assert sorted(m["value"] for m in got) == sorted(r["value"] for r in sent)

    # A broker that does not own a partition takes no writes for it.
    p = on_a[0]
    c = Client(b.bootstrap)
    try:
        err, _, message = c.produce(topic, {p: batch(records(2), 2)})[0]
    finally:
        c.close()
    assert err == NOT_LEADER_OR_FOLLOWER, message
    # From Produce v10 on, the refusal names the leader and where it listens (KIP-951).
    err, leader, endpoints = produce_v10(b.bootstrap, topic, p, batch(records(2), 2))
    assert err == NOT_LEADER_OR_FOLLOWER
    assert leader is not None and leader[0] == 1, leader
    assert endpoints == {1: ("127.0.0.1", a.port, "zone-a")}
    err, leader, endpoints = produce_v10(a.bootstrap, topic, p, batch(records(2), 2))
    assert (err, endpoints) == (0, {})

    # Stopped cleanly, a broker hands its partitions to the other first (each at a new
    # epoch): none waits for it to come back.
    before = partition_leader_epochs(a.bootstrap, topic)
    assert a.stop() == 0
    assert "before stopping" in a.log_text()
    deadline = time.time() + 5
    while time.time() < deadline:
        during = partition_leader_epochs(b.bootstrap, topic)
        if all(during[p][:2] == (0, 2) for p in range(3)):
            break
        time.sleep(0.05)
    assert all(during[p][:2] == (0, 2) for p in range(3)), during
    assert all(during[p][2] == before[p][2] + (1 if p in on_a else 0) for p in range(3)), \
        (before, during)
    produce_all(b.bootstrap, topic, sent[:30], acks="all")
    # Back, it gets its share again from the controller; both brokers agree on the leaders.
    a.start()
    deadline = time.time() + 10
    while time.time() < deadline:
        after = partition_leader_epochs(a.bootstrap, topic)
        if {n for _, n, _ in after.values()} == {1, 2} and \
                partition_leader_epochs(b.bootstrap, topic) == after:
            break
        time.sleep(0.05)
    assert {n for _, n, _ in after.values()} == {1, 2}, after
    assert partition_leader_epochs(b.bootstrap, topic) == after
    produce_all(b.bootstrap, topic, sent, acks="all")
    # Both rounds, the 30 written while the owner was stopped, and the two records the raw
    # Produce v10 wrote through the owner.
    assert len(consume_all(b.bootstrap, topic, 3, count=632)) == 632

    # Deleted through the other broker, the topic goes from both.
    client = admin(b.bootstrap)
    fs = client.delete_topics([topic], operation_timeout=20, request_timeout=20)
    assert wait_futures(fs, 20)[topic] is None
    deadline = time.time() + 10
    while partition_leaders(a.bootstrap, topic) is not None and time.time() < deadline:
        time.sleep(0.05)
    assert partition_leaders(a.bootstrap, topic) is None


def test_topic_changes_through_one_broker_are_seen_by_the_other_within_a_second(
        shared_store_brokers):
    """Creation, a config change and deletion through one broker, each timed until the other
    broker shows it (the brokers read the registry every 100 ms; the times are printed)."""
    from confluent_kafka.admin import ConfigResource

    (a, b), _ = shared_store_brokers
    topic = "seen-everywhere"

    def until(check, what):
        start = time.time()
        while not check():
            # A bound for the test, well above what the brokers need (docs/benchmarks.md).
            assert time.time() - start < 10, what
            time.sleep(0.01)
        return time.time() - start

    def retention_on(bootstrap):
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        client = admin(bootstrap)
        fs = client.describe_configs([resource], request_timeout=10)
        return fs[resource].result(timeout=10)["retention.ms"].value

    create_topic(a.bootstrap, topic, partitions=3)
    created = until(lambda: partition_leaders(b.bootstrap, topic) is not None,
                    "the topic created through broker 1 is not in broker 2's Metadata")
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic,
                              set_config={"retention.ms": "123456"})
    client = admin(a.bootstrap)
    fs = client.alter_configs([resource], request_timeout=10)
    assert wait_futures(fs, 10)[resource] is None
    changed = until(lambda: retention_on(b.bootstrap) == "123456",
                    "broker 2 does not describe the config set through broker 1")
    client = admin(b.bootstrap)
    fs = client.delete_topics([topic], operation_timeout=10, request_timeout=10)
    assert wait_futures(fs, 10)[topic] is None
    deleted = until(lambda: partition_leaders(a.bootstrap, topic) is None,
                    "the topic deleted through broker 2 is still in broker 1's Metadata")
    print(f"seen by the other broker after: creation {created * 1000:.0f} ms, config change "
          f"{changed * 1000:.0f} ms, deletion {deleted * 1000:.0f} ms")
