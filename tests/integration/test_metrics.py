"""The metrics endpoint (metrics.listener): a scrape parsed by Prometheus' own text parser
(prometheus_client) has the request, topic, WAL, upload, object store, cache, group and
connection metrics, with values that follow what clients did; promtool's lint passes when
promtool is installed."""
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer

from conftest import SANITIZED, SiltBroker, free_port
from util import QUIET, create_topic, produce_all

parser = pytest.importorskip("prometheus_client.parser")

RECORDS = 2000


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


def samples(text):
    """{(sample name, frozenset of labels): value} of every sample, and the families' types."""
    out, types = {}, {}
    for family in parser.text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out, types


def value(got, name, **labels):
    return got[(name, frozenset(labels.items()))]


@pytest.fixture
def metrics_broker(tmp_path):
    port = free_port()
    b = SiltBroker(tmp_path, {"metrics.listener": f"http://127.0.0.1:{port}/metrics",
                              "upload.interval.ms": "200"})
    b.start()
    try:
        yield b, f"http://127.0.0.1:{port}/metrics"
    finally:
        assert b.stop() == 0


def test_a_scrape_shows_what_clients_did(metrics_broker):
    b, url = metrics_broker
    topic = "scraped"
    create_topic(b.bootstrap, topic, partitions=2)
    values = [b"v-%05d" % i for i in range(RECORDS)]
    produce_all(b.bootstrap, topic, [{"value": v, "partition": i % 2} for i, v in enumerate(values)],
                acks="all")
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "scraper", **QUIET,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    read, deadline = 0, time.time() + 30
    while read < RECORDS:
        assert time.time() < deadline, f"{read} of {RECORDS} read"
        read += sum(1 for m in c.consume(500, timeout=0.5) if m.error() is None)
    c.commit(asynchronous=False)

    # Uploaded within a few upload intervals.
    deadline = time.time() + 20
    while True:
        got, types = samples(scrape(url))
        if value(got, "silt_object_store_requests_total", operation="put") > 0 and \
                value(got, "kafka_server_brokertopicmetrics_remotecopylagbytes") == 0:
            break
        assert time.time() < deadline, "nothing uploaded"
        time.sleep(0.2)
    c.close()

    bytes_in = value(got, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert value(got, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == RECORDS
    assert bytes_in >= RECORDS * len(values[0])
    assert value(got, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= bytes_in
    assert value(got, "kafka_network_requestmetrics_requests_total", request="Produce") >= 1
    # A histogram: cumulative buckets, +Inf equal to the count.
    assert types["kafka_network_requestmetrics_totaltime_seconds"] == "histogram"
    buckets = sorted((float(dict(k)["le"]), v) for (n, k), v in got.items()
                     if n == "kafka_network_requestmetrics_totaltime_seconds_bucket" and
                     dict(k)["request"] == "Fetch")
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)
    assert buckets[-1][1] == value(got, "kafka_network_requestmetrics_totaltime_seconds_count",
                                   request="Fetch") > 0
    assert value(got, "silt_wal_appends_total") >= 1
    assert value(got, "silt_wal_write_seconds_count") >= 1
    assert value(got, "silt_uploaded_bytes_total") >= bytes_in
    assert value(got, "silt_object_store_bytes_total", operation="put") >= bytes_in
    assert value(got, "silt_log_cache_reads_total", result="hit") >= 1
    assert value(got, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 1
    assert value(got, "kafka_server_socketservermetrics_connections") >= 1
    assert value(got, "process_resident_memory_bytes") > 1 << 20
    if not SANITIZED:  # (AddressSanitizer's allocator is not glibc's: mallinfo2 sees nothing)
        heap = value(got, "silt_heap_allocated_bytes")
        assert 1 << 20 < heap < value(got, "process_resident_memory_bytes")
        mapped = value(got, "silt_request_buffer_mapped_bytes")
        assert mapped >= 1 << 20 and mapped % (1 << 20) == 0  # the chunks the requests used
        assert 0 <= value(got, "silt_request_buffer_free_bytes") <= mapped
    sqlite = value(got, "silt_metadata_sqlite_memory_bytes")
    assert sqlite == 0 if os.environ.get("SILT_TEST_POSTGRES_URI") else sqlite > 0
    assert types["silt_object_store_requests"] == "counter"

    # Other paths are not found.
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=10)
    assert e.value.code == 404

    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "metrics"], input=scrape(url), text=True,
                           capture_output=True, timeout=30)
        assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), \
            r.stdout + r.stderr
