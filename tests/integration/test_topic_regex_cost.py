"""A consumer-protocol topic pattern that RE2 can only match slowly, against thousands of long
topic names, would take minutes of CPU in full. Silt matches patterns outside the group
coordinator's lock and off the network threads, one matching at a time, each stopped after its
CPU budget (the pattern is then refused with INVALID_REGULAR_EXPRESSION): while one client sends
such patterns over and over, other groups' heartbeats, other groups' commits and new
connections' ApiVersions stay answered at once. Silt only: Kafka resolves patterns in the
background with no budget, so it would spend those minutes (and the test would measure nothing
of Kafka's answers)."""
import base64
import random
import threading
import time
import uuid

from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic

from util import (TAGS, admin, api_versions_request, call_once, carray, connect, consumer, cstr,
                  i32, read_response, wait_futures)

TOPICS = 2000
INVALID_REGULAR_EXPRESSION = 128
NONE = 0
# What an answer may take while the costly patterns are matched (a few milliseconds measured on
# a busy 2-core machine). Each costly heartbeat takes its budget, half a second of CPU, and in
# full minutes: under the coordinator's lock or on a network thread others would wait as long.
ANSWER_WITHIN_S = 0.5


def create_topics(bootstrap, names):
    a = admin(bootstrap)
    for i in range(0, len(names), 200):
        futures = a.create_topics([NewTopic(n, 1, 1) for n in names[i:i + 200]],
                                  operation_timeout=60, request_timeout=60)
        assert set(wait_futures(futures, timeout=120).values()) == {None}


def consumer_heartbeat(bootstrap, group, member, epoch, names=None, regex=None):
    """ConsumerGroupHeartbeat v1: (error, message, member epoch)."""
    joining = epoch == 0
    body = (cstr(group) + cstr(member) + i32(epoch) + cstr(None) + cstr(None) +
            i32(30000 if joining else -1) +
            carray(None if names is None else [cstr(n) for n in names]) + cstr(regex) +
            cstr(None) + carray([] if joining else None) + TAGS)
    r = call_once(bootstrap, 68, 1, body)
    assert r is not None, "the broker closed the connection"
    r.i32()
    error, message = r.i16(), r.compact_string()
    r.compact_string()
    return error, message, r.i32()


def api_versions_answered(bootstrap):
    s = connect(bootstrap, timeout=30)
    try:
        s.sendall(api_versions_request(1))
        return read_response(s) is not None
    finally:
        s.close()


def member_id():
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def timed(f):
    start = time.monotonic()
    result = f()
    return time.monotonic() - start, result


def test_a_costly_topic_pattern_holds_no_other_client_up(silt):
    b = silt.bootstrap
    rng = random.Random(7)
    names = ["".join(rng.choice("ab") for _ in range(240)) for _ in range(TOPICS)]
    create_topics(b, names)

    # A group of another client, by topic name, and one committing offsets.
    steady = "steady-" + member_id()
    steady_member = member_id()
    error, _, epoch = consumer_heartbeat(b, steady, steady_member, 0, names=[names[0]])
    assert error == NONE
    committer = consumer(b, **{"group.id": "committer", "enable.auto.commit": False})

    stop = threading.Event()
    costly = []

    def attack():
        i = 0
        while not stop.is_set():
            i += 1
            # A new pattern each time: nothing matched before can be reused.
            took, (error, message, _) = timed(lambda: consumer_heartbeat(
                b, f"costly-{i}", member_id(), 0, regex=f"(a*b*){{500}}c|x{i}"))
            costly.append((took, error, message))

    attacker = threading.Thread(target=attack)
    attacker.start()
    latencies = {"heartbeat": [], "api_versions": [], "commit": []}
    try:
        time.sleep(1)
        deadline = time.monotonic() + 8
        i = 0
        while time.monotonic() < deadline:
            i += 1
            took, (error, _, epoch) = timed(
                lambda: consumer_heartbeat(b, steady, steady_member, epoch))
            assert error == NONE
            latencies["heartbeat"].append(took)
            took, answered = timed(lambda: api_versions_answered(b))
            assert answered
            latencies["api_versions"].append(took)
            took, _ = timed(lambda: committer.commit(
                offsets=[TopicPartition(names[0], 0, i)], asynchronous=False))
            latencies["commit"].append(took)
            time.sleep(0.1)
    finally:
        stop.set()
        attacker.join(120)
        committer.close()
    assert costly, "no costly heartbeat was answered"
    for took, error, message in costly:
        assert error == INVALID_REGULAR_EXPRESSION, (error, message)
        assert "within" in message, message
    for kind, values in latencies.items():
        assert max(values) < ANSWER_WITHIN_S, (kind, sorted(values)[-5:])
