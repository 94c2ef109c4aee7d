"""The three-broker cluster of scripts/cluster.sh (PostgreSQL, radosgw, brokers in two racks,
default timeouts) under moves, kills and joins, with clients nobody on the team wrote.

Kafka's Java VerifiableProducer and a librdkafka producer (both idempotent, acks=all) write
to every partition, and Kafka's Java VerifiableConsumer and a librdkafka consumer read in
groups, with reads near the client on (KIP-392: a broker of the consumer's rack may serve it)
for the Java consumer, in a rack of its own. (The librdkafka consumer names no rack: librdkafka
2.0, Debian bookworm's, keeps a preferred read replica that was killed for up to five minutes,
longer than the test waits; test_rack_reads covers it, a reader stopping cleanly included.)
Meanwhile, SILT_CLUSTER_ROUNDS times each (default 10): a partition is moved to another
broker; a broker is killed with SIGKILL and started again; a fourth broker joins, gets its
share, and stops cleanly. A checker then proves that every acknowledged record is in the log
once, at the offset it was acknowledged at, that offsets are dense and each producer's records
keep their order in every partition, and that both groups consumed every acknowledged record.
The median and worst time of each kind of event are printed (docs/benchmarks.md)."""
import collections
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from conftest import KAFKA_REF, POSTGRES_URI, SILT_BIN, free_port, selected_brokers
from test_failover import LoadProducer
from test_membership import partition_leader_epochs, produce_v10
from test_partition_moves import alter_reassignments
from test_record_validation import batch, records
from util import check_acknowledged, create_topic

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "scripts" / "cluster.sh"
ROUNDS = int(os.environ.get("SILT_CLUSTER_ROUNDS", "10"))
PARTITIONS = 6
TOPIC = "chaos"


class Cluster:
    def __init__(self, workdir):
        self.env = dict(os.environ, CLUSTER_DIR=str(workdir), SILT=str(SILT_BIN),
                        BASE_PORT=str(free_port(4)),  # brokers 1-4
                        # Not the S3 server's default ports: other tests may run one.
                        S3_PORT=str(free_port()), S3_MON_PORT=str(free_port()),
                        CLUSTER_SETTINGS="replica.selector.class="
                                         "org.apache.kafka.common.replica.RackAwareReplicaSelector")
        self.base = int(self.env["BASE_PORT"])
        self.workdir = workdir

    def run(self, *args, timeout=120):
        r = subprocess.run([str(CLUSTER), *map(str, args)], env=self.env, capture_output=True,
                           text=True, timeout=timeout)
        assert r.returncode == 0, f"cluster.sh {' '.join(map(str, args))}:\n{r.stderr}"
        return r

    def bootstrap(self, n):
        return f"127.0.0.1:{self.base + n - 1}"

    def all_bootstrap(self):
        return ",".join(self.bootstrap(n) for n in (1, 2, 3))

    def log(self, n):
        p = self.workdir / f"broker-{n}" / "log"
        return p.read_text(errors="replace") if p.exists() else ""


@pytest.fixture
def cluster():
    if "silt" not in selected_brokers():
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")
    if POSTGRES_URI:
        # The cluster keeps its metadata in a PostgreSQL of its own whatever the run uses: the
        # run with SILT_TEST_METADATA=postgresql would only repeat this test.
        pytest.skip("the same as in the run on SQLite")
    # Not under pytest's private temporary directory: PostgreSQL's server user reads it.
    workdir = Path(tempfile.mkdtemp(prefix="silt-cluster-"))
    workdir.chmod(0o755)
    c = Cluster(workdir)
    try:
        c.run("up", timeout=300)
        yield c
    finally:
        subprocess.run([str(CLUSTER), "down"], env=c.env, capture_output=True, timeout=300)
        if not os.environ.get("SILT_KEEP_CLUSTER"):  # set: the directory stays, logs and all
            shutil.rmtree(workdir, ignore_errors=True)


class JavaTool:
    """A Kafka tool in a JVM of its own whose JSON output lines are collected. Both its outputs
    are read as it runs: the client's log on stderr (reconnections, retries) fills a pipe left
    unread within a few minutes of chaos, and the JVM then blocks writing to it."""

    def __init__(self, cls, *args):
        self.proc = subprocess.Popen([str(KAFKA_REF), "tool", cls, *map(str, args)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events = []
        self.stderr = collections.deque(maxlen=400)  # its last lines
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()
        self.err_reader = threading.Thread(target=self.read_stderr, daemon=True)
        self.err_reader.start()

    def read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    self.events.append(json.loads(line))
                except ValueError:
                    pass

    def read_stderr(self):
        for line in self.proc.stderr:
            self.stderr.append(line)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                pytest.fail("a Java tool did not stop within 120 s")
        self.reader.join(30)
        self.err_reader.join(30)
        return "".join(self.stderr)


class RdGroupConsumer:
    def __init__(self, bootstrap):
        self.seen = set()
        self.errors = []
        self.stop_event = threading.Event()
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-rd",
                           "auto.offset.reset": "earliest", "enable.auto.commit": True,
                           "auto.commit.interval.ms": 500})
        self.c.subscribe([TOPIC])
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop_event.is_set():
            m = self.c.poll(0.2)
            if m is None:
                continue
            if m.error():
                self.errors.append(str(m.error()))
                continue
            self.seen.add((m.partition(), m.offset()))
        self.c.close()

    def positions(self):
        """{partition: next offset} of the partitions assigned to the consumer now."""
        try:
            return {tp.partition: tp.offset for tp in self.c.position(self.c.assignment())}
        except Exception as e:  # noqa: BLE001 (a diagnostic only)
            return str(e)

    def stop(self):
        self.stop_event.set()
        self.thread.join(60)


def missed_ranges(missed):
    """{partition: (first, last, count)} of the (partition, offset) pairs missed."""
    out = {}
    for p, o in missed:
        first, last, n = out.get(p, (o, o, 0))
        out[p] = (min(first, o), max(last, o), n + 1)
    return dict(sorted(out.items()))


def leaders(bootstrap):
    """{partition: (error, leader)}; empty while the broker does not know the topic yet."""
    known = partition_leader_epochs(bootstrap, TOPIC) or {}
    return {p: (err, node) for p, (err, node, _) in known.items()}


def wait_has_partition(c, node, timeout=20):
    """Until broker 1 names `node` the leader of some partition (a joining broker's share)."""
    deadline = time.time() + timeout
    while node not in {n for _, n in leaders(c.bootstrap(1)).values()}:
        assert time.time() < deadline, f"broker {node} got no partition"
        time.sleep(0.05)


def wait_served(c, via, since, timeout=60, partitions=range(PARTITIONS)):
    """Until each partition's leader takes a produce; seconds since `since`."""
    pending = set(partitions)
    deadline = time.time() + timeout
    while pending:
        assert time.time() < deadline, f"partitions {sorted(pending)} not served"
        try:
            now = leaders(c.bootstrap(via))
        except OSError:
            time.sleep(0.05)
            continue
        for p in sorted(pending):
            err, node = now.get(p, (-1, -1))
            if err != 0 or node < 1:
                continue
            try:
                if produce_v10(c.bootstrap(node), TOPIC, p, batch(records(1), 1))[0] == 0:
                    pending.discard(p)
            except OSError:
                pass
        time.sleep(0.02)
    return time.time() - since


# Ten rounds take about two minutes, servers included (the suite's bound is 120 s a test).
@pytest.mark.timeout(900)
def test_moves_kills_and_joins_lose_and_duplicate_nothing(cluster, tmp_path):
    c = cluster
    create_topic(c.all_bootstrap(), TOPIC, partitions=PARTITIONS)
    wait_served(c, 1, time.time())
    config = tmp_path / "producer.properties"
    config.write_text("enable.idempotence=true\nacks=all\nretries=2147483647\n"
                      "delivery.timeout.ms=300000\nretry.backoff.ms=50\n"
                      "reconnect.backoff.max.ms=500\n")
    java_producer = JavaTool("org.apache.kafka.tools.VerifiableProducer", "--topic", TOPIC,
                             "--bootstrap-server", c.all_bootstrap(), "--throughput", 500,
                             "--value-prefix", 1, "--producer.config", config)
    consumer_config = tmp_path / "consumer.properties"
    consumer_config.write_text("client.rack=zone-a\n")
    java_consumer = JavaTool("org.apache.kafka.tools.VerifiableConsumer", "--topic", TOPIC,
                             "--group-id", "chaos-java", "--bootstrap-server",
                             c.all_bootstrap(), "--reset-policy", "earliest", "--verbose",
                             "--consumer.config", consumer_config)
    rd_producer = LoadProducer(c.all_bootstrap(), TOPIC, PARTITIONS, prefix=b"2.", every=10,
                               pause=0.02)
    rd_consumer = RdGroupConsumer(c.all_bootstrap())
    try:
        check_under_chaos(c, java_producer, java_consumer, rd_producer, rd_consumer)
    except BaseException:
        # The brokers' side of a failure, shown with it (the cluster's directory is removed).
        for n in (1, 2, 3, 4):
            tail = "\n".join(c.log(n).splitlines()[-60:])
            print(f"--- broker {n}, the end of its log ---\n{tail}")
        raise
    finally:
        # Whatever failed, no client outlives the test.
        for stop in (rd_producer.stop_event.set, rd_consumer.stop_event.set, java_producer.stop,
                     java_consumer.stop):
            try:
                stop()
            except Exception:  # noqa: BLE001 (the first failure is the one reported)
                pass


def check_under_chaos(c, java_producer, java_consumer, rd_producer, rd_consumer):
    moves, failovers, joins = [], [], []
    rng = random.Random(int(os.environ.get("SILT_CLUSTER_SEED", "12")))
    try:
        time.sleep(3)
        for r in range(ROUNDS):
            print(f"{time.strftime('%H:%M:%S', time.gmtime())} round {r + 1}")
            # (a) A partition moves to another broker.
            now = leaders(c.bootstrap(1))
            p = rng.randrange(PARTITIONS)
            to = rng.choice([n for n in (1, 2, 3) if n != now[p][1]])
            start = time.time()
            top, res = alter_reassignments(c.bootstrap(1), TOPIC, {p: [to]})
            assert top == 0 and res[p][0] == 0, res
            moves.append(wait_served(c, to, start, partitions=[p]))
            time.sleep(0.5)

            # (b) A broker is killed, and started again once its partitions are served.
            dead = rng.choice((1, 2, 3))
            via = 1 if dead != 1 else 2
            killed = time.time()  # (cluster.sh returns once the process is gone)
            c.run("kill", dead)
            failovers.append(wait_served(c, via, killed))
            c.run("start", dead)
            time.sleep(0.5)

            # (c) A fourth broker joins, gets its share, and stops cleanly.
            start = time.time()
            c.run("start", 4)
            wait_has_partition(c, 4)
            joins.append(wait_served(c, 1, start))
            c.run("stop", 4)
            wait_served(c, 1, time.time())
        # librdkafka 2.0 keeps a produce whose connection broke queued for retry on that
        # broker's connection until the broker is up again (confluentinc/librdkafka#1432): one
        # sent to broker 4 as it stopped for the last time would wait out message.timeout.ms.
        # Broker 4 comes back once more, so that such a request is answered and sent on; the
        # checks below begin once it has its share (no partition moving then).
        c.run("start", 4)
        wait_has_partition(c, 4)
        wait_served(c, 1, time.time())
        print(f"{time.strftime('%H:%M:%S', time.gmtime())} rounds done; stopping the producers")
    finally:
        rd_producer.stop()
        producer_err = java_producer.stop()
    acked = list(rd_producer.acked)
    java_acked = [e for e in java_producer.events if e.get("name") == "producer_send_success"]
    # (A send that races the producer's close at the end fails so, unacknowledged.)
    java_errors = [e for e in java_producer.events if e.get("name") == "producer_send_error" and
                   e.get("message") != "Producer closed while send in progress"]
    acked += [(e["partition"], e["offset"], e["value"].encode()) for e in java_acked]
    assert not rd_producer.errors, rd_producer.errors[:5]
    assert not java_errors, java_errors[:5]
    assert len(java_acked) > 1000, producer_err[-3000:]
    assert len(rd_producer.acked) > 1000

    # Every acknowledged record once, where it was acknowledged; offsets dense; each
    # producer's records in order in each partition.
    check_acknowledged(c.all_bootstrap(), TOPIC, PARTITIONS, acked, prefixes=(b"1.", b"2."))

    # Both groups read everything acknowledged (at least once).
    wanted = {(p, o) for p, o, _ in acked}
    deadline = time.time() + 120
    while True:
        java_seen = {(e["partition"], e["offset"]) for e in java_consumer.events
                     if e.get("name") == "record_data"}
        missing = (len(wanted - rd_consumer.seen), len(wanted - java_seen))
        if missing == (0, 0):
            break
        assert time.time() < deadline, (
            f"groups missed records (librdkafka, Java): {missing}; librdkafka missed "
            f"{missed_ranges(wanted - rd_consumer.seen)} at {rd_consumer.positions()}; Java "
            f"missed {missed_ranges(wanted - java_seen)}")
        time.sleep(0.5)
    rd_consumer.stop()
    java_consumer.stop()

    def summary(name, xs):
        return (f"{len(xs)} {name}: median {statistics.median(xs) * 1000:.0f} ms, worst "
                f"{max(xs) * 1000:.0f} ms")
    print(f"3 brokers, {PARTITIONS} partitions; {summary('moves (request to served)', moves)}; "
          f"{summary('kills (SIGKILL to every partition served)', failovers)}; "
          f"{summary('joins (start to every partition served, one on the new broker)', joins)}; "
          f"{len(acked)} records acknowledged (Java {len(java_acked)}, librdkafka "
          f"{len(rd_producer.acked)}), none lost or duplicated")
