"""Consumer groups (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete) through real clients:
confluent-kafka-python and kafka-python groups, kcat -G, Kafka's console consumer,
kafka-consumer-groups (ConsumerGroupCommand) and ConsumerPerformance; rebalances on join,
leave, crash of a member, static membership, cooperative-sticky; committed offsets across a
clean restart and a SIGKILL of the broker (Silt only, `private_broker`).

Every member uses session.timeout.ms=6000 and heartbeat.interval.ms=1000 so that rebalances
and expiries happen within seconds. The reference Kafka broker runs with
group.initial.rebalance.delay.ms=0 (tests/kafka-reference.sh); a broker with Kafka's default
of 3000 delays the first rebalance of a new (empty) group by 3 s or more, which the waits for
a first assignment allow for (FIRST_JOIN_TIMEOUT). The rebalances that are timed (a member
joining, leaving, dying, a static member returning) are of non-empty groups, where no initial
delay applies.
"""
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.structs import OffsetAndMetadata

from util import JVM_OPTS, QUIET, admin, create_topic, produce_all, wait_topic, watermarks

ROOT = Path(__file__).resolve().parents[2]
KAFKA_REF = ROOT / "tests" / "kafka-reference.sh"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"

# Records of the three-consumer confluent-kafka scenario (the 100,000).
N_RECORDS = 100_000
PARTITIONS = 6
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 1000
SESSION_TIMEOUT = SESSION_TIMEOUT_MS / 1000
# A first join of a new group: the broker's initial rebalance delay (Kafka's default 3 s,
# extended by each member joining during it) plus the join itself.
FIRST_JOIN_TIMEOUT = 30
# Group settings of every confluent-kafka member.
GROUP_CONF = {"session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
              "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
              "enable.partition.eof": False}


def new_group():
    return "g-" + uuid.uuid4().hex[:12]


def wait_until(cond, timeout, what, members=()):
    """Poll cond() every 50 ms until it is true; fail with what() (or what) after timeout s.
    A member thread that failed fails the wait at once. Returns the seconds waited."""
    t0 = time.monotonic()
    while True:
        for m in members:
            m.check()
        if cond():
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            msg = what() if callable(what) else what
            raise AssertionError(f"after {timeout} s: {msg}")
        time.sleep(0.05)


# ---------------------------------------------------------------------------- group members

class Tally:
    """The distinct (partition, offset) pairs a group has consumed, shared by its members."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen = set()
        self.total = 0

    def add(self, pairs):
        with self.lock:
            self.seen.update(pairs)
            self.total += len(pairs)

    def __len__(self):
        with self.lock:
            return len(self.seen)


class Member:
    """A confluent-kafka consumer subscribed to `topic` in `group`, polled by its own thread.

    Records every assign/revoke/lost callback with its time and every message with the
    ownership session of its partition (a partition's session count goes up each time the
    member is assigned it), so that a test can check that within one ownership session a
    partition's offsets are consecutive: duplicates only come with a change of owner.
    `assigned` is the member's assignment() after its last poll.
    """

    def __init__(self, bootstrap, group, topic, name, cooperative=False, tally=None, pause=0,
                 **conf):
        self.name = name
        self.pause = pause      # seconds to pause after each batch: a slow (or stalled) consumer
        self.topic = topic
        self.cooperative = cooperative
        self.tally = tally
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                     "enable.auto.commit": False, **GROUP_CONF, **QUIET, **conf}
        if cooperative:
            self.conf["partition.assignment.strategy"] = "cooperative-sticky"
        self.lock = threading.Lock()
        self.events = []        # (monotonic time, "assign" | "revoke" | "lost", [partitions])
        self.assigned = frozenset()
        self.session = {}       # partition -> number of times assigned
        self.records = []       # (session, partition, offset, key, value)
        self.errors = []
        self.failure = None
        self._commit = None     # a pending commit request: (offsets or None, Event, [result])
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    # Callbacks run in the member's thread, inside consume().
    def _event(self, kind, parts):
        ps = sorted(p.partition for p in parts)
        with self.lock:
            self.events.append((time.monotonic(), kind, ps))
            if kind == "assign":
                for p in ps:
                    self.session[p] = self.session.get(p, 0) + 1

    def _on_assign(self, c, parts):
        self._event("assign", parts)
        if self.cooperative:
            c.incremental_assign(parts)
        else:
            c.assign(parts)

    def _on_revoke(self, c, parts):
        self._event("revoke", parts)
        if self.cooperative:
            c.incremental_unassign(parts)
        else:
            c.unassign()

    def _on_lost(self, c, parts):
        self._event("lost", parts)
        if self.cooperative:
            c.incremental_unassign(parts)
        else:
            c.unassign()

    def _run(self):
        c = None
        try:
            c = Consumer(self.conf)
            c.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                        on_lost=self._on_lost)
            while not self._stop.is_set():
                msgs = c.consume(num_messages=500, timeout=0.1)
                got = []
                with self.lock:
                    for m in msgs:
                        err = m.error()
                        if err is not None:
                            if err.fatal():
                                raise KafkaException(err)
                            self.errors.append(str(err))
                            continue
                        p = m.partition()
                        got.append((p, m.offset()))
                        self.records.append((self.session.get(p, 0), p, m.offset(), m.key(),
                                             m.value()))
                    self.assigned = frozenset(tp.partition for tp in c.assignment())
                if self.tally is not None and got:
                    self.tally.add(got)
                if got and self.pause:
                    self._stop.wait(self.pause)  # stop() ends the pause
                req = self._commit
                if req is not None:
                    self._commit = None
                    offsets, done, result = req
                    try:
                        if offsets is None:
                            result.append(c.commit(asynchronous=False))
                        else:
                            result.append(c.commit(offsets=offsets, asynchronous=False))
                    except KafkaException as e:
                        result.append(e)
                    done.set()
        except Exception as e:  # noqa: BLE001 - reported by check()
            self.failure = e
        finally:
            if c is not None:
                try:
                    c.close()
                except Exception as e:  # noqa: BLE001
                    self.failure = self.failure or e

    def check(self):
        if self.failure is not None:
            raise AssertionError(f"member {self.name} failed: {self.failure!r}")

    def commit(self, offsets=None, timeout=20):
        """A synchronous commit from the member's thread: of `offsets` ({partition: offset}),
        or of the positions of its assignment."""
        tps = None
        if offsets is not None:
            tps = [TopicPartition(self.topic, p, o) for p, o in sorted(offsets.items())]
        done, result = threading.Event(), []
        self._commit = (tps, done, result)
        assert done.wait(timeout), f"{self.name}: commit did not finish in {timeout} s"
        if isinstance(result[0], Exception):
            raise AssertionError(f"{self.name}: commit failed: {result[0]!r}")
        return result[0]

    def stop(self, timeout=30):
        """Leave the group: close() (LeaveGroup, and a commit with enable.auto.commit)."""
        self._stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.name}: close() did not finish in {timeout} s"
        self.check()

    def events_since(self, t):
        with self.lock:
            return [(kind, ps) for when, kind, ps in self.events if when >= t]

    def count(self):
        with self.lock:
            return len(self.records)

    def describe(self):
        with self.lock:
            ev = [(round(t % 1000, 2), k, ps) for t, k, ps in self.events]
            return (f"{self.name}: assigned {sorted(self.assigned)}, {len(self.records)} "
                    f"records, events {ev[-8:]}, errors {self.errors[-3:]}")


CHILD = textwrap.dedent('''
    import sys
    from confluent_kafka import Consumer

    bootstrap, group, topic, name = sys.argv[1:5]

    def report(kind):
        def cb(c, parts):
            print(kind, ",".join(str(p.partition) for p in parts), flush=True)
        return cb

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                  "session.timeout.ms": %d, "heartbeat.interval.ms": %d,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "log_level": 0})
    c.subscribe([topic], on_assign=report("assign"), on_revoke=report("revoke"))
    while True:
        c.poll(0.1)
''' % (SESSION_TIMEOUT_MS, HEARTBEAT_MS))


class ChildMember:
    """A group member in a process of its own (to be killed with SIGKILL); `assigned` is
    what its assign/revoke callbacks last reported on its stdout."""

    def __init__(self, bootstrap, group, topic, name, tmp_path):
        self.name = name
        script = tmp_path / "group_member_child.py"
        script.write_text(CHILD)
        self.proc = subprocess.Popen([sys.executable, str(script), bootstrap, group, topic, name],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assigned = frozenset()
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            kind, _, parts = line.strip().partition(" ")
            ps = frozenset(int(p) for p in parts.split(",") if p)
            self.assigned = ps if kind == "assign" else frozenset()

    def check(self):
        if self.proc.poll() is not None and self.proc.returncode != -9:
            raise AssertionError(f"member {self.name} exited {self.proc.returncode}: "
                                 f"{self.proc.stderr.read()[-2000:]}")

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def describe(self):
        return f"{self.name} (pid {self.proc.pid}): assigned {sorted(self.assigned)}, " \
               f"output {self.lines[-6:]}"

    def close(self):
        if self.proc.poll() is None:
            self.kill()
        self.proc.stdout.close()
        self.proc.stderr.close()


def balanced(members, partitions):
    """The members' assignments are disjoint, cover all partitions, and are equal in size."""
    sets = [m.assigned for m in members]
    return (sum(len(s) for s in sets) == partitions and
            frozenset().union(*sets) == frozenset(range(partitions)) and
            all(len(s) == partitions // len(members) for s in sets))


def wait_balanced(members, partitions, timeout, what):
    return wait_until(lambda: balanced(members, partitions), timeout,
                      lambda: f"{what}; members:\n  " + "\n  ".join(m.describe() for m in members),
                      members)


def stop_all(members):
    """Stop members together (a ChildMember is killed), then wait for each to close."""
    for m in members:
        if isinstance(m, Member):
            m._stop.set()
        else:
            m.close()
    for m in members:
        if isinstance(m, Member):
            m.stop()


def stop_in_turn(members, partitions, timeout=30):
    """Stop members one at a time, each once the others hold every partition again: a member
    closing while its group rebalances may leave before its last commit (librdkafka sends that
    commit after LeaveGroup, and it is refused, as Kafka refuses it), and a member still
    polling may take the partition over and commit a position before the end."""
    for i, m in enumerate(members):
        m.stop()
        rest = members[i + 1:]
        if rest:
            wait_until(lambda: (sum(len(r.assigned) for r in rest) == partitions and
                                frozenset().union(*(r.assigned for r in rest)) ==
                                frozenset(range(partitions))), timeout,
                       lambda: f"{m.name} stopped; the others did not take its partitions:\n  " +
                               "\n  ".join(r.describe() for r in rest), rest)


def committed(bootstrap, group, topic, partitions, timeout=20):
    """The group's committed offsets ({partition: offset}, OFFSET_INVALID for none), fetched
    by a consumer that does not join the group (OffsetFetch only)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, **QUIET})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=timeout)
        for tp in tps:
            assert tp.error is None, f"committed() of {group} {topic}[{tp.partition}]: {tp.error}"
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def high_watermarks(bootstrap, topic, partitions):
    return {p: watermarks(bootstrap, topic, p)[1] for p in range(partitions)}


def keyed_records(n, start=0):
    return [{"key": b"key-%d" % i, "value": b"value-%d" % i} for i in range(start, start + n)]


def check_sessions(members):
    """Within one ownership session of a partition by a member, offsets are consecutive (no
    gap, no repeat). Returns the number of sessions."""
    sessions = {}
    for m in members:
        for sess, p, off, _, _ in m.records:
            sessions.setdefault((m.name, p, sess), []).append(off)
    for (name, p, sess), offs in sessions.items():
        assert offs == list(range(offs[0], offs[0] + len(offs))), \
            f"{name}, partition {p}, ownership {sess}: offsets not consecutive: " \
            f"{[o for i, o in enumerate(offs) if i and o != offs[i - 1] + 1][:5]} break the run"
    return len(sessions)


# ---------------------------------------------------------------------------- Kafka's tools

# Short-lived tool JVMs start about a second faster with C1 only (kafka-reference.sh adds
# -XX:+UseG1GC itself, so no other collector can be chosen here).
TOOL_ENV = dict(os.environ, KAFKA_TOOL_HEAP_OPTS="-Xmx256m -XX:TieredStopAtLevel=1")


def tool_cmd(cls, *args):
    return [str(KAFKA_REF), "tool", cls, *map(str, args)]


def tool(cls, *args, timeout=60, check=True):
    try:
        r = subprocess.run(tool_cmd(cls, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout, env=TOOL_ENV)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{cls} {' '.join(map(str, args))} did not finish in {timeout}s:\n"
                    f"stdout:\n{e.stdout}\nstderr:\n{e.stderr}")
    if check:
        assert r.returncode == 0, (f"{cls} {' '.join(map(str, args))} exited {r.returncode}:\n"
                                   f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def groups_cmd(broker, *args, timeout=60):
    """kafka-consumer-groups.sh: its stdout (where it also prints its errors) and stderr."""
    r = tool(GROUP_COMMAND, "--bootstrap-server", broker.bootstrap, *args, timeout=timeout)
    return r.stdout + r.stderr


def table(out, first, columns):
    """The rows of the table in `out` whose header starts with the column names `columns`
    (whitespace-separated); each row a dict, up to the next blank line. `first` (the value of
    the first column, e.g. the group) selects rows, None takes all. The last column takes the
    rest of the line."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.split()[:len(columns)] == columns:
            rows = []
            for row in lines[i + 1:]:
                if not row.strip():
                    break
                vals = row.split(None, len(columns) - 1)
                if first is None or vals[0] == first:
                    rows.append(dict(zip(columns, vals)))
            return rows
    raise AssertionError(f"no table with columns {columns} in:\n{out}")


OFFSET_COLUMNS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "CONSUMER-ID", "HOST", "CLIENT-ID"]
MEMBER_COLUMNS = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
RESET_COLUMNS = ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]


def offsets_table(out, group, topic):
    """--describe --offsets: {partition: (current, log end, lag, consumer id, client id)};
    current and lag are None when shown as '-' (no committed offset)."""
    num = lambda v: None if v == "-" else int(v)  # noqa: E731
    rows = [r for r in table(out, group, OFFSET_COLUMNS) if r["TOPIC"] == topic]
    return {int(r["PARTITION"]): (num(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]),
                                  num(r["LAG"]), r["CONSUMER-ID"], r["CLIENT-ID"])
            for r in rows}


def list_groups(broker):
    """kafka-consumer-groups.sh --list (ListGroups of the Java admin client)."""
    return set(groups_cmd(broker, "--list").split())


def group_ids(bootstrap, timeout=10):
    """The groups the broker lists (librdkafka's ListGroups): quicker than a tool JVM."""
    return {g.id for g in admin(bootstrap).list_groups(timeout=timeout)}


def group_state(bootstrap, group, timeout=10):
    """(state, [member client ids]) of a group from ListGroups/DescribeGroups (librdkafka's
    list_groups), or None if the broker does not know the group."""
    try:
        gs = admin(bootstrap).list_groups(group, timeout=timeout)
    except KafkaException as e:
        if e.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
            return None
        raise
    for g in gs:
        if g.id == group:
            if g.error is not None and g.error.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return None
            return g.state, sorted(m.client_id for m in g.members)
    return None


# ---------------------------------------------------------------------------- confluent-kafka

def test_three_consumers_share_the_topic(broker, topic_name):
    """Three confluent-kafka consumers of one group read N_RECORDS keyed records of a
    6-partition topic. They join one after the other while records remain (each reads at most
    about 10,000 records a second), so the group rebalances twice under way: every record is
    seen, a partition's offsets are consecutive while one member owns it (duplicates only
    where ownership changed), the group ends with 2 partitions a member, and the offsets
    committed on close are the end of every partition."""
    b = broker.bootstrap
    create_topic(b, topic_name, partitions=PARTITIONS)
    t0 = time.monotonic()
    delivered = produce_all(b, topic_name, keyed_records(N_RECORDS), timeout=60,
                            **{"linger.ms": 20, "batch.num.messages": 5000})
    expected = {(d["partition"], d["offset"]): (d["key"], d["value"]) for d in delivered}
    assert len(expected) == N_RECORDS
    assert len({p for p, _ in expected}) == PARTITIONS, "the keys did not reach every partition"
    t_produced = time.monotonic()

    group = new_group()
    tally = Tally()
    members = []

    def join():
        members.append(Member(b, group, topic_name, f"c{len(members)}", tally=tally, pause=0.05,
                              **{"enable.auto.commit": True, "auto.commit.interval.ms": 1000}))
    try:
        join()
        wait_until(lambda: len(tally) >= N_RECORDS // 5, FIRST_JOIN_TIMEOUT + 20,
                   lambda: f"{len(tally)} records read: {members[0].describe()}", members)
        join()
        wait_until(lambda: len(tally) >= N_RECORDS // 2, 30,
                   lambda: f"{len(tally)} records read; members:\n  " +
                           "\n  ".join(m.describe() for m in members), members)
        join()
        wait_until(lambda: len(tally) == N_RECORDS and balanced(members, PARTITIONS),
                   FIRST_JOIN_TIMEOUT + 30,
                   lambda: f"{len(tally)} of {N_RECORDS} records seen and balanced="
                           f"{balanced(members, PARTITIONS)}; members:\n  " +
                           "\n  ".join(m.describe() for m in members), members)
        t_consumed = time.monotonic()
        assignments = {m.name: sorted(m.assigned) for m in members}
        stop_in_turn(members, PARTITIONS)
    finally:
        stop_all(members)

    for m in members:
        for _, p, off, key, value in m.records:
            assert expected.get((p, off)) == (key, value), \
                f"{m.name} read {key!r}={value!r} at partition {p} offset {off}, produced " \
                f"{expected.get((p, off))}"
    assert tally.seen == set(expected)
    sessions = check_sessions(members)
    duplicates = tally.total - len(tally.seen)
    print(f"produced {N_RECORDS} in {t_produced - t0:.1f} s, consumed in "
          f"{t_consumed - t_produced:.1f} s; per member "
          f"{ {m.name: len(m.records) for m in members} }, {duplicates} duplicates, "
          f"{sessions} ownership sessions, final assignment {assignments}")
    assert all(len(ps) == 2 for ps in assignments.values()), assignments
    assert sum(1 for m in members if m.records) >= 2, "one member read everything"
    # enable.auto.commit: close() commits the positions, the end of every partition.
    hw = high_watermarks(b, topic_name, PARTITIONS)
    assert committed(b, group, topic_name, PARTITIONS) == hw


# ---------------------------------------------------------------------------- kafka-python

def test_kafka_python_group(broker, topic_name):
    """Two kafka-python consumers of one group (JoinGroup v2, SyncGroup v1, Heartbeat v1,
    OffsetCommit v2, OffsetFetch v1, LeaveGroup v1) share a 4-partition topic: all records
    read, 2 partitions each, auto-committed offsets at the end of every partition. Then an
    offset committed with a metadata string outside the group reads back with it."""
    partitions, n = 4, 4000
    b = broker.bootstrap
    create_topic(b, topic_name, partitions=partitions)
    delivered = produce_all(b, topic_name, keyed_records(n))
    expected = {(d["partition"], d["offset"]): d["value"] for d in delivered}
    group = new_group()
    lock = threading.Lock()
    seen = {}            # (partition, offset) -> times read
    state = {}           # member -> assignment
    failures = []
    stop = threading.Event()

    def run(name):
        try:
            c = KafkaConsumer(topic_name, bootstrap_servers=b, group_id=group, client_id=name,
                              auto_offset_reset="earliest", enable_auto_commit=True,
                              auto_commit_interval_ms=500, session_timeout_ms=SESSION_TIMEOUT_MS,
                              heartbeat_interval_ms=HEARTBEAT_MS, fetch_max_wait_ms=100,
                              request_timeout_ms=30000)
            try:
                while not stop.is_set():
                    for recs in c.poll(timeout_ms=100, max_records=1000).values():
                        with lock:
                            for m in recs:
                                assert expected.get((m.partition, m.offset)) == m.value, \
                                    f"{name} read {m.value!r} at {m.partition}/{m.offset}"
                                seen[(m.partition, m.offset)] = \
                                    seen.get((m.partition, m.offset), 0) + 1
                    with lock:
                        state[name] = frozenset(tp.partition for tp in c.assignment())
            finally:
                c.close()  # autocommit on close, then LeaveGroup
        except Exception as e:  # noqa: BLE001
            failures.append(f"{name}: {e!r}")

    threads = [threading.Thread(target=run, args=(f"kp{i}",), daemon=True) for i in range(2)]
    for t in threads:
        t.start()

    def done():
        assert not failures, failures
        with lock:
            sets = list(state.values())
            return (len(seen) == n and len(sets) == 2 and
                    all(len(s) == partitions // 2 for s in sets) and
                    frozenset().union(*sets) == frozenset(range(partitions)))
    try:
        wait_until(done, FIRST_JOIN_TIMEOUT + 30,
                   lambda: f"{len(seen)} of {n} records, assignments {state}")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not any(t.is_alive() for t in threads), "a kafka-python consumer did not close"
    assert not failures, failures
    assert set(seen) == set(expected)
    print(f"duplicates: {sum(seen.values()) - n}; assignments {state}")
    hw = high_watermarks(b, topic_name, partitions)
    assert committed(b, group, topic_name, partitions) == hw

    def kp(**conf):
        return KafkaConsumer(bootstrap_servers=b, group_id=group, enable_auto_commit=False,
                             request_timeout_ms=30000, **conf)
    c = kp()
    try:
        c.commit({KTopicPartition(topic_name, 1): OffsetAndMetadata(7, "checkpoint 7 ü")})
    finally:
        c.close()
    c = kp()
    try:
        got = {p: c.committed(KTopicPartition(topic_name, p), metadata=True)
               for p in range(partitions)}
    finally:
        c.close()
    assert got == {p: OffsetAndMetadata(7, "checkpoint 7 ü") if p == 1 else
                   OffsetAndMetadata(hw[p], "") for p in range(partitions)}


# ---------------------------------------------------------------------------- kcat

def test_kcat_balanced_consumer(broker, topic_name):
    """kcat -G (librdkafka's KafkaConsumer) reads every record with -c N and commits on exit;
    a second kcat in the same group starts at the committed offsets and reads only what was
    produced since."""
    b = broker.bootstrap
    partitions, n = 3, 3000
    create_topic(b, topic_name, partitions=partitions)
    delivered = produce_all(b, topic_name, keyed_records(n))
    group = new_group()
    # Not "-o beginning": with -G, kcat assigns that offset and ignores committed ones.
    args = ["kcat", "-b", b, "-G", group, topic_name, "-X", "auto.offset.reset=earliest", "-q",
            "-f", "%p %o %k %s\\n", "-X", f"session.timeout.ms={SESSION_TIMEOUT_MS}",
            "-X", f"heartbeat.interval.ms={HEARTBEAT_MS}"]

    def kcat(count):
        try:
            r = subprocess.run(args + ["-c", str(count)], capture_output=True, text=True,
                               timeout=FIRST_JOIN_TIMEOUT + 30)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"kcat -G -c {count} did not finish: {len((e.stdout or b'').splitlines())} "
                        f"lines read; stderr:\n{e.stderr}")
        assert r.returncode == 0, f"kcat exited {r.returncode}:\n{r.stderr[-2000:]}"
        return [tuple(line.split(" ")) for line in r.stdout.splitlines()]

    got = kcat(n)
    want = sorted((str(d["partition"]), str(d["offset"]), d["key"].decode(), d["value"].decode())
                  for d in delivered)
    assert sorted(got) == want
    assert committed(b, group, topic_name, partitions) == \
        high_watermarks(b, topic_name, partitions)

    more = produce_all(b, topic_name, keyed_records(30, start=n))
    got = kcat(30)
    assert sorted(got) == sorted((str(d["partition"]), str(d["offset"]), d["key"].decode(),
                                  d["value"].decode()) for d in more), \
        "the second kcat did not start at the committed offsets"


# ---------------------------------------------------------------------------- console consumer

def test_console_consumer_groups(broker, topic_name, tmp_path):
    """Kafka's console consumer in subscribe mode: with --group it commits on exit and a second
    run resumes after the committed offsets; without --group it joins a group of its own
    (console-consumer-NNNNN, Stable with one member while it runs) and commits nothing."""
    b = broker.bootstrap
    partitions, n = 3, 300
    create_topic(b, topic_name, partitions=partitions)
    first = produce_all(b, topic_name, keyed_records(n))
    group = new_group()

    def console(*args, max_messages):
        r = tool(CONSOLE_CONSUMER, "--bootstrap-server", b, "--topic", topic_name,
                 "--max-messages", max_messages, "--timeout-ms", FIRST_JOIN_TIMEOUT * 1000,
                 "--property", "print.key=true", "--property", "print.partition=true",
                 "--property", "print.offset=true",
                 "--consumer-property", f"session.timeout.ms={SESSION_TIMEOUT_MS}",
                 "--consumer-property", f"heartbeat.interval.ms={HEARTBEAT_MS}", *args,
                 timeout=FIRST_JOIN_TIMEOUT + 40)
        assert f"Processed a total of {max_messages} messages" in r.stderr, r.stderr
        return sorted(r.stdout.splitlines())

    def lines(delivered):
        # print.partition and print.offset: "Partition:P\tOffset:O\tKEY\tVALUE"
        return sorted(f"Partition:{d['partition']}\tOffset:{d['offset']}\t"
                      f"{d['key'].decode()}\t{d['value'].decode()}" for d in delivered)

    assert console("--group", group, "--from-beginning", max_messages=n) == lines(first)
    # enable.auto.commit is on with --group: close() committed the end of every partition.
    hw = high_watermarks(b, topic_name, partitions)
    assert committed(b, group, topic_name, partitions) == hw
    second = produce_all(b, topic_name, keyed_records(30, start=n))
    assert console("--group", group, max_messages=30) == lines(second), \
        "the second console consumer of the group did not start at the committed offsets"

    # No --group: a group console-consumer-<random>. It reads everything, then waits for one
    # more record while the test looks at its group.
    before = {g for g in group_ids(b) if g.startswith("console-consumer-")}
    out = tmp_path / "console-consumer.out"
    total = n + 30
    with open(out, "w") as f:
        proc = subprocess.Popen(
            tool_cmd(CONSOLE_CONSUMER, "--bootstrap-server", b, "--topic", topic_name,
                     "--from-beginning", "--max-messages", total + 1, "--timeout-ms", 60000,
                     "--consumer-property", f"session.timeout.ms={SESSION_TIMEOUT_MS}",
                     "--consumer-property", f"heartbeat.interval.ms={HEARTBEAT_MS}"),
            stdout=f, stderr=subprocess.PIPE, text=True, env=TOOL_ENV)
    try:
        found = {}

        def joined():
            assert proc.poll() is None, f"console consumer exited {proc.returncode}: " \
                                        f"{proc.stderr.read()}"
            if len(out.read_text().splitlines()) < total:
                return False
            new = {g for g in group_ids(b) if g.startswith("console-consumer-")} - before
            for g in new:
                found[g] = group_state(b, g)
            return any(s is not None and s[0] == "Stable" and len(s[1]) == 1
                       for s in found.values())
        wait_until(joined, FIRST_JOIN_TIMEOUT + 30,
                   lambda: f"{len(out.read_text().splitlines())} of {total} records read; "
                           f"new console-consumer groups: {found}")
        (default_group,) = [g for g, s in found.items() if s and s[0] == "Stable"]
        assert re.fullmatch(r"console-consumer-\d+", default_group), default_group
        produce_all(b, topic_name, [{"key": b"last", "value": b"last"}])
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the console consumer did not read the last record within 30 s")
        assert proc.returncode == 0, err
        assert f"Processed a total of {total + 1} messages" in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # The generated group does not commit (enable.auto.commit=false without --group).
    assert committed(b, default_group, topic_name, partitions) == \
        {p: OFFSET_INVALID for p in range(partitions)}


# ---------------------------------------------------------------------------- consumer groups tool

def timed_records(n_per_partition, partitions, base):
    """Records round-robin over the partitions: the first half of every partition `base`
    old (ms), the second half an hour younger."""
    n = n_per_partition * partitions
    return [{"partition": i % partitions, "key": b"k%d" % i, "value": b"v%d" % i,
             "timestamp": base + (3600_000 if i >= n // 2 else 0) + i} for i in range(n)]


def test_consumer_groups_command_active_group(broker, topic_name):
    """kafka-consumer-groups.sh on a group with one active confluent-kafka member: --list,
    --describe --members / --offsets / --state; --reset-offsets, --delete and --delete-offsets
    refused while the member is there; --describe once it left, with the lag of new records."""
    b = broker.bootstrap
    partitions = 3
    create_topic(b, topic_name, partitions=partitions)
    produce_all(b, topic_name, [{"partition": i % 3, "key": b"k%d" % i, "value": b"v%d" % i}
                                for i in range(300)])
    group = new_group()
    client_id = "groups-cli-" + group[2:8]

    m = Member(b, group, topic_name, client_id,
               **{"enable.auto.commit": True, "auto.commit.interval.ms": 200})
    try:
        wait_until(lambda: m.count() == 300 and len(m.assigned) == partitions and
                   committed(b, group, topic_name, partitions) == {p: 100 for p in range(3)},
                   FIRST_JOIN_TIMEOUT + 20, lambda: m.describe(), [m])

        assert group in list_groups(broker)

        out = groups_cmd(broker, "--describe", "--group", group, "--members")
        rows = table(out, group, MEMBER_COLUMNS)
        assert len(rows) == 1, out
        member_id = rows[0]["CONSUMER-ID"]
        assert rows[0]["CLIENT-ID"] == client_id, out
        assert rows[0]["#PARTITIONS"].strip() == "3", out
        assert "127.0.0.1" in rows[0]["HOST"], out

        out = groups_cmd(broker, "--describe", "--group", group, "--offsets")
        assert offsets_table(out, group, topic_name) == \
            {p: (100, 100, 0, member_id, client_id) for p in range(3)}, out

        out = groups_cmd(broker, "--describe", "--group", group, "--state")
        # GROUP  COORDINATOR (ID)  ASSIGNMENT-STRATEGY  STATE  #MEMBERS
        row = re.search(rf"^{group}\s+\S+\s+\(\d+\)\s+(\S+)\s+(\S+)\s+(\d+)\s*$", out, re.M)
        assert row and row.groups() == ("range", "Stable", "1"), out

        # Refused while the group has a member.
        out = groups_cmd(broker, "--reset-offsets", "--to-earliest", "--execute",
                         "--group", group, "--topic", topic_name)
        assert "can only be reset if the group" in out and "inactive" in out, out
        out = groups_cmd(broker, "--delete", "--group", group)
        assert "GroupNotEmptyException" in out, out
        out = groups_cmd(broker, "--delete-offsets", "--group", group, "--topic", topic_name)
        assert out.count("GroupSubscribedToTopicException") == 3, out
        assert committed(b, group, topic_name, partitions) == {p: 100 for p in range(3)}
    finally:
        m.stop()

    wait_until(lambda: (group_state(b, group) or ("?",))[0] == "Empty", 10,
               lambda: f"the group is {group_state(b, group)} after its only member closed")
    produce_all(b, topic_name, [{"partition": i % 3, "key": b"n", "value": b"new"}
                                for i in range(30)])
    out = groups_cmd(broker, "--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in out, out
    assert offsets_table(out, group, topic_name) == \
        {p: (100, 110, 10, "-", "-") for p in range(3)}, out


def test_consumer_groups_command_changes_offsets(broker, topic_name):
    """kafka-consumer-groups.sh on a group without members whose offsets a consumer outside
    the group committed: --reset-offsets --to-earliest and --to-datetime --execute (a member
    then starts there), --delete-offsets, --delete (gone from --list; a second --delete: not
    found)."""
    b = broker.bootstrap
    partitions = 3
    create_topic(b, topic_name, partitions=partitions)
    # 100 records a partition: offsets 0..49 three hours old, 50..99 two hours old.
    base = (int(time.time()) - 3 * 3600) * 1000
    produce_all(b, topic_name, timed_records(100, partitions, base))
    group = new_group()
    c = Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False,
                  **QUIET})
    try:
        res = c.commit(offsets=[TopicPartition(topic_name, p, 100) for p in range(3)],
                       asynchronous=False)
        assert all(tp.error is None for tp in res), res
    finally:
        c.close()

    out = groups_cmd(broker, "--reset-offsets", "--to-earliest", "--execute",
                     "--group", group, "--topic", topic_name)
    assert sorted((int(r["PARTITION"]), r["NEW-OFFSET"].strip())
                  for r in table(out, group, RESET_COLUMNS)) == \
        [(p, "0") for p in range(3)], out
    assert committed(b, group, topic_name, partitions) == {p: 0 for p in range(3)}

    # Half an hour after the old records: the first of the younger ones, offset 50.
    when = datetime.fromtimestamp(base / 1000 + 1800, tz=timezone.utc)
    out = groups_cmd(broker, "--reset-offsets", "--to-datetime",
                     when.strftime("%Y-%m-%dT%H:%M:%S.000+00:00"), "--execute",
                     "--group", group, "--topic", topic_name)
    assert sorted((int(r["PARTITION"]), r["NEW-OFFSET"].strip())
                  for r in table(out, group, RESET_COLUMNS)) == \
        [(p, "50") for p in range(3)], out
    assert committed(b, group, topic_name, partitions) == {p: 50 for p in range(3)}
    # A member of the group starts there.
    m = Member(b, group, topic_name, "after-reset")
    try:
        wait_until(lambda: m.count() == 3 * 50, FIRST_JOIN_TIMEOUT + 20, m.describe, [m])
    finally:
        m.stop()
    firsts = {}
    for _, p, off, _, _ in m.records:
        firsts.setdefault(p, off)
    assert firsts == {p: 50 for p in range(3)}, m.describe()

    out = groups_cmd(broker, "--delete-offsets", "--group", group, "--topic", topic_name)
    assert f"Request succeeded for deleting offsets from group {group}." in out, out
    status = table(out, None, ["TOPIC", "PARTITION", "STATUS"])
    assert sorted((r["TOPIC"], int(r["PARTITION"]), r["STATUS"].strip()) for r in status) == \
        [(topic_name, p, "Successful") for p in range(3)], out
    assert committed(b, group, topic_name, partitions) == \
        {p: OFFSET_INVALID for p in range(3)}

    out = groups_cmd(broker, "--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out, out
    assert group not in list_groups(broker)
    assert group_state(b, group) in (None, ("Dead", [])), group_state(b, group)
    out = groups_cmd(broker, "--delete", "--group", group)
    assert "GroupIdNotFoundException" in out, out


# ---------------------------------------------------------------------------- ConsumerPerformance

def test_consumer_performance(broker, topic_name):
    """kafka-consumer-perf-test.sh --messages N subscribes in a group of its own
    (perf-consumer-NNNNN), reads N records and reports them; it commits on close."""
    b = broker.bootstrap
    partitions, n = 3, 20_000
    create_topic(b, topic_name, partitions=partitions)
    produce_all(b, topic_name, [{"key": b"k%d" % i, "value": b"x" * 100} for i in range(n)],
                **{"linger.ms": 20})
    before = {g for g in group_ids(b) if g.startswith("perf-consumer-")}
    r = tool(CONSUMER_PERF, "--bootstrap-server", b, "--topic", topic_name, "--messages", n,
             "--timeout", FIRST_JOIN_TIMEOUT * 1000, timeout=FIRST_JOIN_TIMEOUT + 60)
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    lines = r.stdout.strip().splitlines()
    header = [h.strip() for h in lines[0].split(",")]
    assert header[4] == "data.consumed.in.nMsg", r.stdout
    values = [v.strip() for v in lines[-1].split(",")]
    assert int(values[4]) == n, f"consumed {values[4]} of {n}:\n{r.stdout}\n{r.stderr}"
    assert "WARNING" not in r.stdout + r.stderr, r.stdout + r.stderr
    new = {g for g in group_ids(b) if g.startswith("perf-consumer-")} - before
    assert len(new) == 1 and re.fullmatch(r"perf-consumer-\d+", next(iter(new))), new
    assert sum(committed(b, next(iter(new)), topic_name, partitions).values()) == n


# ---------------------------------------------------------------------------- Java client

def test_java_cooperative_group(java_classpath, broker, topic_name):
    """The Java client (tests/integration/java, silt.it.GroupScenarios cooperative-group): two
    CooperativeStickyAssignor consumers (JoinGroup v9, SyncGroup v5, OffsetCommit v9, ...), the
    second taking half the partitions incrementally; commitSync with metadata and leader
    epoch read back by listConsumerGroupOffsets; describeConsumerGroups; LeaveGroup hands the
    partitions over; deleteConsumerGroups."""
    cmd = ["java", *JVM_OPTS, "-cp", java_classpath, "silt.it.GroupScenarios", broker.bootstrap,
           "cooperative-group", topic_name]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=FIRST_JOIN_TIMEOUT + 60)
    except subprocess.TimeoutExpired as e:
        out = e.output.decode(errors="replace") if isinstance(e.output, bytes) else (e.output or "")
        pytest.fail(f"GroupScenarios cooperative-group did not finish:\n{out}")
    assert r.returncode == 0 and "OK cooperative-group" in r.stdout, r.stdout
    print(r.stdout)


# ---------------------------------------------------------------------------- membership

def test_join_triggers_rebalance(broker, topic_name):
    """A second consumer joining a stable group gets half the partitions within the session
    timeout; the first saw its partitions revoked and half of them assigned again."""
    b = broker.bootstrap
    create_topic(b, topic_name, partitions=PARTITIONS)
    group = new_group()
    a = Member(b, group, topic_name, "a")
    members = [a]
    try:
        wait_balanced([a], PARTITIONS, FIRST_JOIN_TIMEOUT, "the first member got no assignment")
        t = time.monotonic()
        members.append(Member(b, group, topic_name, "b"))
        took = wait_balanced(members, PARTITIONS, SESSION_TIMEOUT,
                             "the group did not rebalance over the joining member")
        print(f"rebalance on join: {took:.2f} s")
        ev = a.events_since(t)
        assert ("revoke", list(range(PARTITIONS))) in ev and \
            ("assign", sorted(a.assigned)) in ev, a.describe()
    finally:
        stop_all(members)


def test_leave_hands_partitions_over(broker, topic_name):
    """A consumer closing (LeaveGroup) has its partitions taken by the two others long before
    its session would have timed out."""
    b = broker.bootstrap
    create_topic(b, topic_name, partitions=PARTITIONS)
    group = new_group()
    members = [Member(b, group, topic_name, f"m{i}") for i in range(3)]
    try:
        wait_balanced(members, PARTITIONS, FIRST_JOIN_TIMEOUT, "the group did not balance")
        leaving = members.pop()
        t = time.monotonic()
        leaving.stop()
        closed = time.monotonic() - t
        wait_balanced(members, PARTITIONS, SESSION_TIMEOUT - 1.5 - closed,
                      "the remaining members did not take over the leaving member's "
                      "partitions well within the session timeout (LeaveGroup ignored?)")
        print(f"close() took {closed:.2f} s; takeover {time.monotonic() - t:.2f} s after it began")
    finally:
        stop_all(members)


def test_killed_member_expires(broker, topic_name, tmp_path):
    """A member killed with SIGKILL (no LeaveGroup) keeps its partitions until its session
    times out (session.timeout.ms=6000), then the others take them over: not before about
    the session timeout (the broker does not end a membership when a connection closes),
    and not long after."""
    b = broker.bootstrap
    create_topic(b, topic_name, partitions=PARTITIONS)
    group = new_group()
    members = [Member(b, group, topic_name, f"m{i}") for i in range(2)]
    child = ChildMember(b, group, topic_name, "doomed", tmp_path)
    try:
        wait_balanced(members + [child], PARTITIONS, FIRST_JOIN_TIMEOUT,
                      "the group of three did not balance")
        lost = child.assigned
        t = time.monotonic()
        child.kill()
        took = wait_balanced(members, PARTITIONS, SESSION_TIMEOUT + 5,
                             f"the killed member's partitions {sorted(lost)} were not taken "
                             f"over within the session timeout plus 5 s")
        print(f"takeover after SIGKILL: {took:.2f} s")
        # The last heartbeat of the killed member was at most heartbeat.interval.ms before
        # the kill: its session cannot have expired in less than session - heartbeat.
        assert took >= SESSION_TIMEOUT - HEARTBEAT_MS / 1000 - 1.5, \
            f"partitions moved {took:.2f} s after the kill, before the session timeout"
        for m in members:
            assert not [e for e in m.events_since(t) if e[0] == "lost"], m.describe()
    finally:
        child.close()
        stop_all(members)


def test_static_member_restart_keeps_assignment(broker, topic_name):
    """A static member (group.instance.id) that restarts within its session timeout gets its
    partitions back without a rebalance: the other member sees no revocation and no new
    assignment."""
    b = broker.bootstrap
    create_topic(b, topic_name, partitions=PARTITIONS)
    group = new_group()
    instance = "static-" + uuid.uuid4().hex[:8]
    a = Member(b, group, topic_name, "a")
    members = [a]
    try:
        # a is the group's leader; the static member joins after it.
        wait_balanced([a], PARTITIONS, FIRST_JOIN_TIMEOUT, "the first member got no assignment")
        members.append(Member(b, group, topic_name, "s1", **{"group.instance.id": instance}))
        wait_balanced(members, PARTITIONS, SESSION_TIMEOUT + 5, "the static member did not join")
        before_a, before_s = a.assigned, members[1].assigned
        t = time.monotonic()
        members.pop().stop()
        s2 = Member(b, group, topic_name, "s2", **{"group.instance.id": instance})
        members.append(s2)
        took = wait_until(lambda: s2.assigned == before_s, SESSION_TIMEOUT - 1,
                          lambda: f"the restarted static member did not get "
                                  f"{sorted(before_s)} back: {s2.describe()}; {a.describe()}",
                          members)
        # Heartbeats of the other member go on for a few intervals: no rebalance comes.
        time.sleep(3 * HEARTBEAT_MS / 1000)
        assert a.events_since(t) == [] and a.assigned == before_a, \
            f"the other member saw a rebalance: {a.describe()}"
        assert s2.assigned == before_s and [e[0] for e in s2.events_since(t)] == ["assign"], \
            s2.describe()
        print(f"static member back with its partitions after {took:.2f} s")
    finally:
        stop_all(members)


def test_cooperative_sticky(broker, topic_name):
    """Two cooperative-sticky members: the second joining takes half the partitions through
    incremental callbacks; the first is never revoked all of its partitions and keeps owning
    the ones it keeps (no new ownership session for them)."""
    b = broker.bootstrap
    create_topic(b, topic_name, partitions=PARTITIONS)
    produce_all(b, topic_name, keyed_records(600))
    group = new_group()
    a = Member(b, group, topic_name, "a", cooperative=True)
    members = [a]
    try:
        wait_balanced([a], PARTITIONS, FIRST_JOIN_TIMEOUT, "the first member got no assignment")
        wait_until(lambda: a.count() == 600, 20, a.describe, [a])
        t = time.monotonic()
        bm = Member(b, group, topic_name, "b", cooperative=True)
        members.append(bm)
        took = wait_balanced(members, PARTITIONS, SESSION_TIMEOUT + 5,
                             "the cooperative group did not rebalance over the new member")
        print(f"cooperative rebalance: {took:.2f} s")
        kept, moved = a.assigned, bm.assigned
        ev = a.events_since(t)
        revoked = [p for kind, ps in ev if kind == "revoke" for p in ps]
        assert sorted(revoked) == sorted(moved), f"a revoked {revoked}, b got {sorted(moved)}"
        assert all(ps == [] for kind, ps in ev if kind == "assign"), a.describe()
        assert all(a.session[p] == 1 for p in kept), a.describe()
        got = [p for kind, ps in bm.events_since(t) if kind == "assign" for p in ps]
        assert sorted(got) == sorted(moved), bm.describe()
        # a committed nothing: b reads the partitions it took from the start.
        wait_until(lambda: bm.count() == sum(1 for r in a.records if r[1] in moved), 20,
                   bm.describe, members)
    finally:
        stop_all(members)


# ---------------------------------------------------------------------------- committed offsets

def resume_check(b, group, topic, partitions, want, timeout=60):
    """A new member of `group` finds the committed offsets `want` and consumes from them to
    the end of every partition."""
    assert committed(b, group, topic, partitions, timeout=timeout) == want
    hw = high_watermarks(b, topic, partitions)
    m = Member(b, group, topic, "resumer")
    try:
        n = sum(hw[p] - want[p] for p in range(partitions))
        wait_until(lambda: m.count() >= n and len(m.assigned) == partitions,
                   FIRST_JOIN_TIMEOUT + 20, m.describe, [m])
    finally:
        m.stop()
    got = sorted((p, off) for _, p, off, _, _ in m.records)
    assert got == sorted((p, o) for p in range(partitions) for o in range(want[p], hw[p])), \
        f"consumed {len(got)} records, first per partition " \
        f"{ {p: min((o for q, o in got if q == p), default=None) for p in range(partitions)} }" \
        f", committed {want}"


@pytest.mark.parametrize("how", ["restart", "sigkill"])
def test_committed_offsets_survive(private_broker, topic_name, how):
    """Offsets committed by a group member, and by a consumer outside the group (generation
    -1, assign mode), survive a clean restart / a SIGKILL of the broker: committed() returns
    them and a new member of the group consumes from them."""
    b = private_broker
    partitions = 3
    create_topic(b.bootstrap, topic_name, partitions=partitions)
    produce_all(b.bootstrap, topic_name,
                [{"partition": i % 3, "key": b"k%d" % i, "value": b"v%d" % i}
                 for i in range(300)], acks="all")
    group = new_group()

    def bounce():
        if how == "restart":
            code = b.stop()
            assert code == 0, f"exit code {code} on SIGTERM"
        else:
            b.kill()
        b.start()
        wait_topic(b.bootstrap, topic_name, partitions, timeout=60)

    # A member commits explicit offsets (its generation and member id).
    m = Member(b.bootstrap, group, topic_name, "committer")
    try:
        wait_until(lambda: m.count() == 300, FIRST_JOIN_TIMEOUT + 20, m.describe, [m])
        m.commit({0: 17, 1: 42, 2: 100})
    finally:
        m.stop()
    first = {0: 17, 1: 42, 2: 100}
    assert committed(b.bootstrap, group, topic_name, partitions) == first
    bounce()
    resume_check(b.bootstrap, group, topic_name, partitions, first)

    # A consumer outside the group commits for it (the group is empty).
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                  "enable.auto.commit": False, **QUIET})
    try:
        second = {0: 99, 1: 0, 2: 60}
        res = c.commit(offsets=[TopicPartition(topic_name, p, o) for p, o in second.items()],
                       asynchronous=False)
        assert all(tp.error is None for tp in res), res
    finally:
        c.close()
    bounce()
    resume_check(b.bootstrap, group, topic_name, partitions, second)


def test_group_survives_broker_restart(private_broker, topic_name):
    """A Stable group, with a static and a dynamic member, goes on across a clean restart of
    the broker without a rebalance: the coordinator restores its generation, members and
    assignments, so the members' heartbeats after the restart are answered as before."""
    b = private_broker
    create_topic(b.bootstrap, topic_name, partitions=PARTITIONS)
    group = new_group()
    # Sessions long enough for the reference broker's restart (several seconds); Silt's takes
    # well under one.
    long_session = {"session.timeout.ms": 45000}
    a = Member(b.bootstrap, group, topic_name, "a", **long_session)
    members = [a]
    try:
        wait_balanced([a], PARTITIONS, FIRST_JOIN_TIMEOUT, "the first member got no assignment")
        members.append(Member(b.bootstrap, group, topic_name, "s", **long_session,
                              **{"group.instance.id": "static-" + uuid.uuid4().hex[:8]}))
        wait_balanced(members, PARTITIONS, SESSION_TIMEOUT + 5, "the static member did not join")
        before = [m.assigned for m in members]
        t = time.monotonic()
        code = b.stop()
        assert code == 0, f"exit code {code} on SIGTERM"
        b.start()
        wait_topic(b.bootstrap, topic_name, PARTITIONS, timeout=60)
        # Several heartbeat intervals after the restart, still no callback and the same
        # partitions.
        time.sleep(4 * HEARTBEAT_MS / 1000)
        for m, had in zip(members, before):
            assert m.events_since(t) == [] and m.assigned == had, \
                f"{m.name} saw a rebalance across the restart: {m.describe()}"
    finally:
        stop_all(members)
