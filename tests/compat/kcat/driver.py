#!/usr/bin/env python3
"""Compatibility-matrix driver (tests/compat/README.md) on kcat, the librdkafka command-line
tool. kcat has no admin API (create, describe, alter, delete are n/a) and sets the same
headers on every record it produces: its records carry the `codec` header only."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from compat_common import CODECS, emit_record, main, record  # noqa: E402

TIMEOUT = 60


def kcat(b, *args, stdin=None):
    r = subprocess.run(["kcat", "-b", b, *args], input=stdin, capture_output=True,
                       timeout=TIMEOUT + 30)
    if r.returncode != 0:
        err = r.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(err[-1] if err else f"kcat exited with {r.returncode}")
    return r


def codecs(b):
    return {"codecs": CODECS}


def produce(b, topic, codec, count):
    lines = []
    for i in range(int(count)):
        key, value, _ = record(codec, i)
        lines.append(f"{key}\t{value}\n")
    kcat(b, "-P", "-t", topic, "-K", "\t", "-z", codec, "-H", f"codec={codec}",
         "-X", "acks=all", stdin="".join(lines).encode())
    return {"acked": int(count)}


def consume(b, topic, group, max_records, idle_ms):
    # A balanced consumer: it commits what it printed (auto-commit of stored offsets, and
    # on close) and leaves the group when -c or -e ends it.
    r = kcat(b, "-G", group, "-c", str(int(max_records)), "-e", "-J", "-q",
             "-X", "auto.offset.reset=earliest", "-X", f"session.timeout.ms={TIMEOUT * 1000}",
             topic)
    n = 0
    for line in r.stdout.decode().splitlines():
        m = json.loads(line)
        h = m.get("headers") or []
        emit_record(m["partition"], m["offset"], m.get("key"), m.get("payload"),
                    list(zip(h[0::2], h[1::2])))
        n += 1
    return {"consumed": n}


def list_topics(b):
    md = json.loads(kcat(b, "-L", "-J").stdout)
    return {"topics": sorted(t["topic"] for t in md["topics"])}


if __name__ == "__main__":
    sys.exit(main({"codecs": codecs, "produce": produce, "consume": consume,
                   "list": list_topics}))
