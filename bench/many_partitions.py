#!/usr/bin/env python3
"""How the broker's cost grows with the partition count: Silt and Apache Kafka, one at a time.

Usage: /usr/bin/python3 bench/many_partitions.py [options]
  --topics N                  topics per scenario (default 10)
  --partitions-per-topic L    comma-separated partitions per topic, one scenario each
                              (default 1,1000: 10 and 10,000 partitions)
  --records N                 records to produce per scenario (default 600000)
  --record-size B             record value size in bytes (default 1000)
  --duration-s S              instead of a fixed record count: produce as fast as possible
                              for S seconds
  --only silt|kafka           run one broker only
  --silt-bin PATH             the Silt broker (default build/silt)
  --workdir DIR               data dirs, logs and results.json (default build/many-partitions);
                              must be on a real file system (Silt's WAL uses O_DIRECT)
  --idle-s S                  seconds of idle broker CPU sampled after creation (default 10)
  --metadata-requests N       Metadata requests for all topics, timed (default 5)
  --start-timeout-s, --create-timeout-s, --produce-timeout-s, --read-timeout-s
                              bounds of the phases (defaults 120, 600, 600, 600 s)
  --settle-s S                wait S seconds after the read before stopping the broker (e.g.
                              70, so that Silt's compaction, every 60 s, is in the PUT count)
  --clients N                 producers (and then consumers) in separate processes, each on
                              a share of the topics (default 1: one of each, in this process);
                              librdkafka walks every partition it knows on each send loop, so
                              one client cannot drive 100,000 partitions
  --producer KEY=VALUE        a librdkafka setting of the producers (repeatable), e.g.
                              enable.idempotence=true
  --keep-data                 keep the brokers' data dirs (default: removed after each run)
  --report-only               print the tables from WORKDIR/results.json and exit
Earlier runs in WORKDIR/results.json with the same settings (records, size, duration,
topics, settle) of (broker, scenario) pairs not run now are kept and reported, so that the
brokers (or scenarios) can be run separately and still be reported side by side.

For every (broker, scenario) the broker is started fresh on a free port with an empty data
dir (Silt: its defaults plus listeners and data.dir; Kafka: tests/kafka-reference.sh with its
defaults, heap -Xmx512m), then:
  1. create: one AdminClient.create_topics call with every topic (replication factor 1),
     timed until Metadata lists every partition with a leader; topics the broker refuses
     to create in one request (Kafka's controller refuses operations of more than 10,000
     records: "excessively large batch operation") are retried one topic per request, and
     the report says so;
  2. metadata: N Metadata requests for all topics (AdminClient.list_topics), timed (this
     includes the Python client's parsing of the response);
  3. idle: the broker's CPU over the --idle-s seconds right after creation, with no client
     requests (this includes work a broker still does once Metadata lists the leaders);
  4. produce: one confluent-kafka Producer (acks=all, linger.ms=5, message.timeout.ms above
     --produce-timeout-s, otherwise librdkafka's defaults, no compression), records sent
     round-robin over all partitions; the broker's
     CPU (utime+stime, /proc/PID/stat) is sampled just before the first record and once the
     last one is acknowledged (flush), and so are the CPU of this script (the client) and of
     the whole machine, which gives the CPU other processes used meanwhile; Silt also gets
     SIGUSR1 at both points, so that its log holds its own Produce timing for that phase;
  5. read: one Consumer (a group.id, which the client requires, but no group membership
     or commits) assigned to every partition at
     offset 0 reads until it has as many records as were acknowledged;
  6. the broker's peak RSS (VmHWM) is read, and the broker stopped (SIGTERM, SIGKILL after
     a timeout), also on errors and Ctrl-C.
For Silt, object PUTs are counted from outside: every object file that appears under
DATA/objects/objects (uploads' stream-set and stream objects, compaction's outputs) is seen
with inotify (and a listing every 0.5 s), deleted ones included. Silt's stream-store counters
are read from its log: at each SIGUSR1 it logs the metadata transactions committed since the
last report, from which the produce phase's transactions per second follow (Kafka has no
such count: not reported for it).
A phase that fails or runs out of time ends that run; the table says "failed: <reason>".
Output: one Markdown table per scenario (both brokers and Silt/Kafka ratios), then the ratio
of CPU per GiB at the most to the fewest partitions; JSON in WORKDIR/results.json; per-run
logs in WORKDIR/<broker>-<scenario>/.
"""
import argparse
import ctypes
import datetime
import json
import os
import platform
import re
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
KREF = REPO / "tests" / "kafka-reference.sh"
sys.path.insert(0, str(HERE))
import broker_stats  # noqa: E402  (free_port, cpu_seconds, status_kib, BROKER_RE)

from confluent_kafka import (Consumer, KafkaError,  # noqa: E402
                             KafkaException, Producer, TopicPartition)
from confluent_kafka import libversion as rdkafka_version  # noqa: E402
from confluent_kafka import version as client_version  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30


def log(msg):
    print(f"== {msg}", file=sys.stderr, flush=True)


# Silt's store line at SIGUSR1 (src/app/main.cc): '... | metadata transactions N'.
METADATA_TX_RE = re.compile(r"silt: store: .*\| metadata transactions (\d+)")


class PhaseError(Exception):
    """A phase failed or ran out of time; the message says which and why."""


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def system_busy_s():
    """CPU seconds all CPUs have spent busy since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = v
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def process_cpu_snapshot():
    """{pid: (name, start time, CPU seconds)} of every process now running (kernel threads
    included)."""
    tck = os.sysconf("SC_CLK_TCK")
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        # name, start time (tells a reused pid), CPU seconds
        out[int(d)] = (name, fields[19], (int(fields[11]) + int(fields[12])) / tck)
    return out


def top_other_processes(before, after, exclude, n=5):
    """The processes (other than `exclude`) that used the most CPU between two snapshots."""
    used = []
    for pid, (name, start, cpu) in after.items():
        if pid in exclude:
            continue
        prev = before.get(pid)
        delta = cpu - (prev[2] if prev and prev[1] == start else 0.0)
        if delta >= 0.05:
            used.append((delta, f"{name}[{pid}]"))
    used.sort(reverse=True)
    return [{"process": who, "cpu_s": round(d, 2)} for d, who in used[:n]]


def wait_ready(bootstrap, timeout, alive):
    """Until Metadata lists a broker (and a controller): the port opens a little earlier."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if not alive():
            raise PhaseError("the broker exited during startup")
        try:
            md = admin.list_topics(timeout=5)
            if md.brokers and md.controller_id >= 0:
                return
        except KafkaException as e:
            last = e
        time.sleep(0.2)
    raise PhaseError(f"no broker in Metadata from {bootstrap} within {timeout:.0f}s ({last})")


# --- brokers --------------------------------------------------------------------------------

def pinned_to(cpus):
    """A preexec_fn that pins the child, and every thread it starts, to `cpus` (None: no
    pinning)."""
    if cpus is None:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


class SiltBroker:
    """overrides: more settings (the last of a name wins, listeners included); cpus: the CPUs
    the broker runs on (None: any)."""
    name = "silt"

    def __init__(self, binary, run_dir, port, overrides=(), cpus=None):
        self.binary = binary
        self.overrides = list(overrides)
        self.cpus = cpus
        self.dir = Path(run_dir)
        self.data = self.dir / "data"
        self.port = port
        self.bootstrap = f"127.0.0.1:{port}"
        self.proc = None
        self.log_path = self.dir / "silt.log"

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout):
        self.data.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as out:
            # Its own session: a Ctrl-C in the terminal reaches this script, which stops it.
            self.proc = subprocess.Popen(
                [self.binary, "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                 "--override", f"data.dir={self.data}"]
                + [a for o in self.overrides for a in ("--override", o)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=pinned_to(self.cpus))
        deadline = time.monotonic() + timeout
        while not port_open(self.port):
            if not self.alive():
                raise PhaseError(f"silt exited during startup with {self.proc.returncode} "
                                 f"(log: {self.log_path})")
            if time.monotonic() > deadline:
                raise PhaseError(f"silt did not listen on {self.port} within {timeout:.0f}s")
            time.sleep(0.05)
        wait_ready(self.bootstrap, max(1.0, deadline - time.monotonic()), self.alive)

    def usr1(self):
        if self.alive():
            os.kill(self.proc.pid, signal.SIGUSR1)

    def stop(self, timeout=60):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"silt pid {self.proc.pid} did not stop in {timeout}s, killing it")
            self.proc.kill()
            self.proc.wait(30)

    def log_text(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class KafkaBroker:
    """env: more environment for tests/kafka-reference.sh (KAFKA_EXTRA_LISTENERS...); cpus:
    the CPUs the broker's JVM runs on (None: any)."""
    name = "kafka"

    def __init__(self, run_dir, port, env=None, cpus=None):
        self.env = dict(env or {})
        self.cpus = cpus
        self.dir = Path(run_dir)
        self.data = self.dir / "data"
        self.port = port
        self.bootstrap = f"127.0.0.1:{port}"
        self._pid = None
        self.log_path = self.dir / "logs" / "server.log"

    @property
    def pid(self):
        return self._pid

    def alive(self):
        return self._pid is not None and pid_alive(self._pid)

    def start(self, timeout):
        env = dict(os.environ, CONTROLLER_PORT=str(self.port + 1),
                   KAFKA_START_TIMEOUT=str(int(timeout)), **self.env)
        self.dir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        with open(self.dir / "start.log", "wb") as out:
            try:
                # kafka-reference.sh formats the KRaft log, starts the JVM in the background,
                # writes DIR/kafka.pid and waits for the port.
                rc = subprocess.run([str(KREF), "start", str(self.dir), str(self.port)],
                                    env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, timeout=timeout + 60,
                                    start_new_session=True,
                                    preexec_fn=pinned_to(self.cpus)).returncode
            except subprocess.TimeoutExpired:
                rc = None
        pidf = self.dir / "kafka.pid"
        if pidf.exists():
            try:
                self._pid = int(pidf.read_text().strip())
            except ValueError:
                pass
        if rc != 0:
            how = "timed out" if rc is None else f"exited with {rc}"
            raise PhaseError(f"kafka-reference.sh start {how} (log: {self.dir}/start.log)")
        if self._pid is None:
            raise PhaseError(f"no pid in {pidf}")
        wait_ready(self.bootstrap, max(5.0, timeout - (time.monotonic() - t0)), self.alive)

    def usr1(self):
        pass

    def stop(self, timeout=120):
        if self._pid is None:
            return
        try:
            # SIGTERM (controlled shutdown), SIGKILL after 30 s.
            subprocess.run([str(KREF), "stop", str(self.dir)], timeout=timeout,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
        except subprocess.TimeoutExpired:
            pass
        if pid_alive(self._pid):
            log(f"kafka pid {self._pid} still running after stop, killing it")
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + 30
            while pid_alive(self._pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        self._pid = None

    def log_text(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


# --- Silt's object PUTs, seen from outside --------------------------------------------------

IN_MOVED_TO, IN_CREATE, IN_Q_OVERFLOW = 0x80, 0x100, 0x4000
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
EVENT = struct.Struct("iIII")


class ObjectWatcher:
    """Every distinct object file that appears under DATA/objects/objects (the local object
    store's root is DATA/objects, and every object key starts with objects/). Objects are
    written to a temp dir and renamed in, and their names (id.kind) are never reused: the
    number of distinct names is the number of PUTs, even of objects compaction deleted."""

    def __init__(self, data_dir):
        root = Path(data_dir)
        self.dirs = [root, root / "objects", root / "objects" / "objects"]
        self.names = {}  # name -> monotonic time first seen
        self.lock = threading.Lock()
        self.overflow = False
        self.stopping = threading.Event()
        self.fd = -1
        self.watched = {}
        try:
            self.libc = ctypes.CDLL("libc.so.6", use_errno=True)
            self.fd = self.libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except OSError:
            self.fd = -1
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _add_watches(self):
        if self.fd < 0:
            return
        for d in self.dirs:
            if d not in self.watched.values() and d.is_dir():
                wd = self.libc.inotify_add_watch(self.fd, str(d).encode(), IN_CREATE | IN_MOVED_TO)
                if wd >= 0:
                    self.watched[wd] = d

    def _scan(self):
        d = self.dirs[2]
        try:
            names = os.listdir(d)
        except OSError:
            return
        now = time.monotonic()
        with self.lock:
            for n in names:
                if n.endswith(".set") or n.endswith(".stream"):
                    self.names.setdefault(n, now)

    def _run(self):
        last_scan = 0.0
        while True:
            self._add_watches()
            if time.monotonic() - last_scan > 0.5:
                self._scan()  # also catches files made before a watch existed
                last_scan = time.monotonic()
            if self.stopping.is_set():
                return
            if self.fd < 0:
                time.sleep(0.1)
                continue
            r, _, _ = select.select([self.fd], [], [], 0.1)
            if not r:
                continue
            try:
                buf = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                continue
            now = time.monotonic()
            off = 0
            while off + EVENT.size <= len(buf):
                wd, mask, _, nlen = EVENT.unpack_from(buf, off)
                name = buf[off + EVENT.size:off + EVENT.size + nlen].split(b"\0", 1)[0].decode()
                off += EVENT.size + nlen
                if mask & IN_Q_OVERFLOW:
                    self.overflow = True
                if self.watched.get(wd) == self.dirs[2] and (
                        name.endswith(".set") or name.endswith(".stream")):
                    with self.lock:
                        self.names.setdefault(name, now)

    def counts(self, since=None):
        with self.lock:
            items = [n for n, t in self.names.items() if since is None or t >= since]
        return {"puts": len(items), "set_objects": sum(n.endswith(".set") for n in items),
                "stream_objects": sum(n.endswith(".stream") for n in items)}

    def stop(self):
        self.stopping.set()
        self.thread.join(5)
        self._scan()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


# --- phases ---------------------------------------------------------------------------------

def topic_names(n):
    return [f"mp-{i:03d}" for i in range(n)]


def metadata_complete(md, topics, ppt):
    """None when every topic lists ppt partitions, each with a leader; else what is missing."""
    for t in topics:
        tm = md.topics.get(t)
        if tm is None:
            return f"topic {t} not listed"
        if tm.error is not None:
            return f"topic {t}: {tm.error}"
        if len(tm.partitions) != ppt:
            return f"topic {t}: {len(tm.partitions)} of {ppt} partitions"
        for p in tm.partitions.values():
            if p.leader < 0 or p.error is not None:
                return f"topic {t} partition {p.id}: leader {p.leader}, {p.error}"
    return None


def phase_create(broker, topics, ppt, timeout):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    out = {}
    t0 = time.monotonic()
    deadline = t0 + timeout
    cpu0 = broker_stats.cpu_seconds(broker.pid)

    def create(names):
        fs = admin.create_topics([NewTopic(t, ppt, 1) for t in names],
                                 operation_timeout=max(1.0, min(300.0, timeout - 10)),
                                 request_timeout=timeout)
        failed = {}
        for t, f in fs.items():
            try:
                f.result(timeout=max(0.1, deadline - time.monotonic()))
            except KafkaException as e:
                err = e.args[0]
                if err.code() in (KafkaError.TOPIC_ALREADY_EXISTS, KafkaError.REQUEST_TIMED_OUT,
                                  KafkaError._TIMED_OUT):
                    continue  # created, or still being created: Metadata tells
                failed[t] = err
            except Exception as e:  # noqa: BLE001 - concurrent.futures.TimeoutError
                raise PhaseError(f"CreateTopics: no answer within {timeout:.0f}s ({e!r})")
        return failed

    failed = create(topics)
    if failed:
        # E.g. a controller's limit on records per operation: once more, a topic per request.
        first = next(iter(failed.values()))
        out["create_note"] = (f"CreateTopics of all {len(topics)} topics failed for "
                              f"{len(failed)} ({first.str()}); retried one topic per request")
        log(out["create_note"])
        for t in list(failed):
            again = create([t])
            if again:
                raise PhaseError(f"CreateTopics {t}: {again[t].str()}")
    out["create_response_s"] = time.monotonic() - t0
    missing = "no Metadata yet"
    while True:
        if not broker.alive():
            raise PhaseError("the broker died while creating topics")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PhaseError(f"topics not ready within {timeout:.0f}s ({missing})")
        try:
            md = admin.list_topics(timeout=max(1.0, min(60.0, remaining)))
            missing = metadata_complete(md, topics, ppt)
            if missing is None:
                break
        except KafkaException as e:
            missing = f"Metadata failed: {e}"
        time.sleep(0.1)
    out["create_s"] = time.monotonic() - t0
    out["create_broker_cpu_s"] = broker_stats.cpu_seconds(broker.pid) - cpu0
    return out


def phase_metadata(broker, topics, ppt, n, timeout=120):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    admin.list_topics(timeout=timeout)  # connection and ApiVersions out of the timing
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        try:
            md = admin.list_topics(timeout=timeout)
        except KafkaException as e:
            raise PhaseError(f"Metadata for all topics: {e}")
        times.append(time.monotonic() - t0)
        missing = metadata_complete(md, topics, ppt)
        if missing:
            raise PhaseError(f"Metadata for all topics incomplete: {missing}")
    return {"metadata_ms_all": [t * 1000 for t in times],
            "metadata_ms": statistics.median(times) * 1000}


def phase_idle(broker, seconds):
    cpu0 = broker_stats.cpu_seconds(broker.pid)
    t0 = time.monotonic()
    time.sleep(seconds)
    cpu = broker_stats.cpu_seconds(broker.pid) - cpu0
    return {"idle_cpu_pct": 100.0 * cpu / (time.monotonic() - t0),
            "rss_idle_mib": broker_stats.status_kib(broker.pid, "VmRSS") / 1024.0}


def produce_share(bootstrap, parts, records, size, duration_s, timeout, ready, extra=None):
    """One producer's part of the produce phase: `records` records (or `duration_s` seconds)
    round-robin over `parts`. `ready()` is called once the client is connected and has the
    metadata, right before the first record; it returns the monotonic time to measure from."""
    state = {"acked": 0, "errors": 0, "first_error": None, "client_errors": []}

    def on_delivery(err, msg):
        if err is None:
            state["acked"] += 1
        else:
            state["errors"] += 1
            if state["first_error"] is None:
                state["first_error"] = err.str()

    def on_error(err):
        if len(state["client_errors"]) < 20:
            state["client_errors"].append(err.str())

    # message.timeout.ms: records do not expire (librdkafka's default is 300 s) before the
    # phase's own bound, which a slow broker may need (Kafka at 10,000 partitions here).
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": int(timeout * 1000) + 60000,
            "on_delivery": on_delivery, "error_cb": on_error, "log_level": 3}
    conf.update(extra or {})
    p = Producer(conf)
    try:
        p.list_topics(timeout=60)  # connection and metadata out of the timing
    except KafkaException as e:
        raise PhaseError(f"producer Metadata: {e}")
    value = os.urandom(size)
    nparts = len(parts)
    t0 = ready()
    client0 = os.times()
    deadline = t0 + timeout
    stop_at = t0 + duration_s if duration_s else None
    sent = 0
    timed_out = False
    produce = p.produce
    while True:
        if stop_at is None:
            if sent >= records:
                break
        elif sent % 256 == 0 and time.monotonic() >= stop_at:
            break
        topic, part = parts[sent % nparts]
        try:
            produce(topic, value, partition=part)
        except BufferError:
            p.poll(0.005)
            if time.monotonic() > deadline:
                timed_out = True
                break
            continue
        sent += 1
        if sent % 1000 == 0:
            p.poll(0)
            if time.monotonic() > deadline:
                timed_out = True
                break
    left = p.flush(max(0.0, deadline - time.monotonic()))
    client1 = os.times()
    del p
    return {"sent": sent, "acked": state["acked"], "errors": state["errors"],
            "first_error": state["first_error"], "client_errors": state["client_errors"],
            "left": left, "timed_out": timed_out,
            "client_cpu_s": (client1.user + client1.system) - (client0.user + client0.system)}


def read_share(bootstrap, parts, expected, timeout, stall_s, alive, ready):
    """One consumer's part of the read phase: reads `parts` from their beginning until it has
    `expected` records. Returns (count, errors)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mp-bench-reader",
                  "enable.auto.commit": False, "enable.partition.eof": False,
                  "auto.offset.reset": "earliest", "log_level": 3})
    try:
        t0 = ready()
        deadline = t0 + timeout
        # Offset 0, not OFFSET_BEGINNING: the topics are new, and librdkafka resolves a logical
        # offset with one ListOffsets request per partition, each queued behind the
        # connection's fetch (which waits up to fetch.wait.max.ms when there is nothing new):
        # at 100,000 partitions that, not the broker, would set the read's pace.
        c.assign([TopicPartition(t, p, 0) for t, p in parts])
        count = 0
        errors = []
        last_progress = t0
        while count < expected:
            now = time.monotonic()
            if now > deadline:
                raise PhaseError(f"read {count} of {expected} records within {timeout:.0f}s")
            if now - last_progress > stall_s:
                raise PhaseError(f"read stalled at {count} of {expected} records for {stall_s}s")
            if not alive():
                raise PhaseError("the broker died while reading")
            msgs = c.consume(num_messages=10000, timeout=0.5)
            if msgs:
                last_progress = time.monotonic()
            for m in msgs:
                e = m.error()
                if e is None:
                    count += 1
                elif e.code() != KafkaError._PARTITION_EOF and len(errors) < 20:
                    errors.append(e.str())
        return count, errors
    finally:
        c.close()


def shares(parts, clients):
    """`parts` dealt to `clients` clients by topic, so that each client's librdkafka knows only
    its own topics' partitions (it walks all of them on every send loop)."""
    topics = sorted({t for t, _ in parts})
    mine = [set(topics[i::clients]) for i in range(clients)]
    return [[tp for tp in parts if tp[0] in m] for m in mine]


class Workers:
    """Client processes (this script with --worker), one per share: each sets its client up,
    says "ready", waits for "go", does its part and answers with one JSON line."""

    def __init__(self, jobs):
        self.procs = []
        for job in jobs:
            proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            proc.stdin.write(json.dumps(job) + "\n")
            proc.stdin.flush()
            self.procs.append(proc)

    def wait_ready(self, timeout):
        for proc in self.procs:
            line = self._line(proc, timeout)
            if line.strip() != "ready":
                raise PhaseError(f"a client process failed to start: {line.strip()[:300]}")

    def go(self):
        for proc in self.procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()

    def results(self, timeout):
        out = []
        for proc in self.procs:
            line = self._line(proc, timeout)
            try:
                out.append(json.loads(line))
            except ValueError:
                raise PhaseError(f"a client process failed: {line.strip()[:300]}")
        return out

    def _line(self, proc, timeout):
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            raise PhaseError(f"a client process gave no answer within {timeout:.0f}s")
        return proc.stdout.readline() or "(no output)"

    def close(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def run_workers(jobs, start, timeout):
    """Runs one client process per job: `start()` once all are ready, then their results
    (and their pids) once all are done; the first failure of any is raised."""
    workers = Workers(jobs)
    try:
        workers.wait_ready(120)
        start()
        workers.go()
        results = workers.results(timeout)
    finally:
        pids = {w.pid for w in workers.procs}
        workers.close()
    failed = [r["phase_error"] for r in results if "phase_error" in r]
    if failed:
        raise PhaseError(failed[0])
    return results, pids


def worker_main():
    """--worker: one client process of a phase with several clients (see Workers)."""
    job = json.loads(sys.stdin.readline())

    def ready():
        print("ready", flush=True)
        if sys.stdin.readline().strip() != "go":
            sys.exit(1)
        return time.monotonic()

    parts = [tuple(tp) for tp in job["parts"]]
    try:
        if job["role"] == "produce":
            res = produce_share(job["bootstrap"], parts, job["records"], job["size"],
                                job["duration_s"], job["timeout"], ready, job["producer"])
        else:
            ppid = os.getppid()
            count, errors = read_share(job["bootstrap"], parts, job["expected"], job["timeout"],
                                       job["stall_s"], lambda: os.getppid() == ppid, ready)
            res = {"count": count, "errors": errors}
    except PhaseError as e:
        res = {"phase_error": e.args[0]}
    print(json.dumps(res), flush=True)


def phase_produce(broker, parts, records, size, duration_s, timeout, clients=1, extra=None):
    out = {}
    marks = {}

    def start_measuring():
        broker.usr1()
        time.sleep(0.2)
        marks["log_at"] = len(broker.log_text())  # the phase's own reports follow
        marks["cpu0"] = broker_stats.cpu_seconds(broker.pid)
        marks["procs0"] = process_cpu_snapshot()
        marks["busy0"] = system_busy_s()
        marks["t0"] = time.monotonic()
        return marks["t0"]

    if clients == 1:
        results = [produce_share(broker.bootstrap, parts, records, size, duration_s, timeout,
                                 start_measuring, extra)]
        client_pids = {os.getpid()}
    else:
        each = shares(parts, clients)
        jobs = [{"role": "produce", "bootstrap": broker.bootstrap, "parts": share,
                 "records": records // clients + (1 if i < records % clients else 0),
                 "size": size, "duration_s": duration_s, "timeout": timeout,
                 "producer": extra or {}}
                for i, share in enumerate(each)]
        results, pids = run_workers(jobs, start_measuring, timeout + 120)
        client_pids = {os.getpid()} | pids
    t1 = time.monotonic()
    cpu1 = broker_stats.cpu_seconds(broker.pid)
    busy1 = system_busy_s()
    procs1 = process_cpu_snapshot()
    broker.usr1()
    elapsed = t1 - marks["t0"]
    acked = sum(r["acked"] for r in results)
    sent = sum(r["sent"] for r in results)
    errors = sum(r["errors"] for r in results)
    left = sum(r["left"] for r in results)
    timed_out = any(r["timed_out"] for r in results)
    first_error = next((r["first_error"] for r in results if r["first_error"]), None)
    client_errors = [e for r in results for e in r["client_errors"]][:20]
    cpu0 = marks["cpu0"]
    # Silt's report at the SIGUSR1 just sent: the metadata transactions of the phase (none
    # when its store line is absent: nothing changed).
    time.sleep(0.3)
    if isinstance(broker, SiltBroker):
        m = METADATA_TX_RE.search(broker.log_text()[marks["log_at"]:])
        out["produce_metadata_tx"] = int(m.group(1)) if m else 0
        out["metadata_tx_per_s"] = out["produce_metadata_tx"] / elapsed
    out.update({
        "sent": sent, "acked": acked, "delivery_errors": errors, "clients": clients,
        "produce_s": elapsed, "msgs_per_s": acked / elapsed,
        "mib_per_s": acked * size / MiB / elapsed,
        "produce_broker_cpu_s": cpu1 - cpu0,
        "cpu_s_per_gib": (cpu1 - cpu0) / (acked * size / GiB) if acked else None,
        "broker_cpu_pct": 100.0 * (cpu1 - cpu0) / elapsed,
        "produce_client_cpu_s": sum(r["client_cpu_s"] for r in results),
        "ingested_gib": acked * size / GiB,
        "acked_per_client": [r["acked"] for r in results],
    })
    # What else ran on the machine meanwhile (other processes: builds, tests...).
    out["produce_other_cpu_s"] = max(0.0, (busy1 - marks["busy0"]) - out["produce_broker_cpu_s"]
                                     - out["produce_client_cpu_s"])
    # Who, as far as processes alive at both ends show (short-lived ones are missed).
    out["produce_other_top"] = top_other_processes(marks["procs0"], procs1,
                                                   {broker.pid} | client_pids)
    if first_error:
        out["first_delivery_error"] = first_error
    if client_errors:
        out["client_errors"] = client_errors
    if timed_out or left:
        raise PhaseError(f"produce did not finish within {timeout:.0f}s ({sent} sent, {acked} "
                         f"acknowledged, {left} still queued)", out)
    if errors:
        raise PhaseError(f"{errors} delivery errors, first: {first_error}", out)
    return out


def phase_read(broker, parts, expected, size, timeout, stall_s=120, acked_per_client=None):
    out = {}
    marks = {}

    def start_measuring():
        marks["cpu0"] = broker_stats.cpu_seconds(broker.pid)
        marks["t0"] = time.monotonic()
        return marks["t0"]

    if not acked_per_client or len(acked_per_client) == 1:
        count, errors = read_share(broker.bootstrap, parts, expected, timeout, stall_s,
                                   broker.alive, start_measuring)
    else:
        # Each consumer reads what the producer of the same share had acknowledged.
        each = shares(parts, len(acked_per_client))
        jobs = [{"role": "read", "bootstrap": broker.bootstrap, "parts": share,
                 "expected": n, "timeout": timeout, "stall_s": stall_s}
                for share, n in zip(each, acked_per_client)]
        results, _ = run_workers(jobs, start_measuring, timeout + 120)
        count = sum(r["count"] for r in results)
        errors = [e for r in results for e in r["errors"]][:20]
    t1 = time.monotonic()
    out.update({"read_records": count, "read_s": t1 - marks["t0"],
                "read_msgs_per_s": count / (t1 - marks["t0"]),
                "read_mib_per_s": count * size / MiB / (t1 - marks["t0"]),
                "read_broker_cpu_s": broker_stats.cpu_seconds(broker.pid) - marks["cpu0"]})
    if errors:
        out["read_errors"] = errors
    if count != expected:
        raise PhaseError(f"read {count} records, {expected} were acknowledged", out)
    return out


# --- one run --------------------------------------------------------------------------------

def run_one(args, broker_name, topics_n, ppt):
    scen = scenario_name(topics_n, ppt)
    run_dir = Path(args.workdir) / f"{broker_name}-{scen}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    port = broker_stats.free_port()
    topics = topic_names(topics_n)
    parts = [(t, p) for p in range(ppt) for t in topics]  # round-robin over topics, then partitions
    res = {"broker": broker_name, "scenario": scen, "topics": topics_n,
           "producer_settings": args.producer,
           "partitions_per_topic": ppt, "partitions": topics_n * ppt,
           "records": args.records, "record_size": args.record_size,
           "duration_s": args.duration_s, "settle_s": args.settle_s, "clients": args.clients,
           "port": port,
           "dir": str(run_dir),
           "load_avg_start": open("/proc/loadavg").read().split()[:3]}
    broker = (SiltBroker(args.silt_bin, run_dir, port, args.silt_override)
              if broker_name == "silt" else KafkaBroker(run_dir, port))
    watcher = None
    phase = "start"
    t_produce = None
    log(f"{broker_name}, {scen}: starting on {broker.bootstrap} (dir {run_dir})")
    try:
        t0 = time.monotonic()
        if broker_name == "silt":
            watcher = ObjectWatcher(broker.data)
        broker.start(args.start_timeout_s)
        res["start_s"] = time.monotonic() - t0
        res["pid"] = broker.pid
        phase = "create"
        log(f"{broker_name}, {scen}: creating {topics_n} topics x {ppt} partitions")
        res.update(phase_create(broker, topics, ppt, args.create_timeout_s))
        log(f"{broker_name}, {scen}: created in {res['create_s']:.2f}s")
        phase = "metadata"
        res.update(phase_metadata(broker, topics, ppt, args.metadata_requests))
        log(f"{broker_name}, {scen}: Metadata for all topics {res['metadata_ms']:.1f} ms (median)")
        if args.idle_s > 0:
            phase = "idle"
            res.update(phase_idle(broker, args.idle_s))
            log(f"{broker_name}, {scen}: idle CPU {res['idle_cpu_pct']:.1f}%")
        phase = "produce"
        what = f"for {args.duration_s}s" if args.duration_s else f"{args.records} records"
        log(f"{broker_name}, {scen}: producing {what} of {args.record_size} B over "
            f"{len(parts)} partitions")
        t_produce = time.monotonic()
        try:
            res.update(phase_produce(broker, parts, args.records, args.record_size,
                                     args.duration_s, args.produce_timeout_s, args.clients,
                                     dict(kv.split("=", 1) for kv in args.producer)))
        except PhaseError as e:
            if len(e.args) > 1:
                res.update(e.args[1])
            raise
        log(f"{broker_name}, {scen}: {res['msgs_per_s']:,.0f} msg/s, {res['mib_per_s']:.1f} MiB/s,"
            f" broker CPU {res['produce_broker_cpu_s']:.2f}s ({res['cpu_s_per_gib']:.2f} s/GiB)")
        if watcher:
            res["puts_after_produce"] = watcher.counts(since=t_produce)
        phase = "read"
        log(f"{broker_name}, {scen}: reading {res['acked']} records back")
        try:
            res.update(phase_read(broker, parts, res["acked"], args.record_size,
                                  args.read_timeout_s,
                                  acked_per_client=res.get("acked_per_client")))
        except PhaseError as e:
            if len(e.args) > 1:
                res.update(e.args[1])
            raise
        log(f"{broker_name}, {scen}: read in {res['read_s']:.2f}s "
            f"({res['read_msgs_per_s']:,.0f} msg/s)")
        if args.settle_s > 0:
            phase = "settle"
            log(f"{broker_name}, {scen}: waiting {args.settle_s:.0f}s before stopping")
            time.sleep(args.settle_s)
        phase = "end"
        res["load_avg_end"] = open("/proc/loadavg").read().split()[:3]
    except PhaseError as e:
        res["error"] = f"{phase}: {e.args[0]}"
    except KafkaException as e:
        res["error"] = f"{phase}: {e}"
    except Exception as e:  # noqa: BLE001 - report, stop the broker, go on
        res["error"] = f"{phase}: {type(e).__name__}: {e}"
    finally:
        if broker.alive():
            try:
                res["peak_rss_mib"] = broker_stats.status_kib(broker.pid, "VmHWM") / 1024.0
            except (OSError, SystemExit):
                pass
        elif "error" not in res and phase != "start":
            res["error"] = f"{phase}: the broker is not running"
        log(f"{broker_name}, {scen}: stopping the broker")
        t_stop = time.monotonic()
        broker.stop()
        res["stop_s"] = time.monotonic() - t_stop
        if watcher:
            watcher.stop()
            total = watcher.counts()
            res["object_puts_total"] = total
            if watcher.overflow:
                res["object_puts_note"] = "inotify queue overflowed; counts from listings"
            if t_produce is not None:
                run_puts = watcher.counts(since=t_produce)
                res["object_puts"] = run_puts
                if res.get("ingested_gib"):
                    res["puts_per_gib"] = run_puts["puts"] / res["ingested_gib"]
        text = broker.log_text()
        if broker_name == "silt":
            found = list(broker_stats.BROKER_RE.finditer(text))
            # The first Produce line: the report at SIGUSR1 after the produce phase (nothing is
            # produced before it; the report at the SIGUSR1 before it has no Produce line).
            if found:
                res["silt_produce_timing"] = broker_stats.broker_timing(found[0], "requests")
            found = list(broker_stats.WAL_RE.finditer(text))
            if found:
                res["silt_produce_wal"] = broker_stats.broker_timing(found[0], "writes")
                res["silt_produce_wal"]["avg_write_kib"] = int(found[0].group(2))
            res["log_error_lines"] = sum(1 for line in text.splitlines()
                                         if "error" in line.lower() or "fail" in line.lower())
        else:
            res["log_error_lines"] = sum(1 for line in text.splitlines() if "] ERROR " in line)
        if not args.keep_data:
            shutil.rmtree(broker.data, ignore_errors=True)
    if "error" in res:
        log(f"{broker_name}, {scen}: FAILED: {res['error']}")
    with open(run_dir / "result.json", "w") as f:
        json.dump(res, f, indent=2, sort_keys=True)
    return res


# --- report ---------------------------------------------------------------------------------

def scenario_name(topics, ppt):
    return f"{topics}x{ppt}"


def fmt(v, digits):
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


ROWS = [  # (label, key, digits, ratio?)
    ("broker start, s", "start_s", 1, True),
    ("create all topics until every leader is in Metadata, s", "create_s", 3, True),
    ("  of which the CreateTopics response, s", "create_response_s", 3, True),
    ("  broker CPU during create, s", "create_broker_cpu_s", 2, True),
    ("one Metadata request for all topics, ms (median)", "metadata_ms", 1, True),
    ("broker CPU in the idle seconds after create, %", "idle_cpu_pct", 1, True),
    ("broker RSS when idle, MiB", "rss_idle_mib", 0, True),
    ("produce, msg/s", "msgs_per_s", 0, True),
    ("produce, MiB/s", "mib_per_s", 1, True),
    ("records acknowledged", "acked", 0, False),
    ("broker CPU during produce, s", "produce_broker_cpu_s", 2, True),
    ("broker CPU per GiB produced, s", "cpu_s_per_gib", 2, True),
    ("client (producer) CPU during produce, s", "produce_client_cpu_s", 2, True),
    ("other processes' CPU during produce, s", "produce_other_cpu_s", 2, False),
    ("read back, s", "read_s", 2, True),
    ("read back, msg/s", "read_msgs_per_s", 0, True),
    ("read back, MiB/s", "read_mib_per_s", 1, True),
    ("records read", "read_records", 0, False),
    ("broker peak RSS (VmHWM), MiB", "peak_rss_mib", 0, True),
    ("object PUTs from produce start to exit", "object_puts.puts", 0, False),
    ("  stream-set / stream objects", None, 0, False),
    ("object PUTs per GiB ingested", "puts_per_gib", 1, False),
    ("metadata transactions during produce (Silt's log)", "produce_metadata_tx", 0, False),
    ("  per second", "metadata_tx_per_s", 1, False),
]


def report(runs, meta):
    lines = []
    lines.append(f"Date {meta['date']}, commit {meta['commit']} (the repository's HEAD), "
                 f"machine: {meta['machine']}.")
    if meta.get("silt_bin"):
        lines.append(f"Silt binary: {meta['silt_bin']} (modified {meta.get('silt_bin_mtime')}).")
        if meta.get("silt_overrides"):
            lines.append("Silt settings: " + ", ".join(meta["silt_overrides"]) + ".")
    if meta.get("producer_settings"):
        lines.append("Producer settings: " + ", ".join(meta["producer_settings"]) + ".")
    clients = meta.get("clients", 1)
    who = ("one Producer (acks=all, linger.ms=5, no compression) and one assigned Consumer"
           if clients == 1 else
           f"{clients} Producers (acks=all, linger.ms=5, no compression), then {clients} "
           "assigned Consumers, each in its own process on its share of the topics")
    lines.append(f"Client: confluent-kafka {meta['client']} (librdkafka {meta['librdkafka']}), "
                 f"{who}, on the same machine as the broker. Kafka "
                 f"{meta['kafka_version']} with tests/kafka-reference.sh defaults (heap "
                 "-Xmx512m); Silt with its defaults. Each broker freshly started with an "
                 "empty data dir per scenario.")
    scenarios = []
    for r in runs:
        key = (r["topics"], r["partitions_per_topic"])
        if key not in scenarios:
            scenarios.append(key)
    scenarios.sort(key=lambda k: k[0] * k[1])
    for topics_n, ppt in scenarios:
        by = {r["broker"]: r for r in runs
              if (r["topics"], r["partitions_per_topic"]) == (topics_n, ppt)}
        any_r = next(iter(by.values()))
        what = (f"for {any_r['duration_s']} s" if any_r.get("duration_s")
                else f"{any_r['records']:,} records")
        lines.append("")
        lines.append(f"### {topics_n} topics x {ppt:,} partitions = {topics_n * ppt:,} "
                     f"partitions ({what} of {any_r['record_size']:,} B)")
        lines.append("")
        brokers = [b for b in ("silt", "kafka") if b in by]
        both = len(brokers) == 2
        lines.append("| | " + " | ".join(brokers) + (" | silt/kafka |" if both else " |"))
        lines.append("|---" * (len(brokers) + 1 + both) + "|")
        status = ["ok" if "error" not in by[b] else f"failed: {by[b]['error']}" for b in brokers]
        lines.append("| status | " + " | ".join(status) + (" | |" if both else " |"))
        for label, key, digits, rat in ROWS:
            if key is None:  # the split of Silt's PUTs
                cells = []
                for b in brokers:
                    o = by[b].get("object_puts")
                    cells.append(f"{o['set_objects']:,} / {o['stream_objects']:,}" if o else "-")
            else:
                cells = [fmt(get(by[b], key), digits) for b in brokers]
            if all(c == "-" for c in cells):
                continue
            row = f"| {label} | " + " | ".join(cells)
            if both:
                s, k = get(by["silt"], key) if key else None, get(by["kafka"], key) if key else None
                ok = rat and isinstance(s, (int, float)) and isinstance(k, (int, float)) and k
                row += f" | {s / k:.2f}x" if ok else " | "
            lines.append(row + " |")
        for b in brokers:
            r = by[b]
            if r.get("create_note"):
                lines.append(f"\n{b}: {r['create_note']}.")
            other, busy = r.get("produce_other_cpu_s"), r.get("produce_s")
            if other and busy and other > 0.2 * busy and r.get("produce_other_top"):
                top = ", ".join(f"{x['process']} {x['cpu_s']} s"
                                for x in r["produce_other_top"])
                lines.append(f"\n{b}: other processes used {other:.0f} CPU s during its "
                             f"{busy:.0f} s produce phase (the most, among those alive "
                             f"before and after: {top}).")
            t = r.get("silt_produce_timing")
            if t:
                lines.append(f"\nSilt's own Produce timing over the produce phase: "
                             f"{t['requests']:,} requests, total p50 {t.get('total_p50_ms')} "
                             f"ms, p99 {t.get('total_p99_ms')} ms, max {t.get('total_max_ms')} "
                             "ms.")
    # The key ratio: CPU per GiB at the most partitions over the fewest.
    lines.append("")
    lines.append("### CPU per GiB produced: most partitions / fewest partitions")
    lines.append("")
    lines.append("| broker | partitions | CPU s/GiB | partitions | CPU s/GiB | ratio |")
    lines.append("|---|---|---|---|---|---|")
    ratios = {}
    for b in ("silt", "kafka"):
        rs = sorted((r for r in runs if r["broker"] == b), key=lambda r: r["partitions"])
        if len(rs) < 2:
            continue
        lo, hi = rs[0], rs[-1]
        a, z = lo.get("cpu_s_per_gib"), hi.get("cpu_s_per_gib")
        ok_lo = "error" not in lo and a
        ok_hi = "error" not in hi and z
        ratio = z / a if ok_lo and ok_hi else None
        ratios[b] = ratio
        lines.append(f"| {b} | {lo['partitions']:,} | {fmt(a, 2) if ok_lo else 'failed'} | "
                     f"{hi['partitions']:,} | {fmt(z, 2) if ok_hi else 'failed'} | "
                     f"{f'{ratio:.2f}x' if ratio else '-'} |")
    lines.append("")
    lines.append("CPU: the broker process's utime+stime (/proc/PID/stat) over the phase; per GiB "
                 "of record values acknowledged. Throughputs include the Python client's own "
                 "limits (it shares the 2 CPUs with the broker). Metadata ms includes the "
                 "client's parsing of the response. Object PUTs (Silt only): distinct object "
                 "files that appeared under data/objects/objects from the start of the produce "
                 "phase until the broker exited (uploads and compaction; compaction runs every "
                 "60 s by default). Metadata transactions: committed by Silt's metadata store "
                 "over the produce phase, from its log (Kafka keeps no such count).")
    return "\n".join(lines), ratios


def machine_info(workdir):
    fstype = subprocess.run(["findmnt", "-no", "FSTYPE", "-T", workdir], capture_output=True,
                            text=True).stdout.strip()
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) / 1048576
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    return (f"{os.cpu_count()} CPUs ({model}), {mem:.0f} GiB RAM, workdir on {fstype}, "
            f"kernel {platform.release()}, load average at start {load}"), fstype


def git_commit():
    try:
        c = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, timeout=30).stdout.strip() or "unknown"
        dirty = subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", "HEAD"],
                               timeout=60).returncode != 0
        return c + (" (dirty tree)" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--partitions-per-topic", default="1,1000")
    ap.add_argument("--records", type=int, default=600000)
    ap.add_argument("--record-size", type=int, default=1000)
    ap.add_argument("--duration-s", type=float, default=None)
    ap.add_argument("--only", choices=["silt", "kafka"])
    ap.add_argument("--silt-bin", default=str(REPO / "build" / "silt"))
    ap.add_argument("--silt-override", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting for Silt (repeatable), e.g. wal.io.engine=uring")
    ap.add_argument("--workdir", default=str(REPO / "build" / "many-partitions"))
    ap.add_argument("--idle-s", type=float, default=10)
    ap.add_argument("--metadata-requests", type=int, default=5)
    ap.add_argument("--start-timeout-s", type=float, default=120)
    ap.add_argument("--create-timeout-s", type=float, default=600)
    ap.add_argument("--produce-timeout-s", type=float, default=600)
    ap.add_argument("--read-timeout-s", type=float, default=600)
    ap.add_argument("--settle-s", type=float, default=0)
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--producer", action="append", default=[], metavar="KEY=VALUE",
                    help="a librdkafka setting of the producers (repeatable), e.g. "
                         "enable.idempotence=true")
    ap.add_argument("--keep-data", action="store_true")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    try:
        ppts = [int(x) for x in args.partitions_per_topic.split(",") if x.strip()]
    except ValueError:
        ap.error("--partitions-per-topic takes comma-separated numbers")
    if not ppts or min(ppts) < 1 or args.topics < 1 or args.records < 1 or args.record_size < 1:
        ap.error("counts must be at least 1")
    os.makedirs(args.workdir, exist_ok=True)
    args.workdir = os.path.realpath(args.workdir)
    results_path = Path(args.workdir) / "results.json"

    previous = []
    if results_path.exists():
        try:
            previous = json.loads(results_path.read_text()).get("runs", [])
        except (OSError, ValueError):
            previous = []
    if args.report_only:
        if not previous:
            sys.exit(f"many_partitions: no runs in {results_path}")
        meta = json.loads(results_path.read_text())["meta"]
        print(report(previous, meta)[0])
        return

    brokers = [args.only] if args.only else ["silt", "kafka"]
    machine, fstype = machine_info(args.workdir)
    if fstype in ("tmpfs", "ramfs"):
        sys.exit(f"many_partitions: {args.workdir} is on {fstype}: use a dir on a real disk")
    if "silt" in brokers:
        args.silt_bin = os.path.realpath(args.silt_bin)
        if not os.access(args.silt_bin, os.X_OK):
            sys.exit(f"many_partitions: no Silt binary at {args.silt_bin}")
    if "kafka" in brokers:
        subprocess.run([str(KREF), "install"], check=True, timeout=1800)

    # Keep earlier runs with the same settings of the (broker, scenario) pairs not run now.
    def same_settings(r):
        return (r.get("records") == args.records and r.get("record_size") == args.record_size
                and r.get("duration_s") == args.duration_s and r.get("topics") == args.topics
                and r.get("settle_s", 0) == args.settle_s
                and r.get("clients", 1) == args.clients
                and r.get("producer_settings", []) == args.producer)
    planned = {(b, ppt) for b in brokers for ppt in ppts}
    kept = [r for r in previous if same_settings(r)
            and (r["broker"], r["partitions_per_topic"]) not in planned]
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": git_commit(), "machine": machine, "client": client_version()[0],
            "librdkafka": rdkafka_version()[0],
            "kafka_version": os.environ.get("KAFKA_VERSION", "4.1.1"),
            "silt_bin": args.silt_bin if "silt" in brokers else None,
            "silt_overrides": args.silt_override, "clients": args.clients,
            "producer_settings": args.producer,
            # The repository's HEAD need not be what the binary was built from.
            "silt_bin_mtime": (datetime.datetime.fromtimestamp(
                os.path.getmtime(args.silt_bin), datetime.timezone.utc).strftime(
                    "%Y-%m-%dT%H:%M:%SZ") if "silt" in brokers else None),
            "argv": sys.argv[1:]}
    if kept:
        meta["kept_from_previous"] = sorted({f"{r['broker']}-{r['scenario']}" for r in kept})
        try:
            meta["previous_meta"] = json.loads(results_path.read_text()).get("meta")
        except (OSError, ValueError):
            pass

    # SIGTERM like Ctrl-C: unwind, so that the running broker is stopped.
    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    runs = list(kept)
    for b in brokers:
        for ppt in ppts:
            res = run_one(args, b, args.topics, ppt)
            runs.append(res)
            text, ratios = report(runs, meta)
            with open(results_path, "w") as f:
                json.dump({"meta": meta, "runs": runs, "cpu_per_gib_ratio_most_over_fewest": ratios,
                           "markdown": text}, f, indent=2, sort_keys=True)
    print()
    print(report(runs, meta)[0])
    print(f"\n(JSON: {results_path}; logs: {args.workdir}/<broker>-<scenario>/)")


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker_main()
    else:
        main()
