#!/usr/bin/env python3
"""Do the ACL checks cost Produce and Fetch anything? silt-perf's producer and consumer modes
(Kafka's ProducerPerformance and ConsumerPerformance on librdkafka) against two or more Silt
binaries, or settings, taken in turns.

Usage: /usr/bin/python3 bench/acl_overhead.py [options] NAME=BINARY[,K=V...] ...
  each variant: a name, the Silt binary and settings of its own (passed as --override K=V),
  e.g. (copy the binaries first if the build may change during the run)
    before=/tmp/silt-before             a build from before the ACL checks
    off=/tmp/silt                       no authorizer
    on=/tmp/silt,authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
  --perf PATH           silt-perf (default build/silt-perf)
  --workdir DIR         data dirs and logs (default /tmp/acl-overhead); a real file system
  --rounds N            rounds; each runs every variant once, in turn (default 5)
  --records N           records produced, then consumed, per run (default 2000000)
  --record-size B       bytes per record (default 100)
  --partitions N        partitions of the topic (default 8)
  --acls N              ACLs in the store of a variant with an authorizer (default 1000)
  --broker-cpu N, --client-cpu N
                        the CPU the broker runs on and the one the clients (and this script)
                        run on (default 1 and 0; -1: no pinning)
  --producer-props ...  producer properties (default acks=1 linger.ms=0 batch.size=16384
                        enable.idempotence=false: many small Produce requests, where a check
                        per request would show most)

A variant whose settings set authorizer.class.name is secured as Kafka's StandardAuthorizer
would be in production: allow.everyone.if.no.acl.found=false (unless the variant says
otherwise), super.users=User:admin, and a second listener, SASL_PLAINTEXT with PLAIN, through
which admin creates the topic and --acls ACLs (CreateAcls, kafka-python) before the clients
start. The clients use the PLAINTEXT listener as User:ANONYMOUS, which three of the ACLs allow:
WRITE and READ on the topic (each implies DESCRIBE) and READ on the consumer groups
(PREFIXED perf-consumer). The others allow or deny other principals, so that each check has
company to look through: a quarter on the topic itself (LITERAL perf), a quarter PREFIXED
names that are prefixes of it (p, pe, per, perf) or of nothing the clients use, a quarter
LITERAL other topics, a quarter groups.

Per run: a fresh broker of the variant (an empty data dir) on --broker-cpu, a topic of
--partitions partitions (and the ACLs), one silt-perf producer run (--throughput -1), then one
silt-perf consumer run reading every record from the start (a group of its own), then the
broker is stopped. The broker's CPU time (utime + stime) is taken around each client run.
Variants alternate within a round (and the first of a round moves by one each round) so that
a machine that gets busier or quieter meanwhile weighs on every variant alike. Output: each
run's figures, then per variant the median of the runs (producer records/s, average latency,
consumer records/s, fetch records/s, broker CPU µs per record produced and consumed) and its
ratio to the first variant's, each ratio the median of the rounds' ratios (both sides of a
ratio ran in the same round).
"""
import argparse
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import broker_stats  # noqa: E402  (free_port, cpu_seconds)
from many_partitions import SiltBroker, git_commit, machine_info  # noqa: E402

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

# 2000000 records sent, 512367.2 records/sec (48.86 MB/sec), 3.21 ms avg latency, ...
PRODUCER_RE = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), "
                         r"([\d.]+) ms avg latency", re.M)
AUTHORIZER = "authorizer.class.name"
ADMIN_PASSWORD = "admin-secret"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
TOPIC = "perf"
GROUP_PREFIX = "perf-consumer"
KEYS = ["produce", "latency", "consume", "fetch", "cpu_produce", "cpu_consume"]


def log(msg):
    print(f"== {msg}", file=sys.stderr, flush=True)


def parse_variant(text):
    name, _, rest = text.partition("=")
    binary, *settings = rest.split(",")
    if not name or not binary:
        raise SystemExit(f"bad variant {text!r}: NAME=BINARY[,K=V...]")
    return name, binary, settings


def secured(settings):
    return any(s.startswith(AUTHORIZER + "=") for s in settings)


def security_settings(port, admin_port, settings):
    """The settings a variant with an authorizer gets before its own."""
    out = [f"listeners=PLAINTEXT://127.0.0.1:{port},ADMIN://127.0.0.1:{admin_port}",
           "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,ADMIN:SASL_PLAINTEXT",
           "sasl.enabled.mechanisms=PLAIN",
           f'listener.name.admin.plain.sasl.jaas.config={PLAIN_MODULE} required '
           f'user_admin="{ADMIN_PASSWORD}";',
           "super.users=User:admin"]
    if not any(s.startswith("allow.everyone.if.no.acl.found=") for s in settings):
        out.append("allow.everyone.if.no.acl.found=false")
    return out


def acl_list(n):
    """The ACLs of a secured variant: the three the clients need, then n - 3 others."""
    from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             ResourcePattern, ResourceType)
    topic, group = ResourceType.TOPIC, ResourceType.GROUP
    literal, prefixed = ACLResourcePatternType.LITERAL, ACLResourcePatternType.PREFIXED
    allow, deny = ACLPermissionType.ALLOW, ACLPermissionType.DENY
    anon = "User:ANONYMOUS"

    def acl(principal, op, permission, rtype, name, pattern):
        return ACL(principal, "*", op, permission, ResourcePattern(rtype, name, pattern))

    out = [acl(anon, ACLOperation.WRITE, allow, topic, TOPIC, literal),
           acl(anon, ACLOperation.READ, allow, topic, TOPIC, literal),
           acl(anon, ACLOperation.READ, allow, group, GROUP_PREFIX, prefixed)]
    ops = [ACLOperation.READ, ACLOperation.WRITE, ACLOperation.DESCRIBE, ACLOperation.ALTER]
    for i in range(max(0, n - len(out))):
        user = f"User:user-{i}"
        op = ops[i % len(ops)]
        permission = deny if i % 10 == 9 else allow
        kind = i % 4
        if kind == 0:
            out.append(acl(user, op, permission, topic, TOPIC, literal))
        elif kind == 1:
            name = TOPIC[:1 + (i // 4) % len(TOPIC)] if i % 8 == 1 else f"team-{i}."
            out.append(acl(user, op, permission, topic, name, prefixed))
        elif kind == 2:
            out.append(acl(user, op, permission, topic, f"topic-{i}", literal))
        else:
            out.append(acl(user, ACLOperation.READ, permission, group, f"group-{i}", literal))
    return out


def create_acls(admin_bootstrap, n):
    """Creates acl_list(n) through the admin listener; checks they are all there."""
    from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             KafkaAdminClient, ResourcePatternFilter, ResourceType)
    a = KafkaAdminClient(bootstrap_servers=admin_bootstrap, security_protocol="SASL_PLAINTEXT",
                         sasl_mechanism="PLAIN", sasl_plain_username="admin",
                         sasl_plain_password=ADMIN_PASSWORD, request_timeout_ms=60000)
    try:
        acls = acl_list(n)
        for start in range(0, len(acls), 500):
            result = a.create_acls(acls[start:start + 500])
            if result["failed"]:
                raise RuntimeError(f"ACLs refused: {result['failed'][:3]}")
        described, error = a.describe_acls(ACLFilter(
            None, None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)))
        if len(described) != len(acls):
            raise RuntimeError(f"{len(described)} ACLs described of {len(acls)} created ({error})")
    finally:
        a.close()


def make_topic(bootstrap, partitions, conf=None):
    a = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, **(conf or {})})
    fs = a.create_topics([NewTopic(TOPIC, num_partitions=partitions, replication_factor=1)])
    fs[TOPIC].result(timeout=30)
    deadline = time.monotonic() + 30
    while True:
        t = a.list_topics(topic=TOPIC, timeout=10).topics.get(TOPIC)
        if t and t.error is None and len(t.partitions) == partitions and \
                all(p.leader >= 0 for p in t.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("topic perf not ready")
        time.sleep(0.1)


def run(args, name, binary, settings, workdir, round_no):
    run_dir = workdir / name
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    port = broker_stats.free_port()
    overrides = list(settings)
    admin_port = None
    if secured(settings):
        admin_port = broker_stats.free_port()
        while admin_port == port:
            admin_port = broker_stats.free_port()
        overrides = security_settings(port, admin_port, settings) + overrides
    cpus = None if args.broker_cpu < 0 else {args.broker_cpu}
    broker = SiltBroker(binary, run_dir, port, overrides, cpus=cpus)
    broker.start(60)
    try:
        if admin_port is not None:
            admin = f"127.0.0.1:{admin_port}"
            make_topic(admin, args.partitions, {
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": "admin", "sasl.password": ADMIN_PASSWORD})
            create_acls(admin, args.acls)
        else:
            make_topic(broker.bootstrap, args.partitions)
        cpu0 = broker_stats.cpu_seconds(broker.pid)
        out = subprocess.run(
            [args.perf, "producer", "--topic", TOPIC, "--num-records", str(args.records),
             "--record-size", str(args.record_size), "--throughput", "-1", "--producer-props",
             f"bootstrap.servers={broker.bootstrap}", *args.producer_props],
            capture_output=True, text=True, timeout=600).stdout
        cpu1 = broker_stats.cpu_seconds(broker.pid)
        m = PRODUCER_RE.findall(out)
        if not m:
            raise RuntimeError(f"no producer result:\n{out[-2000:]}")
        sent, produce_rate, _, latency = m[-1]
        if int(sent) != args.records:
            raise RuntimeError(f"the producer sent {sent} of {args.records} records")
        out = subprocess.run(
            [args.perf, "consumer", "--bootstrap-server", broker.bootstrap, "--topic", TOPIC,
             "--messages", str(args.records), "--hide-header", "--timeout", "60000",
             "--group", f"{GROUP_PREFIX}-{round_no}-{name}"],
            capture_output=True, text=True, timeout=600).stdout
        cpu2 = broker_stats.cpu_seconds(broker.pid)
        fields = [f.strip() for f in out.strip().splitlines()[-1].split(",")]
        # start, end, MB, MB/s, records, records/s, rebalance ms, fetch ms, fetch MB/s,
        # fetch records/s
        if int(fields[4]) < args.records:
            raise RuntimeError(f"consumed {fields[4]} of {args.records} records")
        return {"produce": float(produce_rate), "latency": float(latency),
                "consume": float(fields[5]), "fetch": float(fields[9]),
                "cpu_produce": (cpu1 - cpu0) * 1e6 / args.records,
                "cpu_consume": (cpu2 - cpu1) * 1e6 / args.records}
    finally:
        broker.stop()
        shutil.rmtree(run_dir / "data", ignore_errors=True)


def median_ratio(runs, base, key):
    ratios = [x[key] / y[key] for x, y in zip(runs, base) if y[key]]
    return statistics.median(ratios) if ratios else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("variants", nargs="+")
    p.add_argument("--perf", default=str(REPO / "build" / "silt-perf"))
    p.add_argument("--workdir", default="/tmp/acl-overhead")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--records", type=int, default=2000000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--acls", type=int, default=1000)
    p.add_argument("--broker-cpu", type=int, default=1)
    p.add_argument("--client-cpu", type=int, default=0)
    p.add_argument("--producer-props", nargs="+",
                   default=["acks=1", "linger.ms=0", "batch.size=16384",
                            "enable.idempotence=false"])
    args = p.parse_args()
    variants = [parse_variant(v) for v in args.variants]
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if args.client_cpu >= 0:
        os.sched_setaffinity(0, {args.client_cpu})  # this script and the clients
    machine, _ = machine_info(str(workdir))
    started = datetime.datetime.now(datetime.timezone.utc)
    results = {name: [] for name, _, _ in variants}
    for r in range(args.rounds):
        turn = variants[r % len(variants):] + variants[:r % len(variants)]
        for name, binary, settings in turn:
            got = run(args, name, binary, settings, workdir, r + 1)
            results[name].append(got)
            log(f"round {r + 1} {name}: produce {got['produce']:,.0f} records/s "
                f"({got['latency']:.2f} ms avg, broker {got['cpu_produce']:.2f} µs/record), "
                f"consume {got['consume']:,.0f} records/s (fetch {got['fetch']:,.0f}, broker "
                f"{got['cpu_consume']:.2f} µs/record)")
    medians = {n: {k: statistics.median(x[k] for x in rs) for k in KEYS}
               for n, rs in results.items()}
    first = variants[0][0]
    print(f"{started:%Y-%m-%d %H:%M} UTC, commit {git_commit()}, {machine}; broker on CPU "
          f"{args.broker_cpu}, clients on CPU {args.client_cpu}; {args.rounds} rounds of "
          f"{args.records:,} records of {args.record_size} B, {args.partitions} partitions, "
          f"producer {' '.join(args.producer_props)}; {args.acls} ACLs with an authorizer.")
    print()
    print("| variant | produce records/s | avg latency ms | consume records/s | "
          "fetch records/s | broker CPU µs/record produced | broker CPU µs/record consumed |")
    print("|---|---|---|---|---|---|---|")
    for name, m in medians.items():
        ratio = {k: median_ratio(results[name], results[first], k) for k in KEYS}
        print(f"| {name} | {m['produce']:,.0f} ({ratio['produce']:.3f}x) | "
              f"{m['latency']:.2f} ({ratio['latency']:.3f}x) | "
              f"{m['consume']:,.0f} ({ratio['consume']:.3f}x) | "
              f"{m['fetch']:,.0f} ({ratio['fetch']:.3f}x) | "
              f"{m['cpu_produce']:.3f} ({ratio['cpu_produce']:.3f}x) | "
              f"{m['cpu_consume']:.3f} ({ratio['cpu_consume']:.3f}x) |")
    print()
    for name, rs in results.items():
        print(f"{name}: produce " + ", ".join(f"{x['produce']:,.0f}" for x in rs) +
              "; consume " + ", ".join(f"{x['consume']:,.0f}" for x in rs))


if __name__ == "__main__":
    main()
