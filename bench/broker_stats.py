#!/usr/bin/env python3
"""Helpers for bench/producer_perf_vs_kafka.sh.

  broker_stats.py free-port
      Print a port P such that 127.0.0.1:P and P+1 are free (Kafka's controller takes P+1).
  broker_stats.py cpu PID
      Print the CPU seconds (utime + stime from /proc/PID/stat) the process has used.
  broker_stats.py hwm PID
      Print the process's peak resident set (VmHWM from /proc/PID/status) in KiB.
  broker_stats.py procstat
      Print the machine's CPU time so far, from the "cpu" line of /proc/stat, in clock ticks:
      busy,idle,iowait (busy: user, nice, system, irq, softirq and steal).
  broker_stats.py record OUT.json key=value...
      Parse the final line of a ProducerPerformance log (perf_log=FILE) and, for Silt, its
      last Produce timing line (broker_log=FILE, "silt: requests: Produce ..."), and write one
      run's result, with the other key=value pairs (numbers where they parse), to OUT.json.
  broker_stats.py report RUNS_DIR RESULTS.json key=value...
      Read RUNS_DIR/*.json, print the Markdown tables (one per workload, with the Silt/Kafka
      ratios) and write everything, plus the key=value metadata, to RESULTS.json.
"""
import glob
import json
import os
import random
import re
import socket
import sys

# N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency,
# P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th.
FINAL_RE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th")

# silt: requests: Produce n=N total p50=A p99=B max=C | handle p50=... | queue p50=... |
# send p50=... ms
BROKER_RE = re.compile(r"silt: requests: Produce n=(\d+) (.*) ms$", re.M)
# silt: wal: writes n=N avg KiB=K appends/write=A | batch wait p50=... | write p50=... ms
WAL_RE = re.compile(r"silt: wal: writes n=(\d+) avg KiB=(\d+) appends/write=[\d.]+ (.*) ms$", re.M)
# Printed by the producer JVM after the measured run (see write_perf_wrapper).
PRODUCER_CPU_RE = re.compile(r"^producer cpu seconds: ([\d.]+)$", re.M)
PART_RE = re.compile(r"(\w+) p50=([\d.]+) p99=([\d.]+) max=([\d.]+)")


def broker_timing(line_match, first_key):
    out = {first_key: int(line_match.group(1))}
    for name, p50, p99, mx in PART_RE.findall(line_match.group(line_match.re.groups)):
        out.update({f"{name}_p50_ms": float(p50), f"{name}_p99_ms": float(p99),
                    f"{name}_max_ms": float(mx)})
    return out


MiB = 1 << 20
GiB = 1 << 30


def free_port():
    for _ in range(500):
        port = random.randint(20000, 60000)
        ok = True
        for p in (port, port + 1):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                s.close()
        if ok:
            return port
    raise SystemExit("broker_stats: no free port pair found")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # The command name may hold spaces and parentheses: fields start after the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise SystemExit(f"broker_stats: no {key} in /proc/{pid}/status")


def procstat():
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    return f"{user + nice + system + irq + softirq + steal},{idle},{iowait}"


def machine_cpu(run, stat):
    """From two procstat samples ("busy,idle,iowait busy,idle,iowait") taken at the start and
    the end of the measured run: the run's wall time, and the CPUs busy on average during it,
    split into the broker, the producer and everything else (kernel threads, other
    processes)."""
    try:
        (b0, i0, w0), (b1, i1, w1) = ([int(v) for v in s.split(",")] for s in stat.split())
    except ValueError:
        return
    tck = os.sysconf("SC_CLK_TCK")
    ncpu = os.cpu_count() or 1
    wall = ((b1 - b0) + (i1 - i0) + (w1 - w0)) / tck / ncpu
    if wall <= 0:
        return
    m = {"wall_s": wall, "cpus": ncpu, "busy_cpus": (b1 - b0) / tck / wall,
         "iowait_cpus": (w1 - w0) / tck / wall}
    if isinstance(run.get("cpu_seconds"), (int, float)):
        m["broker_cpus"] = run["cpu_seconds"] / wall
    if isinstance(run.get("producer_cpu_seconds"), (int, float)):
        m["producer_cpus"] = run["producer_cpu_seconds"] / wall
    m["other_cpus"] = m["busy_cpus"] - m.get("broker_cpus", 0) - m.get("producer_cpus", 0)
    run["machine"] = m


# Values that are text even when they look like numbers (a short commit hash such as
# 6408e59 parses as a float).
TEXT_KEYS = {"commit", "date", "machine", "producer_props", "java", "kafka_version", "silt_bin",
             "procstat"}


def parse_kv(args):
    out = {}
    for a in args:
        k, _, v = a.partition("=")
        if k in TEXT_KEYS:
            out[k] = v
            continue
        try:
            out[k] = int(v)
        except ValueError:
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    return out


def record(out_path, args):
    run = parse_kv(args)
    broker_log = run.pop("broker_log", None)
    if broker_log and os.path.exists(broker_log):
        with open(broker_log, errors="replace") as f:
            text = f.read()
        # The reports come at the start of the measured run (the warm-up's), at its end, and
        # at shutdown: the second is the measured run.
        found = list(BROKER_RE.finditer(text))
        if len(found) >= 2:
            run["broker_produce"] = broker_timing(found[1], "requests")
        found = list(WAL_RE.finditer(text))
        if len(found) >= 2:
            run["broker_wal"] = broker_timing(found[1], "writes")
            run["broker_wal"]["avg_write_kib"] = int(found[1].group(2))
    log = run.pop("perf_log", None)
    final = None
    if log and os.path.exists(log):
        with open(log, errors="replace") as f:
            text = f.read()
        for m in FINAL_RE.finditer(text):
            final = m
        run["exceptions_logged"] = text.count("Exception")
        m = PRODUCER_CPU_RE.search(text)
        if m:
            run["producer_cpu_seconds"] = float(m.group(1))
    if final is None:
        run.setdefault("error", "no final ProducerPerformance line in " + str(log))
    else:
        n = int(final.group(1))
        size = run.get("record_size", 0)
        rps = float(final.group(2))
        run.update({
            "records_sent": n,
            "records_per_sec": rps,
            "mib_per_sec": rps * size / MiB,
            "tool_mb_per_sec": float(final.group(3)),
            "avg_ms": float(final.group(4)),
            "max_ms": float(final.group(5)),
            "p50_ms": int(final.group(6)),
            "p95_ms": int(final.group(7)),
            "p99_ms": int(final.group(8)),
            "p999_ms": int(final.group(9)),
        })
        if "cpu_seconds" in run and n and size:
            run["cpu_s_per_gib"] = run["cpu_seconds"] / (n * size / GiB)
        if "producer_cpu_seconds" in run and n and size:
            run["producer_cpu_s_per_gib"] = run["producer_cpu_seconds"] / (n * size / GiB)
    stat = run.pop("procstat", "")
    if stat:
        machine_cpu(run, stat)
        if "peak_rss_kib" in run:
            run["peak_rss_mib"] = run["peak_rss_kib"] / 1024.0
    with open(out_path, "w") as f:
        json.dump(run, f, indent=2, sort_keys=True)


def fmt(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:,.{digits}f}"


def ratio(a, b):
    if a is None or b is None or not b:
        return None
    return a / b


COLUMNS = [  # (header, key, digits)
    ("MiB/s", "mib_per_sec", 1),
    ("records/s", "records_per_sec", 0),
    ("avg ms", "avg_ms", 2),
    ("p50", "p50_ms", 0),
    ("p99", "p99_ms", 0),
    ("p99.9", "p999_ms", 0),
    ("CPU s/GiB", "cpu_s_per_gib", 2),
    ("producer CPU s/GiB", "producer_cpu_s_per_gib", 2),
    ("peak RSS MiB", "peak_rss_mib", 0),
]


def report(runs_dir, out_path, args):
    meta = parse_kv(args)
    runs = []
    for p in sorted(glob.glob(os.path.join(runs_dir, "*.json"))):
        with open(p) as f:
            runs.append(json.load(f))
    workloads = []
    for run in runs:
        w = next((w for w in workloads if w["name"] == run["workload"]), None)
        if w is None:
            w = {"name": run["workload"], "title": run.get("title", run["workload"]),
                 "record_size": run.get("record_size"), "records": run.get("records"),
                 "throughput_limit": run.get("throughput_limit"),
                 "producer_props": run.get("producer_props"), "results": {}}
            workloads.append(w)
        w["results"][run["broker"]] = run

    lines = []
    lines.append(f"Date {meta.get('date', '-')}, commit {meta.get('commit', '-')}, "
                 f"machine: {meta.get('machine', '-')}.")
    lines.append(f"Topic: {meta.get('partitions', '-')} partition(s), replication factor 1. "
                 "Each broker freshly started with an empty data dir per workload"
                 + (", then a warm-up run (a quarter of the records, from the same producer JVM, to another topic)."
                    if meta.get("warmup") == 1 else ", no warm-up."))
    for w in workloads:
        res = w["results"]
        lines.append("")
        lines.append(f"### {w['title']}")
        lines.append("")
        if w.get("producer_props"):
            lines.append(f"Producer: {w['producer_props']}.")
            lines.append("")
        lines.append("| broker | " + " | ".join(c[0] for c in COLUMNS) + " |")
        lines.append("|---" * (len(COLUMNS) + 1) + "|")
        for broker in ("silt", "kafka"):
            r = res.get(broker)
            if r is None:
                continue
            if "error" in r:
                lines.append(f"| {broker} | " + " | ".join("-" for _ in COLUMNS) + " |")
                lines.append(f"\n{broker} failed: {r['error']}\n")
                continue
            lines.append(f"| {broker} | " + " | ".join(
                fmt(r.get(key), d) for _, key, d in COLUMNS) + " |")
        s, k = res.get("silt"), res.get("kafka")
        if s and k and "error" not in s and "error" not in k:
            rats = {key: ratio(s.get(key), k.get(key)) for _, key, _ in COLUMNS}
            w["ratios_silt_over_kafka"] = rats
            lines.append("| silt/kafka | " + " | ".join(
                (f"{rats[key]:.2f}x" if rats[key] is not None else "-")
                for _, key, _ in COLUMNS) + " |")
        for broker in ("silt", "kafka"):
            r = res.get(broker)
            if r and r.get("topic_auto_created"):
                lines.append(f"\nNote: TopicCommand --create failed on {broker}; the topic "
                             "was auto-created by the producer (the broker's default "
                             "partition count).")
            bp = r.get("broker_produce") if r else None
            if bp:
                lines.append(
                    f"\n{broker}'s own Produce timing over the measured run ({bp['requests']:,} "
                    f"requests, last request byte read to last response byte written): p50 "
                    f"{bp['total_p50_ms']} ms, p99 {bp['total_p99_ms']} ms, max "
                    f"{bp['total_max_ms']} ms; handling p99 {bp['handle_p99_ms']} ms (max "
                    f"{bp['handle_max_ms']}), response queue p99 {bp['queue_p99_ms']} ms (max "
                    f"{bp['queue_max_ms']}), send p99 {bp['send_p99_ms']} ms (max "
                    f"{bp['send_max_ms']}).")
            bw = r.get("broker_wal") if r else None
            if bw:
                lines.append(
                    f"Its WAL: {bw['writes']:,} writes of {bw['avg_write_kib']} KiB on average; "
                    f"batch wait p99 {bw['wait_p99_ms']} ms (max {bw['wait_max_ms']}), "
                    f"write to durable p99 {bw['write_p99_ms']} ms (max {bw['write_max_ms']}).")
            mc = r.get("machine") if r else None
            if mc and "broker_cpus" in mc and "producer_cpus" in mc:
                lines.append(
                    f"The machine during {broker}'s measured run ({mc['wall_s']:.1f} s): "
                    f"{mc['busy_cpus']:.2f} of its {mc['cpus']} CPUs busy on average: the "
                    f"broker {mc['broker_cpus']:.2f}, the producer {mc['producer_cpus']:.2f}, "
                    f"the rest (kernel threads, other processes) {max(mc['other_cpus'], 0.0):.2f}; "
                    f"{mc['iowait_cpus']:.2f} waiting for I/O.")
            if r and r.get("exceptions_logged"):
                lines.append(f"\nNote: the {broker} run logged {r['exceptions_logged']} "
                             "exception line(s); see its perf log.")
    lines.append("")
    lines.append("Latencies are ProducerPerformance's send-to-acknowledgement times (its "
                 "percentiles are whole milliseconds). CPU s/GiB: the broker process's "
                 "utime+stime over the run per GiB of record payload (producer CPU: the same for "
                 "the producer's JVM); peak RSS: its VmHWM "
                 "(for Kafka this includes the JVM heap it touched).")
    text = "\n".join(lines)
    print(text)
    with open(out_path, "w") as f:
        json.dump({"meta": meta, "workloads": workloads, "markdown": text}, f, indent=2,
                  sort_keys=True)


def main(argv):
    if len(argv) < 2:
        raise SystemExit(__doc__)
    cmd = argv[1]
    if cmd == "free-port":
        print(free_port())
    elif cmd == "cpu":
        print(f"{cpu_seconds(int(argv[2])):.2f}")
    elif cmd == "procstat":
        print(procstat())
    elif cmd == "hwm":
        print(status_kib(int(argv[2]), "VmHWM"))
    elif cmd == "record":
        record(argv[2], argv[3:])
    elif cmd == "report":
        report(argv[2], argv[3], argv[4:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
