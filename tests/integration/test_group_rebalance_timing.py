"""When classic-protocol rebalances complete and who gets which partitions, as Apache Kafka's
group coordinator times them (GroupMetadataManager's classic groups):

- A member that stops polling but goes on heartbeating from its background thread keeps its
  partitions until its max.poll.interval.ms runs out: the rebalance another member starts
  meanwhile waits for it (its heartbeats are answered REBALANCE_IN_PROGRESS and keep its
  session; the group's rebalance timeout is the longest of its members'), and a dynamic member
  leaves at its poll timeout. A static member (group.instance.id) sends no LeaveGroup: it stays
  in the group through the rebalance it missed and, Kafka naming static members after their
  instance id, the range assignor gives it its partition back; it keeps it until its session
  lapses after its poll timeout.
- A static member that restarts within its session timeout gets its partitions back without a
  rebalance, and the other members see no callback; a client of JoinGroup before v9
  (librdkafka) coming back as the group's leader is told the leader as it was, so that it syncs
  as a follower and runs no assignment.

librdkafka (confluent-kafka) and the Java consumer (tests/integration/java, GroupScenarios
stalled-member and static-restart). Members use session.timeout.ms=6000,
heartbeat.interval.ms=1000 and max.poll.interval.ms=10000.
"""
import logging
import subprocess
import threading
import time
import uuid

import pytest

from test_groups import FIRST_JOIN_TIMEOUT, HEARTBEAT_MS, SESSION_TIMEOUT, Member, new_group, \
    stop_all, wait_balanced, wait_until
from util import JVM_OPTS, create_topic, produce_all

MAX_POLL_MS = 10_000
MAX_POLL = MAX_POLL_MS / 1000
STALL = {"max.poll.interval.ms": MAX_POLL_MS}


def stall(member, topic, partitions):
    """Makes `member` stop polling: it sleeps after its next non-empty batch (until stopped),
    which records produced now to `partitions` bring. Returns when it has them (monotonic
    time)."""
    member.pause = 3600
    produce_all(member.conf["bootstrap.servers"], topic,
                [{"partition": p, "value": b"late"} for p in sorted(partitions) for _ in range(5)])
    wait_until(lambda: member.count() > 0, 20, member.describe, [member])
    return time.monotonic()


def reads_any(members, partitions):
    """Whether any of `members` has read a record of `partitions` (the callers poll it and
    note when it turns true)."""
    for m in members:
        with m.lock:
            if any(p in partitions for _, p, _, _, _ in m.records):
                return True
    return False


def test_stalled_member_keeps_its_partitions_until_its_poll_timeout(broker, topic_name):
    """a and b share two partitions; a stops polling, records arrive on its partition and c
    joins a second later. The rebalance c starts waits for a, alive but not rejoining, until
    a's client leaves at its max.poll.interval.ms: b and c read nothing of a's partition
    before then, and they take it over soon after."""
    b = broker.bootstrap
    create_topic(b, topic_name, partitions=2)
    group = new_group()
    a = Member(b, group, topic_name, "a", **STALL)
    members = [a]
    try:
        wait_balanced([a], 2, FIRST_JOIN_TIMEOUT, "the first member got no assignment")
        members.append(Member(b, group, topic_name, "b", **STALL))
        wait_balanced(members, 2, SESSION_TIMEOUT + 5, "b did not join")
        held = a.assigned
        t0 = stall(a, topic_name, held)
        time.sleep(1)
        members.append(Member(b, group, topic_name, "c", **STALL))
        others = members[1:]
        wait_until(lambda: reads_any(others, held), MAX_POLL + 3 * SESSION_TIMEOUT,
                   lambda: "a's partitions were never taken over: " +
                           "; ".join(m.describe() for m in members), others)
        took = time.monotonic() - t0
        print(f"another member read a's partition {took:.2f} s after a stalled")
        assert took >= MAX_POLL - 1.0, \
            f"a's partition {sorted(held)} was read by another member {took:.2f} s after a " \
            f"stopped polling, before its max.poll.interval.ms ({MAX_POLL_MS} ms): " + \
            "; ".join(m.describe() for m in members)
    finally:
        stop_all(members)


def test_stalled_static_member_keeps_its_partition_until_its_session_lapses(broker, topic_name):
    """a is static (its instance id sorts before b's and c's client ids, its own client id
    after them); a and b share two partitions; a stops polling and c joins a second later. The
    rebalance completes at the rebalance timeout without a, which stays a member: with member
    ids made as Kafka makes them (a static member's from its instance id) the range assignor
    ranks a first and gives it its partition again. A static librdkafka member sends no
    LeaveGroup at its poll timeout but stops heartbeating: only once its session has lapsed,
    max.poll.interval.ms + session.timeout.ms after it stalled, do b or c read its partition."""
    b = broker.bootstrap
    create_topic(b, topic_name, partitions=2)
    group = new_group()
    static = {**STALL, "group.instance.id": "a-" + uuid.uuid4().hex[:8]}
    a = Member(b, group, topic_name, "z-stalled", **static)
    members = [a]
    try:
        wait_balanced([a], 2, FIRST_JOIN_TIMEOUT, "the first member got no assignment")
        members.append(Member(b, group, topic_name, "b", **STALL))
        wait_balanced(members, 2, SESSION_TIMEOUT + 5, "b did not join")
        held = a.assigned
        t0 = stall(a, topic_name, held)
        time.sleep(1)
        members.append(Member(b, group, topic_name, "c", **STALL))
        others = members[1:]
        wait_until(lambda: reads_any(others, held), MAX_POLL + 4 * SESSION_TIMEOUT,
                   lambda: "a's partition was never taken over: " +
                           "; ".join(m.describe() for m in members), others)
        took = time.monotonic() - t0
        print(f"another member read a's partition {took:.2f} s after a stalled")
        # a's last heartbeat comes at most a heartbeat interval plus the client's one-second
        # poll-timeout check after max.poll.interval.ms; its session lapses a session later.
        earliest = MAX_POLL + SESSION_TIMEOUT - HEARTBEAT_MS / 1000 - 2
        assert took >= earliest, \
            f"a's partition {sorted(held)} was read by another member {took:.2f} s after a " \
            f"stopped polling, before a's session could lapse ({earliest:.1f} s): " + \
            "; ".join(m.describe() for m in members)
    finally:
        stop_all(members)


class LogLines(logging.Handler):
    """Keeps a librdkafka client's log lines (confluent-kafka's `logger`)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []
        self.guard = threading.Lock()

    def emit(self, record):
        with self.guard:
            self.lines.append(record.getMessage())

    def matching(self, text):
        with self.guard:
            return [line for line in self.lines if text in line]


def client_log(name):
    logger = logging.getLogger(f"silt-it.{name}.{uuid.uuid4().hex[:6]}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = LogLines()
    logger.addHandler(handler)
    return logger, handler


@pytest.mark.parametrize("follower", ["dynamic", "static"])
def test_static_leader_restart_keeps_its_partitions_without_a_rebalance(broker, topic_name,
                                                                        follower):
    """a (static, the group's leader) and b share six partitions; a closes and a new client
    with a's instance id joins within the session timeout. It gets a's partitions back and b
    sees no callback. librdkafka's JoinGroup (v5) cannot skip the assignment: the coordinator
    tells it the leader as it was, so the new client (its debug log shows) is not elected
    leader and runs no assignment, and syncs as a follower."""
    b = broker.bootstrap
    create_topic(b, topic_name, partitions=6)
    group = new_group()
    instance = {"group.instance.id": "a-" + uuid.uuid4().hex[:8]}
    other = {"group.instance.id": "b-" + uuid.uuid4().hex[:8]} if follower == "static" else {}
    a = Member(b, group, topic_name, "a", **instance)
    members = [a]
    try:
        wait_balanced([a], 6, FIRST_JOIN_TIMEOUT, "the first member got no assignment")
        bm = Member(b, group, topic_name, "b", **other)
        members.append(bm)
        wait_balanced(members, 6, SESSION_TIMEOUT + 5, "b did not join")
        held = a.assigned
        t = time.monotonic()
        members.remove(a)
        a.stop()
        logger, lines = client_log("a2")
        a2 = Member(b, group, topic_name, "a2", debug="cgrp", logger=logger, **instance)
        members.append(a2)
        took = wait_until(lambda: a2.assigned == held, SESSION_TIMEOUT - 1,
                          lambda: f"the restarted static member did not get {sorted(held)} "
                                  f"back: {a2.describe()}; {bm.describe()}", members)
        time.sleep(3 * HEARTBEAT_MS / 1000)
        print(f"a2 has {sorted(held)} back {took:.2f} s after a closed")
        assert bm.events_since(t) == [], f"b saw a rebalance: {bm.describe()}"
        assert [e[0] for e in a2.events_since(t)] == ["assign"] and a2.assigned == held, \
            a2.describe()
        joins = lines.matching("JoinGroup response: GenerationId")
        assert joins, "no JoinGroup response in a2's debug log (debug=cgrp)"
        elected = lines.matching("I am elected leader")
        assert not elected, \
            f"a2 (JoinGroup v5) was told it leads the Stable group and ran an assignment: " \
            f"{joins[-1]!r}, {elected[-1]!r}"
    finally:
        stop_all(members)


@pytest.mark.parametrize("scenario", ["stalled-member", "static-restart"])
def test_java_rebalance_timing(java_classpath, broker, topic_name, scenario):
    """The Java consumer (GroupScenarios stalled-member, static-restart): a member that stops
    polling keeps its partitions until its max.poll.interval.ms runs out; a static member
    (the group's leader, JoinGroup v9) restarted within its session gets its partitions back
    and the other member sees no callback."""
    cmd = ["java", *JVM_OPTS, "-cp", java_classpath, "silt.it.GroupScenarios", broker.bootstrap,
           scenario, topic_name]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=FIRST_JOIN_TIMEOUT + 90)
    except subprocess.TimeoutExpired as e:
        out = e.output.decode(errors="replace") if isinstance(e.output, bytes) else (e.output or "")
        pytest.fail(f"GroupScenarios {scenario} did not finish:\n{out}")
    assert r.returncode == 0 and f"OK {scenario}" in r.stdout, r.stdout
    print(r.stdout)
