#!/usr/bin/env python3
"""Do offset commits slow produce? Kafka's ProducerPerformance against Silt, alone and while a
consumer commits the offsets of 1,000 partitions every 100 ms.

Usage: /usr/bin/python3 bench/offset_commits.py [options]
  --silt-bin PATH             the Silt broker (default build/silt; copy it elsewhere first if
                              it may be rebuilt during the run)
  --silt-override K=V         a setting for Silt (repeatable), passed as --override K=V
  --metadata-uri URI          Silt's metadata store (metadata.store.uri), e.g.
                              postgresql://silt@127.0.0.1:5432/bench (default: SQLite in the
                              data dir); the database must be empty or hold no other broker's
                              state (a fresh one per run)
  --workdir DIR               data dir, logs and results.json (default build/offset-commits);
                              must be on a real file system (Silt's WAL uses O_DIRECT)
  --out FILE                  the JSON results (default WORKDIR/results.json)
  --records N                 records per measured produce phase (default 4000000, about 15 s
                              on the idle 2-core development machine)
  --record-size B             record size in bytes (default 1024)
  --warmup-records N          records sent by the same producer JVM before the first phase,
                              not measured (default: a quarter of --records)
  --repetitions N             pairs of phases, alternated: base, commits, base, commits...
                              (default 3)
  --commit-partitions N       partitions of the topic `commits`, all committed in every
                              OffsetCommit request (default 1000)
  --perf-partitions N         partitions of the topic `perf` (default 10)
  --commit-interval-ms MS     the committer's schedule (default 100)
  --pause-s S                 idle seconds between phases (default 5)
  --alone-s S                 then the committer alone, without the producer, for S seconds
                              (default 10; 0: not): the broker's CPU per commit
  --alone-committers N        committers in that last phase, each in a group of its own on
                              the same schedule (default 1): with several, commits that reach
                              the offset writer together share one metadata transaction
  --phase-timeout-s S         bound of one phase's ProducerPerformance (default 600)
  --keep-data                 keep the broker's data dir (default: removed at the end)
  --report-only               print the tables from the JSON results and exit

One Silt broker is started on a free port with an empty data dir (its defaults plus
listeners, data.dir and the settings given), the topics `commits` and `perf` are created with
confluent-kafka's AdminClient (replication factor 1) and awaited in Metadata. One producer
JVM (Kafka's org.apache.kafka.tools.ProducerPerformance, via tests/kafka-reference.sh tool,
acks=all linger.ms=3 batch.size=65536, unthrottled, --records records of --record-size bytes
to `perf`) first sends the warm-up records, then runs one measured ProducerPerformance per
phase, each started when this script says so (so that the JIT's warm-up stays out of every
phase). The phases alternate:
  base     the producer alone;
  commits  the producer while a committer (one confluent-kafka Consumer with a group.id, no
           subscription and no auto-commit, in a thread of this script) commits offsets for
           every partition of `commits` in one OffsetCommit request
           (commit(offsets=[...], asynchronous=False)) at every tick of a fixed schedule
           (t0 + k * interval); the offsets rise by one each round. A commit that overruns
           its slot delays the next, which then starts at once (a start more than 10 ms
           after its tick counts as late); ticks passed entirely are skipped (counted as
           missed). One commit before the first
           phase finds the coordinator and connects, out of the figures.
Per phase: ProducerPerformance's final line (records/s, MB/s, avg/p50/p99/p99.9/max latency);
the broker's CPU (utime+stime, /proc/PID/stat) from just before the phase's go to the end of
its ProducerPerformance (and of the committer's last commit), the same for the producer JVM,
this script (the committer) and, with --metadata-uri, the local processes named postgres, and
the CPU the rest of the machine used meanwhile (other processes: a noisy neighbour shows
there); Silt's own counters from its log, which it writes on SIGUSR1 (sent at both ends of
the phase): its timing of Produce and OffsetCommit requests and the metadata transactions
committed (`silt: store: ... | metadata transactions N`: every transaction of the metadata
store, so the offset writer's and the uploads' together; Silt logs no count of the offset
writer's transactions alone). After the last phase the committed offsets are read back
(OffsetFetch) and checked against the last round.
Output: the Markdown tables on stdout (every phase, then the medians per phase with the
commits/base ratios, then the committer's figures), JSON in --out, logs in WORKDIR
(silt.log, producer.log).
"""
import argparse
import datetime
import json
import os
import queue
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
KREF = REPO / "tests" / "kafka-reference.sh"
sys.path.insert(0, str(HERE))
import broker_stats  # noqa: E402  (free_port, cpu_seconds, FINAL_RE, BROKER_RE, PART_RE)
from many_partitions import (METADATA_TX_RE, PhaseError, SiltBroker,  # noqa: E402
                             git_commit, machine_info, metadata_complete,
                             process_cpu_snapshot, system_busy_s)

from confluent_kafka import Consumer, KafkaException, TopicPartition  # noqa: E402
from confluent_kafka import libversion as rdkafka_version  # noqa: E402
from confluent_kafka import version as client_version  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
COMMIT_TOPIC = "commits"
PERF_TOPIC = "perf"
GROUP = "offset-commits-bench"
PRODUCER_PROPS = ["acks=all", "linger.ms=3", "batch.size=65536"]
# silt: requests: OffsetCommit n=N total p50=A p99=B max=C | handle ... | send ... ms
OFFSET_COMMIT_RE = re.compile(r"silt: requests: OffsetCommit n=(\d+) (.*) ms$", re.M)


def log(msg):
    print(f"== {msg}", file=sys.stderr, flush=True)


def percentile(values, q):
    """The q-th percentile (0-100) of values, nearest rank; None when empty."""
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(q / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


# --- the producer JVM -------------------------------------------------------------------------

PHASES_JAVA = r"""
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Arrays;
import org.apache.kafka.tools.ProducerPerformance;

// Args: WARMUP_RECORDS PHASES PRODUCER_PERFORMANCE_ARGS...
// The warm-up run, then one ProducerPerformance run per phase, each when a line "go" arrives
// on stdin (any other line, or the end of stdin, ends the program).
public class ProducerPerfPhases {
    public static void main(String[] a) throws Exception {
        long warm = Long.parseLong(a[0]);
        int phases = Integer.parseInt(a[1]);
        String[] perf = Arrays.copyOfRange(a, 2, a.length);
        if (warm > 0) {
            String[] w = perf.clone();
            for (int i = 0; i + 1 < w.length; i++) {
                if (w[i].equals("--num-records")) w[i + 1] = Long.toString(warm);
            }
            System.out.println("warm-up: " + warm + " records (not measured)");
            ProducerPerformance.main(w);
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (int i = 1; i <= phases; i++) {
            System.out.println("ready " + i);
            System.out.flush();
            String line = in.readLine();
            if (line == null || !line.equals("go")) {
                System.out.println("stopped");
                return;
            }
            System.out.println("measured run " + i + ":");
            System.out.flush();
            ProducerPerformance.main(perf);
            System.out.println("phase " + i + " done");
            System.out.flush();
        }
    }
}
"""


class ProducerJvm:
    """The ProducerPerformance JVM: its stdout goes to a log (and, indented, to stderr), and
    its control lines ("ready N", "phase N done") to a queue."""

    def __init__(self, workdir, bootstrap, records, size, warmup, phases):
        src = Path(workdir) / "ProducerPerfPhases.java"
        src.write_text(PHASES_JAVA)
        self.log_path = Path(workdir) / "producer.log"
        self.events = queue.Queue()
        self.lines = []  # every output line, for the final lines of each phase
        self.lock = threading.Lock()
        env = dict(os.environ)
        env.setdefault("KAFKA_TOOL_HEAP_OPTS", "-Xmx512m")
        cmd = [str(KREF), "tool", str(src), str(warmup), str(phases),
               "--topic", PERF_TOPIC, "--num-records", str(records), "--record-size",
               str(size), "--throughput", "-1", "--producer-props",
               f"bootstrap.servers={bootstrap}"] + PRODUCER_PROPS
        self.logf = open(self.log_path, "w")
        # kafka-reference.sh tool execs java: the pid is the JVM's.
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=env, text=True, bufsize=1,
                                     start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    @property
    def pid(self):
        return self.proc.pid

    def _read(self):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            with self.lock:
                self.lines.append(line)
            self.logf.write(line + "\n")
            self.logf.flush()
            print("   " + line, file=sys.stderr, flush=True)
            if line.startswith("ready ") or (line.startswith("phase ") and line.endswith(" done")):
                self.events.put(line)
        self.events.put(None)  # end of output

    def wait_for(self, what, timeout):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PhaseError(f"the producer JVM did not print '{what}' within "
                                 f"{timeout:.0f}s (log: {self.log_path})")
            try:
                ev = self.events.get(timeout=left)
            except queue.Empty:
                continue
            if ev is None:
                rc = self.proc.wait()
                raise PhaseError(f"the producer JVM exited with {rc} before '{what}' "
                                 f"(log: {self.log_path})")
            if ev == what:
                return

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def mark(self):
        with self.lock:
            return len(self.lines)

    def text_since(self, mark):
        with self.lock:
            return "\n".join(self.lines[mark:])

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # the end of stdin ends it between phases
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(15)
        self.reader.join(5)
        self.logf.close()


# --- the committer ----------------------------------------------------------------------------

class Committer:
    """One Consumer with a group.id, no subscription: commits offsets for every partition of
    the topic in one request per tick, from a thread of its own."""

    def __init__(self, bootstrap, topic, partitions, interval_s, group=GROUP):
        self.topic = topic
        self.partitions = partitions
        self.interval = interval_s
        self.round = 0
        self.client_errors = []
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "enable.auto.offset.store": False, "log_level": 3,
            "error_cb": lambda e: self.client_errors.append(e.str())})
        self.thread = None
        self.stopping = threading.Event()
        self.stats = None

    def offsets(self):
        return [TopicPartition(self.topic, p, self.round) for p in range(self.partitions)]

    def commit_once(self, timeout=60):
        """One commit, out of the figures: finds the coordinator, connects."""
        self.round += 1
        deadline = time.monotonic() + timeout
        while True:
            try:
                res = self.consumer.commit(offsets=self.offsets(), asynchronous=False)
                bad = [tp for tp in res if tp.error is not None]
                if not bad:
                    return
                err = f"{len(bad)} partition(s) failed, first: {bad[0].error.str()}"
            except KafkaException as e:
                err = str(e)
            if time.monotonic() > deadline:
                raise PhaseError(f"the committer's first commit failed: {err}")
            time.sleep(0.5)

    def start(self):
        self.stopping.clear()
        self.stats = {"latencies_ms": [], "lateness_ms": [], "late": 0, "missed_ticks": 0,
                      "failed_commits": 0, "failed_partitions": 0, "errors": [],
                      "first_round": self.round + 1}
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self.thread.start()
        started.wait(10)

    def _run(self, started):
        st = self.stats
        tick = time.monotonic()
        st["t0"] = tick
        started.set()
        while not self.stopping.is_set():
            self.round += 1
            offs = self.offsets()  # built before the tick: not in the latency
            now = time.monotonic()
            if now < tick and self.stopping.wait(tick - now):
                self.round -= 1
                break
            start = time.monotonic()
            lateness = start - tick
            st["lateness_ms"].append(lateness * 1000)
            if lateness > 0.010:  # started more than 10 ms after its tick
                st["late"] += 1
            t0 = time.monotonic()
            try:
                res = self.consumer.commit(offsets=offs, asynchronous=False)
                bad = [tp for tp in res if tp.error is not None]
                if bad:
                    st["failed_commits"] += 1
                    st["failed_partitions"] += len(bad)
                    if len(st["errors"]) < 10:
                        st["errors"].append(f"round {self.round}: {len(bad)} partition(s): "
                                            f"{bad[0].error.str()}")
            except KafkaException as e:
                st["failed_commits"] += 1
                if len(st["errors"]) < 10:
                    st["errors"].append(f"round {self.round}: {e}")
            st["latencies_ms"].append((time.monotonic() - t0) * 1000)
            tick += self.interval
            now = time.monotonic()
            if now >= tick + self.interval:  # whole ticks passed during this commit
                skipped = int((now - tick) / self.interval)
                st["missed_ticks"] += skipped
                tick += skipped * self.interval
        st["t1"] = time.monotonic()
        st["last_round"] = self.round

    def stop(self):
        self.stopping.set()
        if self.thread:
            self.thread.join(120)
        st = self.stats
        self.stats = None
        lat = st.pop("latencies_ms")
        lateness = st.pop("lateness_ms")
        elapsed = st.pop("t1") - st.pop("t0")
        ticks = int(elapsed / self.interval) + 1
        return {
            "commits": len(lat), "ticks": ticks, "elapsed_s": elapsed,
            "commits_per_s": len(lat) / elapsed if elapsed > 0 else None,
            "late": st["late"], "missed_ticks": st["missed_ticks"],
            "failed_commits": st["failed_commits"], "failed_partitions": st["failed_partitions"],
            "errors": st["errors"], "first_round": st["first_round"],
            "last_round": st["last_round"],
            "latency_p50_ms": percentile(lat, 50), "latency_p99_ms": percentile(lat, 99),
            "latency_max_ms": max(lat) if lat else None,
            "latency_mean_ms": statistics.fmean(lat) if lat else None,
            "lateness_p99_ms": percentile(lateness, 99),
            "lateness_max_ms": max(lateness) if lateness else None,
            "latencies_ms": [round(x, 2) for x in lat],
        }

    def verify(self, timeout=60):
        """The committed offsets, read back: every partition at the last round?"""
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        got = self.consumer.committed(tps, timeout=timeout)
        wrong = [tp for tp in got if tp.error is not None or tp.offset != self.round]
        return {"expected_offset": self.round, "partitions": len(got),
                "mismatched": len(wrong),
                "first_mismatch": (f"partition {wrong[0].partition}: offset {wrong[0].offset}"
                                   f"{', ' + wrong[0].error.str() if wrong[0].error else ''}"
                                   if wrong else None)}

    def close(self):
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError):
            pass


# --- setup ------------------------------------------------------------------------------------

def create_topics(bootstrap, spec, timeout=120):
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    fs = admin.create_topics([NewTopic(t, n, 1) for t, n in spec.items()],
                             operation_timeout=60, request_timeout=timeout)
    for t, f in fs.items():
        try:
            f.result(timeout=timeout)
        except KafkaException as e:
            raise PhaseError(f"CreateTopics {t}: {e}")
    deadline = time.monotonic() + timeout
    missing = None
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=30)
        missing = next((m for m in (metadata_complete(md, [t], n) for t, n in spec.items())
                        if m), None)
        if missing is None:
            return
        time.sleep(0.2)
    raise PhaseError(f"topics not ready within {timeout}s: {missing}")


def postgres_cpu_s():
    """{(pid, start time): CPU seconds} of the processes named postgres on this machine (a
    PostgreSQL server holding the metadata store elsewhere is not seen)."""
    return {(pid, start): cpu for pid, (name, start, cpu) in process_cpu_snapshot().items()
            if name == "postgres"}


def postgres_delta(before, after):
    """The CPU the postgres processes used between two snapshots (new ones: all of theirs;
    ones that ended in between are missed)."""
    return sum(cpu - before.get(k, 0.0) for k, cpu in after.items())


# --- one phase --------------------------------------------------------------------------------

def timing(match):
    """The key=value percentiles of a Silt request/WAL line: {total_p50_ms: ..., ...}."""
    return broker_stats.broker_timing(match, "requests")


def run_phase(args, broker, jvm, committer, index, kind, size):
    """One measured ProducerPerformance run (phase `index`, 1-based, of kind base|commits)."""
    jvm.wait_for(f"ready {index}", 600)
    res = {"phase": index, "kind": kind, "load_avg_start": open("/proc/loadavg").read().split()[:3]}
    broker.usr1()  # Silt's counters from here
    time.sleep(0.3)
    log_at = len(broker.log_text())
    mark = jvm.mark()
    cpu0 = broker_stats.cpu_seconds(broker.pid)
    jvm0 = broker_stats.cpu_seconds(jvm.pid)
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    pg0 = postgres_cpu_s() if args.metadata_uri else None
    busy0 = system_busy_s()
    t0 = time.monotonic()
    if kind == "commits":
        committer.start()
    jvm.go()
    try:
        jvm.wait_for(f"phase {index} done", args.phase_timeout_s)
    finally:
        # The committer first (a commit in flight ends), so that the CPU, Silt's counters and
        # the commits cover the same time.
        if kind == "commits":
            res["committer"] = committer.stop()
        t1 = time.monotonic()
        cpu1 = broker_stats.cpu_seconds(broker.pid) if broker.alive() else cpu0
        jvm1 = broker_stats.cpu_seconds(jvm.pid) if jvm.proc.poll() is None else jvm0
        self1 = resource.getrusage(resource.RUSAGE_SELF)
        busy1 = system_busy_s()
        pg1 = postgres_cpu_s() if args.metadata_uri else None
        broker.usr1()
    time.sleep(0.3)
    res["load_avg_end"] = open("/proc/loadavg").read().split()[:3]
    elapsed = t1 - t0
    me = (self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime)
    pg = postgres_delta(pg0, pg1) if pg0 is not None else 0.0
    res.update({
        "elapsed_s": elapsed,
        "broker_cpu_s": cpu1 - cpu0,
        "producer_cpu_s": jvm1 - jvm0,
        "script_cpu_s": me,
        "other_cpu_s": max(0.0, (busy1 - busy0) - (cpu1 - cpu0) - (jvm1 - jvm0) - me - pg),
    })
    if pg0 is not None:
        res["postgres_cpu_s"] = pg
    text = jvm.text_since(mark)
    final = None
    for m in broker_stats.FINAL_RE.finditer(text):
        final = m
    res["exceptions_logged"] = text.count("Exception")
    if final is None:
        raise PhaseError(f"no final ProducerPerformance line in phase {index}", res)
    n = int(final.group(1))
    rps = float(final.group(2))
    res.update({
        "records_sent": n, "records_per_sec": rps, "mib_per_sec": rps * size / MiB,
        "avg_ms": float(final.group(4)), "max_ms": float(final.group(5)),
        "p50_ms": int(final.group(6)), "p95_ms": int(final.group(7)),
        "p99_ms": int(final.group(8)), "p999_ms": int(final.group(9)),
    })
    res["broker_cpu_s_per_gib"] = res["broker_cpu_s"] / (n * size / GiB) if n else None
    res["broker_cpu_pct"] = 100.0 * res["broker_cpu_s"] / elapsed
    # Silt's report at the SIGUSR1 after the phase (and any periodic ones in between).
    blog = broker.log_text()[log_at:]
    res["metadata_transactions"] = sum(int(m.group(1)) for m in METADATA_TX_RE.finditer(blog))
    res["metadata_tx_per_s"] = res["metadata_transactions"] / elapsed
    m = list(broker_stats.BROKER_RE.finditer(blog))
    if m:
        res["silt_produce"] = timing(m[-1])
    m = list(OFFSET_COMMIT_RE.finditer(blog))
    if m:
        res["silt_offset_commit"] = timing(m[-1])
    m = list(broker_stats.WAL_RE.finditer(blog))
    if m:
        res["silt_wal"] = broker_stats.broker_timing(m[-1], "writes")
    return res


def run_alone(args, broker, committer):
    """The committer(s) without the producer, for --alone-s seconds: what a commit costs, and
    with several committers how many commits share a metadata transaction."""
    res = {"kind": "commits alone", "load_avg_start": open("/proc/loadavg").read().split()[:3],
           "committers": args.alone_committers}
    others = [Committer(broker.bootstrap, COMMIT_TOPIC, args.commit_partitions,
                        args.commit_interval_ms / 1000.0, f"{GROUP}-{i}")
              for i in range(2, args.alone_committers + 1)]
    for c in others:
        c.commit_once()
    broker.usr1()
    time.sleep(0.3)
    log_at = len(broker.log_text())
    cpu0 = broker_stats.cpu_seconds(broker.pid)
    pg0 = postgres_cpu_s() if args.metadata_uri else None
    busy0 = system_busy_s()
    t0 = time.monotonic()
    committer.start()
    for c in others:
        c.start()
    time.sleep(args.alone_s)
    res["committer"] = committer.stop()
    res["others"] = [c.stop() for c in others]
    elapsed = time.monotonic() - t0
    cpu1 = broker_stats.cpu_seconds(broker.pid)
    busy1 = system_busy_s()
    pg1 = postgres_cpu_s() if args.metadata_uri else None
    broker.usr1()
    time.sleep(0.3)
    res.update({"elapsed_s": elapsed, "broker_cpu_s": cpu1 - cpu0,
                "machine_cpu_s": busy1 - busy0})
    for c in others:
        c.close()
    n = res["committer"]["commits"] + sum(o["commits"] for o in res["others"])
    res["commits"] = n
    res["broker_cpu_ms_per_commit"] = 1000.0 * (cpu1 - cpu0) / n if n else None
    if pg0 is not None:
        res["postgres_cpu_s"] = postgres_delta(pg0, pg1)
        res["postgres_cpu_ms_per_commit"] = 1000.0 * res["postgres_cpu_s"] / n if n else None
    blog = broker.log_text()[log_at:]
    res["metadata_transactions"] = sum(int(m.group(1)) for m in METADATA_TX_RE.finditer(blog))
    m = list(OFFSET_COMMIT_RE.finditer(blog))
    if m:
        res["silt_offset_commit"] = timing(m[-1])
    return res


# --- report -----------------------------------------------------------------------------------

def fmt(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, int) and digits == 0:
        return f"{v:,}"
    return f"{v:,.{digits}f}"


def get(r, key):
    v = r
    for k in key.split("."):
        if not isinstance(v, dict) or k not in v:
            return None
        v = v[k]
    return v


COLUMNS = [  # (header, key, digits, ratio in the summary?)
    ("MiB/s", "mib_per_sec", 1, True),
    ("records/s", "records_per_sec", 0, True),
    ("avg ms", "avg_ms", 1, True),
    ("p50 ms", "p50_ms", 0, True),
    ("p99 ms", "p99_ms", 0, True),
    ("broker CPU s", "broker_cpu_s", 2, True),
    ("broker CPU s/GiB", "broker_cpu_s_per_gib", 2, True),
    ("metadata tx", "metadata_transactions", 0, False),
    ("Silt Produce p99 ms", "silt_produce.total_p99_ms", 1, True),
    ("other CPU s", "other_cpu_s", 1, False),
]
PG_COLUMN = ("PostgreSQL CPU s", "postgres_cpu_s", 2, True)


def median_of(runs, key):
    vals = [get(r, key) for r in runs]
    vals = [v for v in vals if isinstance(v, (int, float))]
    return statistics.median(vals) if vals else None


def report(data):
    meta, phases = data["meta"], data["phases"]
    cols = COLUMNS + ([PG_COLUMN] if any("postgres_cpu_s" in r for r in phases) else [])
    lines = []
    lines.append(f"Date {meta['date']}, commit {meta['commit']} (the repository's HEAD), "
                 f"machine: {meta['machine']}.")
    lines.append(f"Silt binary: {meta['silt_bin']} (modified {meta['silt_bin_mtime']}); "
                 f"metadata store: {meta['metadata_store']}"
                 + (f"; settings: {', '.join(meta['silt_overrides'])}" if meta['silt_overrides']
                    else "") + ".")
    lines.append(f"Producer: ProducerPerformance (Kafka {meta['kafka_version']}), "
                 f"{meta['records']:,} records of {meta['record_size']:,} B per phase to "
                 f"`{PERF_TOPIC}` ({meta['perf_partitions']} partitions), "
                 f"{' '.join(PRODUCER_PROPS)}, unthrottled, one JVM warmed up with "
                 f"{meta['warmup_records']:,} records. Committer: confluent-kafka "
                 f"{meta['client']} (librdkafka {meta['librdkafka']}), "
                 f"{meta['commit_partitions']:,} partitions of `{COMMIT_TOPIC}` in one "
                 f"OffsetCommit every {meta['commit_interval_ms']} ms, synchronous.")
    if data.get("error"):
        lines.append(f"\n**The run failed**: {data['error']}")
    lines.append("")
    lines.append("### Every phase")
    lines.append("")
    hdr = ["phase"] + [c[0] for c in cols] + ["commits (late, missed)",
                                                  "commit p50/p99/max ms", "commit errors"]
    lines.append("| " + " | ".join(hdr) + " |")
    lines.append("|---" * len(hdr) + "|")
    for r in phases:
        c = r.get("committer")
        cells = [f"{r['phase']} {r['kind']}"] + [fmt(get(r, k), d) for _, k, d, _ in cols]
        if c:
            cells += [f"{c['commits']:,} of {c['ticks']:,} ticks ({c['late']}, "
                      f"{c['missed_ticks']})",
                      f"{fmt(c['latency_p50_ms'])} / {fmt(c['latency_p99_ms'])} / "
                      f"{fmt(c['latency_max_ms'])}",
                      f"{c['failed_commits']}"]
        else:
            cells += ["-", "-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    if "error" in data and not phases:
        return "\n".join(lines)

    base = [r for r in phases if r["kind"] == "base"]
    comm = [r for r in phases if r["kind"] == "commits"]
    lines.append("")
    lines.append(f"### Medians ({len(base)} base, {len(comm)} commits phases)")
    lines.append("")
    lines.append("| | " + " | ".join(c[0] for c in cols) + " |")
    lines.append("|---" * (len(cols) + 1) + "|")
    med = {"base": {k: median_of(base, k) for _, k, _, _ in cols},
           "commits": {k: median_of(comm, k) for _, k, _, _ in cols}}
    for kind in ("base", "commits"):
        lines.append(f"| {kind} | " + " | ".join(fmt(med[kind][k], d)
                                                for _, k, d, _ in cols) + " |")
    ratios = {}
    cells = []
    for _, k, _, rat in cols:
        a, b = med["commits"][k], med["base"][k]
        if rat and a is not None and b:
            ratios[k] = a / b
            cells.append(f"{a / b:.2f}x")
        else:
            cells.append("")
    lines.append("| commits/base | " + " | ".join(cells) + " |")
    data["medians"] = med
    data["ratios_commits_over_base"] = ratios

    cs = [r["committer"] for r in comm if r.get("committer")]
    if cs:
        lat = [x for c in cs for x in c["latencies_ms"]]
        total = sum(c["commits"] for c in cs)
        ticks = sum(c["ticks"] for c in cs)
        late = sum(c["late"] for c in cs)
        missed = sum(c["missed_ticks"] for c in cs)
        failed = sum(c["failed_commits"] for c in cs)
        secs = sum(c["elapsed_s"] for c in cs)
        oc = [r["silt_offset_commit"] for r in comm if r.get("silt_offset_commit")]
        summary = {"commits": total, "ticks": ticks, "late": late, "missed_ticks": missed,
                   "failed_commits": failed, "commits_per_s": total / secs if secs else None,
                   "latency_p50_ms": percentile(lat, 50), "latency_p99_ms": percentile(lat, 99),
                   "latency_max_ms": max(lat) if lat else None,
                   "silt_offset_commit_p99_ms_median":
                       statistics.median([o["total_p99_ms"] for o in oc]) if oc else None}
        data["committer_summary"] = summary
        lines.append("")
        lines.append("### The committer")
        lines.append("")
        lines.append("| | commits | per s | ticks | late (>10 ms) | missed ticks | failed | "
                     "latency p50 ms | p99 | max | Silt's OffsetCommit p99 ms | "
                     "broker CPU ms per commit |")
        lines.append("|---" * 12 + "|")
        lines.append(f"| during produce | {total:,} | {fmt(summary['commits_per_s'])} | "
                     f"{ticks:,} | {late:,} | {missed:,} | {failed:,} | "
                     f"{fmt(summary['latency_p50_ms'])} | {fmt(summary['latency_p99_ms'])} | "
                     f"{fmt(summary['latency_max_ms'])} | "
                     f"{fmt(summary['silt_offset_commit_p99_ms_median'])} (median) | |")
        a = data.get("alone")
        if a and a.get("committer"):
            c = a["committer"]
            lines.append(f"| alone, {a['elapsed_s']:.0f} s | {c['commits']:,} | "
                         f"{fmt(c['commits_per_s'])} | {c['ticks']:,} | {c['late']:,} | "
                         f"{c['missed_ticks']:,} | {c['failed_commits']:,} | "
                         f"{fmt(c['latency_p50_ms'])} | {fmt(c['latency_p99_ms'])} | "
                         f"{fmt(c['latency_max_ms'])} | "
                         f"{fmt(get(a, 'silt_offset_commit.total_p99_ms'))} | "
                         f"{fmt(a.get('broker_cpu_ms_per_commit'), 2)} |")
            n = a.get("commits", c["commits"])
            extra = (f"Alone: {a.get('committers', 1)} committer(s), {n:,} commits, "
                     f"{a['metadata_transactions']:,} metadata transactions")
            if a["metadata_transactions"]:
                extra += f" ({n / a['metadata_transactions']:.2f} commits per transaction)"
            if a.get("postgres_cpu_ms_per_commit") is not None:
                extra += (f"; PostgreSQL used {a['postgres_cpu_ms_per_commit']:.2f} ms of CPU "
                          "per commit")
            lines.append("\n" + extra + ".")
        errs = [e for c in cs for e in c["errors"]]
        if errs:
            lines.append("\nCommit errors (first ones): " + "; ".join(errs[:5]) + ".")
        if data.get("client_errors"):
            lines.append("\nCommitter client errors (error_cb): "
                         + "; ".join(data["client_errors"][:5]) + ".")
    busy = [(r["phase"], r["other_cpu_s"] / (r["elapsed_s"] * (os.cpu_count() or 1)))
            for r in phases if r.get("elapsed_s")]
    noisy = [f"{p} ({100 * share:.0f}%)" for p, share in busy if share > 0.10]
    if noisy:
        lines.append("")
        lines.append("Other processes used more than 10% of the machine's CPU during phase(s) "
                     + ", ".join(noisy) + ": their figures are the least dependable.")
    v = data.get("verify")
    if v:
        lines.append("")
        lines.append(f"Committed offsets read back after the last phase: {v['partitions']:,} "
                     f"partitions, {v['mismatched']} not at offset {v['expected_offset']:,}"
                     + (f" (first: {v['first_mismatch']})" if v.get("first_mismatch") else "")
                     + ".")
    lines.append("")
    lines.append("Latencies are ProducerPerformance's send-to-acknowledgement times (whole ms "
                 "for the percentiles). Broker CPU: Silt's utime+stime over the phase. "
                 "Metadata tx: transactions Silt's metadata store committed over the phase "
                 "(uploads and offset commits together; Silt logs no count of the offset "
                 "writer's own). Other CPU: what the rest of the machine (neither the broker, "
                 "the producer JVM nor this script) used meanwhile. Commit latency: "
                 "commit(asynchronous=False) for all partitions, as the client sees it.")
    return "\n".join(lines)


# --- main -------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--silt-bin", default=str(REPO / "build" / "silt"))
    ap.add_argument("--silt-override", action="append", default=[], metavar="K=V")
    ap.add_argument("--metadata-uri", default=None)
    ap.add_argument("--workdir", default=str(REPO / "build" / "offset-commits"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--records", type=int, default=4000000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--warmup-records", type=int, default=None)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--commit-partitions", type=int, default=1000)
    ap.add_argument("--perf-partitions", type=int, default=10)
    ap.add_argument("--commit-interval-ms", type=float, default=100)
    ap.add_argument("--pause-s", type=float, default=5)
    ap.add_argument("--alone-s", type=float, default=10)
    ap.add_argument("--alone-committers", type=int, default=1)
    ap.add_argument("--phase-timeout-s", type=float, default=600)
    ap.add_argument("--keep-data", action="store_true")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    if min(args.records, args.record_size, args.repetitions, args.commit_partitions,
           args.perf_partitions, args.alone_committers) < 1 or args.commit_interval_ms <= 0:
        ap.error("counts and the interval must be positive")
    if args.warmup_records is None:
        args.warmup_records = args.records // 4
    os.makedirs(args.workdir, exist_ok=True)
    workdir = Path(os.path.realpath(args.workdir))
    out_path = Path(args.out) if args.out else workdir / "results.json"

    if args.report_only:
        data = json.loads(out_path.read_text())
        print(report(data))
        return

    machine, fstype = machine_info(str(workdir))
    if fstype in ("tmpfs", "ramfs"):
        sys.exit(f"offset_commits: {workdir} is on {fstype}: use a dir on a real disk")
    args.silt_bin = os.path.realpath(args.silt_bin)
    if not os.access(args.silt_bin, os.X_OK):
        sys.exit(f"offset_commits: no Silt binary at {args.silt_bin}")
    subprocess.run([str(KREF), "install"], check=True, timeout=1800)

    overrides = list(args.silt_override)
    if args.metadata_uri:
        overrides.append(f"metadata.store.uri={args.metadata_uri}")
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": git_commit(), "machine": machine, "client": client_version()[0],
        "librdkafka": rdkafka_version()[0],
        "kafka_version": os.environ.get("KAFKA_VERSION", "4.1.1"),
        "silt_bin": args.silt_bin,
        "silt_bin_mtime": datetime.datetime.fromtimestamp(
            os.path.getmtime(args.silt_bin), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "silt_overrides": args.silt_override,
        # Not the URI itself: it may hold a password.
        "metadata_store": ("PostgreSQL (--metadata-uri)" if args.metadata_uri
                           and args.metadata_uri.startswith("postgres") else
                           "--metadata-uri" if args.metadata_uri else "SQLite (the default)"),
        "records": args.records, "record_size": args.record_size,
        "warmup_records": args.warmup_records, "repetitions": args.repetitions,
        "commit_partitions": args.commit_partitions, "perf_partitions": args.perf_partitions,
        "commit_interval_ms": args.commit_interval_ms, "pause_s": args.pause_s,
        "argv": sys.argv[1:]}
    data = {"meta": meta, "phases": []}

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    run_dir = workdir / "silt"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    port = broker_stats.free_port()
    broker = SiltBroker(args.silt_bin, run_dir, port, overrides)
    jvm = committer = None
    kinds = ["base", "commits"] * args.repetitions
    try:
        log(f"starting Silt on {broker.bootstrap} (dir {run_dir})")
        broker.start(120)
        meta["pid"] = broker.pid
        log(f"creating `{COMMIT_TOPIC}` ({args.commit_partitions} partitions) and "
            f"`{PERF_TOPIC}` ({args.perf_partitions})")
        create_topics(broker.bootstrap, {COMMIT_TOPIC: args.commit_partitions,
                                         PERF_TOPIC: args.perf_partitions})
        committer = Committer(broker.bootstrap, COMMIT_TOPIC, args.commit_partitions,
                              args.commit_interval_ms / 1000.0)
        log("committer: first commit (finds the coordinator)")
        committer.commit_once()
        log(f"producer JVM: warm-up of {args.warmup_records:,} records, then {len(kinds)} "
            f"phases of {args.records:,}")
        jvm = ProducerJvm(workdir, broker.bootstrap, args.records, args.record_size,
                          args.warmup_records, len(kinds))
        for i, kind in enumerate(kinds, 1):
            if i > 1 and args.pause_s > 0:
                time.sleep(args.pause_s)  # the broker's uploads of the last phase settle
            log(f"phase {i} of {len(kinds)}: {kind}")
            try:
                res = run_phase(args, broker, jvm, committer, i, kind, args.record_size)
            except PhaseError as e:
                if len(e.args) > 1:
                    data["phases"].append(e.args[1])
                raise
            data["phases"].append(res)
            c = res.get("committer")
            log(f"phase {i} {kind}: {res['mib_per_sec']:.1f} MiB/s, p99 {res['p99_ms']} ms, "
                f"broker CPU {res['broker_cpu_s']:.2f} s, metadata tx "
                f"{res['metadata_transactions']}"
                + (f"; {c['commits']} commits, p50 {c['latency_p50_ms']:.1f} ms, p99 "
                   f"{c['latency_p99_ms']:.1f} ms, {c['failed_commits']} failed" if c else ""))
        if args.alone_s > 0:
            time.sleep(args.pause_s)
            log(f"the committer alone for {args.alone_s:.0f} s")
            data["alone"] = run_alone(args, broker, committer)
            a = data["alone"]
            log(f"alone: {a['committer']['commits']} commits, p50 "
                f"{a['committer']['latency_p50_ms']:.1f} ms, broker CPU "
                f"{a['broker_cpu_s']:.2f} s")
        data["verify"] = committer.verify()
    except PhaseError as e:
        data["error"] = e.args[0]
    except KafkaException as e:
        data["error"] = str(e)
    except KeyboardInterrupt:
        data["error"] = "interrupted"
    finally:
        if committer is not None:
            if committer.stats is not None:
                committer.stop()
            data["client_errors"] = committer.client_errors[:20]
            committer.close()
        if jvm is not None:
            jvm.stop()
        if broker.alive():
            try:
                meta["peak_rss_mib"] = broker_stats.status_kib(broker.pid, "VmHWM") / 1024.0
            except (OSError, SystemExit):
                pass
        elif "error" not in data:
            data["error"] = "the broker is not running at the end"
        log("stopping Silt")
        broker.stop()
        text = broker.log_text()
        data["log_error_lines"] = [ln for ln in text.splitlines()
                                   if "error" in ln.lower() or "fail" in ln.lower()][:20]
        if not args.keep_data:
            shutil.rmtree(broker.data, ignore_errors=True)
    if data.get("error"):
        log(f"FAILED: {data['error']}")
    text = report(data)
    data["markdown"] = text
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
    print()
    print(text)
    print(f"\n(JSON: {out_path}; logs: {workdir}/silt/silt.log, {workdir}/producer.log)")
    if data.get("error"):
        sys.exit(1)


if __name__ == "__main__":
    main()
