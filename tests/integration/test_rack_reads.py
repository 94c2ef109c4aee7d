"""Reads near the client (KIP-392): two brokers in two racks with
replica.selector.class=RackAwareReplicaSelector and a log cache too small to keep what was
produced. A consumer that sets client.rack is sent, for each partition whose owner is in the
other rack, to the broker of its own rack, which reads the partition's data from the object
store; it reads every record once, in order, with librdkafka and with the Java client."""
import re
import signal
import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from test_cli_tools import CONSOLE_CONSUMER, tool
from test_membership import shared_brokers
from test_partition_moves import wait_spread
from util import create_topic, produce_all

PARTITIONS = 4
PER_PARTITION = 2000
VALUE = 1000  # bytes: 8 MB in all, eight times the log cache
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture
def rack_brokers(tmp_path):
    # A log cache too small to keep what the test produces.
    yield from shared_brokers(tmp_path, {"replica.selector.class": SELECTOR,
                                         "log.cache.bytes": str(1 << 20),
                                         "upload.interval.ms": "200"})


def report(b):
    """The report SIGUSR1 makes broker `b` log (its last line names the log cache)."""
    start = b.log.stat().st_size
    b.proc.send_signal(signal.SIGUSR1)
    deadline = time.time() + 10
    while time.time() < deadline:
        with open(b.log, "rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
        if re.search(r"silt: log cache: .*not yet uploaded\n", text):
            return text
        time.sleep(0.05)
    raise AssertionError("no report logged after SIGUSR1")


def near_reads(b):
    """(fetches sent to a broker of the client's rack, partition reads served for another
    broker's partitions) since the broker started."""
    m = re.search(r"reads near the client since start: sent to a broker of the client's "
                  r"rack (\d+), read for partitions other brokers own (\d+)", report(b))
    return (int(m[1]), int(m[2])) if m else (0, 0)


def wait_uploaded(*brokers, timeout=60):
    """Waits until every broker has uploaded what it holds and kept at most the 1 MiB log
    cache: what was produced is read from the object store from then on."""
    deadline = time.time() + timeout
    while True:
        state = []
        for b in brokers:
            m = re.search(r"silt: log cache: (\d+) bytes, (\d+) bytes not yet uploaded", report(b))
            state.append((int(m[1]), int(m[2])))
        if all(waiting == 0 and cached <= 1 << 20 for cached, waiting in state):
            return
        assert time.time() < deadline, f"(cached, not uploaded) bytes per broker: {state}"
        time.sleep(0.2)


def read_from_start(c, topic, partitions, each=None):
    """Reads PER_PARTITION records of each partition from offset 0 with consumer `c`, checking
    that offsets follow each other; calls each(records read so far) before every poll.
    Returns {partition: [values]}."""
    got = {p: [] for p in partitions}
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    deadline = time.time() + 60
    while (read := sum(map(len, got.values()))) < len(got) * PER_PARTITION:
        assert time.time() < deadline, {p: len(v) for p, v in got.items()}
        if each is not None:
            each(read)
        m = c.poll(0.2)
        if m is None:
            continue
        assert m.error() is None, m.error()
        assert m.offset() == len(got[m.partition()]), (m.partition(), m.offset())
        got[m.partition()].append(m.value())
    return got


def produced(bootstrap, topic):
    """Produces PER_PARTITION records to each partition; returns {partition: [values]}."""
    want = {p: [b"%d-%d-" % (p, i) + b"x" * VALUE for i in range(PER_PARTITION)]
            for p in range(PARTITIONS)}
    for p, values in want.items():
        produce_all(bootstrap, topic, [{"value": v, "partition": p} for v in values],
                    acks="all")
    return want


def test_a_consumer_reads_from_a_broker_of_its_own_rack(rack_brokers):
    (a, b), _ = rack_brokers
    topic = "near"
    create_topic(a.bootstrap, topic, partitions=PARTITIONS)
    leaders = wait_spread(a.bootstrap, topic, PARTITIONS, [1, 2])

    # Each partition lists its leader and the broker serving it in the other rack.
    md = AdminClient({"bootstrap.servers": a.bootstrap}).list_topics(topic, timeout=10)
    for p, info in md.topics[topic].partitions.items():
        assert info.leader == leaders[p], (p, info)
        assert sorted(info.replicas) == [1, 2] and info.replicas[0] == leaders[p], (p, info)
        assert sorted(info.isrs) == [1, 2], (p, info)

    want = produced(a.bootstrap, topic)
    wait_uploaded(a, b)  # (every 200 ms), then evicted from the 1 MiB log cache

    # librdkafka in zone-b: the partitions node 1 (zone-a) owns are read through node 2.
    sent_before, _ = near_reads(a)
    _, served_before = near_reads(b)
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "near-b",
                  "client.rack": "zone-b", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "fetch.max.bytes": 1 << 20})
    try:
        got = read_from_start(c, topic, range(PARTITIONS))
    finally:
        c.close()
    assert got == want
    sent, _ = near_reads(a)
    _, served = near_reads(b)
    owned_by_a = sum(1 for n in leaders.values() if n == 1)
    assert sent - sent_before >= owned_by_a, (sent_before, sent)
    assert served - served_before >= owned_by_a, (served_before, served)
    print(f"librdkafka in zone-b: {sent - sent_before} fetches of node 1's partitions sent to "
          f"node 2, which served {served - served_before} reads of them")

    # The Java consumer in zone-a: the partitions node 2 owns are read through node 1.
    sent_before, _ = near_reads(b)
    _, served_before = near_reads(a)
    r = tool(CONSOLE_CONSUMER, "--bootstrap-server", b.bootstrap, "--topic", topic,
             "--from-beginning", "--max-messages", PARTITIONS * PER_PARTITION,
             "--timeout-ms", 60000, "--consumer-property", "client.rack=zone-a",
             "--consumer-property", "group.id=near-a",
             "--property", "print.partition=true", timeout=120)
    read = {p: [] for p in range(PARTITIONS)}
    for line in r.stdout.splitlines():
        m = re.match(r"Partition:(\d+)\s+(.*)$", line)
        assert m, line
        read[int(m[1])].append(m[2].encode())
    assert read == want
    sent, _ = near_reads(b)
    _, served = near_reads(a)
    owned_by_b = PARTITIONS - owned_by_a
    assert sent - sent_before >= owned_by_b, (sent_before, sent)
    assert served - served_before >= owned_by_b, (served_before, served)
    print(f"Java in zone-a: {sent - sent_before} fetches of node 2's partitions sent to node 1, "
          f"which served {served - served_before} reads of them")


def test_a_consumer_read_by_a_stopping_broker_goes_back_to_the_owner(rack_brokers):
    """A broker of the consumer's rack that stops cleanly sends the consumer to the owner before
    it goes: librdkafka 2.0 (Debian bookworm's) leaves a preferred read replica only for a
    redirect, and would wait minutes for one that no longer answers."""
    (a, b), _ = rack_brokers
    topic = "leaving"
    create_topic(a.bootstrap, topic, partitions=PARTITIONS)
    leaders = wait_spread(a.bootstrap, topic, PARTITIONS, [1, 2])
    want = produced(a.bootstrap, topic)
    wait_uploaded(a, b)
    mine = [p for p, n in leaders.items() if n == 1]  # node 1's: read through node 2
    _, served_before = near_reads(b)
    # Small fetches, little read ahead: the consumer is still reading when node 2 stops.
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "leaving-b",
                  "client.rack": "zone-b", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "fetch.max.bytes": 65536, "message.max.bytes": 65536,
                  "max.partition.fetch.bytes": 65536, "queued.max.messages.kbytes": 128})
    stopped = None

    def stop_once_a_quarter_read(read):
        nonlocal stopped, stopping
        if stopped is None and read >= len(mine) * PER_PARTITION // 4:
            _, served = near_reads(b)
            assert served > served_before, "node 2 served none of node 1's partitions"
            # (Stopped from another thread: the consumer keeps polling meanwhile.)
            stopping = threading.Thread(target=b.stop)
            stopping.start()
            stopped = time.time()

    stopping = None
    try:
        got = read_from_start(c, topic, mine, each=stop_once_a_quarter_read)
    finally:
        c.close()
        if stopped is not None:
            stopping.join(60)
    assert got == {p: want[p] for p in mine}
    print(f"the rest read from the owner {time.time() - stopped:.1f} s after node 2 stopped")
