"""The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat, ConsumerGroupDescribe, and
OffsetCommit/OffsetFetch with member epochs) through Java consumers with
group.protocol=consumer (silt.it.GroupScenarios, tests/integration/java) and Kafka's
kafka-consumer-groups (ConsumerGroupCommand).

With this protocol the broker assigns the partitions (its default assignor, "uniform", or the
one a member names in group.remote.assignor) and a member only learns of a new target
assignment in a heartbeat response: a rebalance of a non-empty group takes up to two heartbeat
intervals (Kafka: group.consumer.heartbeat.interval.ms=5000, also the smallest it allows), so
the scenarios wait for rebalances up to 15 s.

The Java 4.1.1 client sends ConsumerGroupHeartbeat v1 (its own member id, a random UUID in
base64, with epoch 0 to join and -1 to leave; after the first, fields that did not change are
null), OffsetCommit v9 and OffsetFetch v9 (with the member id and epoch; requireStable), and
its admin client ConsumerGroupDescribe v1 (for a classic group Kafka answers
GROUP_ID_NOT_FOUND, "Group G is not a consumer group.", and the admin client falls back to
DescribeGroups v6) and ListGroups v5 (with types filters).

A scenario runs in its own JVM and prints its progress. Where it needs Kafka's tools to look at
the group it prints "PAUSE TAG key=value ..." and waits for "go TAG" on its stdin while its
consumers go on polling; the test runs the tools meanwhile.
"""
import queue
import re
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from test_groups import MEMBER_COLUMNS, groups_cmd, table
from util import JVM_OPTS

# The whole of one scenario, tools included (pytest-timeout allows 120 s a test).
SCENARIO_TIMEOUT = 110


class Scenario:
    """A GroupScenarios scenario in a JVM of its own, with its PAUSE handshake."""

    def __init__(self, classpath, broker, scenario, topic, *args):
        self.name = scenario
        self.broker = broker
        self.deadline = time.monotonic() + SCENARIO_TIMEOUT
        cmd = ["java", *JVM_OPTS, "-cp", classpath, "silt.it.GroupScenarios", broker.bootstrap,
               scenario, topic, *args]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.lines = []
        self.pauses = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if line.startswith("PAUSE "):
                self.pauses.put(line)
        self.pauses.put(None)

    def output(self):
        return "\n".join(self.lines)

    def left(self):
        return max(0.0, self.deadline - time.monotonic())

    def fail(self, why):
        self.kill()
        pytest.fail(f"{self.name} against {self.broker.kind} ({self.broker.bootstrap}): {why}\n"
                    f"scenario output:\n{self.output()}", pytrace=False)

    def wait_pause(self, tag):
        """The key=value pairs of the scenario's PAUSE TAG line."""
        try:
            line = self.pauses.get(timeout=self.left())
        except queue.Empty:
            self.fail(f"no PAUSE {tag} within {SCENARIO_TIMEOUT} s of the start")
        if line is None:
            self.proc.wait(10)
            self.fail(f"the scenario exited {self.proc.returncode} before PAUSE {tag}")
        _, got, *pairs = line.split(" ")
        if got != tag:
            self.fail(f"PAUSE {got} where PAUSE {tag} was expected")
        return dict(p.split("=", 1) for p in pairs)

    def resume(self, tag):
        try:
            self.proc.stdin.write(f"go {tag}\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.proc.wait(10)
            self.fail(f"the scenario exited {self.proc.returncode} while paused at {tag}")

    def finish(self):
        try:
            self.proc.wait(self.left())
        except subprocess.TimeoutExpired:
            self.fail(f"did not finish within {SCENARIO_TIMEOUT} s")
        self.reader.join(10)
        if self.proc.returncode != 0 or f"OK {self.name}" not in self.output():
            self.fail(f"exited {self.proc.returncode}")
        print(self.output())

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(10)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is not None and self.proc.poll() is None:
            # A failed check of the test while the scenario waits: show what it printed.
            self.kill()
            print(f"scenario output:\n{self.output()}")
        self.kill()


def check_described(s, info):
    """PAUSE describe: kafka-consumer-groups on the Stable group of three consumer-protocol
    members, four tool runs at once: --describe --members (plain and --verbose), --state,
    --list --type."""
    b = s.broker
    group = info["group"]
    members = {}
    for m in info["members"].split(","):
        client, member_id, count = m.split(":")
        members[member_id] = (client, count)
    with ThreadPoolExecutor(4) as pool:
        runs = [pool.submit(groups_cmd, b, *args, timeout=max(5.0, s.left())) for args in (
            ("--describe", "--group", group, "--members"),
            ("--describe", "--group", group, "--members", "--verbose"),
            ("--describe", "--group", group, "--state"),
            ("--list", "--type"))]
        members_out, verbose_out, state_out, list_out = [r.result() for r in runs]

    rows = table(members_out, group, MEMBER_COLUMNS)
    assert {r["CONSUMER-ID"]: (r["CLIENT-ID"], r["#PARTITIONS"].strip()) for r in rows} == \
        members, members_out
    assert all("127.0.0.1" in r["HOST"] for r in rows), members_out

    # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT
    # TARGET-EPOCH TARGET-ASSIGNMENT (the assignments as TOPIC:P,P).
    rows = table(verbose_out, group, MEMBER_COLUMNS + [
        "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"])
    assert {r["CONSUMER-ID"] for r in rows} == set(members), verbose_out
    epochs = {(r["CURRENT-EPOCH"], r["TARGET-EPOCH"]) for r in rows}
    assert len(epochs) == 1 and len(set(next(iter(epochs)))) == 1, verbose_out
    for r in rows:
        assert r["CURRENT-ASSIGNMENT"] == r["TARGET-ASSIGNMENT"].strip(), verbose_out

    # GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS
    row = re.search(rf"^{group}\s+\S+\s+\(\d+\)\s+(\S+)\s+(\S+)\s+(\d+)\s*$", state_out, re.M)
    assert row and row.groups() == (info["assignor"], "Stable", "3"), state_out

    listed = table(list_out, None, ["GROUP", "TYPE"])
    assert {r["GROUP"]: r["TYPE"].strip() for r in listed}.get(group) == "Consumer", list_out
    print(members_out, verbose_out, state_out, sep="\n")


def test_consumer_protocol_group(java_classpath, broker, topic_name):
    """Consumer-protocol members with the broker's default assignor (uniform) on a 6-partition
    topic of 30,000 keyed records: a first member gets all 6 partitions, two join while it reads
    and it revokes exactly the 4 they get; describeConsumerGroups (type CONSUMER, Stable, uniform,
    client-made member ids, member epochs = group epoch, assignments = target assignments),
    listGroups (type consumer) and kafka-consumer-groups --describe --members [--verbose] /
    --state and --list --type show the group of three; one closing hands its partitions to the
    two others (no revocation); a fourth joining takes one partition from each (each revokes
    exactly that one). Meanwhile every record is read exactly once (commitSync after each batch
    and on revocation) and no partition ever has two owners. Once all close the group is Empty
    with the end offsets committed; a new member resumes from them; kafka-consumer-groups
    --describe --state shows the group Empty and --delete deletes it (silt.it.GroupScenarios
    consumer-protocol-group)."""
    with Scenario(java_classpath, broker, "consumer-protocol-group", topic_name) as s:
        check_described(s, s.wait_pause("describe"))
        s.resume("describe")

        group = s.wait_pause("delete")["group"]
        out = groups_cmd(broker, "--describe", "--group", group, "--state",
                         timeout=max(5.0, s.left()))
        row = re.search(rf"^{group}\s+\S+\s+\(\d+\)\s+(\S+)\s+(\S+)\s+(\d+)\s*$", out, re.M)
        assert row and row.groups() == ("uniform", "Empty", "0"), out
        out = groups_cmd(broker, "--delete", "--group", group, timeout=max(5.0, s.left()))
        assert f"Deletion of requested consumer groups ('{group}') was successful." in out, out
        s.resume("delete")
        s.finish()


def test_consumer_protocol_range_assignor(java_classpath, broker, topic_name):
    """test_consumer_protocol_group with group.remote.assignor=range, up to a member leaving:
    three members end with 2 partitions each, describeConsumerGroups and listGroups show the
    Stable consumer group with the range assignor; when one closes, the two others take its
    partitions, each revoking exactly what it no longer has (Kafka's range assignor may move a
    partition from one to the other: it is assigned only after it was revoked); every record is
    read exactly once and the end offsets are committed."""
    with Scenario(java_classpath, broker, "consumer-protocol-group", topic_name, "range") as s:
        s.finish()


def test_consumer_protocol_upgrade_from_classic(java_classpath, broker, topic_name):
    """A classic group (group.protocol=classic) commits offsets with metadata and empties; a
    consumer with group.protocol=consumer joins the same group id: the group becomes a consumer
    group (type CONSUMER, Stable, uniform) that kept the offsets and their metadata, and the
    member resumes from them (silt.it.GroupScenarios consumer-protocol-upgrade)."""
    with Scenario(java_classpath, broker, "consumer-protocol-upgrade", topic_name) as s:
        s.finish()
