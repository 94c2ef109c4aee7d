"""Scenarios of the Java Kafka 4.1.1 client (tests/integration/java, silt.it.ClientScenarios).

The Maven project is built once per session into a temporary directory (or SILT_JAVA_BUILD,
a directory reused across sessions); each test runs one scenario in its own JVM:
    java -cp CLASSPATH silt.it.ClientScenarios BOOTSTRAP SCENARIO TOPIC
A scenario prints its progress and exits 0 on success, 1 with "FAIL: ..." otherwise.
"""
import subprocess

import pytest

from util import JVM_OPTS

SCENARIO_TIMEOUT = 60


def run_scenario(classpath, broker, scenario, topic):
    cmd = ["java", *JVM_OPTS, "-cp", classpath, "silt.it.ClientScenarios",
           broker.bootstrap, scenario, topic]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=SCENARIO_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        out = e.output.decode(errors="replace") if isinstance(e.output, bytes) else (e.output or "")
        pytest.fail(f"{scenario} against {broker.kind} did not finish in {SCENARIO_TIMEOUT}s:\n{out}")
    assert r.returncode == 0, (
        f"{scenario} against {broker.kind} ({broker.bootstrap}) exited {r.returncode}:\n{r.stdout}")
    assert f"OK {scenario}" in r.stdout, r.stdout


def test_idempotent_producer(java_classpath, broker, topic_name):
    """Default 4.x producer (idempotent, acks=all): 1,000 records with keys and headers to 3
    partitions; every send's metadata has dense offsets from 0 per partition, in send order."""
    run_scenario(java_classpath, broker, "idempotent-producer", topic_name)


def test_assign_consumer(java_classpath, broker, topic_name):
    """Consumer without group.id: assign, seekToBeginning, exact keys/values/headers/timestamps/
    offsets of 500 records (null keys and values, empty and repeated headers); seek to the middle;
    offsetsForTimes, beginningOffsets, endOffsets."""
    run_scenario(java_classpath, broker, "assign-consumer", topic_name)


def test_admin(java_classpath, broker, topic_name):
    """AdminClient: describeCluster, createTopics (configs, validateOnly, duplicate),
    listTopics, describeTopics, describeConfigs (topic and broker), incrementalAlterConfigs,
    createPartitions, deleteRecords, deleteTopics."""
    run_scenario(java_classpath, broker, "admin", topic_name)


def test_producer_acks(java_classpath, broker, topic_name):
    """acks=0 and acks=1 (non-idempotent) and acks=all producers, 200 records each, all read back."""
    run_scenario(java_classpath, broker, "producer-acks", topic_name)


def test_compression(java_classpath, broker, topic_name):
    """none, gzip, snappy, lz4 and zstd producers, 200 records each, read back in order."""
    run_scenario(java_classpath, broker, "compression", topic_name)
