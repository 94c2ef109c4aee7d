#!/usr/bin/env python3
"""Crash checker: idempotent acks=all producers and a consumer group run against one Silt
broker while it is killed with SIGKILL and restarted at random moments, optionally with its
object store failing for periods (SILT_TEST_STORE_FAULTS). Then it proves that no
acknowledged record was lost, none was written twice, each producer's records kept their
order within a partition, offsets are dense, and the group's committed offsets never went
backwards.

    tests/chaos/run.py [--kills N] [--seed S] [--store-faults SPEC] [--work DIR]

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
sys.path.insert(0, str(ROOT / "tests" / "integration"))
_spec = importlib.util.spec_from_file_location("integration_conftest",
                                               ROOT / "tests" / "integration" / "conftest.py")
conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conftest)

from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 4
PRODUCERS = 2
TOPIC = "chaos"
GROUP = "chaos-group"

PRODUCER = r'''
import signal, sys, time
from confluent_kafka import Producer
bootstrap, topic, partitions, name, ackfile = sys.argv[1:6]
partitions = int(partitions)
out = open(ackfile, "a")
def done(err, msg):
    if err is None:
        out.write("%d %d %s\n" % (msg.partition(), msg.offset(), msg.value().decode()))
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
            c.commit(offsets=[TopicPartition(topic, p, o) for p, o in pos.items()],
                     asynchronous=False)
            out.write(json.dumps({"t": time.time(), "committed": pos}) + "\n")
            out.flush()
        except Exception as e:
            sys.stderr.write("commit failed: %s\n" % e)
c.close()
'''


def committed(bootstrap):
    """The group's committed offsets, {partition: offset} (those it has)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "log_level": 0})
    try:
        got = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in got if tp.offset >= 0}
    finally:
        c.close()


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


def check(acked, log, commits, failures):
    """commits: (time, {partition: offset}) in time order: what the consumer had
    acknowledged as committed, and what the group store said after each restart."""
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
    if lost:
        failures.append(f"{len(lost)} of {len(acked)} acknowledged records lost or moved, "
                        f"first {lost[:3]} (found at {[by_value.get(v) for _, v in lost[:3]]})")
    high = {}
    for _, c in commits:
        for p, o in c.items():
            p = int(p)
            if o < high.get(p, -1):
                failures.append(f"committed offset of partition {p} went back: {o} after "
                                f"{high[p]}")
            high[p] = max(high.get(p, -1), o)


def read_acks(path):
    acks = {}
    if not path.exists():
        return acks
    for line in path.read_text().splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        p, o, v = line.split()
        acks[(int(p), int(o))] = v
    return acks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=20)
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
    # Uploads and compaction often, so that kills land in them too.
    b = conftest.SiltBroker(work / "broker", {"upload.interval.ms": "500",
                                              "compaction.interval.ms": "3000"}, env=env)
    (work / "broker").mkdir(parents=True, exist_ok=True)
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    procs = []
    for i in range(PRODUCERS):
        script = work / "producer.py"
        script.write_text(PRODUCER)
        procs.append(subprocess.Popen(
            [sys.executable, str(script), b.bootstrap, TOPIC, str(PARTITIONS), f"p{i}",
             str(work / f"acks-{i}.txt")], stderr=open(work / f"producer-{i}.err", "w")))
    (work / "consumer.py").write_text(CONSUMER)
    commits_file = work / "commits.jsonl"
    procs.append(subprocess.Popen(
        [sys.executable, str(work / "consumer.py"), b.bootstrap, TOPIC, GROUP, str(commits_file)],
        stderr=open(work / "consumer.err", "w")))
    failures = []
    commits = []
    t0 = time.time()
    restarts = []
    try:
        for k in range(a.kills):
            time.sleep(rng.uniform(a.min_gap, a.max_gap))
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a client died (exit {p.returncode}); see {work}")
            b.kill()
            t = time.time()
            b.start(timeout=120)
            restarts.append(time.time() - t)
            commits.append((time.time(), committed(b.bootstrap)))
            print(f"kill {k + 1}/{a.kills}: back in {restarts[-1]:.2f} s", flush=True)
        time.sleep(3)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(150)
            except subprocess.TimeoutExpired:
                p.kill()
    acked = {}
    for i in range(PRODUCERS):
        for key, v in read_acks(work / f"acks-{i}.txt").items():
            if key in acked and acked[key] != v:
                failures.append(f"offset {key} acknowledged for {acked[key]} and {v}")
            acked[key] = v
    if commits_file.exists():
        for line in commits_file.read_text().splitlines():
            if line.endswith("}"):
                c = json.loads(line)
                commits.append((c["t"], c["committed"]))
    commits.append((time.time(), committed(b.bootstrap)))
    commits.sort(key=lambda c: c[0])
    log = read_log(b.bootstrap)
    check(acked, log, commits, failures)
    code = b.stop()
    if code != 0:
        failures.append(f"the broker exited with {code} on SIGTERM")
    summary = {"kills": a.kills, "seconds": round(time.time() - t0, 1), "acknowledged": len(acked),
               "records": sum(len(rows) for _, rows in log.values()),
               "restart_s_median": sorted(restarts)[len(restarts) // 2] if restarts else None,
               "restart_s_max": max(restarts) if restarts else None,
               "store_faults": a.store_faults or None, "failures": failures[:20]}
    print(json.dumps(summary), flush=True)
    if not failures and not a.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
