#!/usr/bin/env python3
"""The client compatibility matrix: the same scenarios with many Kafka clients, against Silt
and against the reference Apache Kafka broker (see tests/compat/README.md).

    tests/compat/run.py [--brokers silt,kafka] [--clients a,b] [--records N]
                        [--write docs/compatibility.md] [--work DIR]

Each client's driver is built (Maven, Go, npm) into the work directory, a broker is started,
and for every client the scenario runs on a topic of its own: create, produce N records
under each codec the client supports, consume in a group, commit, resume with a new
consumer, describe, alter a config, delete. Then the applications: a Kafka Streams topology
and Kafka Connect's FileStream connectors. Exits 1 when a step that passed on Kafka failed on
Silt (or, with --brokers silt, when any step failed).
"""
import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PY = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
STEP_TIMEOUT = 240

sys.path.insert(0, str(ROOT / "tests" / "integration"))
_spec = importlib.util.spec_from_file_location("integration_conftest",
                                               ROOT / "tests" / "integration" / "conftest.py")
brokers_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(brokers_mod)
sys.path.insert(0, str(HERE / "python"))
from compat_common import record  # noqa: E402

STEPS = ["create", "produce", "consume", "commit + resume", "describe", "alter config",
         "delete"]
APP_STEPS = ["run"]


class StepFailed(Exception):
    pass


class Unsupported(Exception):
    pass


def sh(cmd, cwd=None, env=None, timeout=1800):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{r.stdout[-3000:]}"
                           f"\n{r.stderr[-3000:]}")
    return r.stdout


# ---- the clients -----------------------------------------------------------------------

def java_driver(version):
    def prepare(work):
        out = work / f"java-{version}"
        cp_file = out / "classpath.txt"
        if not cp_file.exists():
            sh(["mvn", "-q", "-B", "-Dstyle.color=never", f"-Dkafka.version={version}",
                f"-Dsilt.build.dir={out}", "compile", "dependency:build-classpath",
                f"-Dmdep.outputFile={cp_file}"], cwd=HERE / "java")
        cp = f"{out / 'classes'}{os.pathsep}{cp_file.read_text().strip()}"
        return ["java", "-cp", cp, "silt.compat.Driver"]
    return prepare


def go_driver(name):
    def prepare(work):
        out = work / "go"
        # Quick when nothing changed (the Go build cache).
        sh(["go", "build", "-o", str(out) + "/", "./..."], cwd=HERE / "go",
           env=dict(os.environ, GOFLAGS="-mod=mod", GOTOOLCHAIN="local"))
        return [str(out / name)]
    return prepare


def node_driver(script):
    def prepare(work):
        out = work / "node"
        sh(["bash", str(HERE / "node" / "install.sh"), str(out)])  # quick once installed
        os.environ["NODE_PATH"] = str(out / "node_modules")
        return ["node", str(HERE / "node" / script)]
    return prepare


def python_driver(path, venv=False):
    def prepare(work):
        if not venv:
            return [PY, str(HERE / path)]
        # The newest releases from PyPI, beside Debian's: another librdkafka and the
        # rewritten kafka-python 3.
        env = work / "venv"
        if not (env / "ready").exists():
            shutil.rmtree(env, ignore_errors=True)
            sh([PY, "-m", "venv", str(env)])
            sh([str(env / "bin" / "pip"), "install", "-q", *PYPI_PACKAGES])
            (env / "ready").write_text(" ".join(PYPI_PACKAGES))
        return [str(env / "bin" / "python"), str(HERE / path)]
    return prepare


PYPI_PACKAGES = ["confluent-kafka==2.16.1", "kafka-python==3.0.12", "lz4==4.4.5",
                 "python-snappy==0.7.3", "zstandard==0.25.0"]


def debian_version(package):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True,
                       text=True)
    return r.stdout.strip() or "?"


# name: (label, prepare, records carry the idx header)
CLIENTS = {
    "java-4.1": ("Java clients 4.1.1", java_driver("4.1.1"), True),
    "java-4.4": ("Java clients 4.4.0", java_driver("4.4.0"), True),
    "kafka-cli": ("Kafka CLI tools 4.1.1 (kafka-topics, kafka-configs, console producer and "
                  "consumer)", python_driver("cli/driver.py"), True),
    "confluent-kafka-python": (
        f"confluent-kafka-python {debian_version('python3-confluent-kafka')} "
        f"(librdkafka {debian_version('librdkafka1')})",
        python_driver("python/confluent_driver.py"), True),
    "confluent-kafka-python-2": ("confluent-kafka-python 2.16.1 from PyPI (librdkafka 2.16.0)",
                                 python_driver("python/confluent_driver.py", venv=True), True),
    "kcat": (f"kcat {debian_version('kcat')} (librdkafka)", python_driver("kcat/driver.py"),
             False),
    "kafka-python": (f"kafka-python {debian_version('python3-kafka')}",
                     python_driver("python/kafka_python_driver.py"), True),
    "kafka-python-3": ("kafka-python 3.0.12 from PyPI",
                       python_driver("python/kafka_python_driver.py", venv=True), True),
    "franz-go": ("franz-go 1.22.3", go_driver("franz"), True),
    "sarama": ("sarama 1.61.1", go_driver("sarama"), True),
    "kafkajs": ("kafkajs 2.2.4", node_driver("kafkajs.js"), True),
    "confluent-kafka-javascript": ("@confluentinc/kafka-javascript 1.10.1 (librdkafka 2.15.1)",
                                   node_driver("confluent.js"), True),
}
APPS = {
    "kafka-streams": "Kafka Streams 4.1.1: a stateless topology (filter and map into a second "
                     "topic)",
    "kafka-connect": "Kafka Connect 4.1.1, standalone: FileStream source and sink",
}


class Driver:
    def __init__(self, cmd, bootstrap, log):
        self.cmd, self.bootstrap, self.log = cmd, bootstrap, log

    def __call__(self, *args):
        """The driver's JSON lines for COMMAND ARGS; StepFailed with its first error."""
        full = [*self.cmd, "--bootstrap", self.bootstrap, *map(str, args)]
        t0 = time.monotonic()
        try:
            r = subprocess.run(full, capture_output=True, text=True, timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise StepFailed(f"{args[0]}: no answer after {STEP_TIMEOUT} s") from None
        with open(self.log, "a") as f:
            f.write(f"$ {' '.join(full)}  # {time.monotonic() - t0:.1f} s, exit "
                    f"{r.returncode}\n{r.stderr[-4000:]}\n")
        if r.returncode == 3 and "unsupported" in r.stderr:
            raise Unsupported(args[0])
        if r.returncode != 0:
            lines = r.stderr.strip().splitlines()
            raise StepFailed(lines[-1] if lines else f"exit status {r.returncode}")
        return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


# ---- checks ------------------------------------------------------------------------------

VALUE_TAIL = ":" + "abcdefghij" * 20
KEY_RE = re.compile(r"^([a-z0-9]+)-(\d{6})$")


def check_records(rows, codecs, count, with_idx, seen):
    """Checks one consumer's records against the produce rule; adds (codec, i) to `seen`.
    Returns {partition: offset after the last record}."""
    last = {}
    for r in rows:
        m = KEY_RE.match(r.get("k") or "")
        if not m or m.group(1) not in codecs or int(m.group(2)) >= count:
            raise StepFailed(f"unexpected key {r.get('k')!r} at {r['p']}/{r['o']}")
        codec, i = m.group(1), int(m.group(2))
        key, value, headers = record(codec, i)
        if r.get("v") != value:
            raise StepFailed(f"value of {key} is {str(r.get('v'))[:60]!r}")
        want = [list(h) for h in headers] if with_idx else [["codec", codec]]
        if r.get("h") != want:
            raise StepFailed(f"headers of {key} are {r.get('h')}, expected {want}")
        if (codec, i) in seen:
            raise StepFailed(f"{key} consumed twice (at {r['p']}/{r['o']})")
        seen.add((codec, i))
        if r["p"] in last and r["o"] < last[r["p"]]:
            raise StepFailed(f"offsets went back in partition {r['p']}: {r['o']} after "
                             f"{last[r['p']] - 1}")
        last[r["p"]] = r["o"] + 1
    return last


def run_client(name, prepare, with_idx, bootstrap, work, records):
    """{step: ("pass"|"fail"|"n/a", detail)} for one client against one broker."""
    res = {}
    try:
        cmd = prepare(work)
    except Exception as e:  # noqa: BLE001 - a driver that cannot be built fails every step
        msg = f"driver not built: {str(e).strip().splitlines()[0][:300]}"
        return {s: ("fail", msg) for s in STEPS}
    d = Driver(cmd, bootstrap, work / f"{name}.log")
    helper = Driver([PY, str(HERE / "python" / "confluent_driver.py")], bootstrap,
                    work / f"{name}.log")
    topic = f"compat-{name}-{uuid.uuid4().hex[:8]}"
    group = f"group-{topic}"

    def step(label, fn):
        try:
            res[label] = ("pass", fn())
        except Unsupported:
            res[label] = ("n/a", "not in this client")
        except StepFailed as e:
            res[label] = ("fail", str(e))
        return res[label][0]

    try:
        codecs = d("codecs")[0]["codecs"]
    except (StepFailed, Unsupported) as e:
        return {s: ("fail", f"codecs: {e}") for s in STEPS}

    if step("create", lambda: d("create", topic, 3)) != "pass":
        try:
            helper("create", topic, 3)  # so that the other steps can still run
        except StepFailed:
            pass  # created after all

    def produce():
        for c in codecs:
            d("produce", topic, c, records)
        return ", ".join(codecs)
    if step("produce", produce) != "pass":
        res.update({s: ("fail", "nothing produced") for s in STEPS[2:4]})
    else:
        total = records * len(codecs)
        seen = set()
        committed = {}

        def consume():
            rows = d("consume", topic, group, total // 2, 5000)
            committed.update(check_records([r for r in rows if "p" in r], codecs, records,
                                           with_idx, seen))
            if not committed:
                raise StepFailed("no record consumed")
            return f"{len(seen)} records"

        def resume():
            rows = [r for r in d("consume", topic, group, total, 5000) if "p" in r]
            first = {}
            for r in rows:
                first.setdefault(r["p"], r["o"])
            for p, o in first.items():
                if o != committed.get(p, 0):
                    raise StepFailed(f"partition {p} resumed at offset {o}, committed "
                                     f"{committed.get(p, 0)}")
            check_records(rows, codecs, records, with_idx, seen)
            if len(seen) != total:
                raise StepFailed(f"{total - len(seen)} of {total} records never consumed")
            return f"{len(rows)} records"
        if step("consume", consume) == "pass":
            step("commit + resume", resume)
        else:
            res["commit + resume"] = ("fail", "the first consumer failed")

    def describe():
        out = d("describe", topic)[0]
        if out.get("partitions") != 3:
            raise StepFailed(f"describe says {out.get('partitions')} partitions, not 3")
        if "retention.ms" not in out.get("configs", {}):
            raise StepFailed("describe lists no retention.ms")
        return ""
    step("describe", describe)

    def alter():
        d("alter", topic, "retention.ms", 3600000)
        try:
            got = d("describe", topic)[0]["configs"].get("retention.ms")
        except Unsupported:
            got = helper("describe", topic)[0]["configs"].get("retention.ms")
        if got != "3600000":
            raise StepFailed(f"retention.ms reads {got!r} after setting it to 3600000")
        return ""
    step("alter config", alter)

    def delete():
        d("delete", topic)
        deadline = time.monotonic() + 30
        while topic in helper("list")[0]["topics"]:
            if time.monotonic() > deadline:
                raise StepFailed(f"{topic} still listed 30 s after its deletion")
            time.sleep(0.2)
        return ""
    if step("delete", delete) != "pass":
        try:
            helper("delete", topic)
        except StepFailed:
            pass
    return res


def run_streams(bootstrap, work, records):
    cmd = java_driver("4.1.1")(work)
    d = Driver(cmd, bootstrap, work / "kafka-streams.log")
    topic = f"compat-streams-{uuid.uuid4().hex[:8]}"
    d("create", topic, 3)
    d("create", topic + "-out", 3)
    d("produce", topic, "none", records)
    app = [*cmd[:-1], "silt.compat.StreamsApp"]
    out = Driver(app, bootstrap, work / "kafka-streams.log")(topic, topic + "-out",
                                                              "app-" + topic, records)
    return f"{out[-1].get('out')} records out"


def run_connect(bootstrap, work, records):
    cwork = work / f"connect-{uuid.uuid4().hex[:8]}"
    cwork.mkdir()
    r = subprocess.run(["bash", str(HERE / "connect" / "run.sh"), bootstrap, str(cwork)],
                       capture_output=True, text=True, timeout=STEP_TIMEOUT)
    with open(work / "kafka-connect.log", "a") as f:
        f.write(r.stderr[-4000:])
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        raise StepFailed(lines[-1] if lines else f"exit status {r.returncode}")
    return f"{json.loads(r.stdout.strip().splitlines()[-1]).get('lines')} lines"


def run_app(name, bootstrap, work, records):
    fn = {"kafka-streams": run_streams, "kafka-connect": run_connect}[name]
    try:
        return {"run": ("pass", fn(bootstrap, work, records))}
    except (StepFailed, Unsupported, RuntimeError) as e:
        return {"run": ("fail", str(e).strip().splitlines()[-1][:300] if str(e) else repr(e))}


# ---- the brokers -----------------------------------------------------------------------

def start_broker(kind, work):
    d = work / f"broker-{kind}"
    if kind == "silt":
        b = brokers_mod.SiltBroker(d)
        d.mkdir(parents=True, exist_ok=True)
    else:
        subprocess.run([str(brokers_mod.KAFKA_REF), "install"], check=True)
        b = brokers_mod.KafkaBroker(d)
    b.start()
    return b


# ---- the table -------------------------------------------------------------------------

def cell(silt, kafka):
    s = silt[0] if silt else "-"
    k = kafka[0] if kafka else "-"
    return s if k in (s, "-") else f"{s} (Kafka: {k})"


def write_table(path, results, selected_brokers, records, started):
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True).stdout.strip()
    lines = [
        "# Client compatibility",
        "",
        "Written by `make compat` (`tests/compat/run.py`): every client runs the same scenario "
        "(tests/compat/README.md) on a topic of 3 partitions of its own: create it, produce "
        f"{records:,} keyed records with headers under each compression codec the client "
        "supports (acks=all), consume half of them in a group and commit, resume with a new "
        "consumer of the group (it must start where the first one committed and get every "
        "other record exactly once), describe the topic, alter a config, delete the topic. "
        "The same run is made against the reference Apache Kafka broker; a cell reads `pass` "
        "when both brokers passed, and names Kafka's result where it differs.",
        "",
        f"Run of {time.strftime('%Y-%m-%d', time.gmtime(started))}, commit {rev}, brokers: "
        f"{', '.join(selected_brokers)}.",
        "",
        "| client | " + " | ".join(STEPS) + " |",
        "|---|" + "---|" * len(STEPS),
    ]
    notes = []
    for name, (label, _, _) in CLIENTS.items():
        r = results.get(name)
        if not r:
            continue
        cells = []
        for s in STEPS:
            silt, kafka = r.get("silt", {}).get(s), r.get("kafka", {}).get(s)
            c = cell(silt, kafka)
            for kind, v in (("Silt", silt), ("Kafka", kafka)):
                if v and v[0] == "fail":
                    notes.append(f"- {label}, {s}, on {kind}: {v[1]}")
            if s == "produce" and silt and silt[0] == "pass":
                c += f" ({silt[1]})"
            cells.append(c)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "| application | result |", "|---|---|"]
    for name, label in APPS.items():
        r = results.get(name)
        if not r:
            continue
        silt, kafka = r.get("silt", {}).get("run"), r.get("kafka", {}).get("run")
        for kind, v in (("Silt", silt), ("Kafka", kafka)):
            if v and v[0] == "fail":
                notes.append(f"- {label}, on {kind}: {v[1]}")
        detail = f" ({silt[1]})" if silt and silt[0] == "pass" else ""
        lines.append(f"| {label} | {cell(silt, kafka)}{detail} |")
    lines += ["", "n/a: the client has no such call. kcat has no admin API, and sets the same "
              "headers on every record it produces: its records carry the `codec` header only. "
              "@confluentinc/kafka-javascript 1.10.1 has no call to describe or alter configs. "
              "kafkajs compresses with gzip only, unless codec packages are added."]
    if notes:
        lines += ["", "First errors:", ""] + notes
    Path(path).write_text("\n".join(lines) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--brokers", default="silt,kafka")
    p.add_argument("--clients", default=",".join([*CLIENTS, *APPS]))
    p.add_argument("--records", type=int, default=10000)
    p.add_argument("--write", help="the Markdown table to write (docs/compatibility.md)")
    p.add_argument("--work", help="build and log directory (default: build/compat)")
    a = p.parse_args()
    kinds = [k for k in a.brokers.split(",") if k]
    names = [n for n in a.clients.split(",") if n]
    unknown = [n for n in names if n not in CLIENTS and n not in APPS]
    if unknown:
        p.error(f"unknown clients {unknown}: choose from {', '.join([*CLIENTS, *APPS])}")
    work = Path(a.work or ROOT / "build" / "compat").resolve()
    work.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    started = time.time()
    results = {}
    failed = False
    for kind in kinds:
        broker = start_broker(kind, run_dir)
        try:
            for name in names:
                t0 = time.monotonic()
                if name in CLIENTS:
                    _, prepare, with_idx = CLIENTS[name]
                    r = run_client(name, prepare, with_idx, broker.bootstrap, work, a.records)
                else:
                    r = run_app(name, broker.bootstrap, work, a.records)
                results.setdefault(name, {})[kind] = r
                bad = {s: v[1] for s, v in r.items() if v[0] == "fail"}
                print(f"{kind:5} {name:28} {time.monotonic() - t0:6.1f} s  "
                      + ("pass" if not bad else f"FAIL {json.dumps(bad)[:400]}"), flush=True)
        finally:
            broker.stop()
        if kind == "silt":
            log = broker.log_text()
            if brokers_mod.NETWORK_THREAD_REFUSAL in log:
                print("silt: a metadata statement ran on a network thread", flush=True)
                failed = True
    for name, by_kind in results.items():
        for step, v in by_kind.get("silt", {}).items():
            k = by_kind.get("kafka", {}).get(step)
            if v[0] == "fail" and (k is None or k[0] != "fail"):
                print(f"silt fails where kafka passes: {name} / {step}: {v[1]}", flush=True)
                failed = True
    if a.write:
        write_table(a.write, results, kinds, a.records, started)
    shutil.rmtree(run_dir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
