"""SIGKILL under load: every record the broker acknowledged (acks=all) before it was killed
is there after a restart, at the offset it was acknowledged with, with the WAL on disk and
in the object store. Silt only (`private_broker`)."""
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import SiltBroker, selected_brokers, start_silt
from util import consume_all, create_topic, produce_all, wait_topic

PARTITIONS = 3
ROUNDS = 3

CHILD = textwrap.dedent('''
    import signal, sys, time
    from confluent_kafka import Producer

    bootstrap, topic, partitions, prefix, ackfile = sys.argv[1:6]
    partitions = int(partitions)
    out = open(ackfile, "a")

    def on_delivery(err, msg):
        if err is None:
            out.write("%d %d %s\\n" % (msg.partition(), msg.offset(), msg.value().decode()))
            out.flush()

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                  "message.timeout.ms": 120000, "log_level": 0,
                  "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200})
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    i = 0
    while True:
        try:
            p.produce(topic, value=("%s-%d" % (prefix, i)).encode(),
                      partition=i % partitions, on_delivery=on_delivery)
            i += 1
        except BufferError:
            pass
        p.poll(0.001 if i % 20 == 0 else 0)
''')


def read_acks(path):
    acks = {}
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break  # cut short by the kill
            p, off, val = line.split()
            acks[(int(p), int(off))] = val.encode()
    return acks


def test_sigkill_loses_no_acknowledged_record(private_broker, topic_name, tmp_path):
    kill_under_load_and_check(private_broker, topic_name, tmp_path)


def test_sigkill_with_the_wal_in_objects_loses_no_acknowledged_record(topic_name, tmp_path):
    """The same with wal.type=object: acknowledged once the WAL object is stored; a restart
    replays the WAL objects after the trim point."""
    if "silt" not in selected_brokers():
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")
    d = tmp_path / "broker"
    d.mkdir()
    b = SiltBroker(d, {"wal.type": "object", "wal.object.flush.interval.ms": "5"})
    start_silt(b)
    try:
        kill_under_load_and_check(b, topic_name, tmp_path)
    finally:
        if b.alive():
            assert b.stop() == 0, b.log_text()[-4000:]
    b.check_log()


def kill_under_load_and_check(b, topic_name, tmp_path):
    """Kills `b` ROUNDS times under an acks=all producer, restarting it each time, and checks
    that every acknowledged record is there at its offset."""
    create_topic(b.bootstrap, topic_name, partitions=PARTITIONS)
    child_py = tmp_path / "producer_child.py"
    child_py.write_text(CHILD)
    acked = {}
    for rnd in range(ROUNDS):
        ackfile = tmp_path / f"acks-{rnd}.txt"
        ackfile.write_text("")
        child = subprocess.Popen([sys.executable, str(child_py), b.bootstrap, topic_name,
                                  str(PARTITIONS), f"r{rnd}", str(ackfile)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            # Wait for the first acknowledgement, then let it run for about 2 s.
            deadline = time.time() + 20
            while ackfile.stat().st_size == 0:
                assert child.poll() is None, f"producer died: {child.stderr.read()[-2000:]}"
                assert time.time() < deadline, "no record acknowledged within 20 s"
                time.sleep(0.05)
            time.sleep(2.0)
            b.kill()
        finally:
            child.kill()
            child.wait()
            child.stderr.close()
        round_acks = read_acks(ackfile)
        assert len(round_acks) > 10, f"round {rnd}: only {len(round_acks)} acknowledged"
        for key, val in round_acks.items():
            assert acked.setdefault(key, val) == val, \
                f"offset {key} acknowledged twice, for {acked[key]!r} and {val!r}"

        b.start()
        wait_topic(b.bootstrap, topic_name, PARTITIONS, timeout=60)
        got = consume_all(b.bootstrap, topic_name, PARTITIONS, timeout=60)
        stored = {(g["partition"], g["offset"]): g["value"] for g in got}
        missing = [(k, v) for k, v in sorted(acked.items()) if stored.get(k) != v]
        assert not missing, (f"round {rnd}: {len(missing)} of {len(acked)} acknowledged "
                             f"records lost or changed, first: {missing[:5]} "
                             f"(found there: {[stored.get(k) for k, _ in missing[:5]]})")
        # Offsets are dense: the consumed offsets of a partition are 0..n-1.
        for p in range(PARTITIONS):
            offs = [g["offset"] for g in got if g["partition"] == p]
            assert offs == list(range(len(offs))), f"partition {p}: gaps in offsets"

    # The broker takes new records after the last crash, right after what it kept.
    hw = {p: sum(1 for k in stored if k[0] == p) for p in range(PARTITIONS)}
    d = produce_all(b.bootstrap, topic_name,
                    [{"partition": p, "value": b"after"} for p in range(PARTITIONS)])
    assert {x["partition"]: x["offset"] for x in d} == hw
