"""Kafka's command-line tool classes (run via tests/kafka-reference.sh tool) against the broker.

Each tool invocation is a JVM start (1-2 s on a small machine), so the tests keep them few.
The console consumer reads with --partition/--offset (assign mode): it never joins a group.
"""
import re
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KAFKA_REF = ROOT / "tests" / "kafka-reference.sh"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"


def tool(cls, *args, stdin=None, timeout=60, check=True):
    cmd = [str(KAFKA_REF), "tool", cls, *map(str, args)]
    try:
        r = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{cls} {' '.join(map(str, args))} did not finish in {timeout}s:\n"
                    f"stdout:\n{e.stdout}\nstderr:\n{e.stderr}")
    if check:
        assert r.returncode == 0, (f"{cls} {' '.join(map(str, args))} exited {r.returncode}:\n"
                                   f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def topics(broker):
    return tool(TOPIC_COMMAND, "--bootstrap-server", broker.bootstrap, "--list").stdout.split()


def test_topic_command(broker, topic_name):
    b = broker.bootstrap
    r = tool(TOPIC_COMMAND, "--bootstrap-server", b, "--create", "--topic", topic_name,
             "--partitions", 3)
    assert f"Created topic {topic_name}." in r.stdout, r.stdout

    assert topic_name in topics(broker)

    tool(TOPIC_COMMAND, "--bootstrap-server", b, "--alter", "--topic", topic_name, "--partitions", 4)

    out = tool(TOPIC_COMMAND, "--bootstrap-server", b, "--describe", "--topic", topic_name).stdout
    # Topic: T\tTopicId: ...\tPartitionCount: 4\tReplicationFactor: 1\tConfigs: ...
    # \tTopic: T\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: 
    assert re.search(rf"Topic: {topic_name}\tTopicId: \S+\tPartitionCount: 4\tReplicationFactor: 1",
                     out), out
    parts = re.findall(rf"Topic: {topic_name}\tPartition: (\d+)\tLeader: (\d+)\tReplicas: (\d+)\t"
                       rf"Isr: (\d+)", out)
    assert sorted(int(p[0]) for p in parts) == [0, 1, 2, 3], out
    for _, leader, replicas, isr in parts:
        assert leader == replicas == isr, out

    tool(TOPIC_COMMAND, "--bootstrap-server", b, "--delete", "--topic", topic_name)
    # Deletion reaches the broker's metadata asynchronously in KRaft: allow a retry.
    for attempt in range(3):
        listed = topics(broker)
        if topic_name not in listed:
            break
        time.sleep(1)
    assert topic_name not in listed, listed


def test_console_producer_consumer(broker, topic_name):
    b = broker.bootstrap
    tool(TOPIC_COMMAND, "--bootstrap-server", b, "--create", "--topic", topic_name,
         "--partitions", 1)
    lines = [f"key-{i}:value {i}" for i in range(50)]
    lines += ["k-colons:v:with:colons", "k-space:  leading and trailing spaces  ",
              "k-unicode:Grüße ✓ 日本", "k-empty:"]
    tool(CONSOLE_PRODUCER, "--bootstrap-server", b, "--topic", topic_name,
         "--property", "parse.key=true", "--property", "key.separator=:",
         stdin="".join(line + "\n" for line in lines))

    r = tool(CONSOLE_CONSUMER, "--bootstrap-server", b, "--topic", topic_name,
             "--partition", 0, "--offset", "earliest", "--max-messages", len(lines),
             "--property", "print.key=true", "--timeout-ms", 20000)
    # Keys and values split at the first separator; print.key joins them with a tab.
    expected = [line.replace(":", "\t", 1) for line in lines]
    assert r.stdout.split("\n")[:-1] == expected, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert f"Processed a total of {len(lines)} messages" in r.stderr, r.stderr
