#!/usr/bin/env python3
"""Crash checker: idempotent acks=all producers and a consumer group run against one Silt
broker while it is killed with SIGKILL and restarted at random moments, optionally with its
object store failing for periods (SILT_TEST_STORE_FAULTS). Then it proves that no
acknowledged record was lost, none was written twice, each producer's records kept their
order within a partition, offsets are dense, and the group's committed offsets never went
backwards.

With --cluster, the same clients run against the three-broker cluster of scripts/cluster.sh
(PostgreSQL, radosgw, two racks): at random moments a random broker is killed with SIGKILL
(its WAL taken over by a survivor) and started again after a random pause, and partitions
are moved to random live brokers, some while a broker is down.

    tests/chaos/run.py [--kills N] [--cluster] [--seed S] [--store-faults SPEC] [--work DIR]

SPEC as for SILT_TEST_STORE_FAULTS, e.g. "error=0.3,timeout=0.1,slow=0.2,delay_ms=200,
on_ms=2000,off_ms=3000". Prints a JSON summary; exits 1 when a check fails.
"""
import argparse
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The brokers run in directories of their own: a relative SILT_BIN is taken from here.
os.environ["SILT_BIN"] = os.path.abspath(os.environ.get("SILT_BIN", ROOT / "build" / "silt"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
_spec = importlib.util.spec_from_file_location("integration_conftest",
                                               ROOT / "tests" / "integration" / "conftest.py")
conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conftest)

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from test_partition_moves import alter_reassignments  # noqa: E402

PARTITIONS = 4
PRODUCERS = 2
TOPIC = "chaos"
GROUP = "chaos-group"
# Retriable in Kafka's protocol, though librdkafka 2.0 does not flag them so.
RETRIABLE = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
             KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._TIMED_OUT,
             KafkaError._TRANSPORT}

PRODUCER = r'''
import signal, sys, time
from confluent_kafka import Producer
bootstrap, topic, partitions, name, ackfile = sys.argv[1:6]
partitions = int(partitions)
out = open(ackfile, "a")
def done(err, msg):
    if err is None:
        # No offset (-1): acknowledged implicitly, a later batch of the producer having
        # succeeded while this one's answer was an error.
        o = msg.offset()
        out.write("%d %d %s\n" % (msg.partition(), -1 if o is None or o < 0 else o,
                                   msg.value().decode()))
        out.flush()
    else:
        sys.stderr.write("delivery failed: %s\n" % err)
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
              "linger.ms": 5, "message.timeout.ms": 300000, "log_level": 0,
              "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500})
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
i = 0
while not stop:
    try:
        p.produce(topic, value=("%s-%09d" % (name, i)).encode(), partition=i % partitions,
                  on_delivery=done)
        i += 1
    except BufferError:
        p.poll(0.05)
    p.poll(0.002 if i % 10 == 0 else 0)
p.flush(120)
'''

CONSUMER = r'''
import json, signal, sys, time
from confluent_kafka import Consumer, TopicPartition
bootstrap, topic, group, commitfile = sys.argv[1:5]
out = open(commitfile, "a")
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "log_level": 0, "session.timeout.ms": 10000,
              "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500})
c.subscribe([topic])
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
pos = {}
last = time.time()
while not stop:
    m = c.poll(0.2)
    if m is not None and not m.error():
        pos[m.partition()] = m.offset() + 1
    if pos and time.time() - last > 0.5:
        last = time.time()
        try:
            t0 = time.time()
            c.commit(offsets=[TopicPartition(topic, p, o) for p, o in pos.items()],
                     asynchronous=False)
            out.write(json.dumps({"t0": t0, "t": time.time(), "committed": pos}) + "\n")
            out.flush()
        except Exception as e:
            sys.stderr.write("commit failed: %s\n" % e)
c.close()
'''

COMMITTED_WAITS = []  # seconds each read of the committed offsets took, retries included


def committed(bootstrap, timeout=60):
    """The group's committed offsets, {partition: offset} (those it has). Retriable errors
    (the coordinator moving while brokers come and go) are retried, as Kafka's clients do."""
    start = time.time()
    deadline = start + timeout
    while True:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "log_level": 0})
        try:
            got = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
            COMMITTED_WAITS.append(time.time() - start)
            return {tp.partition: tp.offset for tp in got if tp.offset >= 0}
        except KafkaException as e:
            retriable = e.args[0].retriable() or e.args[0].code() in RETRIABLE
            if not retriable or time.time() > deadline:
                raise
            time.sleep(0.2)
        finally:
            c.close()


class Single:
    """One broker, killed and restarted at once."""

    def __init__(self, work, env):
        # Uploads and compaction often, so that kills land in them too.
        self.b = conftest.SiltBroker(work / "broker", {"upload.interval.ms": "500",
                                                       "compaction.interval.ms": "3000"},
                                     env=env)
        (work / "broker").mkdir(parents=True, exist_ok=True)
        self.bootstrap = self.b.bootstrap
        self.moves = self.refused_moves = 0
        self.b.start()

    def chaos(self, rng):
        """Kills the broker and starts it again: (seconds until it listens, what was done)."""
        self.b.kill()
        t = time.time()
        self.b.start(timeout=120)
        back = time.time() - t
        return back, f"back in {back:.2f} s"

    def stop(self):
        return self.b.stop()

    def clean(self):
        pass


class Cluster:
    """The three brokers of scripts/cluster.sh: one killed at a time, partitions moved."""

    def __init__(self, work, env):
        port = conftest.free_port(3)
        # Not under the work directory, which may be private: PostgreSQL's server user reads it.
        self.dir = Path(tempfile.mkdtemp(prefix="silt-chaos-cluster-"))
        self.dir.chmod(0o755)
        (work / "cluster").write_text(f"{self.dir}\n")
        self.env = dict(os.environ, **(env or {}), CLUSTER_DIR=str(self.dir),
                        SILT=os.environ["SILT_BIN"],
                        BASE_PORT=str(port),
                        # Not the S3 server's default ports: other tests may run one.
                        S3_PORT=str(conftest.free_port()), S3_MON_PORT=str(conftest.free_port()),
                        CLUSTER_SETTINGS="upload.interval.ms=500 compaction.interval.ms=3000")
        self.ports = [port, port + 1, port + 2]
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        self.moves = self.refused_moves = 0
        try:
            self.run("up", timeout=300)
        except BaseException:
            self.stop()
            raise

    def run(self, *args, timeout=120):
        r = subprocess.run([str(ROOT / "scripts" / "cluster.sh"), *map(str, args)], env=self.env,
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"cluster.sh {' '.join(map(str, args))}: {r.stderr[-2000:]}")

    def move(self, rng, live):
        """Moves a random partition to a random live broker, through a random live one."""
        p, to = rng.randrange(PARTITIONS), rng.choice(live)
        try:
            top, res = alter_reassignments(f"127.0.0.1:{self.ports[rng.choice(live) - 1]}", TOPIC,
                                           {p: [to]})
        except (OSError, AssertionError):
            top, res = -1, {}
        if top == 0 and res.get(p, (-1,))[0] == 0:
            self.moves += 1
            return f"partition {p} to broker {to}"
        # Refused while the cluster changes (e.g. the controller was the broker killed): as
        # Kafka does; the checker only asks that nothing acknowledged is lost.
        self.refused_moves += 1
        return f"move of partition {p} refused ({top}, {res.get(p)})"

    def chaos(self, rng):
        """A round: (seconds the killed broker was down, what was done)."""
        dead = rng.choice((1, 2, 3))
        live = [n for n in (1, 2, 3) if n != dead]
        done = []
        if rng.random() < 0.3:
            done.append(self.move(rng, [1, 2, 3]))
        self.run("kill", dead)
        t = time.time()
        if rng.random() < 0.5:
            time.sleep(rng.uniform(0, 2))
            done.append(self.move(rng, live))
        time.sleep(rng.uniform(0, 3))
        self.run("start", dead)
        down = time.time() - t
        if rng.random() < 0.5:
            done.append(self.move(rng, [1, 2, 3]))
        return down, f"broker {dead} down {down:.2f} s; " + "; ".join(done)

    def stop(self):
        """Stops the brokers and the servers; the brokers' logs stay in self.dir."""
        try:
            self.run("down", timeout=300)
            return 0
        except RuntimeError:
            return 1

    def clean(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def read_log(bootstrap):
    """Every record of the topic, {partition: [(offset, value)]}."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-reader",
                  "enable.auto.commit": False, "log_level": 0})
    out = {}
    try:
        for p in range(PARTITIONS):
            lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
            c.assign([TopicPartition(TOPIC, p, lo)])
            rows = []
            deadline = time.time() + 120
            while (not rows or rows[-1][0] < hi - 1) and hi > lo:
                if time.time() > deadline:
                    raise RuntimeError(f"partition {p}: read {len(rows)} of {hi - lo}")
                for m in c.consume(1000, 1.0):
                    if not m.error():
                        rows.append((m.offset(), m.value().decode()))
            out[p] = (lo, rows)
    finally:
        c.close()
    return out


def check(acked, log, commits, failures, implicit=()):
    """acked: {(partition, offset): value}; implicit: [(partition, value)] acknowledged without
    an offset, which must be in that partition. commits: (start, end, {partition: offset}):
    what the consumer had acknowledged as committed, and what the group store answered after
    each restart, each with the time its request was sent and the time its answer came. Each
    must be at least what every one that ended before it started said."""
    by_value = {}
    for p, (lo, rows) in log.items():
        offsets = [o for o, _ in rows]
        if offsets != list(range(lo, lo + len(rows))):
            failures.append(f"partition {p}: offsets not dense from {lo}")
        last_seq = {}
        for o, v in rows:
            if v in by_value:
                failures.append(f"{v} written twice: {by_value[v]} and {(p, o)}")
            by_value[v] = (p, o)
            name, seq = v.rsplit("-", 1)
            if int(seq) <= last_seq.get(name, -1):
                failures.append(f"partition {p}: {v} at {o} after {name}-{last_seq[name]:09d}")
            last_seq[name] = int(seq)
    lost = [(k, v) for k, v in acked.items() if by_value.get(v) != k]
    lost += [((p, None), v) for p, v in implicit if by_value.get(v, (None,))[0] != p]
    if lost:
        failures.append(f"{len(lost)} of {len(acked)} acknowledged records lost or moved, "
                        f"first {lost[:3]} (found at {[by_value.get(v) for _, v in lost[:3]]})")
    by_end = sorted(commits, key=lambda c: c[1])
    high, i = {}, 0  # the highest offset of each partition among those ended so far
    for start, end, c in sorted(commits, key=lambda c: c[0]):
        while i < len(by_end) and by_end[i][1] < start:
            for p, o in by_end[i][2].items():
                p = int(p)
                if o > high.get(p, (-1,))[0]:
                    high[p] = (o, by_end[i][1])
            i += 1
        for p, o in c.items():
            p = int(p)
            if o < high.get(p, (-1,))[0]:
                failures.append(f"committed offset of partition {p} went back: {o} (asked at "
                                f"{start:.3f}) after {high[p][0]} (answered at {high[p][1]:.3f})")


def read_acks(path):
    """[(partition, offset, value)] of a producer's acknowledgements (offset -1: implicit)."""
    acks = []
    if not path.exists():
        return acks
    for line in path.read_text().splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        p, o, v = line.split()
        acks.append((int(p), int(o), v))
    return acks


def run(a, rng, work, target):
    """Clients, chaos and the checks; returns (summary fields, failures)."""
    admin = AdminClient({"bootstrap.servers": target.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    procs = []
    for i in range(PRODUCERS):
        script = work / "producer.py"
        script.write_text(PRODUCER)
        procs.append(subprocess.Popen(
            [sys.executable, str(script), target.bootstrap, TOPIC, str(PARTITIONS), f"p{i}",
             str(work / f"acks-{i}.txt")], stderr=open(work / f"producer-{i}.err", "w")))
    (work / "consumer.py").write_text(CONSUMER)
    commits_file = work / "commits.jsonl"
    procs.append(subprocess.Popen(
        [sys.executable, str(work / "consumer.py"), target.bootstrap, TOPIC, GROUP,
         str(commits_file)], stderr=open(work / "consumer.err", "w")))
    failures = []
    commits = []
    restarts = []
    try:
        for k in range(a.kills):
            time.sleep(rng.uniform(a.min_gap, a.max_gap))
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a client died (exit {p.returncode}); see {work}")
            seconds, what = target.chaos(rng)
            restarts.append(seconds)
            t = time.time()
            got = committed(target.bootstrap)
            commits.append((t, time.time(), got))
            print(f"kill {k + 1}/{a.kills}: {what}", flush=True)
        time.sleep(3)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(150)
            except subprocess.TimeoutExpired:
                p.kill()
    acked, implicit = {}, []
    for i in range(PRODUCERS):
        for p, o, v in read_acks(work / f"acks-{i}.txt"):
            if o < 0:
                implicit.append((p, v))
                continue
            key = (p, o)
            if key in acked and acked[key] != v:
                failures.append(f"offset {key} acknowledged for {acked[key]} and {v}")
            acked[key] = v
    if commits_file.exists():
        for line in commits_file.read_text().splitlines():
            if line.endswith("}"):
                c = json.loads(line)
                commits.append((c["t0"], c["t"], c["committed"]))
    t = time.time()
    got = committed(target.bootstrap)
    commits.append((t, time.time(), got))
    log = read_log(target.bootstrap)
    check(acked, log, commits, failures, implicit)
    return {"acknowledged": len(acked) + len(implicit),
            "records": sum(len(rows) for _, rows in log.values()),
            "restart_s_median": sorted(restarts)[len(restarts) // 2] if restarts else None,
            "restart_s_max": max(restarts) if restarts else None}, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--cluster", action="store_true",
                    help="three brokers (scripts/cluster.sh): kills and partition moves")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--store-faults", default="")
    ap.add_argument("--min-gap", type=float, default=0.5, help="seconds between kills, least")
    ap.add_argument("--max-gap", type=float, default=4.0, help="seconds between kills, most")
    ap.add_argument("--work", help="directory for the broker and the logs (default: a temp one)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    work = Path(a.work or tempfile.mkdtemp(prefix="silt-chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {"SILT_TEST_STORE_FAULTS": a.store_faults} if a.store_faults else None
    t0 = time.time()
    target = Cluster(work, env) if a.cluster else Single(work, env)
    try:
        fields, failures = run(a, rng, work, target)
    finally:
        code = target.stop()
    if code != 0:
        failures.append(f"a broker exited with {code} on SIGTERM")
    summary = {"kills": a.kills, "cluster": a.cluster, "moves": target.moves,
               "moves_refused": target.refused_moves, "seconds": round(time.time() - t0, 1),
               **fields, "committed_read_s_max": round(max(COMMITTED_WAITS, default=0), 2),
               "store_faults": a.store_faults or None, "failures": failures[:20]}
    print(json.dumps(summary), flush=True)
    if not failures:
        target.clean()
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
