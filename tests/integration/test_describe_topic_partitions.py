"""DescribeTopicPartitions (key 75, v0, KIP-966) over a raw socket, and the Java tools that use it.

Every test runs against Silt and the reference Kafka broker and checks the same structure on
both: topic ids and node ids differ between brokers, so they are compared by shape (an id is
zero or not; every replica list is [leader]).
"""
import re
import signal
import time
import uuid

import pytest

from test_cli_tools import TOPIC_COMMAND, tool
from util import (Reader, api_versions_request, compact_string, connect, create_topic, i8,
                  i16, i32, parse_api_versions_v0, read_response, string, uvarint)

DESCRIBE_TOPIC_PARTITIONS = 75
UNKNOWN_SERVER_ERROR = -1
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUEST = 42
UNKNOWN_TOPIC_OR_PARTITION = 3
# Every operation on a topic, as a broker without an authorizer reports it: READ, WRITE,
# CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
NO_OPERATIONS = -2 ** 31  # the field's default: not filled in
ZERO_ID = bytes(16)


# ---------------------------------------------------------------------------- wire format (v0)



def request(correlation_id, topics, limit=2000, cursor=None):
    """A DescribeTopicPartitions v0 request (request header v2, flexible body)."""
    body = uvarint(len(topics) + 1) + b"".join(compact_string(t) + uvarint(0) for t in topics)
    body += i32(limit)
    if cursor is None:
        body += i8(-1)
    else:
        body += i8(1) + compact_string(cursor[0]) + i32(cursor[1]) + uvarint(0)
    body += uvarint(0)
    payload = (i16(DESCRIBE_TOPIC_PARTITIONS) + i16(0) + i32(correlation_id) +
               string("silt-tests") + uvarint(0) + body)
    return i32(len(payload)) + payload


def parse_response(body):
    """The response body after the correlation id: (topics, next_cursor)."""
    r = Reader(body)
    r.skip_tags()  # response header v1
    r.i32()  # throttle_time_ms

    def partition():
        p = {"error": r.i16(), "index": r.i32(), "leader": r.i32(), "epoch": r.i32(),
             "replicas": r.compact_array(r.i32), "isr": r.compact_array(r.i32),
             "elr": r.compact_array(r.i32), "last_known_elr": r.compact_array(r.i32),
             "offline": r.compact_array(r.i32)}
        r.skip_tags()
        return p

    def topic():
        t = {"error": r.i16(), "name": r.compact_string(), "id": r.bytes16(),
             "internal": r.i8() != 0, "partitions": r.compact_array(partition),
             "operations": r.i32()}
        r.skip_tags()
        return t

    topics = r.compact_array(topic)
    cursor = None
    if r.i8() >= 0:
        cursor = (r.compact_string(), r.i32())
        r.skip_tags()
    r.skip_tags()
    assert r.pos == len(body), f"{len(body) - r.pos} bytes left after the response"
    return topics, cursor


def describe(bootstrap, topics, limit=2000, cursor=None):
    with connect(bootstrap) as s:
        s.sendall(request(11, topics, limit, cursor))
        resp = read_response(s)
    assert resp is not None, "broker closed the connection on DescribeTopicPartitions"
    corr, body = resp
    assert corr == 11
    return parse_response(body)


def shape(topics):
    """Topics with the broker-specific parts abstracted: ids as zero or not, every node id as
    "leader" when it is the partition's leader."""
    out = []
    for t in topics:
        parts = []
        for p in t["partitions"]:
            def node(n, leader=p["leader"]):
                return "leader" if n == leader and n >= 0 else n
            parts.append({**p, "leader": node(p["leader"]),
                          "replicas": [node(n) for n in p["replicas"]],
                          "isr": [node(n) for n in p["isr"]]})
        out.append({**t, "id": "zero" if t["id"] == ZERO_ID else "id", "partitions": parts})
    return out


def described(name, partitions):
    """The shape of a topic of this single-broker cluster with the given partitions."""
    return {"error": 0, "name": name, "id": "id", "internal": False, "operations": TOPIC_OPERATIONS,
            "partitions": [{"error": 0, "index": i, "leader": "leader", "epoch": 0,
                            "replicas": ["leader"], "isr": ["leader"], "elr": [],
                            "last_known_elr": [], "offline": []} for i in partitions]}


def failed(name, error, operations=TOPIC_OPERATIONS):
    """The shape of a topic answered with an error."""
    return {"error": error, "name": name, "id": "zero", "internal": False, "partitions": [],
            "operations": operations}


@pytest.fixture
def prefix():
    return "dtp-" + uuid.uuid4().hex[:10]


# ---------------------------------------------------------------------------- tests

def test_advertised_in_api_versions(broker):
    with connect(broker.bootstrap) as s:
        s.sendall(api_versions_request(1))
        _, body = read_response(s)
    err, apis = parse_api_versions_v0(body)
    assert err == 0
    assert apis.get(DESCRIBE_TOPIC_PARTITIONS) == (0, 0), apis.get(DESCRIBE_TOPIC_PARTITIONS)


def test_all_topics_sorted_by_name(broker, prefix):
    # Created out of order: the answer is sorted by name whatever the creation order.
    create_topic(broker.bootstrap, f"{prefix}-b", partitions=1)
    create_topic(broker.bootstrap, f"{prefix}-a", partitions=2)
    topics, cursor = describe(broker.bootstrap, [])
    assert cursor is None
    names = [t["name"] for t in topics]
    assert names == sorted(names), names
    mine = [t for t in topics if t["name"].startswith(prefix)]
    assert shape(mine) == [described(f"{prefix}-a", range(2)), described(f"{prefix}-b", range(1))]


def test_named_topics_missing_and_invalid(broker, prefix):
    a, b = f"{prefix}-a", f"{prefix}-b"
    create_topic(broker.bootstrap, a, partitions=2)
    create_topic(broker.bootstrap, b, partitions=1)
    missing, invalid = f"{prefix}-missing", f"{prefix}-c!"
    # Asked for out of order and one twice: answered once each, sorted by name.
    topics, cursor = describe(broker.bootstrap, [missing, b, invalid, a, b])
    assert cursor is None
    assert shape(topics) == [described(a, range(2)), described(b, range(1)),
                             failed(invalid, INVALID_TOPIC_EXCEPTION),
                             failed(missing, UNKNOWN_TOPIC_OR_PARTITION)]


def test_empty_topic_name(broker, prefix):
    a = f"{prefix}-a"
    create_topic(broker.bootstrap, a, partitions=1)
    topics, cursor = describe(broker.bootstrap, [a, ""])
    assert cursor is None
    if broker.kind == "kafka":
        # Kafka 4.1.1 takes "" for the topic of the (absent) cursor and fails with a
        # NullPointerException: UNKNOWN_SERVER_ERROR in every topic asked for. Silt answers
        # what Kafka means to: an invalid name.
        assert shape(topics) == [failed(a, UNKNOWN_SERVER_ERROR, NO_OPERATIONS),
                                 failed("", UNKNOWN_SERVER_ERROR, NO_OPERATIONS)]
    else:
        assert shape(topics) == [failed("", INVALID_TOPIC_EXCEPTION), described(a, [0])]


def follow(bootstrap, topics, limit):
    """Every page from the first to the one without a cursor: [(topics, cursor)]."""
    pages, cursor = [], None
    for _ in range(20):
        got, cursor = describe(bootstrap, topics, limit, cursor)
        pages.append((shape(got), cursor))
        if cursor is None:
            return pages
    raise AssertionError(f"still a cursor after 20 pages: {pages}")


def test_pagination_one_partition_per_response(broker, prefix):
    t = f"{prefix}-t"
    create_topic(broker.bootstrap, t, partitions=3)
    assert follow(broker.bootstrap, [t], 1) == [
        ([described(t, [0])], (t, 1)),
        ([described(t, [1])], (t, 2)),
        ([described(t, [2])], None),
    ]


def test_pagination_across_topics(broker, prefix):
    x, y, z = f"{prefix}-x", f"{prefix}-y", f"{prefix}-z"
    create_topic(broker.bootstrap, x, partitions=3)
    create_topic(broker.bootstrap, y, partitions=1)
    # A page that ends inside a topic, then one that finishes it and takes the next.
    assert follow(broker.bootstrap, [y, x], 2) == [
        ([described(x, [0, 1])], (x, 2)),
        ([described(x, [2]), described(y, [0])], None),
    ]
    # A page that ends exactly with a topic points at the start of the next one, even a
    # topic that does not exist; a missing topic takes no room in a page.
    assert follow(broker.bootstrap, [z, y, x], 3) == [
        ([described(x, [0, 1, 2])], (y, 0)),
        ([described(y, [0]), failed(z, UNKNOWN_TOPIC_OR_PARTITION)], None),
    ]
    # A limit below 1 is taken as 1.
    assert describe(broker.bootstrap, [y, x], 0) == describe(broker.bootstrap, [y, x], 1)
    topics, cursor = describe(broker.bootstrap, [x], -5)
    assert (shape(topics), cursor) == ([described(x, [0])], (x, 1))
    # A cursor past the topic's last partition: the topic without partitions.
    topics, cursor = describe(broker.bootstrap, [x], 10, (x, 7))
    assert (shape(topics), cursor) == ([described(x, [])], None)


def test_cursor_outside_the_request_is_refused(broker, prefix):
    x = f"{prefix}-x"
    create_topic(broker.bootstrap, x, partitions=1)
    # Refused as a whole: every named topic gets INVALID_REQUEST, without operations.
    topics, cursor = describe(broker.bootstrap, [x, "other"], 10, ("elsewhere", 0))
    assert (shape(topics), cursor) == ([failed(x, INVALID_REQUEST, NO_OPERATIONS),
                                        failed("other", INVALID_REQUEST, NO_OPERATIONS)], None)
    topics, cursor = describe(broker.bootstrap, [x], 10, (x, -1))
    assert (shape(topics), cursor) == ([failed(x, INVALID_REQUEST, NO_OPERATIONS)], None)
    # With all topics asked for, the cursor may name any topic ("~" sorts after every valid
    # name), but not a negative partition.
    assert describe(broker.bootstrap, [], 10, ("~", 0)) == ([], None)
    assert describe(broker.bootstrap, [], 10, (x, -1)) == ([], None)


# ---------------------------------------------------------------------------- Kafka's tools

def silt_request_report(b):
    """Sends SIGUSR1 to a Silt broker and returns {api name: requests} of the report it logs,
    which counts the requests since its previous report. An ApiVersions request sent first
    makes the report non-empty, so its end can be waited for."""
    with connect(b.bootstrap) as s:
        s.sendall(api_versions_request(1))
        assert read_response(s) is not None
    start = b.log.stat().st_size
    b.proc.send_signal(signal.SIGUSR1)
    deadline = time.time() + 10
    text = ""
    while time.time() < deadline:
        with open(b.log, "rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
        if "silt: requests: ApiVersions" in text:
            time.sleep(0.3)  # the rest of the report is written right after
            with open(b.log, "rb") as f:
                f.seek(start)
                text = f.read().decode(errors="replace")
            return {m[0]: int(m[1]) for m in re.findall(r"silt: requests: (\w+) n=(\d+)", text)}
        time.sleep(0.05)
    raise AssertionError(f"no request report logged after SIGUSR1: {text!r}")


def test_topic_command_describe_pages_with_describe_topic_partitions(broker, prefix):
    """kafka-topics --describe (Kafka 4.1's TopicCommand, through the Java admin client's
    describeTopics) one partition per response: on Silt, through DescribeTopicPartitions."""
    x, y = f"{prefix}-x", f"{prefix}-y"
    create_topic(broker.bootstrap, x, partitions=3)
    create_topic(broker.bootstrap, y, partitions=2)
    if broker.kind == "silt":
        silt_request_report(broker)  # start counting from here
    out = tool(TOPIC_COMMAND, "--bootstrap-server", broker.bootstrap, "--describe",
               "--topic", f"{prefix}-.*", "--partition-size-limit-per-response", 1).stdout
    for name, count in ((x, 3), (y, 2)):
        assert re.search(rf"Topic: {name}\tTopicId: \S+\tPartitionCount: {count}\t"
                         rf"ReplicationFactor: 1", out), out
        parts = re.findall(rf"Topic: {name}\tPartition: (\d+)\tLeader: (\d+)\tReplicas: (\d+)\t"
                           rf"Isr: (\d+)\tElr: \tLastKnownElr: ", out)
        assert sorted(int(p[0]) for p in parts) == list(range(count)), out
        assert all(p[1] == p[2] == p[3] for p in parts), out
    if broker.kind == "silt":
        counts = silt_request_report(broker)
        # One partition per response: at least 5 pages for the 5 partitions.
        print("COUNTS", counts)
        assert counts.get("DescribeTopicPartitions", 0) >= 5, counts


def test_consumer_offsets_is_described_once_groups_are_in_use(broker, prefix):
    """Once a group has committed, Metadata lists __consumer_offsets; DescribeTopicPartitions
    describes it (internal, one partition per coordinator shard) so that kafka-topics
    --describe of every topic, which asks for each listed topic, works."""
    from confluent_kafka import Consumer, TopicPartition
    create_topic(broker.bootstrap, prefix, partitions=1)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": prefix,
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(prefix, 0, 0)], asynchronous=False)
    finally:
        c.close()
    topics, _ = describe(broker.bootstrap, ["__consumer_offsets"])
    assert len(topics) == 1 and topics[0]["error"] == 0, topics
    t = topics[0]
    assert t["internal"] and t["id"] != ZERO_ID
    assert [p["index"] for p in t["partitions"]] == list(range(len(t["partitions"])))
    assert len(t["partitions"]) >= 1
    everything, _ = describe(broker.bootstrap, [])
    names = [x["name"] for x in everything]
    assert names == sorted(names) and "__consumer_offsets" in names, names
    out = tool(TOPIC_COMMAND, "--bootstrap-server", broker.bootstrap, "--describe").stdout
    assert re.search(r"Topic: __consumer_offsets\tTopicId: \S+\tPartitionCount: \d+\t", out), out
    assert re.search(rf"Topic: {prefix}\tTopicId: \S+\tPartitionCount: 1\t", out), out
