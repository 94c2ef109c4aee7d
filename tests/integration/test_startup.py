"""Start-up and shutdown of the silt binary: bad settings stop it with a message naming them,
a properties file is read (Apache Kafka's own server.properties too), and SIGTERM answers
requests in flight before it exits 0."""
import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import ROOT, SILT_BIN, SiltBroker
from util import (Reader, array, connect, create_topic, i8, i32, i64, metadata_request,
                  read_response, request, string)

FETCH = 1


def kafka_server_properties():
    """Apache Kafka's stock KRaft config/server.properties: the reference install's
    (tests/kafka-reference.sh) when it has a config directory, else the copy of its settings
    in tests/data."""
    cache = Path(os.environ.get("SILT_CACHE", Path.home() / ".cache" / "silt"))
    version = os.environ.get("KAFKA_VERSION", "4.1.1")
    installed = cache / f"kafka-{version}" / "config" / "server.properties"
    if installed.exists():
        return installed
    return ROOT / "tests" / "data" / "kafka-4.1-server.properties"


def run_silt(*args, timeout=30):
    return subprocess.run([str(SILT_BIN), *args], capture_output=True, text=True, timeout=timeout)


def test_unknown_setting_is_named(tmp_path):
    r = run_silt("--override", "no.such.setting=1", "--override", f"data.dir={tmp_path}")
    assert r.returncode != 0
    assert "no.such.setting" in r.stderr


def test_invalid_value_is_named(tmp_path):
    r = run_silt("--override", "wal.iodepth=lots", "--override", f"data.dir={tmp_path}")
    assert r.returncode != 0
    assert "wal.iodepth" in r.stderr and "lots" in r.stderr


def test_bad_line_in_properties_file_is_named(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# a comment\nnum.partitions=3\nlisteners=NOPE\n")
    r = run_silt(str(props), "--override", f"data.dir={tmp_path / 'data'}")
    assert r.returncode != 0
    assert "listeners" in r.stderr and "server.properties" in r.stderr


def test_properties_file_and_overrides(tmp_path, topic_name):
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=3\nnode.id=7\n")
    b = SiltBroker(tmp_path)
    b.command = lambda: [str(SILT_BIN), str(props)] + sum(
        (["--override", f"{k}={v}"] for k, v in b.overrides.items()), [])
    b.start()
    try:
        from util import admin
        # Silt answers the Metadata that auto-creates a topic once the topic exists, with its
        # partitions: the first answer must already have them.
        md = admin(b.bootstrap).list_topics(topic_name, timeout=10)  # auto-creates
        t = md.topics[topic_name]
        assert 7 in md.brokers
        assert t.error is None, f"{t.error}\n{b.log_text()[-4000:]}"
        assert len(t.partitions) == 3, f"{t.partitions}\n{b.log_text()[-4000:]}"
    finally:
        assert b.stop() == 0


def test_sigterm_answers_a_waiting_fetch(silt, topic_name):
    create_topic(silt.bootstrap, topic_name, 1)
    s = connect(silt.bootstrap, timeout=30)
    # Fetch v4 from the end of an empty partition: it waits up to 20 s for data.
    body = (i32(-1) + i32(20000) + i32(1) + i32(1 << 20) + i8(0) +
            array([string(topic_name) + array([i32(0) + i64(0) + i32(1 << 20)])]))
    s.sendall(request(FETCH, 4, 42, body))
    time.sleep(0.5)
    start = time.time()
    silt.proc.send_signal(signal.SIGTERM)
    got = read_response(s)
    assert got is not None and got[0] == 42, "the waiting fetch was not answered"
    assert time.time() - start < 10
    assert silt.proc.wait(30) == 0
    s.close()


def test_kafka_stock_server_properties(tmp_path):
    """Kafka's own server.properties starts Silt: the settings Silt has no use for are named
    once on stderr, the controller listener is dropped, and the broker serves Metadata."""
    props = kafka_server_properties()
    b = SiltBroker(tmp_path)
    b.command = lambda: [str(SILT_BIN), str(props),
                         "--override", f"listeners=PLAINTEXT://127.0.0.1:{b.port}",
                         "--override", f"data.dir={b.data_dir}"]
    b.start()
    try:
        with connect(b.bootstrap) as s:
            s.sendall(metadata_request(5, topics=None, version=1))
            got = read_response(s)
        assert got is not None and got[0] == 5, "no Metadata response"
        r = Reader(got[1])
        brokers = []
        for _ in range(r.i32()):
            brokers.append((r.i32(), r.string(), r.i32()))
            r.string()  # rack
        # node.id and advertised.listeners come from the file (its CONTROLLER entry dropped).
        assert brokers == [(1, "localhost", 9092)]
        assert r.i32() == 1  # controller_id
        log = b.log_text()
        assert ("silt: ignoring Kafka setting 'controller.quorum.bootstrap.servers' "
                "(Silt has no KRaft controller)") in log
        assert ("silt: ignoring Kafka listener 'CONTROLLER://localhost:9093' in "
                "advertised.listeners (Silt has no KRaft controller)") in log
        assert log.count("ignoring Kafka setting 'log.segment.bytes'") == 1
        assert (b.data_dir / "wal").exists(), "data.dir overrides the file's log.dirs"
    finally:
        assert b.stop() == 0


def thread_nice_values(pid):
    """The nice value of each of the process's threads (field 19 of /proc/PID/task/TID/stat)."""
    values = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:  # a thread that just ended
            continue
        values.append(int(stat[stat.rindex(")") + 2:].split()[16]))
    return values


def test_latency_threads_take_their_nice_value(tmp_path):
    """The network and WAL threads run at latency.threads.nice; the background ones (uploads,
    compaction, cold reads, the blocking pool) keep the process's."""
    if os.geteuid() != 0:
        import pytest
        pytest.skip("lowering a thread's nice value needs root here")
    b = SiltBroker(tmp_path, {"latency.threads.nice": "-7", "wal.iodepth": "4"})
    b.start()
    try:
        # The main thread, 2 network threads, the WAL's I/O thread and its 4 writers. Each
        # thread sets its own value as it starts: on a loaded machine some may not have run
        # yet when the port opens.
        deadline = time.monotonic() + 30
        values = thread_nice_values(b.proc.pid)
        while values.count(-7) < 8 and time.monotonic() < deadline:
            time.sleep(0.1)
            values = thread_nice_values(b.proc.pid)
        assert values.count(-7) >= 8, values
        assert values.count(0) >= 2, values
        assert set(values) <= {-7, 0}, values
        assert "not applied" not in b.log_text()
    finally:
        assert b.stop() == 0


def test_latency_threads_without_the_privilege_keep_the_process_value(tmp_path):
    """Without CAP_SYS_NICE (and RLIMIT_NICE at 0) the broker says so once and runs with
    every thread at the process's nice value."""
    b = SiltBroker(tmp_path)
    if os.geteuid() == 0:  # another user lacks the privilege already
        setpriv = ["setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice"]
        plain = b.command
        b.command = lambda: setpriv + plain()
    b.start()
    try:
        values = thread_nice_values(b.proc.pid)
        assert set(values) == {os.getpriority(os.PRIO_PROCESS, 0)}, values
        warnings = [l for l in b.log_text().splitlines() if "latency.threads.nice" in l]
        assert len(warnings) == 1 and "-10 not applied" in warnings[0], warnings
        with connect(b.bootstrap) as s:  # and it serves
            s.sendall(metadata_request(5, topics=None, version=1))
            assert read_response(s) is not None
    finally:
        assert b.stop() == 0
