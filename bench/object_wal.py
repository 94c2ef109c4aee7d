#!/usr/bin/env python3
"""The WAL on disk against the WAL in object storage, with the data in S3 (Ceph radosgw).

For each wal.type (file, then object) it starts a broker on a fresh bucket of an S3 test
server (scripts/s3-test-server.sh), runs silt-perf (acks=all producers and a consumer group)
at a fixed rate, waits for the uploads to catch up, and reads the broker's metrics endpoint:
object store PUTs and GETs, and the bytes produced. It prints, per WAL type, the produce and
end-to-end latency percentiles, the requests per GiB ingested, and what one GiB costs in
requests at S3 and Azure Blob list prices (below; storage and transfer not counted).

    bench/object_wal.py [BUILD_DIR]

Environment: RATE (records/s, 2000), RECORD_SIZE (1024), PARTITIONS (8), MINUTES (0.5),
FLUSH_MS (wal.object.flush.interval.ms, 20), S3_DIR (the test server's folder, BUILD_DIR/
object-wal-s3).
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build").resolve()
RATE = int(os.environ.get("RATE", "2000"))
RECORD_SIZE = int(os.environ.get("RECORD_SIZE", "1024"))
PARTITIONS = int(os.environ.get("PARTITIONS", "8"))
MINUTES = float(os.environ.get("MINUTES", "0.5"))
FLUSH_MS = os.environ.get("FLUSH_MS", "20")
S3_DIR = Path(os.environ.get("S3_DIR", BUILD / "object-wal-s3"))

# Request prices in US dollars per 1,000 requests (list prices, US East, 2025): S3 Standard
# PUT 0.005, GET 0.0004; Azure Blob Storage hot tier (LRS) write 0.0065, read 0.00052
# (0.065 and 0.0052 per 10,000). DELETEs are free on both. Listings (priced as PUTs or
# writes) are left out: the WAL lists only when it opens or is taken over.
PRICES = {"S3": (0.005, 0.0004), "Azure": (0.0065, 0.00052)}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def s3_server():
    out = subprocess.run([str(ROOT / "scripts/s3-test-server.sh"), "start", str(S3_DIR)],
                         check=True, capture_output=True, text=True).stdout
    return dict(re.findall(r"export (\w+)=(\S+)", out))


def create_bucket(env, bucket):
    subprocess.run(["curl", "-sS", "-f", "-o", "/dev/null", "-X", "PUT", "--aws-sigv4",
                    f"aws:amz:{env['SILT_S3_REGION']}:s3", "--user",
                    f"{env['SILT_S3_ACCESS_KEY']}:{env['SILT_S3_SECRET_KEY']}", "-H",
                    "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495"
                    "991b7852b855", f"{env['SILT_S3_ENDPOINT']}/{bucket}"], check=True)


def scrape(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def total(samples, prefix):
    return sum(v for k, v in samples.items() if k.startswith(prefix))


def run(wal_type, env, work):
    bucket = f"wal-bench-{wal_type}-{uuid.uuid4().hex[:8]}"
    create_bucket(env, bucket)
    port, metrics = free_port(), free_port()
    uri = f"s3://{bucket}?endpoint={env['SILT_S3_ENDPOINT']}&path_style=true"
    cmd = [str(BUILD / "silt"), "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
           "--override", f"data.dir={work}/data-{wal_type}", "--override", f"object.store.uri={uri}",
           "--override", f"metrics.listener=http://127.0.0.1:{metrics}/metrics",
           "--override", f"wal.type={wal_type}", "--override", f"wal.object.flush.interval.ms={FLUSH_MS}",
           "--override", "wal.capacity.bytes=268435456"]
    broker_env = dict(os.environ, AWS_ACCESS_KEY_ID=env["SILT_S3_ACCESS_KEY"],
                      AWS_SECRET_ACCESS_KEY=env["SILT_S3_SECRET_KEY"])
    log = open(work / f"silt-{wal_type}.log", "wb")
    broker = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=broker_env)
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert broker.poll() is None and time.time() < deadline, "the broker did not start"
                time.sleep(0.2)
        result = work / f"perf-{wal_type}.json"
        subprocess.run([str(BUILD / "silt-perf"), "-B", f"127.0.0.1:{port}", "-t", "1", "-n",
                        str(PARTITIONS), "-s", str(RECORD_SIZE), "-r", str(RATE), "-w", "0.1",
                        "-d", str(MINUTES), "-o", str(result)], check=True,
                       stdout=subprocess.DEVNULL)
        # Every byte uploaded before counting the requests it took.
        deadline = time.time() + 60
        while scrape(metrics).get("silt_upload_lag_seconds", 0) > 0 and time.time() < deadline:
            time.sleep(0.5)
        time.sleep(3)
        samples = scrape(metrics)
    finally:
        broker.terminate()
        broker.wait(timeout=30)
        log.close()
    perf = json.loads(result.read_text())["test"]
    bytes_in = total(samples, "kafka_server_brokertopicmetrics_bytesin_total")
    puts = total(samples, 'silt_object_store_requests_total{operation="put"')
    gets = total(samples, 'silt_object_store_requests_total{operation="get"')
    return {"wal": wal_type, "produce": perf["produce_latency"], "e2e": perf["e2e_latency"],
            "mib_s": perf["produce_mib_per_s"], "bytes_in": bytes_in, "puts": puts, "gets": gets}


def main():
    env = s3_server()
    rows = []
    with tempfile.TemporaryDirectory(prefix="object-wal-bench-") as d:
        for wal_type in ("file", "object"):
            rows.append(run(wal_type, env, Path(d)))
    print(f"rate {RATE} records/s of {RECORD_SIZE} B to {PARTITIONS} partitions, "
          f"{MINUTES} min, wal.object.flush.interval.ms={FLUSH_MS}, objects in radosgw\n")
    print("| wal.type | MiB/s | produce p50 ms | produce p99 ms | e2e p50 ms | e2e p99 ms | "
          "PUTs per GiB | GETs per GiB | $ per GiB, S3 | $ per GiB, Azure |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        per_gib = (1 << 30) / r["bytes_in"] if r["bytes_in"] else 0
        puts, gets = r["puts"] * per_gib, r["gets"] * per_gib
        cost = {k: (puts * put + gets * get) / 1000 for k, (put, get) in PRICES.items()}
        print(f"| {r['wal']} | {r['mib_s']:.2f} | {r['produce']['p50_ms']:.2f} | "
              f"{r['produce']['p99_ms']:.2f} | {r['e2e']['p50_ms']:.2f} | {r['e2e']['p99_ms']:.2f} | "
              f"{puts:,.0f} | {gets:,.0f} | {cost['S3']:.4f} | {cost['Azure']:.4f} |")


if __name__ == "__main__":
    main()
