#!/usr/bin/env python3
"""Nothing outlives its topic: a Silt broker's footprint over rounds of creating and deleting
topics.

Usage: /usr/bin/python3 bench/topic_churn.py [options]
  --rounds N              create-and-delete rounds after the warm-up one (default 10)
  --topics N              topics per round (default 200)
  --partitions N          partitions per topic (default 10)
  --records N             records produced to each partition before the delete (default 2)
  --silt-bin PATH         the broker (default build/silt)
  --workdir DIR           its data dir and log (default build/topic-churn)
  --warmups N             create-and-delete rounds before the baseline (default 2)
  --settle-s S            seconds to wait at the end for the deleted topics' objects to go
                          (default 40: they are deleted 30 s after they lose their last range)
  --json PATH             also write the figures as JSON

The broker starts empty with uploads every 100 ms and compaction (which also deletes the
objects nothing references) every 500 ms; one topic of 10 partitions with data stays
throughout. Warm-up rounds (create, produce, delete) come first, so that what the broker
allocates once and keeps for reuse up to a bound (request buffer chunks, the allocator's
per-thread arenas, SQLite's page cache of 2 MiB per connection) is in the baseline;
then the footprint is read: the broker's heap in use (silt_heap_allocated_bytes from its
metrics endpoint, less SQLite's share, silt_metadata_sqlite_memory_bytes: its page caches fill
up to their bound as the metadata file's pages are read) and resident memory (VmRSS), the row
count of every metadata table and the keys of the object store. After N more rounds and the settle time it is read again; the script
prints both, and exits 1 if the heap in use grew by more than 5% and 256 KiB, any row count
by more than 5%, or the object keys by more than 5% (at least one key). The resident memory is
reported, not judged (the figures are in docs/benchmarks.md): it also counts what the
allocator's arenas keep free, high-water marks that move with how the rounds' work fell on
threads.
"""
import argparse
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
TABLES = ["streams", "stream_epochs", "producer_states", "ranges", "objects", "topics",
          "topic_partitions", "topic_configs", "registry_blobs", "group_offsets",
          "consumer_groups"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_bytes(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def heap_sample(metrics_url):
    """The heap in use without what SQLite holds (its page caches, bounded at 2 MiB per
    connection, fill as the metadata file's pages are read, whatever was deleted), and what
    SQLite holds."""
    heap = sqlite = None
    with urllib.request.urlopen(metrics_url, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("silt_heap_allocated_bytes "):
                heap = int(float(line.split()[1]))
            elif line.startswith("silt_metadata_sqlite_memory_bytes "):
                sqlite = int(float(line.split()[1]))
    if heap is None:
        return None, None  # a build without the metric
    return heap - (sqlite or 0), sqlite


def heap_bytes(metrics_url, samples=10):
    """The least of a few samples 100 ms apart (the background thread's uploads and compactions
    hold blocks of megabytes for a moment, which one sample may catch), and SQLite's share."""
    got = []
    for i in range(samples):
        if i:
            time.sleep(0.1)
        got.append(heap_sample(metrics_url))
    if any(h is None for h, _ in got):
        return None, None
    return min(got)


def footprint(pid, metrics_url, data_dir):
    """The broker's heap in use and resident memory, its metadata tables' row counts, its
    object keys."""
    db = sqlite3.connect(f"file:{data_dir / 'metadata.db'}?mode=ro", uri=True, timeout=10)
    try:
        rows = {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        db.close()
    objects = data_dir / "objects"
    keys = sum(len(files) for _, _, files in os.walk(objects)) if objects.exists() else 0
    heap, sqlite = heap_bytes(metrics_url)
    return {"heap_bytes": heap, "sqlite_bytes": sqlite, "rss_bytes": rss_bytes(pid),
            "rows": rows, "object_keys": keys}


def wait_topics(admin, names, present, timeout=120):
    """Waits until Metadata lists every one of `names` (with leaders), or none of them."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        md = admin.list_topics(timeout=20).topics
        if present and all(n in md and md[n].error is None and md[n].partitions and
                           all(p.leader >= 0 for p in md[n].partitions.values())
                           for n in names):
            return
        if not present and not any(n in md for n in names):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topics not {'created' if present else 'deleted'} within {timeout}s")


def create(admin, names, partitions):
    for i in range(0, len(names), 50):
        fs = admin.create_topics([NewTopic(n, partitions, 1) for n in names[i:i + 50]],
                                 operation_timeout=60)
        for f in fs.values():
            f.result(timeout=120)
    wait_topics(admin, names, True)


def produce(bootstrap, names, partitions, records):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True,
                  "message.timeout.ms": 60000, "log_level": 0})
    errors = []
    for n in names:
        for part in range(partitions):
            for i in range(records):
                while True:
                    try:
                        p.produce(n, value=b"v%d" % i, partition=part,
                                  on_delivery=lambda e, m: e and errors.append(e))
                        break
                    except BufferError:
                        p.poll(0.05)
        p.poll(0)
    left = p.flush(120)
    if left or errors:
        raise RuntimeError(f"{left} records not delivered; errors: {errors[:3]}")


def delete(admin, names):
    for i in range(0, len(names), 50):
        for f in admin.delete_topics(names[i:i + 50], operation_timeout=60).values():
            f.result(timeout=120)
    wait_topics(admin, names, False)


def churn(bootstrap, round_no, topics, partitions, records):
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    names = [f"churn-{round_no}-{i}".replace("--", "-w") for i in range(topics)]
    create(admin, names, partitions)
    produce(bootstrap, names, partitions, records)
    delete(admin, names)


def start_broker(silt_bin, workdir, extra=None):
    """Starts Silt on a free port with data under workdir/data; returns (process, bootstrap,
    metrics URL)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    metrics = f"http://127.0.0.1:{free_port()}/metrics"
    overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "data.dir": str(workdir / "data"),
                 "metrics.listener": metrics,
                 "wal.capacity.bytes": str(256 << 20), "upload.interval.ms": "100",
                 "compaction.interval.ms": "500", **(extra or {})}
    cmd = [str(silt_bin)]
    for k, v in overrides.items():
        cmd += ["--override", f"{k}={v}"]
    log = open(workdir / "silt.log", "ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"silt exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"127.0.0.1:{port}", metrics
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("silt did not listen within 60 s")


def grew(before, after):
    """What grew by more than 5% (the heap: and by more than 256 KiB, one-time steps such as a
    hash table's bucket array grown to its high-water mark; object keys: and by at least one
    key), as messages; the resident memory is reported apart."""
    out = []
    if after["heap_bytes"] is None or after["heap_bytes"] > max(before["heap_bytes"] * 1.05,
                                                                before["heap_bytes"] + (256 << 10)):
        out.append(f"heap {before['heap_bytes']} -> {after['heap_bytes']}")
    for t, n in after["rows"].items():
        if n > before["rows"][t] * 1.05:
            out.append(f"table {t}: {before['rows'][t]} -> {n} rows")
    if after["object_keys"] > max(before["object_keys"] * 1.05, before["object_keys"] + 0.5):
        out.append(f"object keys {before['object_keys']} -> {after['object_keys']}")
    return out


def run(silt_bin, workdir, rounds, topics, partitions, records, settle_s, warmups=2, log=print):
    """The measurement; returns {"before", "after", "rounds": [...], "grew": [...]}."""
    proc, bootstrap, metrics = start_broker(silt_bin, workdir)
    data_dir = workdir / "data"
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        create(admin, ["churn-keeper"], 10)
        produce(bootstrap, ["churn-keeper"], 10, 20)
        for w in range(warmups):
            churn(bootstrap, -1 - w, topics, partitions, records)
        time.sleep(settle_s)
        before = footprint(proc.pid, metrics, data_dir)
        log(f"baseline: {json.dumps(before)}")
        per_round = []
        for r in range(1, rounds + 1):
            t0 = time.time()
            churn(bootstrap, r, topics, partitions, records)
            per_round.append({"round": r, "seconds": round(time.time() - t0, 1),
                              "heap_bytes": heap_bytes(metrics)[0],
                              "rss_bytes": rss_bytes(proc.pid)})
            log(f"round {r}: {per_round[-1]}")
        time.sleep(settle_s)
        after = footprint(proc.pid, metrics, data_dir)
        log(f"after {rounds} rounds: {json.dumps(after)}")
        produce(bootstrap, ["churn-keeper"], 10, 1)  # still served
        return {"before": before, "after": after, "rounds": per_round,
                "grew": grew(before, after)}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--topics", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--records", type=int, default=2)
    ap.add_argument("--silt-bin", default=str(ROOT / "build" / "silt"))
    ap.add_argument("--workdir", default=str(ROOT / "build" / "topic-churn"))
    ap.add_argument("--warmups", type=int, default=2)
    ap.add_argument("--settle-s", type=float, default=40)
    ap.add_argument("--json")
    a = ap.parse_args()
    workdir = Path(a.workdir)
    subprocess.run(["rm", "-rf", str(workdir)], check=True)
    result = run(Path(a.silt_bin), workdir, a.rounds, a.topics, a.partitions, a.records,
                 a.settle_s, a.warmups)
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2))
    if result["grew"]:
        print("grew by more than 5%: " + "; ".join(result["grew"]))
        sys.exit(1)
    b, a = result["before"]["rss_bytes"], result["after"]["rss_bytes"]
    print(f"heap, rows and object keys back within 5% of the baseline; RSS {b} -> {a} "
          f"({100 * (a - b) / b:+.1f}%)")


if __name__ == "__main__":
    main()
