"""The groups' internal topic __consumer_offsets as tools read it: Fetch and ListOffsets of its
partitions give Kafka's own records (OffsetCommitKey/Value, GroupMetadataKey/Value), so that
kafka-console-consumer with Kafka's OffsetsMessageFormatter and GroupMetadataMessageFormatter
and lag monitors read a group's commits and state; nobody may produce to it; and a
consumer-protocol (KIP-848) regex that matches it is assigned its partitions, as on Kafka, whose
group coordinator matches regexes against every topic, internal ones included.

On Silt the topic is a view generated from the group store (docs/architecture.md, "The offsets
topic"); the reference Kafka broker has one partition of it (tests/kafka-reference.sh), Silt one
per coordinator shard (50): the tests find a group's partition by Kafka's rule.
"""
import json
import struct
import subprocess
import time

from confluent_kafka import KafkaError, TopicPartition

from test_cli_tools import CONSOLE_CONSUMER, tool
from util import JVM_OPTS, admin, consumer, create_topic, producer

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_FORMATTER = "org.apache.kafka.tools.consumer.OffsetsMessageFormatter"
GROUP_FORMATTER = "org.apache.kafka.tools.consumer.GroupMetadataMessageFormatter"


def group_partition(group, partitions):
    """Kafka's partition of __consumer_offsets for a group: the Java hash of its id, made
    non-negative as Utils.abs does, modulo the partition count."""
    h = 0
    for ch in group:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def offsets_partitions(bootstrap, timeout=20):
    """The partition count of __consumer_offsets once every partition has a leader."""
    a = admin(bootstrap)
    deadline = time.time() + timeout
    while True:
        t = a.list_topics(topic=OFFSETS_TOPIC, timeout=10).topics.get(OFFSETS_TOPIC)
        if t is not None and t.error is None and t.partitions and \
                all(p.leader >= 0 for p in t.partitions.values()):
            return len(t.partitions)
        assert time.time() < deadline, f"{OFFSETS_TOPIC} has no leaders: {t}"
        time.sleep(0.2)


def commit(bootstrap, group, offsets):
    """Commits {(topic, partition): offset} for `group` outside group management."""
    c = consumer(bootstrap, **{"group.id": group})
    try:
        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                 asynchronous=False)
    finally:
        c.close()


def json_objects(text):
    """The JSON objects printed one after the other (Kafka 4.1's coordinator record formatters
    end them with no newline)."""
    decoder = json.JSONDecoder()
    out = []
    pos = text.find("{")
    while pos >= 0:
        obj, end = decoder.raw_decode(text, pos)
        out.append(obj)
        pos = text.find("{", end)
    return out


def decode_commit(key, value):
    """(group, topic, partition, value version, offset) of an OffsetCommit record, else None."""
    if key is None or len(key) < 2 or struct.unpack_from(">h", key)[0] != 1:
        return None
    pos = 2
    fields = []
    for _ in range(2):
        n = struct.unpack_from(">h", key, pos)[0]
        fields.append(key[pos + 2:pos + 2 + n].decode())
        pos += 2 + n
    partition = struct.unpack_from(">i", key, pos)[0]
    if value is None:
        return (*fields, partition, None, None)
    version, offset = struct.unpack_from(">hq", value)
    return (*fields, partition, version, offset)


def read_partition(bootstrap, partition, start, end, timeout=20):
    """The records of __consumer_offsets partition `partition` in [start, end), assign mode."""
    c = consumer(bootstrap, **{"enable.partition.eof": True})
    got = []
    try:
        c.assign([TopicPartition(OFFSETS_TOPIC, partition, start)])
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                if got and got[-1].offset() >= end - 1:
                    break
                continue
            got.append(m)
            if m.offset() >= end - 1:
                break
    finally:
        c.close()
    return got


def test_the_offsets_formatter_reads_a_groups_commits(broker, topic_name):
    """Offsets committed by a group are read from __consumer_offsets with kafka-console-consumer
    and Kafka's OffsetsMessageFormatter: an OffsetCommit record (key group, topic, partition;
    value version 4, as Kafka 4.1 writes it, with the offset, no leader epoch, empty metadata
    and the commit time) per partition, the later commit of a partition after the earlier
    one."""
    b = broker.bootstrap
    create_topic(b, topic_name, 2)
    group = "ot-" + topic_name
    before = int(time.time() * 1000)
    commit(b, group, {(topic_name, 0): 7, (topic_name, 1): 3})
    commit(b, group, {(topic_name, 0): 9})
    after = int(time.time() * 1000)
    p = group_partition(group, offsets_partitions(b))
    r = tool(CONSOLE_CONSUMER, "--bootstrap-server", b, "--topic", OFFSETS_TOPIC,
             "--partition", p, "--offset", "earliest", "--formatter", OFFSETS_FORMATTER,
             "--timeout-ms", 10000, check=False)
    mine = [rec for rec in json_objects(r.stdout) if rec["key"]["data"].get("group") == group]
    assert [(m["key"]["type"], m["key"]["data"]["topic"], m["key"]["data"]["partition"],
             m["value"]["version"], m["value"]["data"]["offset"]) for m in mine] == [
        (1, topic_name, 0, 4, 7), (1, topic_name, 1, 4, 3), (1, topic_name, 0, 4, 9)], (
        f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    for m in mine:
        assert m["value"]["data"]["leaderEpoch"] == -1
        assert m["value"]["data"]["metadata"] == ""
        assert before <= m["value"]["data"]["commitTimestamp"] <= after


def test_offsets_topic_list_offsets_and_later_commits(broker, topic_name):
    """ListOffsets of the group's partition of __consumer_offsets: its high watermark grows with
    each commit; a reader from the high watermark before a commit reads that commit (as an
    OffsetCommit record) next; the commit is found by its timestamp."""
    b = broker.bootstrap
    create_topic(b, topic_name, 1)
    group = "ot-" + topic_name
    commit(b, group, {(topic_name, 0): 5})
    p = group_partition(group, offsets_partitions(b))
    c = consumer(b)
    try:
        tp = TopicPartition(OFFSETS_TOPIC, p)
        low, high = c.get_watermark_offsets(tp, timeout=10)
        assert 0 <= low < high, (low, high)
        t0 = int(time.time() * 1000)
        time.sleep(0.01)
        commit(b, group, {(topic_name, 0): 6})
        low2, high2 = c.get_watermark_offsets(tp, timeout=10)
        assert low2 == low and high2 > high, (low, high, low2, high2)
        [found] = c.offsets_for_times([TopicPartition(OFFSETS_TOPIC, p, t0)], timeout=10)
        assert found.error is None and high <= found.offset < high2, (found, high, high2)
    finally:
        c.close()
    records = read_partition(b, p, high, high2)
    commits = [decode_commit(m.key(), m.value()) for m in records]
    assert (group, topic_name, 0, 4, 6) in commits, commits
    assert all(m.offset() >= high for m in records)


def test_nobody_produces_to_the_offsets_topic(broker, topic_name):
    """A Produce to __consumer_offsets is refused with INVALID_TOPIC_EXCEPTION (Kafka: "Cannot
    append to internal topic")."""
    b = broker.bootstrap
    create_topic(b, topic_name, 1)
    commit(b, "ot-" + topic_name, {(topic_name, 0): 1})
    offsets_partitions(b)
    p = producer(b, **{"message.timeout.ms": 10000, "retries": 0})
    errors = []
    p.produce(OFFSETS_TOPIC, value=b"x", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert len(errors) == 1 and errors[0] is not None, errors
    assert errors[0].code() == KafkaError.TOPIC_EXCEPTION, errors[0]


def test_a_consumer_protocol_regex_is_assigned_the_offsets_topic(java_classpath, broker,
                                                                 topic_name):
    """A consumer with group.protocol=consumer subscribed to the regex __consumer_off.* (a
    SubscriptionPattern: the broker resolves it) is assigned every partition of
    __consumer_offsets and reads another group's commit from it (silt.it.OffsetsTopicScenarios
    regex)."""
    cmd = ["java", *JVM_OPTS, "-cp", java_classpath, "silt.it.OffsetsTopicScenarios",
           broker.bootstrap, "regex", topic_name]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=110)
    assert r.returncode == 0, r.stdout


def test_the_group_metadata_formatter_reads_a_classic_groups_state(broker, topic_name):
    """A classic group's state is read from __consumer_offsets with Kafka's
    GroupMetadataMessageFormatter: once it is Stable, a GroupMetadata record (value version 3)
    with its protocol type, generation, chosen protocol, leader and its member (client id,
    session and rebalance timeouts); once its member has left, one with no members."""
    b = broker.bootstrap
    create_topic(b, topic_name, 1)
    group = "otg-" + topic_name
    c = consumer(b, **{"group.id": group, "client.id": "otg-client",
                       "session.timeout.ms": 10000, "max.poll.interval.ms": 20000,
                       "partition.assignment.strategy": "range"})
    try:
        c.subscribe([topic_name])
        deadline = time.time() + 30
        while not c.assignment():
            assert time.time() < deadline, "no assignment"
            c.poll(0.2)
    finally:
        c.close()
    p = group_partition(group, offsets_partitions(b))
    deadline = time.time() + 30
    while True:
        r = tool(CONSOLE_CONSUMER, "--bootstrap-server", b, "--topic", OFFSETS_TOPIC,
                 "--partition", p, "--offset", "earliest", "--formatter", GROUP_FORMATTER,
                 "--timeout-ms", 5000, check=False)
        mine = [rec for rec in json_objects(r.stdout)
                if rec["key"]["type"] == 2 and rec["key"]["data"]["group"] == group]
        if mine and mine[-1]["value"] and not mine[-1]["value"]["data"]["members"]:
            break
        assert time.time() < deadline, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    stable = [m["value"] for m in mine if m["value"] and m["value"]["data"]["members"]]
    assert stable, mine
    v = stable[-1]
    assert v["version"] == 3
    assert (v["data"]["protocolType"], v["data"]["protocol"]) == ("consumer", "range"), v
    assert v["data"]["generation"] >= 1
    [m] = v["data"]["members"]
    assert v["data"]["leader"] == m["memberId"] and m["memberId"].startswith("otg-client-"), v
    assert (m["clientId"], m["sessionTimeout"], m["rebalanceTimeout"]) == (
        "otg-client", 10000, 20000), m
    assert m["subscription"] and m["assignment"], m
