"""ACLs as Kafka's StandardAuthorizer applies them, API by API (docs/acls-table.md): a principal
without the ACL an API needs is refused with Kafka's error, in Kafka's shape, and one with it is
served. The same broker setup runs on Silt and on the reference Apache Kafka broker
(tests/kafka-reference.sh): authorizer.class.name=...StandardAuthorizer, super.users=User:admin,
a SASL_PLAINTEXT listener with PLAIN users admin, alice and bob, and a PLAINTEXT listener
(User:ANONYMOUS, no ACLs: it is refused everything). Kafka's broker reaches its controller
over a SASL_PLAINTEXT controller listener as User:admin, a super user.

ACLs are created and deleted by admin with CreateAcls and DeleteAcls, and each is in force
(DescribeAcls on the broker lists it) before a test goes on: Kafka's broker applies them once
its controller committed them. Each test names its own topics and groups; the ACLs it creates
are deleted when it ends, those on the cluster resource included.

Requests whose error codes and shapes a client library hides are sent raw (over a SASL
connection of their own); producers and consumers are confluent-kafka's (librdkafka), which
has no consumer group protocol of KIP-848 yet: ConsumerGroupHeartbeat is sent raw too.
"""
import base64
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import franz
from conftest import KAFKA_REF, SiltBroker, free_port, selected_brokers, start_silt
from test_record_validation import batch, records
from util import (Reader, array, compact_string, connect, consume_all, i8, i16, i32, i64,
                  read_response, string, uvarint)

ADMIN_PASSWORD = "admin-Acl-5"
PASSWORDS = {"admin": ADMIN_PASSWORD, "alice": "alice-Acl-8", "bob": "bob-Acl-2"}
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
LISTENERS = ["PLAINTEXT", "SASL"]

# Resource types, pattern types, operations, permissions (Kafka's codes).
TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED = 3, 4
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
DENY, ALLOW = 2, 3
CLUSTER_NAME = "kafka-cluster"

# Error codes.
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
INCONSISTENT_GROUP_PROTOCOL = 23
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
GROUP_ID_NOT_FOUND = 69

INT32_MIN = -(1 << 31)
ZERO_UUID = bytes(16)


def bits(*ops):
    """An *_authorized_operations bit field."""
    return sum(1 << op for op in ops)


# ---------------------------------------------------------------------------- brokers

def jaas():
    users = " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items())
    return f'{PLAIN_MODULE} required username="admin" password="{ADMIN_PASSWORD}" {users};'


def acl_properties(allow_everyone):
    """The same broker settings for Silt and Kafka."""
    return {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config": jaas(),
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "true" if allow_everyone else "false",
        "auto.create.topics.enable": "true",
    }


class AclSilt:
    kind = "silt"

    def __init__(self, workdir, allow_everyone):
        self.ports = {name: free_port() for name in LISTENERS}
        overrides = {
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT",
        }
        overrides.update(acl_properties(allow_everyone))
        self.broker = SiltBroker(workdir, overrides)
        self.broker.port = self.ports["PLAINTEXT"]
        self.broker.overrides["listeners"] = overrides["listeners"]

    def start(self):
        start_silt(self.broker)

    def stop(self):
        assert self.broker.stop() == 0
        self.broker.check_log()


class AclKafka:
    kind = "kafka"

    def __init__(self, workdir, allow_everyone):
        self.workdir = Path(workdir)
        base = free_port(3)
        self.ports = {"PLAINTEXT": base, "SASL": base + 2}
        props = acl_properties(allow_everyone)
        # The broker reaches its controller as User:admin, a super user: the controller
        # refuses a broker's registration and heartbeats (CLUSTER_ACTION) to anyone else.
        props.update({
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": jaas(),
        })
        self.env = dict(
            os.environ,
            CONTROLLER_PORT=str(base + 1),
            KAFKA_CONTROLLER_PROTOCOL="SASL_PLAINTEXT",
            KAFKA_EXTRA_LISTENERS=f"SASL://127.0.0.1:{self.ports['SASL']}",
            KAFKA_EXTRA_PROTOCOLS="SASL:SASL_PLAINTEXT",
            KAFKA_EXTRA_PROPERTIES="\n".join(f"{k}={v}" for k, v in props.items()),
        )

    def start(self):
        subprocess.run([str(KAFKA_REF), "start", str(self.workdir), str(self.ports["PLAINTEXT"])],
                       check=True, env=self.env, timeout=180)
        deadline = time.time() + 120
        while True:
            try:
                s = Session(self, "admin")
                try:
                    if metadata(s, [])["brokers"]:
                        return
                finally:
                    s.close()
            except (OSError, AssertionError):
                pass
            assert time.time() < deadline, "reference Kafka not ready"
            time.sleep(0.3)

    def stop(self):
        subprocess.run([str(KAFKA_REF), "stop", str(self.workdir)], check=False, timeout=90)


def start_broker(request, tmp_path_factory, allow_everyone):
    if request.param not in selected_brokers():
        pytest.skip(f"{request.param} not selected (SILT_TEST_BROKERS)")
    if request.param == "silt":
        b = AclSilt(tmp_path_factory.mktemp("silt-acls"), allow_everyone)
    else:
        b = AclKafka(Path(tempfile.mkdtemp(prefix="silt-kafka-acls-")), allow_everyone)
    b.start()
    return b


def stop_broker(b):
    b.stop()
    if b.kind == "kafka":
        shutil.rmtree(b.workdir, ignore_errors=True)


@pytest.fixture(scope="module", params=["silt", "kafka"])
def acl_broker(request, tmp_path_factory):
    b = start_broker(request, tmp_path_factory, allow_everyone=False)
    yield b
    stop_broker(b)


@pytest.fixture(scope="module", params=["silt", "kafka"])
def open_broker(request, tmp_path_factory):
    """A broker with allow.everyone.if.no.acl.found=true."""
    b = start_broker(request, tmp_path_factory, allow_everyone=True)
    yield b
    stop_broker(b)


def bootstrap(broker, listener="SASL"):
    return f"127.0.0.1:{broker.ports[listener]}"


def client_conf(broker, user):
    return {"bootstrap.servers": bootstrap(broker), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user],
            "log_level": 0, "socket.timeout.ms": 10000}


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# ---------------------------------------------------------------------------- raw requests

def cstr(s):
    """A COMPACT_NULLABLE_STRING."""
    return uvarint(0) if s is None else compact_string(s)


def carray(items):
    """A COMPACT_ARRAY of encoded items (None: null)."""
    return uvarint(0) if items is None else uvarint(len(items) + 1) + b"".join(items)


TAGS = uvarint(0)  # no tagged fields


def tagged(r):
    """The tagged fields of a flexible structure: {tag: bytes}."""
    out = {}
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        out[tag] = r.data[r.pos:r.pos + size]
        r.pos += size
    return out


def carray_of(r, item):
    n = r.uvarint() - 1
    return None if n < 0 else [item() for _ in range(n)]


def array_of(r, item):
    n = r.i32()
    return None if n < 0 else [item() for _ in range(n)]


def rbytes(r):
    n = r.i32()
    if n < 0:
        return None
    v = r.data[r.pos:r.pos + n]
    r.pos += n
    return v


class Session:
    """A connection on the SASL listener, authenticated as `user` (PLAIN), for raw requests."""

    def __init__(self, broker, user):
        self.sock = connect(bootstrap(broker), timeout=30)
        self.corr = 0
        r = self.call(17, 1, string("PLAIN"))  # SaslHandshake
        assert r.i16() == NONE
        token = f"\0{user}\0{PASSWORDS[user]}".encode()
        r = self.call(36, 1, i32(len(token)) + token)  # SaslAuthenticate
        assert r.i16() == NONE, f"{user} not authenticated"

    def call(self, key, version, body, flexible=False):
        """Sends one request; the response body, after its header, in a Reader."""
        self.corr += 1
        header = i16(key) + i16(version) + i32(self.corr) + string("acl-tests")
        if flexible:
            header += TAGS
        payload = header + body
        self.sock.sendall(i32(len(payload)) + payload)
        resp = read_response(self.sock)
        assert resp is not None, f"the broker closed the connection on api {key} v{version}"
        corr, rest = resp
        assert corr == self.corr
        r = Reader(rest)
        if flexible:
            tagged(r)
        return r

    def close(self):
        self.sock.close()


@pytest.fixture
def sessions(acl_broker):
    """Sessions by user, opened on first use and closed when the test ends."""
    opened = {}

    def get(user):
        if user not in opened:
            opened[user] = Session(acl_broker, user)
        return opened[user]

    yield get
    for s in opened.values():
        s.close()


# --- ACL APIs (as admin)

def acl_filter(b):
    rtype, name, pattern, principal, host, op, permission = b
    return i8(rtype) + string(name) + i8(pattern) + string(principal) + string(host) + i8(op) + \
        i8(permission)


def describe_acls(s, b):
    """DescribeAcls v1 of exactly binding `b`: how many ACLs it lists."""
    r = s.call(29, 1, acl_filter(b))
    r.i32()
    error = r.i16()
    message = r.string()
    assert error == NONE, (error, message)
    n = 0
    for _ in range(r.i32()):
        r.i8(), r.string(), r.i8()
        for _ in range(r.i32()):
            r.string(), r.string(), r.i8(), r.i8()
            n += 1
    return n


class Acls:
    """The ACLs a test creates, as admin, in force before add() returns; remove_all() deletes
    them and waits until they are gone."""

    def __init__(self, broker):
        self.admin = Session(broker, "admin")
        self.added = []

    def add(self, rtype, name, op, principal="User:alice", permission=ALLOW, pattern=LITERAL,
            host="*"):
        b = (rtype, name, pattern, principal, host, op, permission)
        creation = acl_filter(b)
        r = self.admin.call(30, 1, array([creation]))  # CreateAcls v1
        r.i32()
        results = array_of(r, lambda: (r.i16(), r.string()))
        assert results == [(NONE, None)] or results[0][0] == NONE, results
        self.added.append(b)
        self._wait(b, 1)
        return b

    def remove(self, b):
        r = self.admin.call(31, 1, array([acl_filter(b)]))  # DeleteAcls v1
        r.i32()
        assert r.i32() == 1
        assert r.i16() == NONE
        self.added.remove(b)
        self._wait(b, 0)

    def remove_all(self):
        for b in list(self.added):
            self.remove(b)
        self.admin.close()

    def _wait(self, b, count):
        deadline = time.time() + 20
        while describe_acls(self.admin, b) != count:
            assert time.time() < deadline, f"ACL {b} not {'in force' if count else 'gone'}"
            time.sleep(0.05)


@pytest.fixture
def acls(acl_broker):
    a = Acls(acl_broker)
    yield a
    a.remove_all()


def make_topic(broker, name, partitions=1):
    """Creates a topic as admin and waits until Metadata names a leader for each partition."""
    a = AdminClient(client_conf(broker, "admin"))
    fs = a.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                         request_timeout=30)
    fs[name].result(timeout=30)
    s = Session(broker, "admin")
    try:
        deadline = time.time() + 30
        while True:
            t = topic_of(metadata(s, [name]), name)
            if t and t["error"] == NONE and len(t["partitions"]) == partitions and \
                    all(p[2] >= 0 for p in t["partitions"]):
                return name
            assert time.time() < deadline, f"topic {name} not ready: {t}"
            time.sleep(0.1)
    finally:
        s.close()


def produce_as(broker, user, topic, values, **conf):
    p = Producer({**client_conf(broker, user), "linger.ms": 0, "message.timeout.ms": 20000,
                  **conf})
    errors = []
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda e, m: errors.append(e) if e else None)
    assert p.flush(30) == 0
    return errors


# --- Metadata

def metadata(s, topics, version=12, auto_create=False, topic_ops=False, cluster_ops=False,
             by_id=False):
    """Metadata v8 or v12. topics: names (or ids with by_id; v12), None for all. Returns
    {"brokers", "topics": [{"error", "name", "id", "internal", "partitions", "ops"}],
    "cluster_ops"}."""
    if version >= 9:
        if topics is None:
            items = None
        elif by_id:
            items = [t + cstr(None) + TAGS for t in topics]
        else:
            items = [ZERO_UUID + cstr(t) + TAGS for t in topics]
        body = carray(items) + i8(int(auto_create)) + i8(int(topic_ops)) + TAGS
        r = s.call(3, version, body, flexible=True)
    else:
        body = array(None if topics is None else [string(t) for t in topics])
        body += i8(int(auto_create)) + i8(int(cluster_ops)) + i8(int(topic_ops))
        r = s.call(3, version, body)
    flex = version >= 9
    st = r.compact_string if flex else r.string
    arr = (lambda item: carray_of(r, item)) if flex else (lambda item: array_of(r, item))
    r.i32()

    def broker():
        b = (r.i32(), st(), r.i32(), st())
        if flex:
            tagged(r)
        return b

    def partition():
        p = (r.i16(), r.i32(), r.i32(), r.i32(), arr(r.i32), arr(r.i32), arr(r.i32))
        if flex:
            tagged(r)
        return p

    def topic():
        t = {"error": r.i16(), "name": st()}
        if version >= 10:
            t["id"] = r.bytes16()
        t["internal"] = bool(r.i8())
        t["partitions"] = arr(partition)
        t["ops"] = r.i32()
        if flex:
            tagged(r)
        return t

    out = {"brokers": arr(broker)}
    st()  # cluster id
    r.i32()  # controller
    out["topics"] = arr(topic)
    if version <= 10:
        out["cluster_ops"] = r.i32()
    return out


def topic_of(md, name):
    return next((t for t in md["topics"] if t["name"] == name), None)


# ---------------------------------------------------------------------------- Produce, Fetch

def produce(s, topic, partition_records, transactional_id=None):
    """Produce v3, acks=1: {partition: (error, base_offset)} of `topic`."""
    parts = [i32(p) + i32(len(b)) + b for p, b in sorted(partition_records.items())]
    body = string(transactional_id) + i16(1) + i32(20000) + array([string(topic) + array(parts)])
    r = s.call(0, 3, body)
    out = {}
    for _ in range(r.i32()):
        assert r.string() == topic
        for _ in range(r.i32()):
            index, error, base = r.i32(), r.i16(), r.i64()
            r.i64()
            out[index] = (error, base)
    return out


def transactional_batch(count=1):
    """A magic 2 batch with the transactional flag (and a producer id), CRC not made right: a
    refusal comes before the batch is checked."""
    b = bytearray(batch(records(count), count))
    b[21:23] = i16(0x10)
    b[43:51] = i64(7)
    return bytes(b)


def fetch(s, topic, partitions, version=4, session_id=0, session_epoch=-1, replica_id=-1):
    """Fetch v4 (or v7 with a session): {"error", "session", "partitions": {index: (error,
    high_watermark, records bytes)}}. partitions: {index: fetch_offset}."""
    parts = [i32(p) + i64(o) + (i64(-1) if version >= 5 else b"") + i32(1 << 20)
             for p, o in sorted(partitions.items())]
    topics = [string(topic) + array(parts)] if partitions else []
    body = i32(replica_id) + i32(100) + i32(1) + i32(1 << 20) + i8(0)
    if version >= 7:
        body += i32(session_id) + i32(session_epoch)
    body += array(topics)
    if version >= 7:
        body += array([])
    r = s.call(1, version, body)
    r.i32()
    out = {"error": NONE, "session": 0, "partitions": {}}
    if version >= 7:
        out["error"], out["session"] = r.i16(), r.i32()
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            index, error, hw = r.i32(), r.i16(), r.i64()
            r.i64()
            if version >= 5:
                r.i64()
            array_of(r, lambda: (r.i64(), r.i64()))
            out["partitions"][index] = (error, hw, rbytes(r))
    return out


def list_offsets(s, topic, partitions=(0,)):
    """ListOffsets v1, latest: {partition: (error, timestamp, offset)}."""
    body = i32(-1) + array([string(topic) + array([i32(p) + i64(-1) for p in partitions])])
    r = s.call(2, 1, body)
    out = {}
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            index = r.i32()
            out[index] = (r.i16(), r.i64(), r.i64())
    return out


def test_produce_needs_topic_write(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-produce"))
    missing = unique("acl-missing")
    alice = sessions("alice")
    # Refused whether the topic exists or not: nothing tells a refused client which.
    assert produce(alice, topic, {0: batch(records(1), 1)}) == \
        {0: (TOPIC_AUTHORIZATION_FAILED, -1)}
    assert produce(alice, missing, {0: batch(records(1), 1)}) == \
        {0: (TOPIC_AUTHORIZATION_FAILED, -1)}
    # READ does not let a client write.
    acls.add(TOPIC, topic, READ)
    assert produce(alice, topic, {0: batch(records(1), 1)})[0][0] == TOPIC_AUTHORIZATION_FAILED
    acls.add(TOPIC, topic, WRITE)
    assert produce(alice, topic, {0: batch(records(2), 2)}) == {0: (NONE, 0)}
    # Authorized for a topic that does not exist: now the client learns it.
    acls.add(TOPIC, missing, WRITE)
    assert produce(alice, missing, {0: batch(records(1), 1)})[0][0] == UNKNOWN_TOPIC_OR_PARTITION
    # librdkafka's producer (not idempotent: no InitProducerId) is served too.
    assert produce_as(acl_broker, "alice", topic, [b"a", b"b"]) == []


def test_a_transactional_batch_needs_transactional_id_write(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-txn"))
    acls.add(TOPIC, topic, WRITE)
    alice = sessions("alice")
    tx = unique("tx")
    # Every partition of the request is refused, nothing written.
    assert produce(alice, topic, {0: transactional_batch()}, transactional_id=tx) == \
        {0: (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)}
    assert produce(alice, topic, {0: transactional_batch()}) == \
        {0: (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)}
    assert list_offsets(alice, topic) == {0: (NONE, -1, 0)}


def test_fetch_needs_topic_read(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-fetch"))
    missing = unique("acl-missing")
    assert produce_as(acl_broker, "admin", topic, [b"x%d" % i for i in range(5)]) == []
    alice = sessions("alice")
    for name in (topic, missing):
        got = fetch(alice, name, {0: 0})["partitions"]
        assert got[0][:2] == (TOPIC_AUTHORIZATION_FAILED, -1), got
    # DESCRIBE is not enough; READ is.
    acls.add(TOPIC, topic, DESCRIBE)
    assert fetch(alice, topic, {0: 0})["partitions"][0][0] == TOPIC_AUTHORIZATION_FAILED
    acls.add(TOPIC, topic, READ)
    error, hw, data = fetch(alice, topic, {0: 0})["partitions"][0]
    assert (error, hw) == (NONE, 5) and data
    # A follower's fetch (replica_id >= 0) needs CLUSTER_ACTION: every partition refused.
    got = fetch(alice, topic, {0: 0}, replica_id=1)["partitions"]
    assert got[0][0] == TOPIC_AUTHORIZATION_FAILED
    # librdkafka reads it too.
    got = consume_all(bootstrap(acl_broker), topic, 1, count=5,
                      **{k: v for k, v in client_conf(acl_broker, "alice").items()
                         if k != "bootstrap.servers"})
    assert [m["value"] for m in got] == [b"x%d" % i for i in range(5)]


def test_an_incremental_fetch_checks_every_partition_of_its_session(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-session"), partitions=2)
    read = acls.add(TOPIC, topic, READ)
    alice = sessions("alice")
    first = fetch(alice, topic, {0: 0, 1: 0}, version=7, session_epoch=0)
    assert first["error"] == NONE and first["session"] != 0, first
    assert first["partitions"][0][0] == NONE
    session = first["session"]
    # Nothing new: an incremental fetch answers nothing.
    again = fetch(alice, topic, {}, version=7, session_id=session, session_epoch=1)
    assert again["error"] == NONE and again["partitions"] == {}, again
    # READ revoked: the next incremental fetch, which names no partition, refuses them all.
    acls.remove(read)
    revoked = fetch(alice, topic, {}, version=7, session_id=session, session_epoch=2)
    assert revoked["error"] == NONE, revoked
    assert {p: v[:2] for p, v in revoked["partitions"].items()} == \
        {0: (TOPIC_AUTHORIZATION_FAILED, -1), 1: (TOPIC_AUTHORIZATION_FAILED, -1)}


def test_list_offsets_needs_topic_describe(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-offsets"))
    assert produce_as(acl_broker, "admin", topic, [b"1", b"2"]) == []
    alice = sessions("alice")
    assert list_offsets(alice, topic) == {0: (TOPIC_AUTHORIZATION_FAILED, -1, -1)}
    assert list_offsets(alice, unique("acl-missing")) == {0: (TOPIC_AUTHORIZATION_FAILED, -1, -1)}
    acls.add(TOPIC, topic, DESCRIBE)
    assert list_offsets(alice, topic) == {0: (NONE, -1, 2)}


# ---------------------------------------------------------------------------- Metadata

def test_metadata_of_named_topics_needs_topic_describe(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-md"))
    missing = unique("acl-missing")
    alice = sessions("alice")
    md = metadata(alice, [topic, missing])
    for name in (topic, missing):
        t = topic_of(md, name)
        assert (t["error"], t["id"], t["internal"], t["partitions"]) == \
            (TOPIC_AUTHORIZATION_FAILED, ZERO_UUID, False, []), t
    # Asked by id: the id is no secret, the name is.
    topic_id = topic_of(metadata(sessions("admin"), [topic]), topic)["id"]
    t = metadata(alice, [topic_id], by_id=True)["topics"][0]
    assert (t["error"], t["name"], t["id"]) == (TOPIC_AUTHORIZATION_FAILED, None, topic_id)
    # READ implies DESCRIBE. The authorized operations are those the ACLs give.
    acls.add(TOPIC, topic, READ)
    md = metadata(alice, [topic, missing], topic_ops=True)
    t = topic_of(md, topic)
    assert (t["error"], t["id"], len(t["partitions"])) == (NONE, topic_id, 1)
    assert t["ops"] == bits(READ, DESCRIBE)
    assert topic_of(md, missing)["error"] == TOPIC_AUTHORIZATION_FAILED
    assert topic_of(md, missing)["ops"] == INT32_MIN
    assert metadata(alice, [topic_id], by_id=True)["topics"][0]["name"] == topic


def test_metadata_of_all_topics_leaves_out_those_not_described(acl_broker, acls, sessions):
    seen = make_topic(acl_broker, unique("acl-all"))
    hidden = make_topic(acl_broker, unique("acl-all"))
    acls.add(TOPIC, seen, DESCRIBE)
    names = [t["name"] for t in metadata(sessions("alice"), None)["topics"]]
    assert seen in names and hidden not in names
    # Without any ACL nothing is listed, and no error is given.
    assert all(t["name"] not in (seen, hidden)
               for t in metadata(sessions("bob"), None, version=8)["topics"])
    admin_names = [t["name"] for t in metadata(sessions("admin"), None)["topics"]]
    assert seen in admin_names and hidden in admin_names


def test_metadata_auto_creation_needs_create_on_top_of_describe(acl_broker, acls, sessions):
    alice = sessions("alice")
    admin = sessions("admin")
    name = unique("acl-auto")
    # CREATE alone: refused by the DESCRIBE check, nothing created.
    acls.add(TOPIC, name, CREATE)
    t = topic_of(metadata(alice, [name], auto_create=True), name)
    assert (t["error"], t["id"]) == (TOPIC_AUTHORIZATION_FAILED, ZERO_UUID)
    # DESCRIBE alone: refused the creation.
    other = unique("acl-auto")
    acls.add(TOPIC, other, DESCRIBE)
    t = topic_of(metadata(alice, [other], auto_create=True), other)
    assert (t["error"], t["id"], t["internal"]) == (TOPIC_AUTHORIZATION_FAILED, ZERO_UUID, False)
    assert topic_of(metadata(admin, [name, other]), other)["error"] == \
        UNKNOWN_TOPIC_OR_PARTITION
    assert topic_of(metadata(admin, [name]), name)["error"] == UNKNOWN_TOPIC_OR_PARTITION
    # Both: created (Kafka answers UNKNOWN_TOPIC_OR_PARTITION while its controller creates it).
    acls.add(TOPIC, other, CREATE)
    t = topic_of(metadata(alice, [other], auto_create=True), other)
    assert t["error"] in (NONE, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE), t
    deadline = time.time() + 20
    while topic_of(metadata(admin, [other]), other)["error"] != NONE:
        assert time.time() < deadline, "auto-created topic never showed"
        time.sleep(0.1)
    # CLUSTER:CREATE lets DESCRIBE create any topic.
    third = unique("acl-auto")
    acls.add(TOPIC, third, DESCRIBE)
    acls.add(CLUSTER, CLUSTER_NAME, CREATE)
    t = topic_of(metadata(alice, [third], auto_create=True), third)
    assert t["error"] in (NONE, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE), t
    while topic_of(metadata(admin, [third]), third)["error"] != NONE:
        assert time.time() < deadline + 20, "auto-created topic never showed"
        time.sleep(0.1)


def test_metadata_cluster_authorized_operations(acl_broker, acls, sessions):
    alice = sessions("alice")
    assert metadata(alice, [], version=8, cluster_ops=True)["cluster_ops"] == 0
    assert metadata(alice, [], version=8)["cluster_ops"] == INT32_MIN
    acls.add(CLUSTER, CLUSTER_NAME, ALTER)
    # ALTER implies DESCRIBE.
    assert metadata(alice, [], version=8, cluster_ops=True)["cluster_ops"] == \
        bits(ALTER, DESCRIBE)
    assert metadata(sessions("admin"), [], version=8, cluster_ops=True)["cluster_ops"] == \
        bits(CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
             IDEMPOTENT_WRITE)


# ---------------------------------------------------------------------------- DENY, patterns

def test_a_deny_wins_over_an_allow(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-deny"))
    alice = sessions("alice")
    acls.add(TOPIC, topic, WRITE)
    acls.add(TOPIC, topic, ALL, principal="User:*")
    assert produce(alice, topic, {0: batch(records(1), 1)})[0][0] == NONE
    # Denied to every principal, from any host: the ALLOWs do not matter.
    acls.add(TOPIC, topic, WRITE, principal="User:*", permission=DENY)
    assert produce(alice, topic, {0: batch(records(1), 1)})[0][0] == TOPIC_AUTHORIZATION_FAILED
    # A DENY of WRITE does not deny DESCRIBE (no implied operations for DENY).
    assert topic_of(metadata(alice, [topic]), topic)["error"] == NONE
    # A DENY of ALL denies everything, of all prefixes that match the topic.
    acls.add(TOPIC, topic[:8], ALL, permission=DENY, pattern=PREFIXED)
    assert topic_of(metadata(alice, [topic]), topic)["error"] == TOPIC_AUTHORIZATION_FAILED
    assert topic_of(metadata(sessions("bob"), [topic]), topic)["error"] == NONE
    # Super users are never denied.
    assert produce(sessions("admin"), topic, {0: batch(records(1), 1)})[0][0] == NONE


def test_prefixed_acls_apply_to_names_that_start_with_them(acl_broker, acls, sessions):
    prefix = unique("acl-pfx")
    inside = make_topic(acl_broker, prefix + "-a")
    outside = make_topic(acl_broker, unique("acl-other"))
    acls.add(TOPIC, prefix, WRITE, pattern=PREFIXED)
    alice = sessions("alice")
    assert produce(alice, inside, {0: batch(records(1), 1)})[0][0] == NONE
    assert produce(alice, outside, {0: batch(records(1), 1)})[0][0] == TOPIC_AUTHORIZATION_FAILED
    # A LITERAL ACL of the prefix's name does not apply to longer names.
    acls.add(TOPIC, outside[:-1], WRITE)
    assert produce(alice, outside, {0: batch(records(1), 1)})[0][0] == TOPIC_AUTHORIZATION_FAILED
    # The wildcard LITERAL name applies to every topic.
    acls.add(TOPIC, "*", WRITE)
    assert produce(alice, outside, {0: batch(records(1), 1)})[0][0] == NONE


def test_host_filters_compare_the_client_address(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-host"))
    alice = sessions("alice")
    # Hosts are compared as text with the address the client connects from, never resolved.
    for host in ("10.9.9.9", "localhost"):
        acls.add(TOPIC, topic, WRITE, host=host)
    assert produce(alice, topic, {0: batch(records(1), 1)})[0][0] == TOPIC_AUTHORIZATION_FAILED
    acls.add(TOPIC, topic, WRITE, host="127.0.0.1")
    assert produce(alice, topic, {0: batch(records(1), 1)})[0][0] == NONE
    acls.add(TOPIC, topic, WRITE, host="127.0.0.1", permission=DENY)
    assert produce(alice, topic, {0: batch(records(1), 1)})[0][0] == TOPIC_AUTHORIZATION_FAILED


def test_allow_everyone_if_no_acl_found(open_broker):
    topic = make_topic(open_broker, unique("acl-open"))
    acls = Acls(open_broker)
    alice = Session(open_broker, "alice")
    try:
        # No ACL applies to the topic: everyone may use it.
        assert produce(alice, topic, {0: batch(records(1), 1)}) == {0: (NONE, 0)}
        assert topic_of(metadata(alice, None), topic)["error"] == NONE
        # Once one applies (to bob), alice matches none of them: refused.
        acls.add(TOPIC, topic, WRITE, principal="User:bob")
        assert produce(alice, topic, {0: batch(records(1), 1)})[0][0] == \
            TOPIC_AUTHORIZATION_FAILED
        # Even a PREFIXED ACL of another operation does.
        other = make_topic(open_broker, unique("acl-open"))
        acls.add(TOPIC, other[:9], READ, principal="User:bob", pattern=PREFIXED)
        assert produce(alice, other, {0: batch(records(1), 1)})[0][0] == \
            TOPIC_AUTHORIZATION_FAILED
        # The PLAINTEXT listener's User:ANONYMOUS too, with no ACL at all.
        assert produce_as_anonymous(open_broker, make_topic(open_broker, unique("acl-anon")))
    finally:
        alice.close()
        acls.remove_all()


def produce_as_anonymous(broker, topic):
    p = Producer({"bootstrap.servers": bootstrap(broker, "PLAINTEXT"), "log_level": 0,
                  "message.timeout.ms": 20000})
    errors = []
    p.produce(topic, b"anon", partition=0,
              on_delivery=lambda e, m: errors.append(e) if e else None)
    assert p.flush(30) == 0
    return errors == []


# ---------------------------------------------------------------------------- groups

def coordinated(broker, group):
    """Waits until the group's coordinator serves it (Kafka creates the groups' internal topic
    on the first FindCoordinator and answers NOT_COORDINATOR until then); returns the group."""
    s = Session(broker, "admin")
    try:
        deadline = time.time() + 30
        while find_coordinator(s, group)[0][1] != NONE:
            assert time.time() < deadline, f"no coordinator for {group}"
            time.sleep(0.2)
    finally:
        s.close()
    return group


def offset_commit(s, group, offsets):
    """OffsetCommit v2 outside a generation: {(topic, partition): error}."""
    topics = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(i32(p) + i64(o) + string(""))
    body = string(group) + i32(-1) + string("") + i64(-1) + \
        array([string(t) + array(ps) for t, ps in topics.items()])
    r = s.call(8, 2, body)
    out = {}
    for _ in range(r.i32()):
        t = r.string()
        for _ in range(r.i32()):
            p = r.i32()
            out[(t, p)] = r.i16()
    return out


def offset_fetch(s, group, topics, version=4):
    """OffsetFetch v1 or v4. topics: {name: [partitions]} or None (all, v2+). Returns
    (error or None before v2, [(topic, partition, offset, error)])."""
    body = string(group)
    body += array(None if topics is None else
                  [string(t) + array([i32(p) for p in ps]) for t, ps in topics.items()])
    r = s.call(9, version, body)
    if version >= 3:
        r.i32()
    parts = []
    for _ in range(r.i32()):
        t = r.string()
        for _ in range(r.i32()):
            p, o = r.i32(), r.i64()
            r.string()
            parts.append((t, p, o, r.i16()))
    return (r.i16() if version >= 2 else None), parts


def test_offset_commit_needs_group_read_then_topic_read(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-commit"))
    other = make_topic(acl_broker, unique("acl-commit"))
    missing = unique("acl-missing")
    group = coordinated(acl_broker, unique("acl-group"))
    alice = sessions("alice")
    asked = {(topic, 0): 1, (other, 0): 1, (missing, 0): 1}
    # Without the group every partition is refused with the group's error.
    acls.add(TOPIC, topic, READ)
    assert offset_commit(alice, group, asked) == {k: GROUP_AUTHORIZATION_FAILED for k in asked}
    # DESCRIBE on the group is not enough.
    acls.add(GROUP, group, DESCRIBE)
    assert set(offset_commit(alice, group, asked).values()) == {GROUP_AUTHORIZATION_FAILED}
    # READ on the group: the topics it may read are committed, the others refused, unknown or
    # not.
    acls.add(GROUP, group, READ)
    assert offset_commit(alice, group, asked) == {
        (topic, 0): NONE, (other, 0): TOPIC_AUTHORIZATION_FAILED,
        (missing, 0): TOPIC_AUTHORIZATION_FAILED}
    assert offset_fetch(sessions("admin"), group, None)[1] == [(topic, 0, 1, NONE)]


def test_offset_fetch_needs_group_describe_then_topic_describe(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-ofetch"))
    other = make_topic(acl_broker, unique("acl-ofetch"))
    group = coordinated(acl_broker, unique("acl-group"))
    admin = sessions("admin")
    assert set(offset_commit(admin, group, {(topic, 0): 3, (other, 0): 4}).values()) == {NONE}
    alice = sessions("alice")
    asked = {topic: [0], other: [0]}
    # The group refused: v2+ as the group's error, with no topics; before, on every partition.
    assert offset_fetch(alice, group, asked) == (GROUP_AUTHORIZATION_FAILED, [])
    assert offset_fetch(alice, group, asked, version=1)[1] == [
        (topic, 0, -1, GROUP_AUTHORIZATION_FAILED), (other, 0, -1, GROUP_AUTHORIZATION_FAILED)]
    # DESCRIBE on the group (not READ) is enough; a topic refused answers -1 and its error,
    # after the others.
    acls.add(GROUP, group, DESCRIBE)
    acls.add(TOPIC, other, DESCRIBE)
    assert offset_fetch(alice, group, asked) == (NONE, [
        (other, 0, 4, NONE), (topic, 0, -1, TOPIC_AUTHORIZATION_FAILED)])
    # All topics: those refused are left out.
    assert offset_fetch(alice, group, None) == (NONE, [(other, 0, 4, NONE)])


def find_coordinator(s, key, key_type=0, version=2):
    """FindCoordinator v2 (one key) or v4 (flexible): [(key, error, node, host, port,
    message)]."""
    if version >= 4:
        r = s.call(10, 4, i8(key_type) + carray([cstr(key)]) + TAGS, flexible=True)
        r.i32()

        def coordinator():
            c = (r.compact_string(), r.i32(), r.compact_string(), r.i32())
            e, m = r.i16(), r.compact_string()
            tagged(r)
            return c[0], e, c[1], c[2], c[3], m
        return carray_of(r, coordinator)
    r = s.call(10, version, string(key) + i8(key_type))
    r.i32()
    e, m = r.i16(), r.string()
    return [(key, e, r.i32(), r.string(), r.i32(), m)]


def test_find_coordinator_needs_group_describe(acl_broker, acls, sessions):
    group = unique("acl-group")
    alice = sessions("alice")
    assert find_coordinator(alice, group) == \
        [(group, GROUP_AUTHORIZATION_FAILED, -1, "", -1, "Group authorization failed.")]
    assert find_coordinator(alice, group, version=4) == \
        [(group, GROUP_AUTHORIZATION_FAILED, -1, "", -1, "")]
    tx = unique("tx")
    assert find_coordinator(alice, tx, key_type=1)[0][1:5] == \
        (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, "", -1)
    acls.add(GROUP, group, DESCRIBE)
    deadline = time.time() + 20
    while (got := find_coordinator(alice, group)[0])[1] != NONE:
        # The groups' internal topic may still be coming up (COORDINATOR_NOT_AVAILABLE).
        assert got[1] != GROUP_AUTHORIZATION_FAILED and time.time() < deadline, got
        time.sleep(0.2)
    assert got[2] >= 0 and got[4] == acl_broker.ports["SASL"]


def join_group(s, group, member=""):
    """JoinGroup v5: (error, generation, protocol, leader, member, members)."""
    body = string(group) + i32(10000) + i32(10000) + string(member) + string(None) + \
        string("consumer") + array([string("range") + i32(0)])
    r = s.call(11, 5, body)
    r.i32()
    return (r.i16(), r.i32(), r.string(), r.string(), r.string(),
            array_of(r, lambda: (r.string(), r.string(), rbytes(r))))


def test_classic_group_apis_need_group_read(acl_broker, acls, sessions):
    group = coordinated(acl_broker, unique("acl-group"))
    alice = sessions("alice")
    # JoinGroup, SyncGroup, Heartbeat, LeaveGroup: refused with Kafka's error shapes.
    assert join_group(alice, group) == (GROUP_AUTHORIZATION_FAILED, -1, "", "", "", [])
    r = alice.call(14, 3, string(group) + i32(1) + string("m") + string(None) + array([]))
    assert (r.i32(), r.i16(), rbytes(r)) == (0, GROUP_AUTHORIZATION_FAILED, b"")
    r = alice.call(12, 3, string(group) + i32(1) + string("m") + string(None))
    assert (r.i32(), r.i16()) == (0, GROUP_AUTHORIZATION_FAILED)
    r = alice.call(13, 3, string(group) + array([string("m") + string(None)]))
    assert (r.i32(), r.i16(), r.i32()) == (0, GROUP_AUTHORIZATION_FAILED, 0)
    # SyncGroup v5 without a protocol type: INCONSISTENT_GROUP_PROTOCOL before the ACLs.
    body = cstr(group) + i32(1) + cstr("m") + cstr(None) + cstr(None) + cstr("range") + \
        carray([]) + TAGS
    r = alice.call(14, 5, body, flexible=True)
    assert (r.i32(), r.i16()) == (0, INCONSISTENT_GROUP_PROTOCOL)
    acls.add(GROUP, group, READ)
    error, _, _, _, member, _ = join_group(alice, group)
    assert error != GROUP_AUTHORIZATION_FAILED and member  # MEMBER_ID_REQUIRED: a member id
    error, generation, protocol, leader, member, members = join_group(alice, group, member)
    assert (error, protocol, leader, len(members)) == (NONE, "range", member, 1)
    r = alice.call(12, 3, string(group) + i32(generation) + string(member) + string(None))
    assert (r.i32(), r.i16()) == (0, NONE)
    r = alice.call(13, 3, string(group) + array([string(member) + string(None)]))
    assert (r.i32(), r.i16()) == (0, NONE)


def test_a_consumer_group_of_librdkafka(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-cg"))
    assert produce_as(acl_broker, "admin", topic, [b"g%d" % i for i in range(3)]) == []
    group = coordinated(acl_broker, unique("acl-group"))

    def consume(expect_error=None):
        errors = []
        c = Consumer({**client_conf(acl_broker, "alice"), "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "error_cb": errors.append})
        got = []
        try:
            c.subscribe([topic])
            deadline = time.time() + 25
            while time.time() < deadline and len(got) < 3:
                m = c.poll(0.2)
                if m is None:
                    if expect_error and any(e.code() == expect_error for e in errors):
                        return got, errors
                    continue
                if m.error():
                    errors.append(m.error())
                    if expect_error and m.error().code() == expect_error:
                        return got, errors
                    continue
                got.append(m.value())
            if got:
                c.commit(asynchronous=False)
        finally:
            c.close()
        return got, errors

    got, errors = consume(KafkaError.GROUP_AUTHORIZATION_FAILED)
    assert got == [] and any(e.code() == KafkaError.GROUP_AUTHORIZATION_FAILED for e in errors)
    acls.add(GROUP, group, READ)
    acls.add(TOPIC, topic, READ)
    got, _ = consume()
    assert got == [b"g0", b"g1", b"g2"]
    assert offset_fetch(sessions("admin"), group, {topic: [0]}) == \
        (NONE, [(topic, 0, 3, NONE)])


def describe_groups(s, groups, ops=True):
    """DescribeGroups v3: [(error, group, state, ops)]."""
    r = s.call(15, 3, array([string(g) for g in groups]) + i8(int(ops)))
    r.i32()

    def group():
        e, g, state = r.i16(), r.string(), r.string()
        r.string(), r.string()
        array_of(r, lambda: (r.string(), r.string(), r.string(), rbytes(r), rbytes(r)))
        return e, g, state, r.i32()
    return array_of(r, group)


def test_describe_groups_needs_group_describe(acl_broker, acls, sessions):
    seen, hidden = unique("acl-group"), unique("acl-group")
    acls.add(GROUP, seen, DESCRIBE)
    # The refused groups come first.
    assert describe_groups(sessions("alice"), [seen, hidden]) == [
        (GROUP_AUTHORIZATION_FAILED, hidden, "", INT32_MIN),
        (NONE, seen, "Dead", bits(DESCRIBE))]
    assert describe_groups(sessions("admin"), [seen], ops=False) == [(NONE, seen, "Dead",
                                                                      INT32_MIN)]
    assert describe_groups(sessions("admin"), [seen]) == [
        (NONE, seen, "Dead", bits(READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS))]


def list_groups(s):
    r = s.call(16, 2, b"")
    r.i32()
    assert r.i16() == NONE
    return {g for g, _ in array_of(r, lambda: (r.string(), r.string()))}


def test_list_groups_lists_the_groups_described(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-lg"))
    seen, hidden = (coordinated(acl_broker, unique("acl-group")) for _ in range(2))
    for g in (seen, hidden):
        assert offset_commit(sessions("admin"), g, {(topic, 0): 1}) == {(topic, 0): NONE}
    alice = sessions("alice")
    assert not {seen, hidden} & list_groups(alice)
    acls.add(GROUP, seen, DESCRIBE)
    assert {seen, hidden} & list_groups(alice) == {seen}
    # CLUSTER:DESCRIBE lists every group.
    acls.add(CLUSTER, CLUSTER_NAME, DESCRIBE)
    assert {seen, hidden} <= list_groups(alice)


def test_delete_groups_needs_group_delete(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-dg"))
    doomed, kept = (coordinated(acl_broker, unique("acl-group")) for _ in range(2))
    for g in (doomed, kept):
        assert offset_commit(sessions("admin"), g, {(topic, 0): 1}) == {(topic, 0): NONE}
    acls.add(GROUP, doomed, DELETE)
    r = sessions("alice").call(42, 1, array([string(kept), string(doomed), string(doomed)]))
    r.i32()
    # Named twice, answered once; the refused ones last.
    assert array_of(r, lambda: (r.string(), r.i16())) == \
        [(doomed, NONE), (kept, GROUP_AUTHORIZATION_FAILED)]
    assert describe_groups(sessions("admin"), [doomed, kept], ops=False) == [
        (NONE, doomed, "Dead", INT32_MIN), (NONE, kept, "Empty", INT32_MIN)]


def offset_delete(s, group, topics):
    body = string(group) + array([string(t) + array([i32(p) for p in ps])
                                  for t, ps in topics.items()])
    r = s.call(47, 0, body)
    error = r.i16()
    r.i32()
    parts = {}
    for _ in range(r.i32()):
        t = r.string()
        for _ in range(r.i32()):
            p = r.i32()
            parts[(t, p)] = r.i16()
    return error, parts


def test_offset_delete_needs_group_delete_then_topic_read(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-od"))
    other = make_topic(acl_broker, unique("acl-od"))
    group = coordinated(acl_broker, unique("acl-group"))
    assert set(offset_commit(sessions("admin"), group, {(topic, 0): 1, (other, 0): 2})
               .values()) == {NONE}
    alice = sessions("alice")
    asked = {topic: [0], other: [0]}
    acls.add(GROUP, group, READ)
    assert offset_delete(alice, group, asked) == (GROUP_AUTHORIZATION_FAILED, {})
    acls.add(GROUP, group, DELETE)
    acls.add(TOPIC, topic, READ)
    assert offset_delete(alice, group, asked) == \
        (NONE, {(topic, 0): NONE, (other, 0): TOPIC_AUTHORIZATION_FAILED})
    assert offset_fetch(sessions("admin"), group, None) == (NONE, [(other, 0, 2, NONE)])


# ---------------------------------------------------------------------------- KIP-848 groups

def member_id():
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def consumer_heartbeat(s, group, member, epoch, names=None, regex=None, owned=None):
    """ConsumerGroupHeartbeat v1: (error, message, member epoch, {topic id: partitions} or
    None)."""
    body = cstr(group) + cstr(member) + i32(epoch) + cstr(None) + cstr(None) + \
        i32(30000 if epoch == 0 else -1) + \
        carray(None if names is None else [cstr(n) for n in names]) + cstr(regex) + cstr(None)
    body += carray(None if owned is None else
                   [t + carray([i32(p) for p in ps]) + TAGS for t, ps in owned.items()])
    r = s.call(68, 1, body + TAGS, flexible=True)
    r.i32()
    error, message = r.i16(), r.compact_string()
    r.compact_string()
    epoch = r.i32()
    r.i32()
    assignment = None
    if r.i8() >= 0:
        def part():
            t = r.bytes16()
            ps = carray_of(r, r.i32)
            tagged(r)
            return t, ps
        assignment = dict(carray_of(r, part))
        tagged(r)
    return error, message, epoch, assignment


def test_consumer_group_heartbeat_checks_the_group_and_the_subscribed_names(acl_broker, acls,
                                                                           sessions):
    topic = make_topic(acl_broker, unique("acl-848"))
    missing = unique("acl-missing")
    group = coordinated(acl_broker, unique("acl-group"))
    alice = sessions("alice")
    member = member_id()
    assert consumer_heartbeat(alice, group, member, 0, names=[topic], owned={})[0] == \
        GROUP_AUTHORIZATION_FAILED
    acls.add(GROUP, group, READ)
    # One subscribed name refused, existing or not: the heartbeat fails, the group is unchanged.
    assert consumer_heartbeat(alice, group, member, 0, names=[topic], owned={})[0] == \
        TOPIC_AUTHORIZATION_FAILED
    acls.add(TOPIC, topic, DESCRIBE)
    assert consumer_heartbeat(alice, group, member, 0, names=[topic, missing], owned={})[0] == \
        TOPIC_AUTHORIZATION_FAILED
    assert describe_consumer_groups(sessions("admin"), [group])[0][0] == GROUP_ID_NOT_FOUND
    error, _, epoch, _ = consumer_heartbeat(alice, group, member, 0, names=[topic], owned={})
    assert error == NONE and epoch >= 1
    assert consumer_heartbeat(alice, group, member, -1)[0] == NONE  # leaves


def test_a_regex_subscription_matches_only_topics_described(acl_broker, acls, sessions):
    prefix = unique("acl-rx")
    seen = make_topic(acl_broker, prefix + "-seen")
    make_topic(acl_broker, prefix + "-hidden")
    seen_id = topic_of(metadata(sessions("admin"), [seen]), seen)["id"]
    group = coordinated(acl_broker, unique("acl-group"))
    acls.add(GROUP, group, READ)
    acls.add(TOPIC, seen, DESCRIBE)
    alice = sessions("alice")
    member = member_id()
    error, _, epoch, assignment = consumer_heartbeat(alice, group, member, 0,
                                                     regex=prefix + ".*", owned={})
    assert error == NONE, error
    # Kafka resolves the regex in the background: the assignment comes with a later heartbeat.
    deadline = time.time() + 30
    while not assignment:
        assert time.time() < deadline, "no assignment"
        time.sleep(0.5)
        error, _, epoch, got = consumer_heartbeat(alice, group, member, epoch)
        assert error == NONE, error
        assignment = got if got is not None else assignment
    assert assignment == {seen_id: [0]}
    assert consumer_heartbeat(alice, group, member, -1)[0] == NONE


def describe_consumer_groups(s, groups, ops=True):
    """ConsumerGroupDescribe v0: [(error, message, group, members, ops)]; members:
    [(member id, {topic name: partitions} assigned)]."""
    r = s.call(69, 0, carray([cstr(g) for g in groups]) + i8(int(ops)) + TAGS, flexible=True)
    r.i32()

    def assignment():
        def tp():
            r.bytes16()
            name = r.compact_string()
            ps = carray_of(r, r.i32)
            tagged(r)
            return name, ps
        out = dict(carray_of(r, tp))
        tagged(r)
        return out

    def member():
        m = r.compact_string()
        r.compact_string(), r.compact_string()
        r.i32()
        r.compact_string(), r.compact_string()
        carray_of(r, r.compact_string)
        r.compact_string()
        assigned = assignment()
        assignment()
        tagged(r)
        return m, assigned

    def group():
        e, m, g = r.i16(), r.compact_string(), r.compact_string()
        r.compact_string()
        r.i32(), r.i32()
        r.compact_string()
        members = carray_of(r, member)
        ops = r.i32()
        tagged(r)
        return e, m, g, members, ops
    return carray_of(r, group)


def test_consumer_group_describe_hides_groups_with_topics_not_described(acl_broker, acls,
                                                                       sessions):
    topic = make_topic(acl_broker, unique("acl-cgd"))
    group, other = coordinated(acl_broker, unique("acl-group")), unique("acl-group")
    alice = sessions("alice")
    acls.add(GROUP, group, READ)
    acls.add(TOPIC, topic, DESCRIBE)
    member = member_id()
    error, _, epoch, _ = consumer_heartbeat(alice, group, member, 0, names=[topic], owned={})
    assert error == NONE
    deadline = time.time() + 20
    while True:
        got = describe_consumer_groups(alice, [group, other])
        # The refused group first.
        assert got[0] == (GROUP_AUTHORIZATION_FAILED, None, other, [], INT32_MIN), got
        error, _, name, members, ops = got[1]
        assert (error, name, ops) == (NONE, group, bits(READ, DESCRIBE)), got
        if members and members[0][1]:
            break
        assert time.time() < deadline, got
        time.sleep(0.3)
        error, _, epoch, _ = consumer_heartbeat(alice, group, member, epoch)
    assert members == [(member, {topic: [0]})]
    # bob may describe the group but not its topic: the whole group is refused.
    acls.add(GROUP, group, DESCRIBE, principal="User:bob")
    assert describe_consumer_groups(sessions("bob"), [group]) == [
        (TOPIC_AUTHORIZATION_FAILED,
         "The group has described topic(s) that the client is not authorized to describe.",
         group, [], INT32_MIN)]
    assert consumer_heartbeat(alice, group, member, -1)[0] == NONE


# ---------------------------------------------------------------------------- admin APIs

def create_topics(s, names, validate_only=False):
    """CreateTopics v5: {name: (error, message, config error, partitions, configs)}."""
    topics = [cstr(n) + i32(1) + i16(1) + carray([]) + carray([]) + TAGS for n in names]
    r = s.call(19, 5, carray(topics) + i32(20000) + i8(int(validate_only)) + TAGS,
               flexible=True)
    r.i32()
    out = {}

    def topic():
        name, error, message = r.compact_string(), r.i16(), r.compact_string()
        partitions, _ = r.i32(), r.i16()

        def config():
            c = (r.compact_string(), r.compact_string())
            r.i8(), r.i8(), r.i8()
            tagged(r)
            return c
        configs = carray_of(r, config)
        tags = tagged(r)
        config_error = Reader(tags[0]).i16() if 0 in tags else NONE
        out[name] = (error, message, config_error, partitions, configs)
    carray_of(r, topic)
    return out


def test_create_topics_needs_create(acl_broker, acls, sessions):
    existing = make_topic(acl_broker, unique("acl-ct"))
    new = unique("acl-ct")
    alice = sessions("alice")
    refused = (TOPIC_AUTHORIZATION_FAILED, "Authorization failed.", NONE, -1, [])
    # Refused before the name is checked or looked up.
    got = create_topics(alice, [new, existing, "bad name!"])
    assert got == {new: refused, existing: refused, "bad name!": refused}, got
    assert create_topics(alice, [new], validate_only=True) == {new: refused}
    # TOPIC:CREATE: created, but its configs are only told with DESCRIBE_CONFIGS.
    acls.add(TOPIC, new, CREATE)
    acls.add(TOPIC, existing, CREATE)
    got = create_topics(alice, [new, existing])
    assert got[new] == (NONE, None, TOPIC_AUTHORIZATION_FAILED, -1, []), got
    assert got[existing][0] == 36  # TOPIC_ALREADY_EXISTS, now that it may be told
    described = unique("acl-ct")
    acls.add(TOPIC, described, CREATE)
    acls.add(TOPIC, described, DESCRIBE_CONFIGS)
    error, _, config_error, partitions, configs = create_topics(alice, [described])[described]
    assert (error, config_error, partitions) == (NONE, NONE, 1)
    assert dict(configs)["cleanup.policy"] == "delete"
    # CLUSTER:CREATE creates any topic, and gives no DESCRIBE_CONFIGS.
    acls.add(CLUSTER, CLUSTER_NAME, CREATE)
    anywhere = unique("acl-ct")
    assert create_topics(alice, [anywhere])[anywhere][:4] == \
        (NONE, None, TOPIC_AUTHORIZATION_FAILED, -1)


def delete_topics(s, names=(), ids=()):
    """DeleteTopics v6: sorted [(name, id, error, message)]."""
    topics = [cstr(n) + ZERO_UUID + TAGS for n in names] + [cstr(None) + i + TAGS for i in ids]
    r = s.call(20, 6, carray(topics) + i32(20000) + TAGS, flexible=True)
    r.i32()

    def result():
        out = (r.compact_string(), r.bytes16(), r.i16(), r.compact_string())
        tagged(r)
        return out
    return sorted(carray_of(r, result), key=lambda x: (x[0] or "", x[1]))


def test_delete_topics_tells_only_describable_topics_apart(acl_broker, acls, sessions):
    hidden = make_topic(acl_broker, unique("acl-dt"))
    seen = make_topic(acl_broker, unique("acl-dt"))
    doomed = make_topic(acl_broker, unique("acl-dt"))
    hidden_missing, seen_missing = unique("acl-dt"), unique("acl-dt")
    ids = {t["name"]: t["id"]
           for t in metadata(sessions("admin"), [hidden, seen, doomed])["topics"]}
    for name in (seen, seen_missing):
        acls.add(TOPIC, name, DESCRIBE)
    acls.add(TOPIC, doomed, DELETE)
    denied = (TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
    got = delete_topics(sessions("alice"), [hidden, seen, doomed, hidden_missing, seen_missing])
    assert got == sorted([
        (hidden, ZERO_UUID, *denied), (seen, ZERO_UUID, *denied),
        (hidden_missing, ZERO_UUID, *denied),
        (seen_missing, ZERO_UUID, UNKNOWN_TOPIC_OR_PARTITION,
         "This server does not host this topic-partition."),
        (doomed, ids[doomed], NONE, None)], key=lambda x: (x[0] or "", x[1])), got
    # By id: the name only to who may describe the topic.
    got = delete_topics(sessions("alice"), ids=[ids[hidden], ids[seen]])
    assert got == sorted([(None, ids[hidden], *denied), (seen, ids[seen], *denied)],
                         key=lambda x: (x[0] or "", x[1])), got
    # CLUSTER:DELETE deletes any topic.
    acls.add(CLUSTER, CLUSTER_NAME, DELETE)
    assert delete_topics(sessions("alice"), [hidden])[0][2] == NONE


def test_delete_records_needs_topic_delete(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-dr"))
    assert produce_as(acl_broker, "admin", topic, [b"1", b"2", b"3"]) == []
    alice = sessions("alice")

    def delete_records(name):
        body = array([string(name) + array([i32(0) + i64(2)])]) + i32(10000)
        r = alice.call(21, 0, body)
        r.i32()
        assert r.i32() == 1 and r.string() == name and r.i32() == 1
        return r.i32(), r.i64(), r.i16()

    assert delete_records(topic) == (0, -1, TOPIC_AUTHORIZATION_FAILED)
    assert delete_records(unique("acl-missing")) == (0, -1, TOPIC_AUTHORIZATION_FAILED)
    acls.add(TOPIC, topic, WRITE)
    assert delete_records(topic) == (0, -1, TOPIC_AUTHORIZATION_FAILED)
    acls.add(TOPIC, topic, DELETE)
    assert delete_records(topic) == (0, 2, NONE)


def init_producer_id(s, transactional_id=None):
    """InitProducerId v0: (error, producer id, epoch), once the producer id manager is ready
    (Kafka answers COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR meanwhile)."""
    deadline = time.time() + 30
    while True:
        r = s.call(22, 0, string(transactional_id) + i32(60000))
        r.i32()
        got = r.i16(), r.i64(), r.i16()
        if got[0] not in (14, 15, 16) or time.time() > deadline:
            return got
        time.sleep(0.2)


def test_init_producer_id_needs_idempotent_write_or_write_on_some_topic(acl_broker, acls,
                                                                        sessions):
    topic = make_topic(acl_broker, unique("acl-pid"))
    alice = sessions("alice")
    assert init_producer_id(alice) == (CLUSTER_AUTHORIZATION_FAILED, -1, -1)
    assert init_producer_id(alice, unique("tx")) == (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)
    # WRITE on a topic (any one) is enough (KIP-679)...
    write = acls.add(TOPIC, topic, WRITE)
    error, pid, _ = init_producer_id(alice)
    assert error == NONE and pid >= 0
    # ... unless a DENY of that name cancels it.
    deny = acls.add(TOPIC, topic, WRITE, permission=DENY)
    assert init_producer_id(alice)[0] == CLUSTER_AUTHORIZATION_FAILED
    acls.remove(deny)
    # A PREFIXED ALLOW counts, unless a PREFIXED DENY of a prefix of it exists.
    acls.remove(write)
    prefix = unique("acl-pid")
    acls.add(TOPIC, prefix, WRITE, pattern=PREFIXED)
    assert init_producer_id(alice)[0] == NONE
    acls.add(TOPIC, prefix[:-2], WRITE, pattern=PREFIXED, permission=DENY)
    assert init_producer_id(alice)[0] == CLUSTER_AUTHORIZATION_FAILED
    # CLUSTER:IDEMPOTENT_WRITE.
    acls.add(CLUSTER, CLUSTER_NAME, IDEMPOTENT_WRITE)
    assert init_producer_id(alice)[0] == NONE
    # librdkafka's idempotent producer then needs only TOPIC:WRITE to produce.
    acls.add(TOPIC, topic, WRITE)
    assert produce_as(acl_broker, "alice", topic, [b"i1", b"i2"], **{"enable.idempotence": True}) \
        == []


def describe_configs(s, resources):
    """DescribeConfigs v1: [(type, name, error, message, number of configs)]."""
    body = array([i8(t) + string(n) + array(None) for t, n in resources]) + i8(0)
    r = s.call(32, 1, body)
    r.i32()

    def result():
        e, m, t, n = r.i16(), r.string(), r.i8(), r.string()
        configs = array_of(r, lambda: (r.string(), r.string(), r.i8(), r.i8(), r.i8(),
                                       array_of(r, lambda: (r.string(), r.string(), r.i8()))))
        return t, n, e, m, len(configs)
    return array_of(r, result)


BROKER = 4
BROKER_LOGGER = 8


def test_describe_configs_needs_describe_configs(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-dc"))
    other = make_topic(acl_broker, unique("acl-dc"))
    alice = sessions("alice")
    got = describe_configs(alice, [(TOPIC, topic), (BROKER, ""), (TOPIC, "bad name!")])
    assert got == [
        (TOPIC, topic, TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.", 0),
        (BROKER, "", CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", 0),
        (TOPIC, "bad name!", TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.", 0)], got
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS; the refused resources come last.
    acls.add(TOPIC, other, ALTER_CONFIGS)
    acls.add(CLUSTER, CLUSTER_NAME, DESCRIBE_CONFIGS)
    got = describe_configs(alice, [(TOPIC, topic), (TOPIC, other), (BROKER, "")])
    assert [g[:3] for g in got] == [(TOPIC, other, NONE), (BROKER, "", NONE),
                                    (TOPIC, topic, TOPIC_AUTHORIZATION_FAILED)], got
    assert got[0][4] > 0


def alter_configs(s, resources, incremental=False):
    """AlterConfigs v0 or IncrementalAlterConfigs v0, validate only: [(type, name, error,
    message)]. resources: [(type, name, {config: value})] (incremental: SET, or DELETE for a
    None value)."""
    items = []
    for t, n, configs in resources:
        if incremental:
            cs = [string(k) + i8(1 if v is None else 0) + string(v) for k, v in configs.items()]
        else:
            cs = [string(k) + string(v) for k, v in configs.items()]
        items.append(i8(t) + string(n) + array(cs))
    r = s.call(44 if incremental else 33, 0, array(items) + i8(1))
    r.i32()
    return array_of(r, lambda: (lambda e, m, t, n: (t, n, e, m))(r.i16(), r.string(), r.i8(),
                                                                   r.string()))


@pytest.mark.parametrize("incremental", [False, True], ids=["legacy", "incremental"])
def test_alter_configs_needs_alter_configs(acl_broker, acls, sessions, incremental):
    topic = make_topic(acl_broker, unique("acl-ac"))
    missing = unique("acl-missing")
    alice = sessions("alice")
    # A broker's dynamic settings: a DELETE (incremental) or an empty set (legacy) are accepted
    # by both brokers' checks before the ACLs.
    broker = (BROKER, "", {"log.cleaner.threads": None}) if incremental else (BROKER, "1", {})
    resources = [(TOPIC, topic, {"retention.ms": "3600000"}),
                 (TOPIC, missing, {"retention.ms": "3600000"}), broker]
    got = alter_configs(alice, resources, incremental)
    assert got == [
        (TOPIC, topic, TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
        (TOPIC, missing, TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
        (broker[0], broker[1], CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")], got
    acls.add(TOPIC, topic, ALTER_CONFIGS)
    acls.add(TOPIC, missing, ALTER_CONFIGS)
    acls.add(CLUSTER, CLUSTER_NAME, ALTER_CONFIGS)
    got = alter_configs(alice, resources, incremental)
    assert [g[2] for g in got] == [NONE, UNKNOWN_TOPIC_OR_PARTITION, NONE], got


def test_broker_logger_configs_need_cluster_alter_configs(acl_broker, sessions):
    got = alter_configs(sessions("alice"), [(BROKER_LOGGER, "1", {"kafka": "INFO"})], True)
    # Kafka's broker refuses it itself, without a message.
    assert got == [(BROKER_LOGGER, "1", CLUSTER_AUTHORIZATION_FAILED, None)]


def test_create_partitions_needs_topic_alter(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-cp"))
    missing = unique("acl-missing")
    alice = sessions("alice")

    def create_partitions():
        body = array([string(t) + i32(2) + array(None) for t in (topic, missing)]) + \
            i32(20000) + i8(1)
        r = alice.call(37, 0, body)
        r.i32()
        return sorted(array_of(r, lambda: (r.string(), r.i16(), r.string())))

    assert create_partitions() == sorted([(topic, TOPIC_AUTHORIZATION_FAILED, None),
                                          (missing, TOPIC_AUTHORIZATION_FAILED, None)])
    acls.add(TOPIC, topic, ALTER)
    acls.add(TOPIC, missing, ALTER)
    got = {n: e for n, e, _ in create_partitions()}
    assert got == {topic: NONE, missing: UNKNOWN_TOPIC_OR_PARTITION}


def test_describe_cluster_authorized_operations(acl_broker, acls, sessions):
    def describe(s, ops=True):
        r = s.call(60, 0, i8(int(ops)) + TAGS, flexible=True)
        r.i32()
        assert r.i16() == NONE
        r.compact_string(), r.compact_string(), r.i32()
        carray_of(r, lambda: (r.i32(), r.compact_string(), r.i32(), r.compact_string(),
                              tagged(r)))
        return r.i32()

    alice = sessions("alice")
    assert describe(alice) == 0
    assert describe(alice, ops=False) == INT32_MIN
    acls.add(CLUSTER, CLUSTER_NAME, DESCRIBE)
    acls.add(CLUSTER, CLUSTER_NAME, IDEMPOTENT_WRITE)
    assert describe(alice) == bits(DESCRIBE, IDEMPOTENT_WRITE)
    assert describe(sessions("admin")) == bits(CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
                                               DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE)


def test_partition_reassignments_need_cluster_alter_and_describe(acl_broker, acls, sessions):
    topic = make_topic(acl_broker, unique("acl-ra"))
    alice = sessions("alice")
    # AlterPartitionReassignments v0 (flexible): the request's error and every partition's.
    body = i32(20000) + carray([cstr(topic) + carray([i32(0) + carray(None) + TAGS]) + TAGS]) + \
        TAGS
    r = alice.call(45, 0, body, flexible=True)
    r.i32()
    error = r.i16()
    r.compact_string()

    def partition():
        p = (r.i32(), r.i16())
        r.compact_string()
        tagged(r)
        return p

    def topic_result():
        t = (r.compact_string(), carray_of(r, partition))
        tagged(r)
        return t
    assert (error, carray_of(r, topic_result)) == \
        (CLUSTER_AUTHORIZATION_FAILED, [(topic, [(0, CLUSTER_AUTHORIZATION_FAILED)])])
    # ListPartitionReassignments v0: refused, the partitions asked echoed.
    body = i32(20000) + carray([cstr(topic) + carray([i32(0)]) + TAGS]) + TAGS
    r = alice.call(46, 0, body, flexible=True)
    r.i32()
    assert r.i16() == CLUSTER_AUTHORIZATION_FAILED
    r.compact_string()

    def ongoing():
        name = r.compact_string()

        def part():
            p = r.i32()
            carray_of(r, r.i32), carray_of(r, r.i32), carray_of(r, r.i32)
            tagged(r)
            return p
        t = (name, carray_of(r, part))
        tagged(r)
        return t
    assert carray_of(r, ongoing) == [(topic, [0])]
    acls.add(CLUSTER, CLUSTER_NAME, DESCRIBE)
    r = alice.call(46, 0, body, flexible=True)
    r.i32()
    assert r.i16() == NONE


def describe_topic_partitions(s, names):
    """DescribeTopicPartitions v0: [(error, name, id, internal, partitions, ops)]."""
    body = carray([cstr(n) + TAGS for n in names]) + i32(2000) + i8(-1) + TAGS
    r = s.call(75, 0, body, flexible=True)
    r.i32()

    def partition():
        p = r.i16(), r.i32()
        r.i32(), r.i32()
        for _ in range(5):
            carray_of(r, r.i32)
        tagged(r)
        return p

    def topic():
        t = (r.i16(), r.compact_string(), r.bytes16(), bool(r.i8()), carray_of(r, partition),
             r.i32())
        tagged(r)
        return t
    return carray_of(r, topic)


def test_describe_topic_partitions_needs_topic_describe(acl_broker, acls, sessions):
    seen = make_topic(acl_broker, unique("acl-dtp"))
    hidden = make_topic(acl_broker, unique("acl-dtp"))
    missing = unique("acl-dtp")
    acls.add(TOPIC, seen, DESCRIBE)
    acls.add(TOPIC, missing, ALTER)
    seen_id = topic_of(metadata(sessions("admin"), [seen]), seen)["id"]
    got = describe_topic_partitions(sessions("alice"), [hidden, seen, missing])
    # Sorted by name, the refused ones after the page.
    answered = sorted([(NONE, seen, seen_id, False, [(NONE, 0)], bits(DESCRIBE)),
                       (UNKNOWN_TOPIC_OR_PARTITION, missing, ZERO_UUID, False, [],
                        bits(ALTER, DESCRIBE))], key=lambda t: t[1])
    assert got == answered + [(TOPIC_AUTHORIZATION_FAILED, hidden, ZERO_UUID, False, [],
                               INT32_MIN)], got
    # All topics: the refused ones are left out.
    names = [t[1] for t in describe_topic_partitions(sessions("alice"), [])]
    assert seen in names and hidden not in names


def test_franz_go_kadm_creates_describes_and_deletes_acls(acl_broker):
    """kadm's CreateACLs, DescribeACLs (a MATCH filter finds the LITERAL and the PREFIXED ACL)
    and DeleteACLs, as admin; alice, without ALTER on the cluster, is refused."""
    topic = unique("kadm")
    sasl = {"mechanism": "PLAIN", "user": "admin", "password": ADMIN_PASSWORD}
    rc, lines, err = franz.franz(bootstrap(acl_broker), "acls", topic, "User:carol", **sasl)
    assert rc == 0, err
    assert lines == [{"created": 3, "deleted": 3, "after": 0, "described": [
        f"User:carol * {topic} LITERAL READ ALLOW",
        f"User:carol * {topic} LITERAL WRITE ALLOW",
        f"User:carol * {topic} PREFIXED DELETE DENY"]}]
    rc, _, err = franz.franz(bootstrap(acl_broker), "acls", topic, "User:carol",
                             mechanism="PLAIN", user="alice", password=PASSWORDS["alice"])
    assert rc == 1 and "CLUSTER_AUTHORIZATION_FAILED" in err, err
