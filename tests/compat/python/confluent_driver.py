#!/usr/bin/env python3
"""Compatibility-matrix driver (tests/compat/README.md) on confluent-kafka-python
(librdkafka)."""
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from compat_common import CODECS, main, record, emit_record

TIMEOUT = 60.0


def admin(b):
    return AdminClient({"bootstrap.servers": b})


def codecs(b):
    return {"codecs": CODECS}


def create(b, topic, partitions):
    n = int(partitions)
    a = admin(b)
    a.create_topics([NewTopic(topic, n, 1)], request_timeout=TIMEOUT)[topic].result(TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while True:
        md = a.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == n and \
                all(p.leader >= 0 for p in t.partitions.values()):
            return {}
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic} has no leader for all {n} partitions after {TIMEOUT} s")
        time.sleep(0.1)


def produce(b, topic, codec, count):
    errors = []
    p = Producer({"bootstrap.servers": b, "acks": "all", "compression.type": codec,
                  "linger.ms": 5})

    def done(err, msg):
        if err is not None and not errors:
            errors.append(err)
    for i in range(int(count)):
        key, value, headers = record(codec, i)
        while True:
            try:
                p.produce(topic, value=value, key=key, headers=headers, on_delivery=done)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(TIMEOUT)
    if errors:
        raise KafkaException(errors[0])
    if left:
        raise TimeoutError(f"{left} records not acknowledged after {TIMEOUT} s")
    return {"acked": int(count)}


def consume(b, topic, group, max_records, idle_ms):
    want, idle = int(max_records), int(idle_ms) / 1000.0
    assigned = []
    c = Consumer({"bootstrap.servers": b, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic], on_assign=lambda cons, parts: assigned.append(True))
    start = time.monotonic()
    last = None
    n = 0
    positions = {}
    try:
        while n < want and time.monotonic() - start < TIMEOUT:
            msg = c.poll(0.2)
            now = time.monotonic()
            if msg is None:
                if assigned and last is None:
                    last = now
                if last is not None and now - last > idle:
                    break
                continue
            if msg.error():
                raise KafkaException(msg.error())
            last = now
            emit_record(msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers())
            positions[msg.partition()] = msg.offset() + 1
            n += 1
        if positions:
            c.commit(offsets=[TopicPartition(topic, p, o) for p, o in positions.items()],
                     asynchronous=False)
    finally:
        c.close()
    return {"consumed": n}


def describe(b, topic):
    a = admin(b)
    md = a.list_topics(topic, timeout=10)
    t = md.topics[topic]
    if t.error is not None:
        raise KafkaException(t.error)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = a.describe_configs([res], request_timeout=TIMEOUT)[res].result(TIMEOUT)
    return {"partitions": len(t.partitions),
            "configs": {k: v.value for k, v in configs.items()}}


def alter(b, topic, name, value):
    a = admin(b)
    try:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
    except ImportError:  # before confluent-kafka 2.2: the legacy AlterConfigs only
        res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={name: value})
        a.alter_configs([res], request_timeout=TIMEOUT)[res].result(TIMEOUT)
        return {}
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res])[res].result(TIMEOUT)
    return {}


def delete(b, topic):
    a = admin(b)
    a.delete_topics([topic], request_timeout=TIMEOUT)[topic].result(TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while topic in a.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic} still listed {TIMEOUT} s after its deletion")
        time.sleep(0.1)
    return {}


def list_topics(b):
    return {"topics": sorted(admin(b).list_topics(timeout=10).topics)}


if __name__ == "__main__":
    sys.exit(main({"codecs": codecs, "create": create, "produce": produce, "consume": consume,
                   "describe": describe, "alter": alter, "delete": delete,
                   "list": list_topics}))
