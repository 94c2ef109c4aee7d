"""Two clusters (two metadata stores) given one object store: the second refuses to start,
naming both cluster ids and the store, and touches nothing in it; the first keeps serving and
loses nothing. The marker at the store's root, cluster.json (docs/formats/cluster-marker.md),
is what tells them apart. Also: a marker that is not one, and a store that cannot be read at
start. Silt only.

The brokers share a file:// store (on Azurite, SiltBroker gives brokers sharing a file:// URI
one container instead: the checks on the directory's files are then skipped).
"""
import hashlib
import json
import time
from pathlib import Path

import pytest

from conftest import AZURE_ENDPOINT, SiltBroker, selected_brokers, start_silt
from test_rack_reads import wait_uploaded
from util import consume_all, create_topic, produce_all

PARTITIONS = 2


@pytest.fixture(autouse=True)
def silt_only():
    if "silt" not in selected_brokers():
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")


def files(store):
    """Every file of a file:// store but its temporary ones: {relative path: SHA-256}."""
    out = {}
    for p in sorted(Path(store).rglob("*")):
        rel = p.relative_to(store).as_posix()
        if p.is_file() and not rel.startswith(".silt-tmp/"):
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def records(n, start=0):
    return [{"partition": i % PARTITIONS, "key": b"k%d" % i, "value": b"v%d" % i}
            for i in range(start, start + n)]


def values(msgs):
    return sorted(m["value"] for m in msgs)


def refused_start(b, timeout=30):
    """Starts `b`, which must exit before it listens; its exit code and log."""
    with pytest.raises(RuntimeError, match="exited with"):
        b.start(timeout=timeout)
    return b.proc.returncode, b.log_text()


def wait_exit(b, timeout):
    deadline = time.time() + timeout
    while b.alive() and time.time() < deadline:
        time.sleep(0.1)
    assert not b.alive(), "still running:\n" + b.log_text()[-3000:]
    return b.proc.returncode


def wait_log(b, text, timeout=30):
    deadline = time.time() + timeout
    while text not in b.log_text():
        assert time.time() < deadline, f"no '{text}' in the log:\n{b.log_text()[-3000:]}"
        time.sleep(0.1)


def test_second_cluster_on_the_same_store_refuses_to_start_and_the_first_loses_nothing(tmp_path):
    store = tmp_path / "objects"
    common = {"object.store.uri": f"file://{store}", "upload.interval.ms": "100"}
    # No compaction while the store's files are compared.
    a = SiltBroker(tmp_path / "a", {**common, "cluster.id": "first-cluster",
                                    "compaction.interval.ms": "3600000"})
    # Were it to start, its sweep would delete every object it does not know at once.
    b = SiltBroker(tmp_path / "b", {**common, "cluster.id": "second-cluster",
                                    "object.sweep.interval.ms": "100",
                                    "object.sweep.grace.ms": "0"})
    for d in (a.workdir, b.workdir):
        d.mkdir()
    start_silt(a)
    try:
        topic = "marked"
        create_topic(a.bootstrap, topic, partitions=PARTITIONS)
        produce_all(a.bootstrap, topic, records(200), acks="all")
        wait_uploaded(a)
        if not AZURE_ENDPOINT:
            marker = json.loads((store / "cluster.json").read_text())
            assert marker == {"cluster_id": "first-cluster", "version": 1}
            before = files(store)
            assert any(k.startswith("objects/") for k in before), before

        code, log = refused_start(b)
        assert code == 1, log[-3000:]
        assert "belongs to another cluster" in log, log[-3000:]
        assert "names cluster first-cluster" in log, log[-3000:]
        assert "this broker's cluster (its metadata store) is second-cluster" in log, log[-3000:]
        assert "nothing in the store was written or deleted" in log, log[-3000:]
        if not AZURE_ENDPOINT:
            assert f"file://{store}" in log, log[-3000:]
            assert files(store) == before, "the refused broker changed the store"
        # And again: the refusal left nothing behind that would change it.
        assert refused_start(b)[0] == 1
        if not AZURE_ENDPOINT:
            assert files(store) == before

        # The first cluster goes on, and after a restart (its marker found) has everything.
        assert a.alive()
        produce_all(a.bootstrap, topic, records(100, start=200), acks="all")
        assert values(consume_all(a.bootstrap, topic, PARTITIONS)) == values(records(300))
        wait_uploaded(a)
        assert a.stop() == 0, a.log_text()[-3000:]
        start_silt(a)
        assert values(consume_all(a.bootstrap, topic, PARTITIONS)) == values(records(300))
        assert "its marker cluster.json names it" in a.log_text()
        produce_all(a.bootstrap, topic, records(10, start=300), acks="all")
        assert len(consume_all(a.bootstrap, topic, PARTITIONS)) == 310
    finally:
        assert a.stop() == 0, a.log_text()[-3000:]
        a.check_log()


def test_broker_given_another_metadata_store_in_the_same_data_dir_refuses_to_start(tmp_path):
    """A broker with everything default but its metadata store (a new one: another cluster id)
    in a data directory whose objects are another cluster's: refused before it opens the WAL;
    the objects, the marker and the WAL are as they were, and the first cluster starts again."""
    if AZURE_ENDPOINT:
        pytest.skip("on Azurite each broker's default store is a container of its own")
    a = SiltBroker(tmp_path / "a", {"upload.interval.ms": "100"})
    a.workdir.mkdir()
    start_silt(a)
    create_topic(a.bootstrap, "first", partitions=PARTITIONS)
    produce_all(a.bootstrap, "first", records(50), acks="all")
    wait_uploaded(a)
    assert a.stop() == 0
    store = a.data_dir / "objects"
    before = files(store)
    assert "cluster.json" in before and any(k.startswith("objects/") for k in before), before
    wal = hashlib.sha256((a.data_dir / "wal").read_bytes()).hexdigest()

    other = {k: v for k, v in a.overrides.items() if k != "listeners"}
    other["metadata.store.uri"] = f"sqlite://{tmp_path}/other/metadata.db"
    b = SiltBroker(tmp_path / "a", other)
    code, log = refused_start(b)
    assert code == 1, log[-3000:]
    assert "belongs to another cluster" in log, log[-3000:]
    assert f"file://{store}" in log, log[-3000:]
    assert files(store) == before, "the refused broker changed the store"
    assert hashlib.sha256((a.data_dir / "wal").read_bytes()).hexdigest() == wal

    start_silt(a)
    try:
        assert values(consume_all(a.bootstrap, "first", PARTITIONS)) == values(records(50))
    finally:
        assert a.stop() == 0, a.log_text()[-3000:]
        a.check_log()


@pytest.mark.parametrize("marker", [b"", b"garbage\n", b'{"version":2,"cluster_id":"x"}\n'],
                         ids=["empty", "garbage", "version-2"])
def test_store_whose_marker_is_not_one_refuses_the_start_and_nothing_is_deleted(tmp_path, marker):
    if AZURE_ENDPOINT:
        pytest.skip("writes the marker into the store's directory")
    store = tmp_path / "objects"
    (store / "objects").mkdir(parents=True)
    (store / "cluster.json").write_bytes(marker)
    # Keys of the store's own form, with ids a fresh catalog hands out at once.
    for i in (1, 2, 3):
        (store / "objects" / f"{i:016x}.set").write_bytes(b"someone's data %d" % i)
    before = files(store)
    b = SiltBroker(tmp_path / "b", {"object.store.uri": f"file://{store}",
                                    "upload.interval.ms": "100",
                                    "object.sweep.interval.ms": "100",
                                    "object.sweep.grace.ms": "0"})
    b.workdir.mkdir()
    code, log = refused_start(b)
    assert code == 1, log[-3000:]
    assert "holds a cluster.json that is not a cluster marker this broker reads" in log, log[-3000:]
    reason = {b"": "it is empty", b"garbage\n": "it is not JSON",
              b'{"version":2,"cluster_id":"x"}\n': "its version is 2"}[marker]
    assert reason in log, log[-3000:]
    assert "refusing to start" in log, log[-3000:]
    assert files(store) == before


def test_store_unreadable_at_start_is_left_alone_until_the_marker_is_read(tmp_path):
    """The store fails every call for the broker's first 6 s: it serves from its WAL meanwhile
    and touches nothing. Of another cluster's store it then stops with the refusal (exit 1,
    nothing touched); of its own it goes on and uploads. (On Azurite the container's contents
    are not compared.)"""
    store = tmp_path / "objects"
    down = {"SILT_TEST_STORE_FAULTS": "error=1,on_ms=6000,off_ms=100000000"}
    a = SiltBroker(tmp_path / "a", {"object.store.uri": f"file://{store}",
                                    "upload.interval.ms": "100"})
    a.workdir.mkdir()
    start_silt(a)
    create_topic(a.bootstrap, "first", partitions=PARTITIONS)
    produce_all(a.bootstrap, "first", records(50), acks="all")
    wait_uploaded(a)
    assert a.stop() == 0
    before = None if AZURE_ENDPOINT else files(store)

    # Another cluster: it starts (the store does not answer), takes writes into its WAL, and
    # stops once it reads the marker.
    b = SiltBroker(tmp_path / "b", {"object.store.uri": f"file://{store}",
                                    "upload.interval.ms": "100",
                                    "object.sweep.interval.ms": "100",
                                    "object.sweep.grace.ms": "0"}, env=down)
    b.workdir.mkdir()
    start_silt(b)
    assert "cannot read the cluster marker cluster.json" in b.log_text()
    assert "serving from the WAL" in b.log_text()
    create_topic(b.bootstrap, "second", partitions=PARTITIONS)
    produce_all(b.bootstrap, "second", records(5), acks="all")
    assert wait_exit(b, 30) == 1, b.log_text()[-3000:]
    log = b.log_text()
    assert "belongs to another cluster" in log, log[-3000:]
    if not AZURE_ENDPOINT:
        assert files(store) == before, "the refused broker changed the store"

    # The store's own cluster, the store down at first: it serves, then claims and uploads.
    a.env = down
    start_silt(a)
    try:
        assert "serving from the WAL" in a.log_text()
        produce_all(a.bootstrap, "first", records(50, start=50), acks="all")
        wait_log(a, "the object store is used from now on")
        wait_uploaded(a)
        if not AZURE_ENDPOINT:
            assert set(files(store)) - set(before), "nothing uploaded once the marker was read"
        assert values(consume_all(a.bootstrap, "first", PARTITIONS)) == values(records(100))
    finally:
        assert a.stop() == 0, a.log_text()[-3000:]
    a.env = None
    start_silt(a)
    try:
        assert values(consume_all(a.bootstrap, "first", PARTITIONS)) == values(records(100))
    finally:
        assert a.stop() == 0, a.log_text()[-3000:]
        a.check_log()
