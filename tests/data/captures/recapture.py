#!/usr/bin/env python3
"""Re-creates the golden Kafka wire captures in this directory, or checks them.

    recapture.py            start a reference Kafka broker, run kcat and the Java
                            console clients through tools/capture_proxy.py, keep
                            the useful frames, and rewrite manifest.json
    recapture.py --clients java
                            the same for the Java client only; the other
                            clients' files stay as they are
    recapture.py --manifest-only
                            rewrite manifest.json from the .bin files already here
    recapture.py --check    decode every file listed in manifest.json and compare
                            with its "expect" block (no broker needed, only the
                            Kafka message definitions that
                            `tests/kafka-reference.sh install` fetches)

See README.md for what is captured and why.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tools"))

import capture_proxy  # noqa: E402
import decode_capture as dc  # noqa: E402

KAFKA_SH = os.path.join(REPO, "tests", "kafka-reference.sh")
PROXY = os.path.join(REPO, "tools", "capture_proxy.py")
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CLIENTS = ["librdkafka", "java"]

# The API versions Silt generates code for, hence the only ones its ApiVersions
# response advertises.
API_TABLE = os.path.join(REPO, "src", "protocol", "generated", "api_table.h")
# Clients whose sessions run through a proxy that clamps the broker's
# ApiVersions responses to API_TABLE, so that they negotiate the versions they
# would use with Silt. librdkafka 2.0.2 stays below Silt's maximum versions on
# its own; its ApiVersions response is kept as the broker sent it.
CLAMPED_CLIENTS = {"java"}

RDKAFKA_RECORDS = [(f"key-{i}", f"value-{i}") for i in range(10)]
JAVA_RECORDS = [(f"key-{i}", f"value-{i}") for i in range(5)]


def log(msg: str) -> None:
    print(f"recapture: {msg}", file=sys.stderr, flush=True)


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Proxy:
    """Runs tools/capture_proxy.py for one capture session."""

    def __init__(self, listen: int, upstream: int, out: str, clamp: str | None = None):
        self.out = out
        os.makedirs(out, exist_ok=True)
        self.log_path = out + ".proxy.log"
        self.logf = open(self.log_path, "w")
        cmd = [sys.executable, PROXY, "--listen", f"127.0.0.1:{listen}",
               "--upstream", f"127.0.0.1:{upstream}", "--out", out]
        if clamp:
            cmd += ["--clamp-api-versions", clamp]
        self.proc = subprocess.Popen(cmd, stderr=self.logf, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with open(self.log_path) as f:
                if "listening" in f.read():
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"capture proxy did not start, see {self.log_path}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()


def run(cmd: list[str], stdin_text: str | None = None, timeout: float = 120) -> str:
    log("$ " + " ".join(cmd))
    res = subprocess.run(cmd, input=stdin_text, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"command failed ({res.returncode}): {' '.join(cmd)}\n{res.stderr}")
    return res.stdout


def session(args, name: str, cmd: list[str], stdin_text: str | None = None,
            clamp: bool = False) -> str:
    out = os.path.join(args.workdir, "raw", name)
    proxy = Proxy(args.proxy_port, args.kafka_port, out, args.api_table if clamp else None)
    try:
        run(cmd, stdin_text)
        time.sleep(0.3)  # let the last responses pass through
    finally:
        proxy.stop()
    return out


def lines(records, sep=":") -> str:
    return "".join(f"{k}{sep}{v}\n" for k, v in records)


def capture(args) -> dict[str, str]:
    """Runs all client sessions; returns {session name: raw frame directory}."""
    bootstrap = f"127.0.0.1:{args.proxy_port}"
    tool = [KAFKA_SH, "tool"]
    raw = {}

    topics = ([f"golden-{c}" for c in CODECS] if "librdkafka" in args.clients else []) \
        + ([f"golden-java-{c}" for c in CODECS] if "java" in args.clients else [])
    # Topics are created through the proxy too (the broker advertises the proxy
    # port), into a scratch directory that is not kept.
    out = os.path.join(args.workdir, "raw", "setup")
    proxy = Proxy(args.proxy_port, args.kafka_port, out)
    try:
        for t in topics:
            run(tool + ["org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap,
                        "--create", "--if-not-exists", "--topic", t,
                        "--partitions", "1", "--replication-factor", "1"])
    finally:
        proxy.stop()

    if "librdkafka" in args.clients:
        clamp = "librdkafka" in CLAMPED_CLIENTS
        kcat = ["kcat", "-b", bootstrap]
        raw["rdkafka-list"] = session(args, "rdkafka-list", kcat + ["-L"], clamp=clamp)
        for c in CODECS:
            raw[f"rdkafka-produce-{c}"] = session(
                args, f"rdkafka-produce-{c}",
                kcat + ["-P", "-t", f"golden-{c}", "-K:", "-z", c, "-X", "linger.ms=100"],
                lines(RDKAFKA_RECORDS), clamp=clamp)
        for c in CODECS:
            raw[f"rdkafka-consume-{c}"] = session(
                args, f"rdkafka-consume-{c}",
                kcat + ["-C", "-t", f"golden-{c}", "-o", "beginning", "-e", "-f", "%k:%s\\n"],
                clamp=clamp)

    if "java" in args.clients:
        clamp = "java" in CLAMPED_CLIENTS
        for c in CODECS:
            raw[f"java-produce-{c}"] = session(
                args, f"java-produce-{c}",
                tool + ["org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", bootstrap,
                        "--topic", f"golden-java-{c}", "--compression-codec", c,
                        "--property", "parse.key=true", "--property", "key.separator=:"],
                lines(JAVA_RECORDS), clamp=clamp)
        for c in CODECS:
            raw[f"java-consume-{c}"] = session(
                args, f"java-consume-{c}",
                tool + ["org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                        bootstrap, "--topic", f"golden-java-{c}", "--partition", "0",
                        "--offset", "earliest", "--max-messages", str(len(JAVA_RECORDS)),
                        "--property", "print.key=true", "--property", "key.separator=:"],
                clamp=clamp)
    return raw


# --------------------------------------------------------------------------
# Selecting frames


def frames(raw_dir: str, api: str, dec: dc.Decoder):
    """Yields (request path, response path or None, decoded request, decoded response)."""
    for name in sorted(os.listdir(raw_dir)):
        if not name.endswith("_request.bin") or f"_{api}_v" not in name:
            continue
        req = os.path.join(raw_dir, name)
        resp = req.replace("_request.bin", "_response.bin")
        dreq = dc.decode_file(dec, req)
        dresp = dc.decode_file(dec, resp) if os.path.exists(resp) else None
        yield req, (resp if dresp else None), dreq, dresp


def fetched_records(dresp) -> int:
    n = 0
    for t in dresp["body"]["responses"]:
        for p in t["partitions"]:
            recs = p.get("records") or {"batches": []}
            n += sum(b.get("record_count", 0) for b in recs["batches"])
    return n


def pick(raw_dir, api, dec, pred=lambda q, r: True):
    for req, resp, dreq, dresp in frames(raw_dir, api, dec):
        if resp and pred(dreq, dresp):
            return req, resp
    raise RuntimeError(f"no {api} frame pair matching in {raw_dir}")


def curate(args, raw: dict[str, str], dec: dc.Decoder) -> list[str]:
    """Copies the useful frame pairs of args.clients; returns the files written."""
    chosen = []  # (client, stem, req, resp)

    def keep(client, stem, pair):
        chosen.append((client, stem) + pair)

    def metadata_for(topic):
        return lambda q, r: (q["body"]["topics"] or [{}])[0].get("name") == topic \
            and r["body"]["topics"] and r["body"]["topics"][0]["error_code"] == 0

    has_records = lambda q, r: fetched_records(r) > 0  # noqa: E731
    no_records = lambda q, r: fetched_records(r) == 0  # noqa: E731

    if "librdkafka" in args.clients:  # kcat
        lst = raw["rdkafka-list"]
        keep("librdkafka", "apiversions_v{v}", pick(lst, "ApiVersions", dec))
        keep("librdkafka", "metadata_v{v}_no-topics",
             pick(lst, "Metadata", dec, lambda q, r: q["body"]["topics"] == []))
        keep("librdkafka", "metadata_v{v}_all-topics",
             pick(lst, "Metadata", dec, lambda q, r: q["body"]["topics"] is None))
        keep("librdkafka", "metadata_v{v}_golden-none",
             pick(raw["rdkafka-produce-none"], "Metadata", dec, metadata_for("golden-none")))
        for c in CODECS:
            keep("librdkafka", f"produce_v{{v}}_{c}",
                 pick(raw[f"rdkafka-produce-{c}"], "Produce", dec))
        keep("librdkafka", "listoffsets_v{v}_earliest",
             pick(raw["rdkafka-consume-none"], "ListOffsets", dec))
        for c in CODECS:
            keep("librdkafka", f"fetch_v{{v}}_{c}",
                 pick(raw[f"rdkafka-consume-{c}"], "Fetch", dec, has_records))
        keep("librdkafka", "fetch_v{v}_none-empty",
             pick(raw["rdkafka-consume-none"], "Fetch", dec, no_records))

    if "java" in args.clients:
        jp = raw["java-produce-none"]
        keep("java", "apiversions_v{v}", pick(jp, "ApiVersions", dec))
        keep("java", "metadata_v{v}_golden-java-none",
             pick(jp, "Metadata", dec, metadata_for("golden-java-none")))
        keep("java", "initproducerid_v{v}",
             pick(jp, "InitProducerId", dec, lambda q, r: r["body"]["error_code"] == 0))
        for c in CODECS:
            keep("java", f"produce_v{{v}}_{c}", pick(raw[f"java-produce-{c}"], "Produce", dec))
        keep("java", "listoffsets_v{v}_earliest", pick(raw["java-consume-none"], "ListOffsets", dec))
        for c in CODECS:
            keep("java", f"fetch_v{{v}}_{c}",
                 pick(raw[f"java-consume-{c}"], "Fetch", dec, has_records))
        keep("java", "fetch_v{v}_none-empty",
             pick(raw["java-consume-none"], "Fetch", dec, no_records))

    for client in args.clients:
        d = os.path.join(args.out, client)
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
    files = []
    for client, stem, req, resp in chosen:
        version = dc.decode_file(dec, req)["api_version"]
        stem = stem.format(v=version)
        for src, kind in ((req, "request"), (resp, "response")):
            rel = f"{client}/{stem}_{kind}.bin"
            shutil.copyfile(src, os.path.join(args.out, rel))
            files.append(rel)
    return files


# --------------------------------------------------------------------------
# Manifest


def _topic_key(t: dict) -> dict:
    if "topic_id" in t and ("name" not in t and "topic" not in t):
        return {"topic_id": t["topic_id"]}
    return {"topic": t.get("name", t.get("topic"))}


def _batches(records) -> list[dict]:
    out = []
    for b in (records or {"batches": []})["batches"]:
        out.append({
            "base_offset": b["base_offset"], "batch_length": b["batch_length"],
            "magic": b["magic"], "crc": b["crc"], "attributes": b["attributes"],
            "codec": b["codec"], "last_offset_delta": b["last_offset_delta"],
            "producer_id": b["producer_id"], "producer_epoch": b["producer_epoch"],
            "base_sequence": b["base_sequence"], "base_timestamp": b["base_timestamp"],
            "max_timestamp": b["max_timestamp"], "record_count": b["record_count"],
            "keys": [r["key"] for r in b["records"]],
            "values": [r["value"] for r in b["records"]],
        })
        if b["codec"] != "none":
            out[-1]["uncompressed_size"] = b["uncompressed_size"]
        if "snappy_framing" in b:
            out[-1]["snappy_framing"] = b["snappy_framing"]
    return out


def _records_summary(records) -> dict:
    batches = _batches(records)
    out = {"records_size": (records or {}).get("size", -1), "batches": batches,
           "record_count": sum(b["record_count"] for b in batches),
           "keys": [k for b in batches for k in b["keys"]],
           "values": [v for b in batches for v in b["values"]]}
    if len(batches) == 1:
        out["codec"] = batches[0]["codec"]
    return out


def expect_for(d: dict) -> dict:
    h, b, api, kind = d["header"], d["body"], d["api_name"], d["kind"]
    if d.get("trailing_bytes"):
        raise ValueError(f"{api} {kind}: {d['trailing_bytes']} undecoded trailing bytes")
    e: dict = {"correlation_id": h["correlation_id"]}
    if kind == "request":
        e["client_id"] = h["client_id"]
    if api == "ApiVersions" and kind == "request":
        if "client_software_name" in b:
            e["client_software_name"] = b["client_software_name"]
            e["client_software_version"] = b["client_software_version"]
    elif api == "ApiVersions":
        keys = {k["api_key"]: k for k in b["api_keys"]}
        e["error_code"] = b["error_code"]
        e["throttle_time_ms"] = b.get("throttle_time_ms")
        e["api_key_count"] = len(b["api_keys"])
        e["api_keys_sample"] = [[k, keys[k]["min_version"], keys[k]["max_version"]]
                                for k in (0, 1, 2, 3, 18, 22) if k in keys]
        if b.get("finalized_features") is not None:
            e["finalized_features_epoch"] = b.get("finalized_features_epoch")
            e["finalized_features"] = {f["name"]: f["max_version_level"] for f in b["finalized_features"]}
    elif api == "Metadata" and kind == "request":
        e["topics"] = None if b["topics"] is None else [t["name"] for t in b["topics"]]
        e["allow_auto_topic_creation"] = b.get("allow_auto_topic_creation")
    elif api == "Metadata":
        e["brokers"] = [[x["node_id"], x["host"], x["port"]] for x in b["brokers"]]
        e["cluster_id"] = b.get("cluster_id")
        e["controller_id"] = b.get("controller_id")
        e["topics"] = [dict({"name": t["name"], "error_code": t["error_code"]},
                            **({"topic_id": t["topic_id"]} if "topic_id" in t else {}),
                            partitions=[[p["partition_index"], p["leader_id"]] for p in t["partitions"]])
                       for t in b["topics"]]
    elif api == "Produce" and kind == "request":
        assert len(b["topic_data"]) == 1 and len(b["topic_data"][0]["partition_data"]) == 1
        t = b["topic_data"][0]
        p = t["partition_data"][0]
        e.update(transactional_id=b["transactional_id"], acks=b["acks"], timeout_ms=b["timeout_ms"])
        e.update(_topic_key(t))
        e["partition"] = p["index"]
        e.update(_records_summary(p["records"]))
    elif api == "Produce":
        t = b["responses"][0]
        p = t["partition_responses"][0]
        e.update(_topic_key(t))
        e.update(partition=p["index"], error_code=p["error_code"], base_offset=p["base_offset"],
                 log_start_offset=p.get("log_start_offset"), throttle_time_ms=b.get("throttle_time_ms"))
    elif api == "Fetch" and kind == "request":
        e.update(max_wait_ms=b["max_wait_ms"], min_bytes=b["min_bytes"], max_bytes=b.get("max_bytes"),
                 isolation_level=b.get("isolation_level"), session_id=b.get("session_id"),
                 session_epoch=b.get("session_epoch"), topic_count=len(b["topics"]))
        if not b["topics"]:  # incremental fetch session request without changes
            return e
        t = b["topics"][0]
        p = t["partitions"][0]
        e.update(_topic_key(t))
        e.update(partition=p["partition"], fetch_offset=p["fetch_offset"],
                 partition_max_bytes=p["partition_max_bytes"])
    elif api == "Fetch":
        e.update(error_code=b.get("error_code"), session_id=b.get("session_id"),
                 topic_count=len(b["responses"]))
        if not b["responses"]:  # incremental fetch session response without changes
            e.update(record_count=0, keys=[], values=[], batches=[])
            return e
        t = b["responses"][0]
        p = t["partitions"][0]
        e.update(_topic_key(t))
        e.update(partition=p["partition_index"], partition_error_code=p["error_code"],
                 high_watermark=p["high_watermark"], last_stable_offset=p.get("last_stable_offset"),
                 log_start_offset=p.get("log_start_offset"))
        e.update(_records_summary(p["records"]))
    elif api == "ListOffsets" and kind == "request":
        t = b["topics"][0]
        p = t["partitions"][0]
        e.update(isolation_level=b.get("isolation_level"), topic=t["name"],
                 partition=p["partition_index"], timestamp=p["timestamp"])
    elif api == "ListOffsets":
        t = b["topics"][0]
        p = t["partitions"][0]
        e.update(topic=t["name"], partition=p["partition_index"], error_code=p["error_code"],
                 offset=p["offset"], timestamp=p["timestamp"])
    elif api == "InitProducerId" and kind == "request":
        e.update(transactional_id=b["transactional_id"],
                 transaction_timeout_ms=b["transaction_timeout_ms"])
    elif api == "InitProducerId":
        e.update(error_code=b["error_code"], producer_id=b["producer_id"],
                 producer_epoch=b["producer_epoch"])
    return e


CLIENT_NAMES = {
    "librdkafka": "kcat 1.7.1 / librdkafka 2.0.2",
    "java": "Apache Kafka Java client 4.1.1 (console tools)",
}


def build_manifest(out_dir: str, files: list[str], dec: dc.Decoder) -> list[dict]:
    entries = []
    for rel in files:
        d = dc.decode_file(dec, os.path.join(out_dir, rel))
        entries.append({"file": rel, "api_key": d["api_key"], "api_name": d["api_name"],
                        "api_version": d["api_version"], "kind": d["kind"],
                        "client": CLIENT_NAMES[rel.split("/")[0]],
                        "size": os.path.getsize(os.path.join(out_dir, rel)),
                        "expect": expect_for(d)})
    return entries


def check_known_content(entries: list[dict]) -> None:
    """Checks that the captures carry exactly what the clients were told to send."""
    problems = []
    for e in entries:
        name, x = e["file"], e["expect"]
        known = RDKAFKA_RECORDS if name.startswith("librdkafka/") else JAVA_RECORDS
        codec = os.path.basename(name).split("_")[2] if name.count("_") >= 3 else None
        if e["api_name"] in ("Produce", "Fetch") and "batches" in x:
            if name.endswith("none-empty_response.bin"):
                if x["record_count"] != 0:
                    problems.append(f"{name}: expected no records")
                continue
            if len(x["batches"]) != 1:
                problems.append(f"{name}: {len(x['batches'])} batches, expected one")
            if x["keys"] != [k for k, _ in known] or x["values"] != [v for _, v in known]:
                problems.append(f"{name}: records differ from what was produced")
            if x.get("codec") != codec:
                problems.append(f"{name}: codec {x.get('codec')}, expected {codec}")
            if e["api_name"] == "Fetch" and x["high_watermark"] != len(known):
                problems.append(f"{name}: high watermark {x['high_watermark']}")
        if e["api_name"] == "ApiVersions" and e["kind"] == "response" and x["error_code"] != 0:
            problems.append(f"{name}: ApiVersions error {x['error_code']}")
        if e["kind"] == "response" and x.get("error_code") not in (None, 0):
            problems.append(f"{name}: error_code {x['error_code']}")
    if problems:
        raise SystemExit("recapture: captured content is not as expected:\n  " + "\n  ".join(problems))


def _range(api_key: int, limits: dict) -> str:
    return "%d-%d" % limits[api_key] if api_key in limits else "none"


def check_versions(out_dir: str, entries: list[dict], dec: dc.Decoder) -> list[str]:
    """Checks that every frame uses an API version Silt has generated code for
    (API_TABLE), and that the ApiVersions responses of clamped clients offer
    nothing else."""
    limits = capture_proxy.load_version_limits(API_TABLE)
    problems = []
    for e in entries:
        name = e["file"]
        lo, hi = limits.get(e["api_key"], (0, -1))
        if not lo <= e["api_version"] <= hi:
            problems.append(f"{name}: {e['api_name']} v{e['api_version']} is outside "
                            f"Silt's versions {_range(e['api_key'], limits)}")
        if name.split("/")[0] in CLAMPED_CLIENTS and e["api_name"] == "ApiVersions" \
                and e["kind"] == "response":
            for k in dc.decode_file(dec, os.path.join(out_dir, name))["body"]["api_keys"]:
                lo, hi = limits.get(k["api_key"], (0, -1))
                if not lo <= k["min_version"] <= k["max_version"] <= hi:
                    problems.append(f"{name}: advertises api key {k['api_key']} versions "
                                    f"{k['min_version']}-{k['max_version']}, Silt has "
                                    f"{_range(k['api_key'], limits)}")
    return problems


def existing_files(out_dir: str) -> list[str]:
    """Capture files on disk, in manifest order where a manifest exists."""
    on_disk = sorted(f"{c}/{n}" for c in CLIENTS
                     if os.path.isdir(os.path.join(out_dir, c))
                     for n in os.listdir(os.path.join(out_dir, c)) if n.endswith(".bin"))
    order = []
    path = os.path.join(out_dir, "manifest.json")
    if os.path.exists(path):
        with open(path) as f:
            order = [e["file"] for e in json.load(f) if e["file"] in on_disk]
    return order + [f for f in on_disk if f not in order]


def write_manifest(out_dir: str, files: list[str], dec: dc.Decoder) -> None:
    manifest = build_manifest(out_dir, files, dec)
    check_known_content(manifest)
    problems = check_versions(out_dir, manifest, dec)
    if problems:
        raise SystemExit("recapture: API versions not as expected:\n  " + "\n  ".join(problems))
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


def check(args, dec: dc.Decoder) -> int:
    with open(os.path.join(args.out, "manifest.json")) as f:
        manifest = json.load(f)
    failed = set()
    present = []
    for entry in manifest:
        path = os.path.join(args.out, entry["file"])
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            print(f"MISSING/EMPTY {entry['file']}")
            failed.add(entry["file"])
            continue
        present.append(entry)
        d = dc.decode_file(dec, path)
        got = {"api_key": d["api_key"], "api_version": d["api_version"], "kind": d["kind"],
               "expect": expect_for(d)}
        want = {k: entry[k] for k in got}
        if got != want:
            print(f"MISMATCH {entry['file']}")
            failed.add(entry["file"])
    for problem in check_versions(args.out, present, dec):
        print(f"VERSION {problem}")
        failed.add(problem.split(":")[0])
    listed = {e["file"] for e in manifest}
    on_disk = {f"{c}/{n}" for c in CLIENTS
               for n in os.listdir(os.path.join(args.out, c)) if n.endswith(".bin")}
    extra = sorted(on_disk - listed)
    for name in extra:
        print(f"NOT IN MANIFEST {name}")
    check_known_content(manifest)
    bad = len(failed) + len(extra)
    print(f"{len(manifest) - len(failed)} passed, {bad} failed")
    return 1 if bad else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="only verify the files against manifest.json")
    p.add_argument("--manifest-only", action="store_true",
                   help="rewrite manifest.json from the existing capture files")
    p.add_argument("--out", default=HERE, help="capture directory (default: this directory)")
    p.add_argument("--kafka-port", type=int, default=19092, help="broker port (controller uses +1)")
    p.add_argument("--proxy-port", type=int, default=19094, help="capture proxy port")
    p.add_argument("--clients", default=",".join(CLIENTS),
                   help="comma-separated clients to capture (default: %(default)s); the files "
                        "of the others are kept")
    p.add_argument("--api-table", default=API_TABLE,
                   help="API versions to clamp ApiVersions responses to for the clients in "
                        f"{sorted(CLAMPED_CLIENTS)} (default: Silt's generated api_table.h)")
    p.add_argument("--workdir", default=None, help="scratch directory (default: a temp dir)")
    p.add_argument("--keep-workdir", action="store_true")
    args = p.parse_args()
    wanted = set(args.clients.split(","))
    if not wanted or wanted - set(CLIENTS):
        p.error(f"--clients: expected some of {','.join(CLIENTS)}")
    args.clients = [c for c in CLIENTS if c in wanted]
    args.api_table = os.path.abspath(args.api_table)

    if not (args.check or args.manifest_only):
        subprocess.run([KAFKA_SH, "install"], check=True)
    source = dc.default_schema_source()
    if not source:
        raise SystemExit("recapture: run tests/kafka-reference.sh install first")
    dec = dc.Decoder(dc.Schemas(source))
    if args.check:
        return check(args, dec)
    if args.manifest_only:
        write_manifest(args.out, existing_files(args.out), dec)
        return 0

    for port in (args.kafka_port, args.kafka_port + 1, args.proxy_port):
        if port_open(port):
            raise SystemExit(f"recapture: port {port} is in use")
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="silt-capture-")
    kafka_dir = os.path.join(args.workdir, "kafka")
    try:
        subprocess.run([KAFKA_SH, "start", kafka_dir, str(args.kafka_port), str(args.proxy_port)],
                       check=True)
        raw = capture(args)
    finally:
        subprocess.run([KAFKA_SH, "stop", kafka_dir], check=False)
    files = curate(args, raw, dec)
    kept = [f for f in existing_files(args.out) if f.split("/")[0] not in args.clients]
    write_manifest(args.out, [f for c in CLIENTS for f in kept + files if f.split("/")[0] == c], dec)
    log(f"{len(files)} files written to {args.out}" + (f", {len(kept)} kept" if kept else ""))
    if args.keep_workdir:
        log(f"raw captures kept in {args.workdir}/raw")
    else:
        shutil.rmtree(args.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
