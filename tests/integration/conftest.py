"""Black-box test harness: starts a broker on a free port and hands tests its address.

Every test that takes the `broker` fixture runs against Silt (build/silt) and against the
reference Apache Kafka broker (tests/kafka-reference.sh), so each scenario is checked to
behave the same on both. SILT_TEST_BROKERS=silt (or kafka) limits the run to one of them.
Tests that take `silt` run against Silt only (restarts, SIGKILL, malformed input).

Environment:
  SILT_BIN            the broker binary (default: build/silt of this checkout)
  SILT_TEST_BROKERS   comma-separated subset of "silt,kafka" (default: both)
  SILT_START_TIMEOUT  seconds a fixture waits for Silt to listen (default 30)
  SILT_TEST_PRIVATE_KAFKA=1  also run the Silt-only scenarios that take `private_broker`
                      (restart, crash, malformed input) against a private reference Kafka
                      broker, to check the tests themselves
  SILT_TEST_POSTGRES_URI  when set (postgresql://user@host:port/postgres), every Silt broker
                      keeps its metadata in a fresh database of that PostgreSQL server
                      (metadata.store.uri) instead of SQLite; run-integration.sh starts one
                      with SILT_TEST_METADATA=postgresql
  SILT_TEST_AZURE_ENDPOINT, SILT_TEST_AZURE_ACCOUNT  when set, every Silt broker keeps its
                      objects in an Azure Blob container of that server (the key in
                      AZURE_STORAGE_KEY): a fresh one, or for brokers given the same file://
                      store, the same one; run-integration.sh starts Azurite with
                      SILT_TEST_OBJECTS=azurite

A Silt broker that stops is also checked not to have run a metadata statement on a network
thread (the store refuses them and logs it).
"""
import os
import shutil
import random
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path

import pytest

from util import JAVA_DIR

ROOT = Path(__file__).resolve().parents[2]
SILT_BIN = Path(os.environ.get("SILT_BIN", ROOT / "build" / "silt"))
KAFKA_REF = ROOT / "tests" / "kafka-reference.sh"
SILT_START_TIMEOUT = float(os.environ.get("SILT_START_TIMEOUT", "30"))
POSTGRES_URI = os.environ.get("SILT_TEST_POSTGRES_URI", "")
AZURE_ENDPOINT = os.environ.get("SILT_TEST_AZURE_ENDPOINT", "")
AZURE_ACCOUNT = os.environ.get("SILT_TEST_AZURE_ACCOUNT", "")
# The broker under test is built with sanitizers (make asan): several times slower, so that a
# rate a test asks for may not be kept.
SANITIZED = os.environ.get("SILT_TEST_SANITIZED") == "1"
NETWORK_THREAD_REFUSAL = "refused a statement on a network thread"


def fresh_postgres_database():
    """A new empty database on the PostgreSQL server of SILT_TEST_POSTGRES_URI; its URI."""
    name = "it_" + uuid.uuid4().hex[:16]
    subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", POSTGRES_URI, "-c",
                    f"CREATE DATABASE {name}"], check=True, capture_output=True, timeout=30)
    return POSTGRES_URI[:POSTGRES_URI.rfind("/") + 1] + name


def azure_objects(uri):
    """The azblob:// URI that replaces a broker's object store `uri` (None: the default, a
    directory of its own) when the suite runs on Azurite: a fresh container, or for a file://
    store shared by several brokers, the one first given for that directory. Other stores
    (s3://) are kept.

    The name is kept beside the directory (DIR.azurite-container), not derived from its path: a
    test's directory is removed once it passes, and a later test of the same name then gets the
    same path. Its brokers, of another cluster, must not find the first test's objects (they
    would refuse the store: docs/formats/cluster-marker.md)."""
    if uri is not None and not uri.startswith("file://"):
        return uri
    name = uuid.uuid4().hex
    if uri is not None:
        where = Path(urllib.parse.unquote(uri[len("file://"):].split("?", 1)[0]).rstrip("/"))
        where.parent.mkdir(parents=True, exist_ok=True)
        kept = where.parent / (where.name + ".azurite-container")
        try:
            with open(kept, "x") as f:
                f.write(name)
        except FileExistsError:
            name = kept.read_text()
    return (f"azblob://it-{name[:24]}?endpoint={AZURE_ENDPOINT}&account={AZURE_ACCOUNT}"
            "&create_container=true")


def listen_port_range():
    """Ports for brokers: below the kernel's ephemeral range (ip_local_port_range), which the
    local ends of outgoing connections take, so that no client connection holds a broker's port
    while the broker restarts on it."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    if low > 12000:
        return 10000, low
    return (high + 1, 65536) if high < 64000 else (10000, 65536)  # no room outside: any


_ports = random.SystemRandom()


def free_port(count=1):
    """A port p such that p..p+count-1 were all free a moment ago, outside the ephemeral
    range (listen_port_range)."""
    lo, hi = listen_port_range()
    for _ in range(500):
        port = _ports.randrange(lo, hi - count)
        socks = []
        try:
            for p in range(port, port + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port")


def wait_port(port, proc=None, timeout=60.0, log=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = Path(log).read_text()[-4000:] if log and Path(log).exists() else ""
            raise RuntimeError(f"broker exited with {proc.returncode} before listening:\n{tail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} not open after {timeout}s")


class SiltBroker:
    """A Silt broker process with its own data directory."""

    kind = "silt"

    def __init__(self, workdir, extra_overrides=None, env=None):
        self.workdir = Path(workdir)
        self.env = env  # extra environment variables
        self.data_dir = self.workdir / "data"
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log = self.workdir / "silt.log"
        self.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "data.dir": str(self.data_dir),
            "wal.capacity.bytes": str(256 << 20),
            # As the reference Kafka broker runs (tests/kafka-reference.sh): a new group's first
            # rebalance does not wait for more members.
            "group.initial.rebalance.delay.ms": "0",
        }
        if POSTGRES_URI:
            self.overrides["metadata.store.uri"] = fresh_postgres_database()
        self.overrides.update(extra_overrides or {})
        if AZURE_ENDPOINT:
            self.overrides["object.store.uri"] = azure_objects(self.overrides.get("object.store.uri"))
        self.proc = None

    def command(self):
        cmd = [str(SILT_BIN)]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    def start(self, timeout=60.0):
        assert self.proc is None or self.proc.poll() is not None, "already running"
        logf = open(self.log, "ab")
        env = dict(os.environ, **self.env) if self.env else None
        self.proc = subprocess.Popen(self.command(), stdout=logf, stderr=subprocess.STDOUT,
                                     cwd=self.workdir, env=env)
        logf.close()
        wait_port(self.port, self.proc, timeout, self.log)

    def stop(self, timeout=30.0):
        """SIGTERM and wait: a clean shutdown must exit 0."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def kill(self):
        """SIGKILL: a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self):
        self.stop()
        self.start()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_text(self):
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def check_log(self):
        """Fails the test if the broker ran a metadata statement on a network thread."""
        text = self.log_text()
        assert NETWORK_THREAD_REFUSAL not in text, \
            "metadata statement on a network thread:\n" + "\n".join(
                l for l in text.splitlines() if NETWORK_THREAD_REFUSAL in l)[:4000]


class KafkaBroker:
    """The reference Apache Kafka broker (single-node KRaft) in its own directory."""

    kind = "kafka"

    def __init__(self, workdir):
        self.workdir = Path(workdir)
        self.port = free_port(2)
        self.bootstrap = f"127.0.0.1:{self.port}"

    def start(self, timeout=120.0):
        env = dict(os.environ, CONTROLLER_PORT=str(self.port + 1))
        subprocess.run([str(KAFKA_REF), "start", str(self.workdir), str(self.port)], check=True,
                       env=env, timeout=timeout)
        self.wait_ready(timeout)

    def wait_ready(self, timeout):
        """The port opens before the broker has registered itself: wait until metadata
        lists a broker, so that the first CreateTopics does not fail."""
        from confluent_kafka.admin import AdminClient
        a = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.time() + timeout
        while True:
            try:
                md = a.list_topics(timeout=5)
                if md.brokers and md.controller_id >= 0:
                    return
            except Exception:  # noqa: BLE001 - not ready yet
                if time.time() > deadline:
                    raise
            if time.time() > deadline:
                raise RuntimeError(f"reference Kafka on {self.bootstrap} not ready")
            time.sleep(0.2)

    def stop(self, timeout=60.0):
        subprocess.run([str(KAFKA_REF), "stop", str(self.workdir)], check=False, timeout=timeout)
        return 0

    def kill(self):
        pidf = self.workdir / "kafka.pid"
        if pidf.exists():
            try:
                pid = int(pidf.read_text().strip())
                os.kill(pid, signal.SIGKILL)
                deadline = time.time() + 10
                while time.time() < deadline:
                    os.kill(pid, 0)
                    time.sleep(0.05)
            except (ProcessLookupError, ValueError):
                pass

    def restart(self):
        self.stop()
        self.start()

    def log_text(self):
        log = self.workdir / "logs" / "server.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def alive(self):
        pidf = self.workdir / "kafka.pid"
        if not pidf.exists():
            return False
        try:
            os.kill(int(pidf.read_text().strip()), 0)
            return True
        except (ProcessLookupError, ValueError):
            return False


_silt_start_failure = None


def start_silt(b):
    """Start a fixture's Silt broker. Once a start has failed in this session, later ones
    fail at once with the same message instead of waiting out the timeout again."""
    global _silt_start_failure
    if _silt_start_failure is not None:
        pytest.fail(f"Silt could not be started earlier in this session: {_silt_start_failure}",
                    pytrace=False)
    try:
        b.start(timeout=SILT_START_TIMEOUT)
    except (OSError, RuntimeError) as e:
        b.kill()
        _silt_start_failure = f"{SILT_BIN}: {e}"
        pytest.fail(_silt_start_failure, pytrace=False)


def selected_brokers():
    names = os.environ.get("SILT_TEST_BROKERS", "silt,kafka").split(",")
    return [n.strip() for n in names if n.strip()]


@pytest.fixture(scope="session")
def kafka_reference():
    if "kafka" not in selected_brokers():
        pytest.skip("reference Kafka not selected (SILT_TEST_BROKERS)")
    workdir = Path(tempfile.mkdtemp(prefix="silt-kafka-ref-"))
    broker = KafkaBroker(workdir)
    broker.start()
    yield broker
    broker.stop()
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def silt_shared(tmp_path_factory):
    """One Silt broker shared by the tests that do not restart or kill it."""
    if "silt" not in selected_brokers():
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")
    broker = SiltBroker(tmp_path_factory.mktemp("silt-shared"))
    start_silt(broker)
    yield broker
    code = broker.stop()
    assert code == 0, f"silt exited with {code} on SIGTERM:\n{broker.log_text()[-4000:]}"
    broker.check_log()


@pytest.fixture(params=["silt", "kafka"])
def broker(request):
    """The broker under test: the shared Silt broker, then the reference Kafka broker."""
    if request.param == "silt":
        b = request.getfixturevalue("silt_shared")
        assert b.alive(), "the shared Silt broker died:\n" + b.log_text()[-4000:]
        return b
    return request.getfixturevalue("kafka_reference")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Removes the directory of a test that passed once its fixtures are torn down: each
    broker's preallocated WAL and objects would otherwise keep gigabytes per run (pytest keeps
    the directories of the last three runs). A failed test's directory stays, to be read."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        item.stash[_FAILED] = True
    if call.when == "teardown" and not item.stash.get(_FAILED, False):
        path = getattr(item, "funcargs", {}).get("tmp_path")
        if isinstance(path, Path):
            shutil.rmtree(path, ignore_errors=True)


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def silt(tmp_path):
    """A private Silt broker for tests that restart, kill or attack it."""
    if "silt" not in selected_brokers():
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")
    b = SiltBroker(tmp_path)
    start_silt(b)
    yield b
    if b.alive():
        code = b.stop()
        assert code == 0, f"silt exited with {code} on SIGTERM:\n{b.log_text()[-4000:]}"
    b.check_log()


@pytest.fixture
def topic_name():
    return "t-" + uuid.uuid4().hex[:12]


def private_kinds():
    kinds = ["silt"]
    if os.environ.get("SILT_TEST_PRIVATE_KAFKA") == "1":
        kinds.append("kafka")
    return kinds


@pytest.fixture(params=private_kinds())
def private_broker(request, tmp_path):
    """A broker of the test's own, which it may stop, kill or attack: a private Silt broker
    (the `silt` fixture), and with SILT_TEST_PRIVATE_KAFKA=1 also a private reference Kafka."""
    if request.param == "silt":
        yield request.getfixturevalue("silt")
        return
    if "kafka" not in selected_brokers():
        pytest.skip("reference Kafka not selected (SILT_TEST_BROKERS)")
    b = KafkaBroker(tmp_path / "kafka")
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="session")
def java_classpath(tmp_path_factory):
    """Compiles the scenarios with Maven; returns the classpath to run them."""
    for tool in ("mvn", "java"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found: the Java client scenarios need a JDK >= 17 and Maven")
    build = Path(os.environ.get("SILT_JAVA_BUILD") or tmp_path_factory.mktemp("java-it"))
    build.mkdir(parents=True, exist_ok=True)
    cp_file = build / "classpath.txt"
    cmd = ["mvn", "-q", "-B", "-Dstyle.color=never", f"-Dsilt.build.dir={build}",
           "compile", "dependency:build-classpath", f"-Dmdep.outputFile={cp_file}"]
    try:
        r = subprocess.run(cmd, cwd=JAVA_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=900)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"maven build timed out:\n{e.output or ''}")
    if r.returncode != 0 or not cp_file.exists():
        pytest.fail(f"maven build failed ({' '.join(cmd)}):\n{r.stdout[-6000:]}")
    return f"{build / 'classes'}{os.pathsep}{cp_file.read_text().strip()}"
