#!/usr/bin/env python3
"""Partition moves under load, against a running Silt cluster (scripts/cluster.sh up).

An idempotent acks=all producer writes to every partition of a fresh topic while partition 0
is moved to another broker MOVES times (AlterPartitionReassignments). For each move: the time
from the request to the new owner acknowledging a produce of its own. At the end every
acknowledged record is read back: none lost, none duplicated, offsets dense. Prints the median
and worst move, and the producer's latency (p50, p99, max).

    bench/partition_moves.py [--bootstrap 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094]
                             [--moves 10] [--partitions 6]
"""
import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from confluent_kafka import Producer  # noqa: E402

from test_membership import listed_brokers, partition_leader_epochs, produce_v10  # noqa: E402
from test_partition_moves import alter_reassignments  # noqa: E402
from test_record_validation import batch, records  # noqa: E402
from util import consume_all, create_topic  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094")
    ap.add_argument("--moves", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=6)
    args = ap.parse_args()
    first = args.bootstrap.split(",")[0]
    brokers = {n: f"{h}:{p}" for n, (h, p, _) in listed_brokers(first).items()}
    topic = "moves-%d" % int(time.time())
    create_topic(args.bootstrap, topic, partitions=args.partitions)
    time.sleep(2)  # the controller spreads the partitions

    acked, errors, latencies = [], [], []
    stop = threading.Event()

    def produce():
        p = Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 5, "retry.backoff.ms": 20})

        def done(err, msg, sent):
            if err is not None:
                errors.append(str(err))
            else:
                acked.append((msg.partition(), msg.offset(), msg.value()))
                latencies.append(time.time() - sent)

        i = 0
        while not stop.is_set():
            sent = time.time()
            p.produce(topic, value=b"m-%d" % i, partition=i % args.partitions,
                      on_delivery=lambda err, msg, sent=sent: done(err, msg, sent))
            i += 1
            p.poll(0)
            if i % 20 == 0:
                time.sleep(0.01)
        p.flush(60)

    t = threading.Thread(target=produce)
    t.start()
    timings = []
    try:
        time.sleep(1)
        for _ in range(args.moves):
            owner = partition_leader_epochs(first, topic)[0][1]
            others = sorted(n for n in brokers if n != owner)
            to = others[len(timings) % len(others)]
            start = time.time()
            top, res = alter_reassignments(first, topic, {0: [to]})
            if top != 0 or res[0][0] != 0:
                sys.exit(f"reassignment refused: {top} {res}")
            while produce_v10(brokers[to], topic, 0, batch(records(1), 1))[0] != 0:
                if time.time() - start > 10:
                    sys.exit(f"partition 0 not served by node {to} after 10 s")
                time.sleep(0.005)
            timings.append(time.time() - start)
            time.sleep(0.5)
    finally:
        stop.set()
        t.join()
    got = consume_all(args.bootstrap, topic, args.partitions, timeout=120)
    at = {(m["partition"], m["offset"]): m["value"] for m in got}
    lost = sum(1 for p, o, v in acked if at.get((p, o)) != v)
    values = [m["value"] for m in got if m["value"].startswith(b"m-")]
    dups = len(values) - len(set(values))
    gaps = 0
    for p in range(args.partitions):
        offsets = sorted(o for (q, o) in at if q == p)
        gaps += 0 if offsets == list(range(len(offsets))) else 1
    lat = sorted(latencies)
    print(f"{len(timings)} moves: request to the new owner acknowledging: median "
          f"{statistics.median(timings) * 1000:.0f} ms, worst {max(timings) * 1000:.0f} ms")
    print(f"{len(acked)} records acknowledged, {len(errors)} errors, {lost} lost, {dups} "
          f"duplicated, {gaps} partitions with gaps; producer latency p50 "
          f"{lat[len(lat) // 2] * 1000:.0f} ms, p99 {lat[int(len(lat) * 0.99)] * 1000:.0f} ms, "
          f"max {lat[-1] * 1000:.0f} ms")
    sys.exit(1 if errors or lost or dups or gaps else 0)


if __name__ == "__main__":
    main()
