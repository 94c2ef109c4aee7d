#!/usr/bin/env python3
"""Compatibility-matrix driver (tests/compat/README.md) on kafka-python."""
import sys
import time

import kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.structs import OffsetAndMetadata

from compat_common import CODECS, emit_record, main, record

TIMEOUT = 60.0
# kafka-python 3 rewrote the admin client: other result shapes, incremental alter.
V3 = int(kafka.__version__.split(".")[0]) >= 3


def leader(p):
    return p["leader_id"] if V3 else p["leader"]


def admin(b):
    return KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=int(TIMEOUT * 1000))


def codecs(b):
    return {"codecs": CODECS}


def create(b, topic, partitions):
    n = int(partitions)
    a = admin(b)
    try:
        a.create_topics([NewTopic(topic, n, 1)], timeout_ms=int(TIMEOUT * 1000))
        deadline = time.monotonic() + TIMEOUT
        while True:
            md = a.describe_topics([topic])
            if md and md[0]["error_code"] == 0 and len(md[0]["partitions"]) == n and \
                    all(leader(p) >= 0 for p in md[0]["partitions"]):
                return {}
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} has no leader for all {n} partitions")
            time.sleep(0.1)
    finally:
        a.close()


def produce(b, topic, codec, count):
    p = KafkaProducer(bootstrap_servers=b, acks="all", linger_ms=5,
                      compression_type=None if codec == "none" else codec)
    futures = []
    for i in range(int(count)):
        key, value, headers = record(codec, i)
        futures.append(p.send(topic, key=key.encode(), value=value.encode(),
                              headers=[(k, v.encode()) for k, v in headers]))
    p.flush(TIMEOUT)
    for f in futures:
        f.get(timeout=TIMEOUT)  # raises the delivery's error
    p.close(TIMEOUT)
    return {"acked": int(count)}


def consume(b, topic, group, max_records, idle_ms):
    want, idle = int(max_records), int(idle_ms) / 1000.0
    c = KafkaConsumer(bootstrap_servers=b, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False)
    c.subscribe([topic])
    start = time.monotonic()
    last = None
    n = 0
    positions = {}
    try:
        while n < want and time.monotonic() - start < TIMEOUT:
            batches = c.poll(timeout_ms=200)
            now = time.monotonic()
            if not batches:
                if c.assignment() and last is None:
                    last = now
                if last is not None and now - last > idle:
                    break
                continue
            last = now
            for tp, msgs in batches.items():
                for m in msgs:
                    emit_record(tp.partition, m.offset, m.key, m.value, m.headers)
                    positions[tp.partition] = m.offset + 1
                    n += 1
        if positions:
            c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, None)
                      for p, o in positions.items()})
    finally:
        c.close(autocommit=False)
    return {"consumed": n}


def describe(b, topic):
    a = admin(b)
    try:
        md = a.describe_topics([topic])[0]
        if md["error_code"] != 0:
            raise RuntimeError(f"describe {topic}: error code {md['error_code']}")
        res = ConfigResource(ConfigResourceType.TOPIC, topic)
        if V3:
            out = a.describe_configs([res], config_filter="all")["topic"][topic]
            configs = {k: v["value"] for k, v in out.items()}
        else:
            configs = {e[0]: e[1] for e in a.describe_configs([res])[0].resources[0][4]}
        return {"partitions": len(md["partitions"]), "configs": configs}
    finally:
        a.close()


def alter(b, topic, name, value):
    a = admin(b)
    try:
        res = a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                              configs={name: value})])
        if V3:
            if res["topic"][topic] != "OK":
                raise RuntimeError(f"alter {topic}: {res['topic'][topic]}")
            return {}
        for r in res.resources:
            if r[0] != 0:
                raise RuntimeError(f"alter {topic}: error code {r[0]}: {r[1]}")
        return {}
    finally:
        a.close()


def delete(b, topic):
    a = admin(b)
    try:
        a.delete_topics([topic], timeout_ms=int(TIMEOUT * 1000))
        deadline = time.monotonic() + TIMEOUT
        while topic in a.list_topics():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} still listed {TIMEOUT} s after its deletion")
            time.sleep(0.1)
        return {}
    finally:
        a.close()


def list_topics(b):
    a = admin(b)
    try:
        return {"topics": sorted(a.list_topics())}
    finally:
        a.close()


if __name__ == "__main__":
    sys.exit(main({"codecs": codecs, "create": create, "produce": produce, "consume": consume,
                   "describe": describe, "alter": alter, "delete": delete,
                   "list": list_topics}))
