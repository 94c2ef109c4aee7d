#!/usr/bin/env python3
"""What TLS and SASL cost: Produce and Fetch throughput over SASL_SSL against PLAINTEXT, and new
TLS connections a second, on Silt and on Apache Kafka set up alike, in one run.

Usage: /usr/bin/python3 bench/sasl_ssl.py [options]
  --silt-bin PATH       the Silt broker (default build/silt; copy it first if the build may
                        change during the run)
  --perf PATH           silt-perf (default build/silt-perf)
  --workdir DIR         certificates, data dirs, logs and results.json (default
                        /tmp/sasl-ssl-bench); a real file system (Silt's WAL uses O_DIRECT)
  --rounds N            rounds (default 3); each starts each broker once
  --sizes B,B           record sizes (default 1024,65536)
  --bytes N             bytes produced, then fetched, per run (default 1 GiB)
  --partitions N        partitions of each topic (default 4)
  --producer-props ...  producer properties (default acks=all linger.ms=5 batch.size=262144)
  --handshake-s S       seconds of the handshake test (default 5)
  --handshake-clients N concurrent openssl s_time clients (default 16)
  --broker-cpu N, --client-cpu N
                        the CPU the broker runs on and the one the clients (and this script)
                        run on (default 1 and 0)
  --only silt|kafka     one broker only

Both brokers get the same settings: a PLAINTEXT listener and a SASL_SSL one (TLS with a
certificate of a CA made for the run, RSA 2048, in a PEM key store; SASL PLAIN with one user),
no authorizer, their defaults otherwise (Silt syncs its WAL before acknowledging, Kafka
acknowledges from the page cache). Kafka is tests/kafka-reference.sh (heap 256-512 MiB, its
JVM on the broker's CPU). The clients are silt-perf's Kafka perf-test modes (librdkafka), the
same for both brokers and both listeners: over SASL_SSL they authenticate with PLAIN, as
Debian's librdkafka 2.0 cannot do SCRAM with Kafka 4 or Silt (docs/security.md); the mechanism
only changes what a connection does once, at its start.

Each round, for each broker (alternating which goes first): the broker starts fresh (an empty
data dir) pinned to --broker-cpu; then for each record size, for PLAINTEXT and SASL_SSL
(alternating which goes first): a new topic, `silt-perf producer` sends --bytes of records as
fast as it goes (--throughput -1), then `silt-perf consumer` reads from the start every record
the log holds (the partitions' offsets; the report says when they are fewer than the producer
counted acknowledged); the broker's CPU time (utime + stime) and the
time its threads spent waiting for a CPU (schedstat: what other processes on its CPU took) are
taken around each, and the clients' CPU time. Then `openssl s_time -new` clients (full TLS 1.3
handshakes, no resumption) connect to the SASL_SSL listener for --handshake-s seconds:
connections a second, all clients together. Then the broker stops.

Output: per run, the figures; then Markdown tables of the medians over the rounds: produce and
fetch MiB/s (silt-perf's MB/sec and fetch.MB.sec; MB = 2^20 bytes, as in Kafka's tools),
broker CPU s/GiB, SASL_SSL/PLAINTEXT ratios per broker and Silt/Kafka ratios per protocol
(each ratio the median of the rounds' ratios: both sides of a ratio ran in the same round),
handshakes a second; and the targets. JSON in WORKDIR/results.json.
"""
import argparse
import datetime
import json
import os
import re
import resource
import shutil
import ssl
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import broker_stats  # noqa: E402  (free_port, cpu_seconds)
from many_partitions import (KafkaBroker, SiltBroker, git_commit, machine_info,  # noqa: E402
                             pinned_to)

from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
USER, PASSWORD = "bench", "bench-secret"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
PROTOCOLS = ["PLAINTEXT", "SASL_SSL"]

# 1000000 records sent, 151234.5 records/sec (147.69 MB/sec), 12.34 ms avg latency, ...
PRODUCER_RE = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), "
                         r"([\d.]+) ms avg latency", re.M)
# 12345 connections in 5.01s; 2463.97 connections/user sec, bytes read 0
S_TIME_RE = re.compile(r"^(\d+) connections in [\d.]+s;", re.M)


def log(msg):
    print(f"== {msg}", file=sys.stderr, flush=True)


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(tls):
    """A CA and the brokers' key store (certificate naming 127.0.0.1, then its PKCS#8 key)."""
    tls.mkdir(parents=True, exist_ok=True)
    if (tls / "broker.pem").exists():
        return
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj",
            "/CN=bench CA", "-keyout", "ca.key", "-out", "ca.pem", cwd=tls)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=broker", "-keyout",
            "broker.key", "-out", "broker.csr", cwd=tls)
    (tls / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "30", "-extfile", "san.ext", "-out", "broker.crt", cwd=tls)
    (tls / "broker.pem").write_text((tls / "broker.crt").read_text() +
                                    (tls / "broker.key").read_text())


def broker_settings(tls):
    """The settings both brokers get, beyond their listeners."""
    return {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required user_{USER}="{PASSWORD}";',
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls / "broker.pem"),
    }


def client_properties(workdir, tls):
    """The client settings of each protocol, as files for silt-perf (librdkafka's names)."""
    plain = workdir / "plaintext.properties"
    plain.write_text("security.protocol=PLAINTEXT\n")
    secure = workdir / "sasl_ssl.properties"
    secure.write_text("security.protocol=SASL_SSL\n"
                      "sasl.mechanism=PLAIN\n"
                      f"sasl.username={USER}\n"
                      f"sasl.password={PASSWORD}\n"
                      f"ssl.ca.location={tls / 'ca.pem'}\n")
    return {"PLAINTEXT": plain, "SASL_SSL": secure}


class Broker:
    """One broker of the run with its two listeners."""

    def __init__(self, kind, args, run_dir, tls):
        self.kind = kind
        settings = broker_settings(tls)
        if kind == "silt":
            port, secure = broker_stats.free_port(), broker_stats.free_port()
            while secure == port:
                secure = broker_stats.free_port()
            self.ports = {"PLAINTEXT": port, "SASL_SSL": secure}
            listeners = f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{secure}"
            self.broker = SiltBroker(args.silt_bin, run_dir, port,
                                     [f"listeners={listeners}"] +
                                     [f"{k}={v}" for k, v in settings.items()],
                                     cpus={args.broker_cpu})
        else:
            port = broker_stats.free_port()  # and port + 1, the controller's
            secure = broker_stats.free_port()
            while secure in (port, port + 1):
                secure = broker_stats.free_port()
            self.ports = {"PLAINTEXT": port, "SASL_SSL": secure}
            env = {
                "KAFKA_EXTRA_LISTENERS": f"SASL_SSL://127.0.0.1:{secure}",
                "KAFKA_EXTRA_PROTOCOLS": "SASL_SSL:SASL_SSL",
                "KAFKA_EXTRA_PROPERTIES": "\n".join(f"{k}={v}" for k, v in settings.items()),
            }
            self.broker = KafkaBroker(run_dir, port, env=env, cpus={args.broker_cpu})

    def bootstrap(self, protocol):
        return f"127.0.0.1:{self.ports[protocol]}"

    def start(self):
        self.broker.start(180)

    def stop(self):
        self.broker.stop()

    def cpu(self):
        return broker_stats.cpu_seconds(self.broker.pid)

    def waited(self):
        """Seconds the broker's threads have spent runnable but waiting for a CPU
        (/proc/PID/task/*/schedstat): what other processes on its CPU took from it."""
        total = 0
        task_dir = f"/proc/{self.broker.pid}/task"
        for tid in os.listdir(task_dir):
            try:
                with open(f"{task_dir}/{tid}/schedstat") as f:
                    total += int(f.read().split()[1])
            except (OSError, IndexError, ValueError):
                pass  # a thread that ended meanwhile
        return total / 1e9


def make_topic(bootstrap, name, partitions):
    a = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    a.create_topics([NewTopic(name, num_partitions=partitions,
                              replication_factor=1)])[name].result(timeout=60)
    deadline = time.monotonic() + 60
    while True:
        t = a.list_topics(topic=name, timeout=10).topics.get(name)
        if t and t.error is None and len(t.partitions) == partitions and \
                all(p.leader >= 0 for p in t.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {name} not ready")
        time.sleep(0.1)


def watermarks(broker, topic, partitions):
    c = Consumer({"bootstrap.servers": broker.bootstrap("PLAINTEXT"), "group.id": "watermarks",
                  "log_level": 0})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                for p in range(partitions)]
    finally:
        c.close()


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_client(cmd, timeout):
    """The client's output and CPU seconds (it runs on this script's CPU)."""
    before = children_cpu()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[1]} exited {p.returncode}:\n{p.stdout[-1500:]}\n"
                           f"{p.stderr[-1500:]}")
    return p.stdout, children_cpu() - before


def produce_and_fetch(args, broker, protocol, size, props, topic):
    records = max(1, args.bytes // size)
    gib = records * size / GiB
    bootstrap = broker.bootstrap(protocol)
    cpu0, wait0, t0 = broker.cpu(), broker.waited(), time.monotonic()
    out, client_cpu = run_client(
        [args.perf, "producer", "--topic", topic, "--num-records", str(records),
         "--record-size", str(size), "--throughput", "-1", "--producer.config", str(props),
         "--producer-props", f"bootstrap.servers={bootstrap}", *args.producer_props],
        timeout=1200)
    cpu1, wait1, t1 = broker.cpu(), broker.waited(), time.monotonic()
    produce_cpu, produce_wait = (cpu1 - cpu0) / gib, (wait1 - wait0) / (t1 - t0)
    m = PRODUCER_RE.findall(out)
    if not m:
        raise RuntimeError(f"no producer result:\n{out[-2000:]}")
    sent, _, produce_mb, latency = m[-1]
    if int(sent) != records:
        raise RuntimeError(f"the producer sent {sent} of {records} records")
    # The consumer reads what the log holds. Kafka's has held fewer records than the producer
    # counted acknowledged (librdkafka 2.0's idempotent producer, 64 KiB records, PLAINTEXT): the
    # run says so, and the fetch figures are of the records there.
    held = sum(high - low for low, high in watermarks(broker, topic, args.partitions))
    missing = records - held
    if missing:
        log(f"{broker.kind} {protocol} {size} B: the log holds {held} of the {records} records "
            "acknowledged")
    out, consumer_cpu = run_client(
        [args.perf, "consumer", "--bootstrap-server", bootstrap, "--topic", topic,
         "--messages", str(held), "--hide-header", "--timeout", "30000",
         "--consumer.config", str(props)],
        timeout=1200)
    cpu2, wait2, t2 = broker.cpu(), broker.waited(), time.monotonic()
    # start, end, MB, MB/s, records, records/s, rebalance ms, fetch ms, fetch MB/s,
    # fetch records/s
    fields = [f.strip() for f in out.strip().splitlines()[-1].split(",")]
    if int(fields[4]) < held:
        raise RuntimeError(f"consumed {fields[4]} of the {held} records held")
    fetched_gib = held * size / GiB
    return {"produce": float(produce_mb), "latency_ms": float(latency),
            "fetch": float(fields[8]), "consume": float(fields[3]),
            "broker_cpu_produce": produce_cpu, "broker_cpu_fetch": (cpu2 - cpu1) / fetched_gib,
            "client_cpu_produce": client_cpu / gib, "client_cpu_fetch": consumer_cpu / fetched_gib,
            # Thread-seconds a second the broker's threads waited for a CPU: how much other
            # processes on the machine weighed on it.
            "broker_wait_produce": produce_wait,
            "broker_wait_fetch": (wait2 - wait1) / (t2 - t1),
            "missing": missing}


def tls_session(port, ca):
    """The protocol version and cipher suite a client of OpenSSL's defaults gets."""
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return f"{s.version()} {s.cipher()[0]}"


def handshakes(args, broker, ca):
    """New TLS connections a second against the SASL_SSL listener: --handshake-clients
    openssl s_time clients at once, each making full handshakes one after another."""
    cmd = ["openssl", "s_time", "-connect", broker.bootstrap("SASL_SSL"), "-new", "-time",
           str(args.handshake_s), "-CAfile", str(ca)]
    start = time.monotonic()
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(args.handshake_clients)]
    total = 0
    for p in procs:
        out, _ = p.communicate(timeout=args.handshake_s + 60)
        m = S_TIME_RE.search(out)
        if not m:
            raise RuntimeError(f"no s_time result:\n{out[-1500:]}")
        total += int(m.group(1))
    return total / (time.monotonic() - start)


def one_broker(args, kind, round_no, workdir, tls, props):
    run_dir = workdir / f"{kind}-{round_no}"
    shutil.rmtree(run_dir, ignore_errors=True)
    b = Broker(kind, args, run_dir, tls)
    b.start()
    out = {}
    try:
        out["tls"] = tls_session(b.ports["SASL_SSL"], tls / "ca.pem")
        for size in args.sizes:
            order = PROTOCOLS if (round_no + size // 1024) % 2 == 0 else PROTOCOLS[::-1]
            for protocol in order:
                topic = f"perf-{size}-{protocol.lower()}"
                make_topic(b.bootstrap("PLAINTEXT"), topic, args.partitions)
                got = produce_and_fetch(args, b, protocol, size, props[protocol], topic)
                out[f"{protocol}/{size}"] = got
                log(f"round {round_no} {kind} {protocol} {size} B: produce {got['produce']:.1f}"
                    f" MiB/s ({got['broker_cpu_produce']:.2f} broker CPU s/GiB, waited "
                    f"{got['broker_wait_produce']:.2f}), fetch {got['fetch']:.1f} MiB/s "
                    f"({got['broker_cpu_fetch']:.2f}, waited {got['broker_wait_fetch']:.2f}); "
                    f"client CPU s/GiB {got['client_cpu_produce']:.2f}, "
                    f"{got['client_cpu_fetch']:.2f}")
        out["handshakes"] = handshakes(args, b, tls / "ca.pem")
        log(f"round {round_no} {kind}: {out['handshakes']:.0f} TLS handshakes/s ({out['tls']})")
    finally:
        b.stop()
        shutil.rmtree(run_dir / "data", ignore_errors=True)
    return out


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(v, digits=1):
    return "-" if v is None else f"{v:,.{digits}f}"


def pct(v):
    """Thread-seconds a second, as a percentage of one CPU."""
    return "-" if v is None else f"{v * 100:.0f}%"


def report(args, runs, meta):
    """Markdown tables of the medians; the targets."""
    brokers = [k for k in ("silt", "kafka") if runs.get(k)]
    lines = [meta, ""]

    def values(kind, key, metric):
        return [r[key][metric] for r in runs.get(kind, [])
                if key in r and r[key][metric] is not None]

    def ratio(kind_a, key_a, kind_b, key_b, metric):
        out = []
        for ra, rb in zip(runs.get(kind_a, []), runs.get(kind_b, [])):
            if key_a in ra and key_b in rb and ra[key_a][metric] is not None and \
                    rb[key_b][metric]:
                out.append(ra[key_a][metric] / rb[key_b][metric])
        return median(out)

    lines += ["| record size | broker | protocol | produce MiB/s | fetch MiB/s | "
              "broker CPU s/GiB produce | broker CPU s/GiB fetch | produce avg latency ms | "
              "broker's threads waiting for a CPU, produce / fetch |",
              "|---|---|---|---|---|---|---|---|---|"]
    for size in args.sizes:
        for kind in brokers:
            for protocol in PROTOCOLS:
                key = f"{protocol}/{size}"
                lines.append(
                    f"| {size // 1024} KiB | {kind} | {protocol} | "
                    f"{fmt(median(values(kind, key, 'produce')))} | "
                    f"{fmt(median(values(kind, key, 'fetch')))} | "
                    f"{fmt(median(values(kind, key, 'broker_cpu_produce')), 2)} | "
                    f"{fmt(median(values(kind, key, 'broker_cpu_fetch')), 2)} | "
                    f"{fmt(median(values(kind, key, 'latency_ms')), 2)} | "
                    f"{pct(median(values(kind, key, 'broker_wait_produce')))} / "
                    f"{pct(median(values(kind, key, 'broker_wait_fetch')))} |")
    lines += ["", "| record size | ratio | produce | fetch |", "|---|---|---|---|"]
    ratios = {}
    for size in args.sizes:
        for kind in brokers:
            for metric in ("produce", "fetch"):
                ratios[(kind, "tls", size, metric)] = ratio(kind, f"SASL_SSL/{size}", kind,
                                                            f"PLAINTEXT/{size}", metric)
            lines.append(f"| {size // 1024} KiB | {kind}: SASL_SSL / PLAINTEXT | "
                         f"{fmt(ratios[(kind, 'tls', size, 'produce')], 2)}x | "
                         f"{fmt(ratios[(kind, 'tls', size, 'fetch')], 2)}x |")
        if len(brokers) == 2:
            for protocol in PROTOCOLS:
                for metric in ("produce", "fetch"):
                    ratios[("vs", protocol, size, metric)] = ratio(
                        "silt", f"{protocol}/{size}", "kafka", f"{protocol}/{size}", metric)
                lines.append(f"| {size // 1024} KiB | {protocol}: Silt / Kafka | "
                             f"{fmt(ratios[('vs', protocol, size, 'produce')], 2)}x | "
                             f"{fmt(ratios[('vs', protocol, size, 'fetch')], 2)}x |")
    lines += ["", "| broker | TLS handshakes/s (median) | runs | session |", "|---|---|---|---|"]
    for kind in brokers:
        hs = [r["handshakes"] for r in runs[kind] if "handshakes" in r]
        lines.append(f"| {kind} | {fmt(median(hs), 0)} | {', '.join(fmt(h, 0) for h in hs)} | "
                     f"{runs[kind][0].get('tls', '')} |")
    if len(brokers) == 2:
        hs = ratio_of([r.get("handshakes") for r in runs["silt"]],
                      [r.get("handshakes") for r in runs["kafka"]])
        lines.append(f"\nSilt/Kafka handshakes a second: {fmt(hs, 2)}x")
    for kind in brokers:
        for i, r in enumerate(runs[kind]):
            for key, v in r.items():
                if isinstance(v, dict) and v.get("missing"):
                    lines.append(f"\nRound {i + 1}, {kind} {key}: the log held "
                                 f"{v['missing']} records fewer than the producer counted "
                                 "acknowledged; the fetch read those it held.")
    # The targets.
    lines += ["", "| target | measured | met |", "|---|---|---|"]
    large, small = max(args.sizes), min(args.sizes)
    for metric in ("produce", "fetch"):
        r = ratios.get(("silt", "tls", large, metric))
        lines.append(f"| Silt {metric} over SASL_SSL at {large // 1024} KiB at least 0.8x its "
                     f"PLAINTEXT | {fmt(r, 2)}x | {met(r, 0.8)} |")
    for metric in ("produce", "fetch"):
        r = ratios.get(("vs", "SASL_SSL", small, metric))
        lines.append(f"| Silt {metric} over SASL_SSL at {small // 1024} KiB at least 2x Kafka's "
                     f"| {fmt(r, 2)}x | {met(r, 2.0)} |")
    return "\n".join(lines), ratios


def ratio_of(a, b):
    return median([x / y for x, y in zip(a, b) if x and y])


def met(r, bar):
    if r is None:
        return "-"
    return "yes" if r >= bar else "**no**"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--silt-bin", default=str(REPO / "build" / "silt"))
    p.add_argument("--perf", default=str(REPO / "build" / "silt-perf"))
    p.add_argument("--workdir", default="/tmp/sasl-ssl-bench")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sizes", default="1024,65536")
    p.add_argument("--bytes", type=int, default=GiB)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--producer-props", nargs="+",
                   default=["acks=all", "linger.ms=5", "batch.size=262144"])
    p.add_argument("--handshake-s", type=int, default=5)
    p.add_argument("--handshake-clients", type=int, default=16)
    p.add_argument("--broker-cpu", type=int, default=1)
    p.add_argument("--client-cpu", type=int, default=0)
    p.add_argument("--only", choices=["silt", "kafka"])
    args = p.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.silt_bin = os.path.realpath(args.silt_bin)
    args.perf = os.path.realpath(args.perf)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    # This script and every client on one CPU; the brokers on the other.
    os.sched_setaffinity(0, {args.client_cpu})
    machine, fstype = machine_info(str(workdir))
    if fstype in ("tmpfs", "ramfs"):
        raise SystemExit(f"{workdir} is on {fstype}: use a dir on a real disk")
    tls = workdir / "tls"
    make_certificates(tls)
    props = client_properties(workdir, tls)
    kinds = [args.only] if args.only else ["silt", "kafka"]
    started = datetime.datetime.now(datetime.timezone.utc)
    runs = {k: [] for k in kinds}
    for r in range(args.rounds):
        order = kinds if r % 2 == 0 else kinds[::-1]
        for kind in order:
            runs[kind].append(one_broker(args, kind, r + 1, workdir, tls, props))
    meta = (f"{started:%Y-%m-%d %H:%M} UTC, commit {git_commit()}, {machine}; brokers on CPU "
            f"{args.broker_cpu}, clients on CPU {args.client_cpu}; {args.rounds} rounds; "
            f"{args.bytes / GiB:g} GiB a run, {args.partitions} partitions, producer "
            f"{' '.join(args.producer_props)}; handshakes: {args.handshake_clients} openssl "
            f"s_time -new clients for {args.handshake_s} s.")
    text, _ = report(args, runs, meta)
    print(text)
    (workdir / "results.json").write_text(json.dumps(
        {"meta": meta, "args": {k: v for k, v in vars(args).items()}, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
