#!/usr/bin/env python3
"""Compatibility-matrix driver (tests/compat/README.md) on Apache Kafka's command-line tools
(kafka-topics, kafka-configs, kafka-console-producer and -consumer), run from the reference
Kafka installation (tests/kafka-reference.sh tool)."""
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
from compat_common import CODECS, emit_record, main, record  # noqa: E402

KAFKA_REF = HERE.parents[1] / "kafka-reference.sh"
TIMEOUT = 60
TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "kafka.admin.ConfigCommand"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"


def tool(cls, *args, stdin=None):
    r = subprocess.run([str(KAFKA_REF), "tool", cls, *map(str, args)], input=stdin,
                       capture_output=True, text=True, timeout=TIMEOUT + 60)
    # The console producer logs a failed send and still exits 0.
    # The console consumer ends at --timeout-ms by logging a TimeoutException as an error.
    stderr = r.stderr
    if cls == CONSUMER:
        stderr = stderr.replace("ERROR Error processing message, terminating consumer process",
                                "").replace("org.apache.kafka.common.errors.TimeoutException", "")
    errors = [l for l in stderr.splitlines()
              if "ERROR" in l or "Exception" in l or "Error when sending" in l]
    if r.returncode != 0 or errors:
        lines = errors or r.stderr.strip().splitlines() or [f"exit status {r.returncode}"]
        raise RuntimeError(f"{cls.rsplit('.', 1)[-1]}: {lines[0]}")
    return r.stdout


def codecs(b):
    return {"codecs": CODECS}


def create(b, topic, partitions):
    tool(TOPICS, "--bootstrap-server", b, "--create", "--topic", topic, "--partitions",
         partitions, "--replication-factor", 1)
    return {}


def produce(b, topic, codec, count):
    lines = []
    for i in range(int(count)):
        key, value, headers = record(codec, i)
        lines.append(",".join(f"{k}:{v}" for k, v in headers) + f"\t{key}\t{value}\n")
    tool(PRODUCER, "--bootstrap-server", b, "--topic", topic, "--compression-codec", codec,
         "--producer-property", "acks=all",
         "--property", "parse.key=true", "--property", "parse.headers=true",
         stdin="".join(lines))
    return {"acked": int(count)}


def consume(b, topic, group, max_records, idle_ms):
    # One record a poll, so that the position the consumer commits when it closes is the
    # one after the last record printed.
    out = tool(CONSUMER, "--bootstrap-server", b, "--topic", topic, "--group", group,
               "--from-beginning", "--max-messages", max_records, "--timeout-ms",
               max(int(idle_ms), 10000), "--consumer-property", "max.poll.records=1",
               "--property", "print.partition=true", "--property", "print.offset=true",
               "--property", "print.headers=true", "--property", "print.key=true")
    n = 0
    for line in out.splitlines():
        part, off, hdrs, key, value = line.split("\t", 4)
        headers = [] if hdrs == "NO_HEADERS" else [h.split(":", 1) for h in hdrs.split(",")]
        emit_record(int(part.split(":")[1]), int(off.split(":")[1]), key, value, headers)
        n += 1
    return {"consumed": n}


def describe(b, topic):
    out = tool(TOPICS, "--bootstrap-server", b, "--describe", "--topic", topic)
    partitions = sum(1 for l in out.splitlines() if "\tPartition: " in l or
                     l.strip().startswith("Topic:") and "Partition:" in l)
    out = tool(CONFIGS, "--bootstrap-server", b, "--describe", "--all", "--entity-type",
               "topics", "--entity-name", topic)
    configs = {}
    for l in out.splitlines():
        l = l.strip()
        if "=" in l and not l.startswith("All configs"):
            name, rest = l.split("=", 1)
            configs[name] = rest.split(" sensitive=")[0]
    return {"partitions": partitions, "configs": configs}


def alter(b, topic, name, value):
    tool(CONFIGS, "--bootstrap-server", b, "--alter", "--entity-type", "topics",
         "--entity-name", topic, "--add-config", f"{name}={value}")
    return {}


def delete(b, topic):
    tool(TOPICS, "--bootstrap-server", b, "--delete", "--topic", topic)
    return {}


def list_topics(b):
    return {"topics": sorted(tool(TOPICS, "--bootstrap-server", b, "--list").split())}


if __name__ == "__main__":
    sys.exit(main({"codecs": codecs, "create": create, "produce": produce, "consume": consume,
                   "describe": describe, "alter": alter, "delete": delete,
                   "list": list_topics}))
