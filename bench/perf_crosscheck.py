#!/usr/bin/env python3
"""Do silt-perf's Kafka perf-test modes measure what Kafka's own tools measure?

Usage: /usr/bin/python3 bench/perf_crosscheck.py [options]
  --broker silt|kafka     the broker both tools run against (default silt), started fresh
  --silt-bin PATH         the Silt broker (default build/silt)
  --perf-bin PATH         silt-perf (default build/silt-perf)
  --workdir DIR           data dir, logs, results.json (default build/perf-crosscheck)
  --records N             records per run (default 1000000)
  --record-size B         bytes per record (default 1024)
  --throughput R          the producers' rate in records/s (default 50000; -1: unthrottled)
  --partitions N          partitions of the topic (default 8)
  --repetitions N         runs of each tool, alternated (default 3)

One broker, one topic per run (so that every consumer run reads exactly its own records).
Each repetition runs, in this order, Kafka's ProducerPerformance then silt-perf producer (or
the reverse on odd repetitions, so that neither always goes first), each with
`--num-records N --record-size B --throughput R --producer-props acks=all linger.ms=3
batch.size=65536`; then Kafka's ConsumerPerformance and silt-perf consumer each read the topic their
producer wrote (`--messages N`). The tools' own final lines are parsed with the same
regular expressions (Kafka's formats), and for every figure the script prints each tool's
median and range and says whether they agree: the medians differ by less than the larger of
the two tools' own run-to-run spreads (max - min over the repetitions), or by less than 5%.
Output: the Markdown table on stdout, JSON in WORKDIR/results.json, logs in WORKDIR.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
KREF = REPO / "tests" / "kafka-reference.sh"
sys.path.insert(0, str(HERE))
import broker_stats  # noqa: E402  (free_port, FINAL_RE)
from many_partitions import (KafkaBroker, SiltBroker, git_commit, log,  # noqa: E402
                             machine_info)

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PRODUCER_FIGURES = ["records/sec", "MB/sec", "avg latency ms", "max latency ms", "p50 ms",
                    "p95 ms", "p99 ms", "p99.9 ms"]
CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                   "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
CONSUMER_FIGURES = ["data.consumed.in.MB", "MB.sec", "data.consumed.in.nMsg", "nMsg.sec",
                    "fetch.MB.sec", "fetch.nMsg.sec"]
ROW_RE = re.compile(r"^\S+ \S+, \S+ \S+, [-\d.]+, [-\d.]+, \d+, [-\d.]+, -?\d+, -?\d+, "
                    r"[-\d.]+, [-\d.]+$", re.M)


def parse_producer(text):
    m = list(broker_stats.FINAL_RE.finditer(text))
    if not m:
        return None
    g = m[-1].groups()
    vals = [float(x) for x in g[1:]]
    return dict(zip(PRODUCER_FIGURES, vals)) | {"records": int(g[0])}


def parse_consumer(text):
    if CONSUMER_HEADER not in text:
        return None
    rows = ROW_RE.findall(text)
    if not rows:
        return None
    fields = [f.strip() for f in rows[-1].split(",")]
    names = [h.strip() for h in CONSUMER_HEADER.split(",")]
    out = {}
    for n, v in zip(names, fields):
        if n in CONSUMER_FIGURES:
            out[n] = float(v)
    return out


def run(cmd, log_path, timeout):
    with open(log_path, "w") as out:
        p = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
    text = Path(log_path).read_text(errors="replace")
    return p.returncode, text


def create_topic(bootstrap, name, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)


def agree(a, b):
    """Medians within the larger run-to-run spread of the two tools, or within 5%."""
    if not a or not b:
        return None
    ma, mb = statistics.median(a), statistics.median(b)
    spread = max(max(a) - min(a), max(b) - min(b))
    return abs(ma - mb) <= max(spread, 0.05 * max(abs(ma), abs(mb)))


def table(results):
    lines = ["| figure | Kafka's tool: median (range) | silt-perf: median (range) | "
             "silt-perf/Kafka | agree |", "|---|---|---|---|---|"]
    for mode, figs in (("producer", PRODUCER_FIGURES), ("consumer", CONSUMER_FIGURES)):
        for f in figs:
            a = [r[f] for r in results[mode]["kafka"] if r and f in r]
            b = [r[f] for r in results[mode]["silt-perf"] if r and f in r]
            if not a and not b:
                continue

            def cell(v):
                if not v:
                    return "-"
                return f"{statistics.median(v):,.2f} ({min(v):,.2f}-{max(v):,.2f})"
            ratio = (f"{statistics.median(b) / statistics.median(a):.2f}x"
                     if a and b and statistics.median(a) else "-")
            ok = agree(a, b)
            lines.append(f"| {mode}: {f} | {cell(a)} | {cell(b)} | {ratio} | "
                         f"{'-' if ok is None else 'yes' if ok else '**no**'} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--broker", choices=["silt", "kafka"], default="silt")
    ap.add_argument("--silt-bin", default=str(REPO / "build" / "silt"))
    ap.add_argument("--perf-bin", default=str(REPO / "build" / "silt-perf"))
    ap.add_argument("--workdir", default=str(REPO / "build" / "perf-crosscheck"))
    ap.add_argument("--records", type=int, default=1000000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--throughput", type=int, default=50000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--repetitions", type=int, default=3)
    args = ap.parse_args()
    workdir = Path(os.path.realpath(args.workdir))
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    subprocess.run([str(KREF), "install"], check=True, timeout=1800)
    port = broker_stats.free_port()
    broker = (SiltBroker(os.path.realpath(args.silt_bin), workdir / "broker", port)
              if args.broker == "silt" else KafkaBroker(workdir / "broker", port))
    props = ["acks=all", "linger.ms=3", "batch.size=65536"]
    results = {"producer": {"kafka": [], "silt-perf": []},
               "consumer": {"kafka": [], "silt-perf": []}}
    errors = []
    timeout = 1800
    try:
        broker.start(180)
        bs = broker.bootstrap
        for rep in range(args.repetitions):
            order = ["kafka", "silt-perf"] if rep % 2 == 0 else ["silt-perf", "kafka"]
            topics = {}
            for tool in order:
                topic = f"crosscheck-{rep}-{tool}"
                topics[tool] = topic
                create_topic(bs, topic, args.partitions)
                common = ["--topic", topic, "--num-records", str(args.records),
                          "--record-size", str(args.record_size),
                          "--throughput", str(args.throughput),
                          "--producer-props", f"bootstrap.servers={bs}"] + props
                cmd = ([str(KREF), "tool", "org.apache.kafka.tools.ProducerPerformance"]
                       if tool == "kafka" else [args.perf_bin, "producer"]) + common
                log(f"repetition {rep + 1}: {tool} producer")
                rc, text = run(cmd, workdir / f"producer-{rep}-{tool}.log", timeout)
                r = parse_producer(text)
                if rc != 0 or r is None:
                    errors.append(f"{tool} producer, repetition {rep + 1}: exit {rc}, "
                                  f"final line {'found' if r else 'missing'}")
                results["producer"][tool].append(r)
            # Each tool's consumer reads the topic its producer wrote.
            for tool in order:
                topic = topics[tool]
                common = ["--bootstrap-server", bs, "--topic", topic,
                          "--messages", str(args.records), "--timeout", "60000"]
                cmd = ([str(KREF), "tool", "org.apache.kafka.tools.ConsumerPerformance"]
                       if tool == "kafka" else [args.perf_bin, "consumer"]) + common
                log(f"repetition {rep + 1}: {tool} consumer of {topic}")
                rc, text = run(cmd, workdir / f"consumer-{rep}-{tool}.log", timeout)
                r = parse_consumer(text)
                if rc != 0 or r is None:
                    errors.append(f"{tool} consumer, repetition {rep + 1}: exit {rc}, "
                                  f"row {'found' if r else 'missing'}")
                results["consumer"][tool].append(r)
    finally:
        broker.stop()
        shutil.rmtree(broker.data, ignore_errors=True)
    machine, _ = machine_info(str(workdir))
    head = (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, commit "
            f"{git_commit()}, {machine}; broker: {args.broker}; {args.repetitions} runs of "
            f"each tool, {args.records:,} records of {args.record_size} B, producers at "
            f"--throughput {args.throughput}, {args.partitions} partitions.")
    text = head + "\n\n" + table(results)
    if errors:
        text += "\n\nErrors: " + "; ".join(errors)
    print(text)
    (workdir / "results.json").write_text(json.dumps(
        {"argv": sys.argv[1:], "results": results, "errors": errors, "markdown": text},
        indent=1))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
