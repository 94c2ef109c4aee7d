"""Silt while its object store is unreachable and its WAL fills up, tried as an operator would:
a small WAL (wal.capacity.bytes=8 MiB), idempotent producers with acks=all, and the S3 server
(Ceph radosgw, scripts/s3-test-server.sh) cut off behind a TCP proxy the test controls.

While the store is down the broker must keep answering Metadata, ApiVersions and fetches of
cached data in milliseconds, produce must wait for room at most until its timeout and then get
REQUEST_TIMED_OUT (the producers retry), and SIGTERM must stop it within 10 s. When the store
comes back, uploads resume by themselves and every acknowledged record reads back, also after
a restart (from the objects).

A store already down when the broker starts cannot show it its cluster marker
(docs/formats/cluster-marker.md): the broker starts all the same after a bounded wait, serves
from its WAL as in an outage with nothing reaching the store, and claims the store once it
answers.
"""
import os
import select
import shutil
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import ROOT, SiltBroker, free_port
from test_rack_reads import wait_uploaded
from util import (QUIET, admin, api_versions_request, connect, consume_all, create_topic,
                  produce_all, read_response)

S3_SERVER = ROOT / "scripts" / "s3-test-server.sh"
OUTAGE_SECONDS = float(os.environ.get("SILT_TEST_OUTAGE_SECONDS", "60"))


class Proxy:
    """A TCP proxy to the S3 server that the test can cut: `down` refuses connections and
    resets the open ones (an unreachable store), `blackhole` accepts connections and never
    answers (a store that hangs), `up` forwards again."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.port = free_port()
        self.mode = "up"
        self.lock = threading.Lock()
        self.conns = []
        self.listener = None
        self.stopped = False
        self._listen()
        self.thread = threading.Thread(target=self._accept_loop, daemon=True)
        self.thread.start()

    def _listen(self):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        s.settimeout(0.2)
        self.listener = s

    def _accept_loop(self):
        while not self.stopped:
            with self.lock:
                listener = self.listener
            if listener is None:
                time.sleep(0.05)
                continue
            try:
                client, _ = listener.accept()
            except (socket.timeout, OSError):
                continue
            with self.lock:
                mode = self.mode
            if mode == "blackhole":
                with self.lock:
                    self.conns.append(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a, b):
        try:
            while True:
                readable, _, _ = select.select([a, b], [], [], 0.5)
                if self.stopped:
                    return
                for s in readable:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
        except (OSError, ValueError):
            # A socket closed by _drop_connections has fileno -1: select refuses it.
            return
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def _drop_connections(self):
        with self.lock:
            conns, self.conns = self.conns, []
        for c in conns:
            try:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                c.close()
            except OSError:
                pass

    def set(self, mode):
        with self.lock:
            self.mode = mode
            listener = self.listener
            if mode == "down":
                self.listener = None
        if mode == "down" and listener is not None:
            listener.close()
        self._drop_connections()
        if mode != "down":
            with self.lock:
                reopen = self.listener is None
            if reopen:
                self._listen()

    def close(self):
        self.stopped = True
        self.set("down")


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    if not S3_SERVER.exists() or shutil.which("radosgw") is None:
        pytest.skip("the S3 test server (Ceph radosgw) is not installed")
    d = tmp_path_factory.mktemp("s3")
    env = dict(os.environ, S3_PORT=str(free_port()), S3_MON_PORT=str(free_port()))
    out = subprocess.run([str(S3_SERVER), "start", str(d)], env=env, capture_output=True,
                         text=True, timeout=180)
    if out.returncode != 0:
        pytest.fail(f"the S3 test server did not start: {out.stderr[-2000:]}")
    conf = {}
    for line in out.stdout.splitlines():
        if line.startswith("export "):
            k, v = line[len("export "):].split("=", 1)
            conf[k] = v
    try:
        yield conf
    finally:
        subprocess.run([str(S3_SERVER), "stop", str(d)], env=env, capture_output=True,
                       timeout=120)


def make_bucket(s3):
    bucket = "outage-" + uuid.uuid4().hex[:12]
    r = subprocess.run(
        ["curl", "-sS", "-f", "-X", "PUT", "--aws-sigv4", f"aws:amz:{s3['SILT_S3_REGION']}:s3",
         "--user", f"{s3['SILT_S3_ACCESS_KEY']}:{s3['SILT_S3_SECRET_KEY']}",
         # radosgw wants the payload hash header: this is the hash of the empty body.
         "-H", "x-amz-content-sha256: "
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
         f"{s3['SILT_S3_ENDPOINT']}/{bucket}"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"cannot create bucket {bucket}: {r.stderr}"
    return bucket


def s3_get(s3, bucket, key):
    """The object's bytes, read from the S3 server itself (not through the proxy); None if
    there is none."""
    r = subprocess.run(
        ["curl", "-sS", "--aws-sigv4", f"aws:amz:{s3['SILT_S3_REGION']}:s3",
         "--user", f"{s3['SILT_S3_ACCESS_KEY']}:{s3['SILT_S3_SECRET_KEY']}",
         "-H", "x-amz-content-sha256: "
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
         "-w", "\n%{http_code}", f"{s3['SILT_S3_ENDPOINT']}/{bucket}/{key}"],
        capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    body, _, code = r.stdout.rpartition(b"\n")
    if code == b"404":
        return None
    assert code == b"200", (code, body[:500])
    return body


def outage_broker(tmp_path, s3, proxy, bucket):
    uri = (f"s3://{bucket}?endpoint=http://127.0.0.1:{proxy.port}&path_style=true"
           f"&region={s3['SILT_S3_REGION']}&access_key={s3['SILT_S3_ACCESS_KEY']}"
           f"&secret_key={s3['SILT_S3_SECRET_KEY']}&connect_timeout_ms=2000")
    return SiltBroker(tmp_path, {"object.store.uri": uri, "wal.capacity.bytes": "8388608"})


class Producers:
    """Idempotent producers (acks=all) writing numbered values as fast as their queues take
    them, each on its own connection; remembers what was acknowledged."""

    def __init__(self, bootstrap, topic, count=3, value_bytes=1000):
        self.topic = topic
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()
        self.acked = {}  # value -> (partition, offset)
        self.errors = []
        self.sent = 0
        self.pad = b"x" * value_bytes
        self.producers = [
            Producer({"bootstrap.servers": bootstrap, **QUIET, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 600000, "request.timeout.ms": 5000,
                      "queue.buffering.max.kbytes": 16384})
            for _ in range(count)]
        self.threads = [threading.Thread(target=self._run, args=(i, p), daemon=True)
                        for i, p in enumerate(self.producers)]

    def start(self):
        for t in self.threads:
            t.start()

    def _report(self, err, msg):
        with self.lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[msg.value()[:32]] = (msg.partition(), msg.offset())

    def _run(self, index, p):
        i = 0
        while not self.stop_flag.is_set():
            key = f"p{index}-{i:09d}".encode()
            try:
                p.produce(self.topic, key.ljust(32, b".") + self.pad, key=key,
                          on_delivery=self._report)
                i += 1
                with self.lock:
                    self.sent += 1
            except BufferError:
                p.poll(0.05)
            p.poll(0)

    def stop(self, flush_timeout):
        self.stop_flag.set()
        for t in self.threads:
            t.join(10)
        left = [p.flush(flush_timeout) for p in self.producers]
        return sum(left)

    def acked_count(self):
        with self.lock:
            return len(self.acked)


def read_all(bootstrap, topic, partitions, timeout=120):
    """Every record of the topic from the start to the high watermarks: value prefix ->
    list of (partition, offset)."""
    c = Consumer({"bootstrap.servers": bootstrap, **QUIET, "group.id": "unused",
                  "enable.auto.commit": False, "fetch.max.bytes": 8 << 20})
    try:
        ends = {}
        for p in range(partitions):
            _, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)
            ends[p] = hi
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        seen = {}
        done = {p for p, hi in ends.items() if hi == 0}
        deadline = time.time() + timeout
        while len(done) < partitions:
            assert time.time() < deadline, f"reading back timed out at {len(seen)} records"
            for m in c.consume(1000, timeout=1):
                assert m.error() is None, f"fetch error: {m.error()}"
                seen.setdefault(m.value()[:32], []).append((m.partition(), m.offset()))
                if m.offset() + 1 >= ends[m.partition()]:
                    done.add(m.partition())
        return seen
    finally:
        c.close()


def timed(fn):
    start = time.monotonic()
    fn()
    return time.monotonic() - start


def check_answers_quickly(broker, topic):
    """Metadata, ApiVersions and a fetch of cached data, each well under a second."""
    a = admin(broker.bootstrap)
    assert timed(lambda: a.list_topics(timeout=5)) < 1.0, "Metadata is slow"
    with connect(broker.bootstrap, timeout=5) as s:
        start = time.monotonic()
        s.sendall(api_versions_request(7))
        answer = read_response(s)
        assert answer is not None and answer[0] == 7
        assert time.monotonic() - start < 1.0, "ApiVersions is slow"
    c = Consumer({"bootstrap.servers": broker.bootstrap, **QUIET, "group.id": "unused",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        start = time.monotonic()
        msgs = c.consume(1, timeout=10)
        assert msgs and msgs[0].error() is None, "no cached record fetched"
        assert time.monotonic() - start < 5.0, "fetch of cached data is slow"
    finally:
        c.close()


def test_full_wal_with_the_store_down_answers_waits_and_recovers(tmp_path, s3_server):
    proxy = Proxy(int(s3_server["SILT_S3_ENDPOINT"].rsplit(":", 1)[1]))
    broker = outage_broker(tmp_path, s3_server, proxy, make_bucket(s3_server))
    broker.start()
    try:
        topic = "outage-" + uuid.uuid4().hex[:8]
        create_topic(broker.bootstrap, topic, partitions=3)
        proxy.set("down")
        producers = Producers(broker.bootstrap, topic)
        producers.start()
        # The WAL (8 MiB) fills in a few seconds; then produce waits for room.
        deadline = time.time() + 30
        while producers.acked_count() < 6000 and time.time() < deadline:
            time.sleep(0.5)
        time.sleep(5)
        stuck = producers.acked_count()
        assert stuck < 9000, "the WAL did not fill up while the store was down"
        outage_end = time.monotonic() + OUTAGE_SECONDS
        # While it is full: the broker answers, and produce gets no acknowledgement.
        check_answers_quickly(broker, topic)
        time.sleep(max(0.0, outage_end - time.monotonic() - 15))
        check_answers_quickly(broker, topic)
        time.sleep(max(0.0, outage_end - time.monotonic()))
        assert producers.acked_count() - stuck < 500, "acknowledged without room in the WAL"
        assert "REQUEST_TIMED_OUT" not in "".join(producers.errors)  # retried, not failed
        proxy.set("up")
        # Uploads resume by themselves; the WAL drains and produce goes on.
        deadline = time.time() + 60
        while producers.acked_count() < stuck + 20000 and time.time() < deadline:
            time.sleep(0.5)
        assert producers.acked_count() >= stuck + 20000, "produce did not resume"
        left = producers.stop(flush_timeout=120)
        assert left == 0, f"{left} messages never acknowledged"
        assert not producers.errors, producers.errors[:5]
        acked = dict(producers.acked)
        for attempt in ("running", "restarted"):
            seen = read_all(broker.bootstrap, topic, 3)
            missing = [v for v in acked if v not in seen]
            assert not missing, f"{attempt}: {len(missing)} acknowledged records missing"
            dups = [v for v, where in seen.items() if len(where) > 1]
            assert not dups, f"{attempt}: {len(dups)} records written twice"
            for v, where in acked.items():
                assert seen[v][0] == where, f"{attempt}: {v} moved"
            if attempt == "running":
                assert broker.stop() == 0
                broker.start()
    finally:
        broker.stop()
        proxy.close()


def test_sigterm_stops_the_broker_within_10s_while_the_store_hangs(tmp_path, s3_server):
    proxy = Proxy(int(s3_server["SILT_S3_ENDPOINT"].rsplit(":", 1)[1]))
    broker = outage_broker(tmp_path, s3_server, proxy, make_bucket(s3_server))
    broker.start()
    try:
        topic = "hang-" + uuid.uuid4().hex[:8]
        create_topic(broker.bootstrap, topic, partitions=2)
        proxy.set("blackhole")  # connections are taken and never answered
        producers = Producers(broker.bootstrap, topic, count=2)
        producers.start()
        deadline = time.time() + 30
        while producers.acked_count() < 6000 and time.time() < deadline:
            time.sleep(0.5)
        time.sleep(3)
        check_answers_quickly(broker, topic)
        start = time.monotonic()
        code = broker.stop(timeout=30)
        elapsed = time.monotonic() - start
        assert elapsed < 10, f"SIGTERM took {elapsed:.1f} s"
        assert code == 0, broker.log_text()[-3000:]
        producers.stop_flag.set()
        for t in producers.threads:
            t.join(10)
        acked = dict(producers.acked)
        assert acked, "nothing was acknowledged before the WAL filled"
        proxy.set("up")
        broker.start()
        seen = read_all(broker.bootstrap, topic, 2)
        missing = [v for v in acked if v not in seen]
        assert not missing, f"{len(missing)} acknowledged records missing after the restart"
    finally:
        broker.stop()
        proxy.close()


def test_broker_started_while_the_store_hangs_acknowledges_from_its_wal_and_stops_on_sigterm(
        tmp_path, s3_server):
    """The store takes connections and never answers from before the start: the broker cannot
    read its cluster marker. It listens after a bounded wait (not the store's retries, minutes
    here), acknowledges produce from its WAL, answers the rest at once, and stops within 10 s;
    its next start, with the store back, claims the store (writes the marker) and has every
    record."""
    proxy = Proxy(int(s3_server["SILT_S3_ENDPOINT"].rsplit(":", 1)[1]))
    bucket = make_bucket(s3_server)
    broker = outage_broker(tmp_path, s3_server, proxy, bucket)
    proxy.set("blackhole")
    try:
        start = time.monotonic()
        broker.start(timeout=60)
        took = time.monotonic() - start
        assert took < 25, f"started after {took:.1f} s"
        log = broker.log_text()
        assert "has not answered the read of its cluster marker cluster.json" in log, log[-3000:]
        assert "serving from the WAL" in log, log[-3000:]
        topic = "hang-at-start"
        create_topic(broker.bootstrap, topic, partitions=2)
        sent = [{"partition": i % 2, "value": b"v%d" % i} for i in range(500)]
        start = time.monotonic()
        produce_all(broker.bootstrap, topic, sent, acks="all")
        assert time.monotonic() - start < 10, "produce waited on the store"
        check_answers_quickly(broker, topic)
        start = time.monotonic()
        code = broker.stop(timeout=30)
        elapsed = time.monotonic() - start
        assert elapsed < 10, f"SIGTERM took {elapsed:.1f} s"
        assert code == 0, broker.log_text()[-3000:]
        assert s3_get(s3_server, bucket, "cluster.json") is None, "the marker was written"

        proxy.set("up")
        broker.start()
        assert "its marker cluster.json was written now" in broker.log_text()
        assert s3_get(s3_server, bucket, "cluster.json").startswith(b'{"cluster_id":"')
        got = consume_all(broker.bootstrap, topic, 2, count=len(sent))
        assert sorted(m["value"] for m in got) == sorted(r["value"] for r in sent)
    finally:
        broker.stop()
        proxy.close()


def test_broker_started_while_the_store_is_down_claims_it_once_it_is_back(tmp_path, s3_server):
    """The store refuses connections at the start: the broker serves from its WAL; once the
    store is back it reads (here: writes) the marker, and uploads what the WAL holds."""
    proxy = Proxy(int(s3_server["SILT_S3_ENDPOINT"].rsplit(":", 1)[1]))
    bucket = make_bucket(s3_server)
    broker = outage_broker(tmp_path, s3_server, proxy, bucket)
    proxy.set("down")
    try:
        broker.start(timeout=60)
        log = broker.log_text()
        assert "cannot read the cluster marker cluster.json" in log, log[-3000:]
        assert "serving from the WAL" in log, log[-3000:]
        topic = "down-at-start"
        create_topic(broker.bootstrap, topic, partitions=2)
        sent = [{"partition": i % 2, "value": b"v%d" % i} for i in range(500)]
        produce_all(broker.bootstrap, topic, sent, acks="all")
        assert s3_get(s3_server, bucket, "cluster.json") is None
        proxy.set("up")
        deadline = time.time() + 60
        while "the object store is used from now on" not in broker.log_text():
            assert time.time() < deadline, broker.log_text()[-3000:]
            time.sleep(0.2)
        wait_uploaded(broker)
        assert s3_get(s3_server, bucket, "cluster.json").startswith(b'{"cluster_id":"')
        got = consume_all(broker.bootstrap, topic, 2, count=len(sent))
        assert sorted(m["value"] for m in got) == sorted(r["value"] for r in sent)
        assert broker.stop() == 0, broker.log_text()[-3000:]
    finally:
        broker.stop()
        proxy.close()
